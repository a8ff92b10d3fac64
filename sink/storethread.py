"""The one thread that holds the sink's store connection, and runs every call on it in turn.

Owns that thread and that connection, from `open_store` to `close`. It never
speaks HTTP and runs no SQL of its own: it runs the functions it is handed
(`receive`, the digest and metrics reads) with the connection as their first
argument, one at a time, and says when the thread is gone and why.
"""

import queue
import threading


class StoreGone(Exception):
    """The store thread has ended (closed by stop(), or dead): no call can run on the store any more."""


class _Call:
    """One call for the store thread, and what came of it once `done` is set."""

    __slots__ = ("fn", "args", "done", "result", "error")

    def __init__(self, fn, args):
        self.fn = fn  # None: close the connection and end the thread
        self.args = args
        self.done = threading.Event()
        self.result = None
        self.error = None


class StoreThread:
    """The one thread that holds the store connection and runs every call on it, in turn.

    `open_store(db_path)` runs on that thread now; its exception, if any, is
    raised here. `call(fn, *args)` runs ``fn(con, *args)`` there and returns
    or raises what it did: an Exception belongs to that call alone. Anything
    else it raises (SystemExit, KeyboardInterrupt, any BaseException) ends the
    thread: the connection is closed (an open transaction rolls back),
    `on_death(exc)` is called, and that call and every later one raise
    StoreGone. `close(timeout)` closes the connection on its own thread
    (sqlite3 insists) and ends the thread; calls still queued raise StoreGone.
    It returns False if a call was still running at `timeout`: the thread, a
    daemon, is then abandoned with its connection.
    """

    def __init__(self, open_store, db_path):
        self.on_death = None  # set by the SinkServer that owns this thread
        # _lock makes "is it gone?" and "queue the call" one step, so no call is queued once it is gone.
        self._lock = threading.Lock()
        self._calls = queue.SimpleQueue()
        self._gone = None  # why no call can run any more, once that is so
        self._con = None
        opened = _Call(open_store, (db_path,))
        self._thread = threading.Thread(target=self._run, args=(opened,), name="sink-store", daemon=True)
        self._thread.start()
        opened.done.wait()
        if opened.error is not None:
            self._thread.join()
            raise opened.error

    def call(self, fn, *args):
        call = _Call(fn, args)
        with self._lock:
            if self._gone is not None:
                raise StoreGone(self._gone)
            self._calls.put(call)
        call.done.wait()
        if call.error is not None:
            raise call.error
        return call.result

    def close(self, timeout):
        closing = _Call(None, ())
        with self._lock:
            if self._gone is not None:
                return True  # closed, or dead and closed then
            self._gone = "the store is closed"
            left = self._take_queued()  # calls not started yet: stop() is under way, they are refused
            self._calls.put(closing)
        _refuse(left, self._gone)
        if not closing.done.wait(timeout):
            return False
        if closing.error is not None:
            raise closing.error
        return True

    def _take_queued(self):
        left = []
        while True:
            try:
                left.append(self._calls.get_nowait())
            except queue.Empty:
                return left

    def _run(self, opened):
        try:
            self._con = opened.fn(*opened.args)
        except BaseException as exc:
            opened.error = exc  # raised by __init__, on the thread that asked
            return
        finally:
            opened.done.set()
        while True:
            call = self._calls.get()
            if call.fn is None:  # close()
                try:
                    self._con.close()
                except Exception as exc:
                    call.error = exc  # close() raises it, for stop() to report
                call.done.set()
                return
            try:
                call.result = call.fn(self._con, *call.args)  # audit: G25
            except Exception as exc:
                call.error = exc
            except BaseException as exc:
                self._die(call, exc)
                return
            call.done.set()

    def _die(self, call, exc):
        """End the thread after `call` raised `exc`, a BaseException: close the store, report, refuse every call."""
        # Not one call's error: nothing more may run on a connection such a failure left in an unknown state.
        why = "the store thread died: %s" % exception_line(exc)
        with self._lock:
            self._gone = why
            left = self._take_queued()
        try:
            self._con.close()
        except Exception:
            pass  # the failure that ends the thread is the one reported, below
        if self.on_death is not None:
            self.on_death(exc)
        _refuse([call] + left, why)


def _refuse(calls, why):
    """End `calls` that will never run: each raises StoreGone(why), and a close() among them is done."""
    for call in calls:
        if call.fn is not None:
            call.error = StoreGone(why)
        call.done.set()


def exception_line(exc):
    """'SystemExit: 3', or the class name alone when the exception says nothing more."""
    text = str(exc)
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__
