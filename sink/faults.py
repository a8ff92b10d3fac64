"""Opt-in fault injection around the sink's `receive`, chosen by name.

Owns the fault names, CRASH_EXIT, `FaultyReceive`, the wrapper that makes
them happen, and `exit_after_first_commit`, the crash right after a COMMIT
(the grader's intake child uses it too). A server started without a fault
never builds a FaultyReceive, so the normal path runs none of this. It never changes what `receive` writes: it only
decides when the process dies or the answer is withheld (by raising the
server's own WithholdAnswer, the one thing the server knows about faults).

Each fault that fires is one line in the server's log, before it acts.
Faults (each hits the first `count` valid events that reach `receive`):
  drop-after-commit    receive runs to the end, then the connection is closed
                       without a byte of HTTP response.
  crash-before-commit  the process exits with CRASH_EXIT (74) when receive is
                       about to COMMIT: nothing of that event is kept.
  crash-after-commit   the process exits with CRASH_EXIT (74) right after
                       receive's first COMMIT: the next statement on that
                       connection, or receive returning or raising, ends it.
"""

import os
import threading

from .server import WithholdAnswer

# Bound at import, before a graded worker's code runs in this process: a worker that rebinds os._exit
# cannot survive the crash a fault is (it can still reach this module; the grader says so, docs/audit.md).
_exit = os._exit
CRASH_EXIT = 74  # EX_IOERR in sysexits.h; documented in `python -m sink serve --help`

DROP_AFTER_COMMIT = "drop-after-commit"
CRASH_BEFORE_COMMIT = "crash-before-commit"
CRASH_AFTER_COMMIT = "crash-after-commit"
NAMES = (DROP_AFTER_COMMIT, CRASH_BEFORE_COMMIT, CRASH_AFTER_COMMIT)
_EFFECTS = {  # what the log line says will happen
    DROP_AFTER_COMMIT: "receive runs, then the connection closes without an answer",
    CRASH_BEFORE_COMMIT: "the process exits %d as receive is about to COMMIT" % CRASH_EXIT,
    CRASH_AFTER_COMMIT: "the process exits %d right after receive's first COMMIT" % CRASH_EXIT,
}


class FaultyReceive:
    """Calls `receive(con, event)`; the first `count` calls suffer the fault `name`.

    `name` is one of NAMES and `count` an int >= 1 (not a bool), else
    ValueError. Later calls go straight to `receive`. The count is taken under
    a lock, so concurrent requests never share one fault. Works with any
    `receive` that commits through the sqlite3 connection it is given.
    `log(line)`, if given, hears of each fault as it fires (it must not raise);
    `before_exit()`, if given, is called after that line when the fault is
    about to end the process, so a log written by a thread of its own
    (sink.logqueue) gets the line out first.
    """

    def __init__(self, receive, name, *, count=1, log=None, before_exit=None):
        if name not in NAMES:
            raise ValueError("unknown fault %r; choose from %s" % (name, ", ".join(NAMES)))
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError("fault count must be an int >= 1, got %r (%s)" % (count, type(count).__name__))
        self.name = name
        self._receive = receive
        self._count = count
        self._left = count
        self._lock = threading.Lock()
        self._log = log
        self._before_exit = before_exit

    def __call__(self, con, event):
        hit = self._take()
        if not hit:  # audit: G35
            return self._receive(con, event)
        if self._log is not None:  # audit: G35
            self._log("fault %s fired on event %r (%d of %d): %s" % (
                self.name, event.get("id") if isinstance(event, dict) else None, hit, self._count,
                _EFFECTS[self.name]))
        if self.name != DROP_AFTER_COMMIT and self._before_exit is not None:
            self._before_exit()  # a crash fault: the process ends inside this call
        if self.name == DROP_AFTER_COMMIT:
            return self._drop_after_commit(con, event)
        if self.name == CRASH_BEFORE_COMMIT:
            return self._crash_before_commit(con, event)
        return self._crash_after_commit(con, event)

    def _take(self):
        """Which hit of the fault this call is (1 to count), or 0 once they are used up."""
        with self._lock:
            if self._left == 0:
                return 0
            self._left -= 1
            return self._count - self._left

    def _drop_after_commit(self, con, event):
        try:
            result = self._receive(con, event)
        except Exception as exc:
            raise WithholdAnswer(
                "%s: receive raised %s: %s; no answer is sent" % (self.name, type(exc).__name__, exc)
            ) from exc
        raise WithholdAnswer("%s: receive returned %r; no answer is sent" % (self.name, result))  # audit: G35

    def _crash_before_commit(self, con, event):
        def trace(statement):
            if _is_commit(statement):
                _exit(CRASH_EXIT)  # audit: G35

        # SQLite calls `trace` as each statement starts, i.e. before COMMIT takes effect.
        con.set_trace_callback(trace)
        try:
            return self._receive(con, event)
        finally:
            con.set_trace_callback(None)

    def _crash_after_commit(self, con, event):
        exit_after_first_commit(con, CRASH_EXIT)  # audit: G35
        try:
            self._receive(con, event)
        finally:
            # No statement came after the commit (or none committed at all):
            # whatever receive wrote is as durable as it will ever be, so end here.
            _exit(CRASH_EXIT)  # audit: G35


def exit_after_first_commit(con, status):
    """Make the first statement after the first COMMIT on `con` end the process with `status`: a real crash.

    `os._exit` from SQLite's trace callback, which runs as each statement
    starts: the COMMIT has taken effect, nothing after it has. Returns a list
    that holds the COMMIT once it has run, so that a caller whose call returned
    with no statement after it ends the process itself. The kit's one copy:
    the grader's intake child crashes a worker's intake with it too.
    """
    committed = []

    def trace(statement):
        if committed:
            _exit(status)  # audit: G35
        if _is_commit(statement):
            committed.append(statement)

    con.set_trace_callback(trace)
    return committed


def _is_commit(statement):
    words = statement.split(None, 1)
    return bool(words) and words[0].upper().rstrip(";") in ("COMMIT", "END")
