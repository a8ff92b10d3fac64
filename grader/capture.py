"""Bounded output: what the grader keeps of a child's stdout, stderr and protocol lines, and the loop that reads them.

Whatever a worker prints, the grader keeps at most the first and the last
KEEP bytes of each stream and counts the rest, so its memory stays flat; the
reading loop checks the step's deadline on every round, so no flood stretches
it. Neutral ground: no worker, no processes of its own, no messages.
"""
import collections
import gc
import json
import os
import queue
import re
import selectors
import sys
import threading
import time

from .common import MARK

KEEP = 64 * 1024  # bytes kept from the start, and again from the end, of each stream
CHUNK = 64 * 1024  # bytes read at once
LINES_KEEP = 4 * 1024 * 1024  # bytes of protocol lines kept (the grader's own, a few KiB per step)
LINE_MAX = 1024 * 1024  # bytes of one protocol line (the grader's own are under 8 KiB): a longer one is a flood
LINES_BUDGET = 32 * 1024 * 1024  # bytes of protocol lines a stream may send in all (the reference's: 200 KB)
OVER = {"kind": "limit", "limit": "protocol"}  # what on_line hears once a stream has run past either bound
ROUND = 0.05  # seconds: how often the loop looks at the process while its pipes are quiet
GRACE = 1.0  # seconds to wait for the pipes to close once the process has ended
MARK_BYTES = MARK.encode("ascii")
# PyPy frees a chunk read (and what Capture.add made of it) only at its next major collection, which a flood
# of short-lived 64 KiB objects puts off: 300 MiB printed left the grader at 600 MB. There `follow` collects
# after every COLLECT_EVERY bytes read. CPython frees each chunk at once (reference counting): nothing to do.
COLLECT_EVERY = 4 * 1024 * 1024 if hasattr(sys, "pypy_version_info") else None
SURROGATE = re.compile("[\ud800-\udfff]")


class Capture:
    """One output stream: its first and last KEEP bytes, and how many bytes it had in all."""

    def __init__(self, keep=KEEP):
        self.keep = keep
        self.head = bytearray()
        # The last chunks, whole (under 2 * keep bytes in all): appending and dropping whole chunks copies
        # nothing, where trimming one bytearray copied its tail on every few chunks (5 times slower on PyPy).
        self.tail = collections.deque()
        self.tail_bytes = 0
        self.total = 0

    def add(self, data):
        self.total += len(data)  # audit: G56
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if len(data) > self.keep:  # a chunk longer than the tail is the whole tail
            self.tail.clear()
            self.tail_bytes = 0
            data = data[-self.keep:]
        if data:
            self.tail.append(data)
            self.tail_bytes += len(data)
            while self.tail_bytes - len(self.tail[0]) >= self.keep:
                self.tail_bytes -= len(self.tail.popleft())

    @property
    def dropped(self):
        return self.total - len(self.head) - min(self.tail_bytes, self.keep)

    def text(self):
        """What was kept, as text; a marker line where bytes were dropped."""
        tail = b"".join(self.tail)[-self.keep:]
        middle = b"\n[... %d bytes dropped ...]\n" % self.dropped if self.dropped else b""
        return (bytes(self.head) + middle + tail).decode("utf-8", "replace")

    def last_line(self):
        lines = self.text().strip().splitlines()
        return lines[-1][:200] if lines else ""


class Lines:
    """The protocol stream: each complete MARK line as a dict, at most LINES_KEEP bytes of them kept.

    Bounded by what it reads, kept or not: a line over LINE_MAX bytes, or
    more than LINES_BUDGET bytes of lines in all, is a flood. Then `over` is
    set, on_line hears OVER once (its owner ends the step) and every later
    byte is dropped unread. A line that does not parse, however it fails
    (RecursionError on "[" * 100000), is dropped: the reading thread lives on.
    """

    def __init__(self, on_line=None):
        self.keep = True  # False: each line goes to on_line only (a step's answers), none is kept here
        self.lines = []
        self.partial = bytearray()
        self.kept = 0
        self.read = 0  # bytes of MARK lines taken, kept or not
        self.dropped = 0
        self.over = False
        self.on_line = on_line

    def add(self, data):
        if self.over:
            self.dropped += len(data)
            return
        pieces = data.split(b"\n")
        self.partial += pieces[0]
        if len(pieces) > 1:
            complete = [bytes(self.partial)] + pieces[1:-1]
            self.partial = bytearray(pieces[-1])
            for raw in complete:
                self.take(raw)
        if len(self.partial) > LINE_MAX:  # no line of the grader's is this long
            self.flood(len(self.partial))
            self.partial = bytearray()

    def take(self, raw):
        if self.over or not raw.startswith(MARK_BYTES):
            return
        self.read += len(raw)
        if len(raw) > LINE_MAX or self.read > LINES_BUDGET:
            self.flood(len(raw))
            return
        if self.keep and self.kept + len(raw) > LINES_KEEP:
            self.dropped += len(raw)
            return
        try:
            line = whole(json.loads(raw[len(MARK_BYTES):].decode("utf-8"), parse_int=bounded_int))
        except Exception:  # noqa: B902 (ValueError, RecursionError, MemoryError: a forged line, never the reader's end)
            return
        if isinstance(line, dict) and self.keep:
            self.kept += len(raw)
            self.lines.append(line)
        if isinstance(line, dict):
            if self.on_line is not None:
                self.on_line(line)

    def flood(self, size):
        """Past a bound: drop what is left, say OVER once (kept too, so that a step's Run can name the limit)."""
        self.dropped += size
        if self.over:
            return
        self.over = True
        if self.keep:
            self.lines.append(dict(OVER))
        if self.on_line is not None:
            self.on_line(dict(OVER))


INT_DIGITS = 4300  # digits of an int a line may hold (as Python 3.11's own limit): longer costs quadratic time


def bounded_int(digits):
    """json's parse_int: on 3.8-3.10 int() has no digit limit, and a 1 MiB number takes seconds of the grader's."""
    if len(digits) > INT_DIGITS:
        raise ValueError("an int of %d digits" % len(digits))
    return int(digits)


def whole(value):
    """`value` with every lone surrogate (a worker's text can hold them; no output can) as U+FFFD."""
    if isinstance(value, str):
        return SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [whole(item) for item in value]
    if isinstance(value, dict):
        return {key: whole(item) for key, item in value.items()}
    return value


def follow(streams, exited, deadline, on_timeout, after_exit, readers=None):
    """Read `streams` ({fd: Capture or Lines}) until the process has ended and they are closed; True if it timed out.

    `exited()` says whether the process has ended; `deadline()` the time
    (time.monotonic()) at which `on_timeout()` ends it; `after_exit()` ends
    what it left behind, called once it has ended and again on every round
    while its pipes stay open (at most GRACE seconds: then they are let go).
    Where select takes no pipes (Windows) a thread reads each stream; their
    threads are appended to `readers` (a list), to be joined before the
    caller closes the streams.
    """
    watch = SelectorWatch(streams) if THREADS is None else ThreadWatch(streams, readers)
    timed_out, ended, cleaned = False, None, None
    unreclaimed = 0  # bytes read since the last collection (COLLECT_EVERY)
    try:
        while True:
            now = time.monotonic()
            if ended is None and exited():
                ended = now
            elif ended is None and now >= deadline():  # audit: G54
                on_timeout()
                timed_out, ended = True, now
            if ended is not None:
                if cleaned is None or now - cleaned >= ROUND:
                    after_exit()
                    cleaned = now
                if not watch.open or now - ended >= GRACE:
                    return timed_out
            if not watch.open:
                time.sleep(max(0.0, min(ROUND / 10, deadline() - now)))  # closed its pipes, still running
                continue
            wait = ROUND if ended is not None else max(0.0, min(ROUND, deadline() - now))
            for fd, data in watch.read(wait):
                if data:
                    streams[fd].add(data)
                    unreclaimed += len(data)
                    if COLLECT_EVERY is not None and unreclaimed >= COLLECT_EVERY:
                        data, unreclaimed = None, 0
                        gc.collect()
    finally:
        watch.close()


THREADS = True if os.name == "nt" else None  # Windows: select takes sockets only, so a thread reads each pipe


class SelectorWatch:
    """The streams still open, and what is there to read on them (select)."""

    def __init__(self, streams):
        self.selector = selectors.DefaultSelector()
        for fd in streams:
            self.selector.register(fd, selectors.EVENT_READ)

    @property
    def open(self):
        return bool(self.selector.get_map())

    def read(self, wait):
        """[(fd, bytes)] read within `wait` seconds; b"" is a stream's end (it is then no longer open)."""
        got = []
        for key, _ in self.selector.select(wait):
            try:
                data = os.read(key.fd, CHUNK)
            except BlockingIOError:  # a protocol socket, non-blocking for the sender's sake (remote.Session)
                continue
            except OSError:  # a step's protocol socket, reset as it ended with a request unread: its end
                data = b""
            if not data:
                self.selector.unregister(key.fd)
            got.append((key.fd, data))
        return got

    def close(self):
        self.selector.close()


class ThreadWatch:
    """The same, with one reading thread per stream and a bounded queue between them and the loop.

    A reader waits while the queue is full, so a flood is read no faster
    than the loop takes it; once closed, a reader drops what it reads until
    its stream ends (the process is gone by then, its job ended).
    """

    def __init__(self, streams, readers):
        self.queue = queue.Queue(maxsize=QUEUED)
        self.left = set(streams)
        self.closed = False
        for fd in streams:
            thread = threading.Thread(target=self._reader, args=(fd,), daemon=True)
            thread.start()
            if readers is not None:
                readers.append(thread)

    def _reader(self, fd):
        while True:
            try:
                data = os.read(fd, CHUNK)
            except OSError:
                data = b""
            while not self.closed:
                try:
                    self.queue.put((fd, data), timeout=ROUND)
                    break
                except queue.Full:
                    continue
            if not data:
                return

    @property
    def open(self):
        return bool(self.left)

    def read(self, wait):
        got = []
        try:
            got.append(self.queue.get(timeout=wait))
            while len(got) < QUEUED:
                got.append(self.queue.get_nowait())
        except queue.Empty:
            pass
        for fd, data in got:
            if not data:
                self.left.discard(fd)
        return got

    def close(self):
        self.closed = True


QUEUED = 16  # chunks read and not yet taken, per step (ThreadWatch)
