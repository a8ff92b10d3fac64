"""The sink's log lines on their way out: a bounded queue that drops with a count, and repeats summed per interval.

Owns the one thread that writes the log, and the tally of repeated lines. It
never decides what is logged (the server does) and never blocks a caller: a
stderr that nobody reads (a stuck log shipper, a paused terminal, a parent
that reads only stdout) fills the queue, and lines are then dropped and
counted, so the sink keeps answering and stops on SIGTERM. The writer uses
os.write on the file descriptor, never the stream's own buffer, so a write
stuck in that thread holds no lock that the interpreter's exit would wait on.
"""

import os
import queue
import threading

CAPACITY = 1000  # lines waiting to be written; one more is dropped and counted
INTERVAL = 10.0  # seconds over which repeated lines are summed into one


class QueuedLog:
    """`log(line)` hands `line` to a writer thread and never waits; `drain(timeout)` and `close(timeout)` wait, bounded.

    Each line is written as ``prefix() + " " + line + "\\n"`` (just the line
    and its newline without a `prefix`, or through `plain`). Lines that find the queue full are
    dropped; the next line written says how many were. `fd` is the file
    descriptor written to (2: stderr).
    """

    def __init__(self, fd, *, prefix=None, capacity=CAPACITY):
        self._fd = fd
        self._prefix = prefix
        self._lines = queue.Queue(maxsize=capacity)
        self._lock = threading.Lock()
        self._dropped = 0  # under _lock
        self._thread = threading.Thread(target=self._write_all, name="sink-log", daemon=True)
        self._thread.start()

    def __call__(self, line):
        self.plain(line if self._prefix is None else "%s %s" % (self._prefix(), line))

    def plain(self, line):
        """Queue `line` without the prefix (a command's own message), never waiting."""
        try:
            self._lines.put_nowait(line + "\n")
        except queue.Full:
            with self._lock:
                self._dropped += 1

    @property
    def dropped(self):
        """Lines dropped so far because the queue was full."""
        with self._lock:
            return self._dropped

    def drain(self, timeout):
        """Wait until every line queued so far is written, for at most `timeout` seconds; True if it was."""
        written = threading.Event()
        try:
            self._lines.put(written, timeout=timeout)
        except queue.Full:
            return False
        return written.wait(timeout)

    def close(self, timeout):
        """Write what is queued and end the writer, for at most `timeout` seconds; True if all of it was written."""
        try:
            self._lines.put(None, timeout=timeout)
        except queue.Full:
            return False
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _write_all(self):
        told = 0  # dropped lines already reported
        while True:
            item = self._lines.get()
            with self._lock:
                dropped = self._dropped
            if dropped > told:
                self._write("%d log line(s) dropped: the log was not read fast enough\n" % (dropped - told))
                told = dropped
            if item is None:
                return
            if isinstance(item, threading.Event):
                item.set()  # drain(): everything before it is written
            else:
                self._write(item)

    def _write(self, text):
        data = text.encode("utf-8", "backslashreplace")
        while data:
            try:
                written = os.write(self._fd, data)
            except InterruptedError:
                continue
            except OSError:
                return  # the log is gone (closed pipe): nothing is left to tell it to
            data = data[written:]


class Repeats:
    """Lines that repeat, summed: the first of a kind in an interval is logged, the rest counted and told at its end.

    `note(kind, line, now)` returns the lines to log now: `line` when it is
    the first of its kind in an interval (after the summary of the interval
    before, if that one ended with a count), else nothing. `due(now)` returns
    the summaries of intervals that have ended ("closed 842 more
    connection(s) without an answer to make room in the last 10 s"), and
    `next_due()` when the next one with a count ends (None if none). `what`
    maps a kind to (verb, words) for its summary. Called from one thread only.
    """

    def __init__(self, what, *, interval=INTERVAL):
        self.what = what
        self.interval = interval
        self._open = {}  # kind -> [interval start, lines counted beyond the first]

    def note(self, kind, line, now):
        lines = self.due(now, kinds=(kind,))
        tally = self._open.get(kind)
        if tally is None:
            self._open[kind] = [now, 0]
            return lines + [line]
        tally[1] += 1
        return lines

    def next_due(self):
        due = [start + self.interval for start, count in self._open.values() if count]
        return min(due) if due else None

    def due(self, now, *, kinds=None, every=False):
        """The summaries of ended intervals (of `kinds`, default all; `every`: end them all now, as at stop)."""
        lines = []
        for kind in sorted(self._open if kinds is None else [k for k in kinds if k in self._open]):
            start, count = self._open[kind]
            if every or now >= start + self.interval:
                del self._open[kind]
                if count:
                    verb, words = self.what[kind]
                    lines.append("%s %d more %s in the last %.0f s" % (
                        verb, count, words, max(1.0, min(self.interval, now - start))))
        return lines
