"""How a stop signal (SIGTERM, SIGHUP, Ctrl-C) ends the grader: it unwinds the main thread, but only where that is safe.

Owns the grader's signal handlers, the one place its main thread waits on
pool threads (`Completions`), and blocks that no stop may cut short
(`Deferred`). A handler that raises can raise between any two bytecodes,
also inside the standard library's own lock handling:
`concurrent.futures.wait` takes the lock of every future one by one, and a
stop raised half-way leaves some of them held, so a pool thread that then
finishes its check blocks on that lock forever, and so does the grader's
`pool.shutdown()`. Inside a `Completions` block a stop signal is only
recorded (and wakes `wait`); it is raised from `wait`, in a part marked as
one a stop may unwind (output, which can block), or when the block ends:
at points where the main thread holds no lock a pool thread needs.

A blocking read has a race of its own: a signal that arrives just before
read() starts, or that the kernel hands to another thread, runs no handler
until the read returns. `wait_readable` waits where a signal always ends
the wait (the quiz's prompt).
"""
import contextlib
import os
import queue
import select
import signal
import socket
import sys
import threading

STOP_SIGNALS = ("SIGTERM", "SIGHUP", "SIGINT")  # SIGHUP: not on Windows
_deferring = []  # the Deferred blocks the main thread is in, innermost last (signal handlers run in the main thread)


class Stopped(BaseException):
    """A signal asked the grader to stop; exits with 128 + its number, after every finally has run."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def stop_on_signals():
    """Unwind on SIGTERM, SIGHUP and Ctrl-C alike (stop_on_signal); one this process was started ignoring stays
    ignored (`nohup` ignores SIGHUP, a shell's background job SIGINT)."""
    for name in STOP_SIGNALS:
        if hasattr(signal, name) and signal.getsignal(getattr(signal, name)) is not signal.SIG_IGN:
            signal.signal(getattr(signal, name), stop_on_signal)


def default_on_signals():
    """Give the stop signals their default action back, once the run is over and only the interpreter's exit is left:
    a signal then ends the process by that signal (a shell shows 128 + N), where a handler that raised in the
    interpreter's own exit code (threading._shutdown) would print a traceback and exit 1."""
    for name in STOP_SIGNALS:
        if hasattr(signal, name) and signal.getsignal(getattr(signal, name)) in (stop_on_signal, ignore_signal):
            signal.signal(getattr(signal, name), signal.SIG_DFL)


def stop_on_signal(signum, frame):
    # Later signals go to a handler that does nothing, since unwinding the first
    # one's cleanup half-way would leave what it was removing (it is bounded: no
    # step starts once stopping). Not SIG_IGN: a signal caught but not yet
    # handled would then raise OSError mid-cleanup.
    for name in STOP_SIGNALS:
        if hasattr(signal, name) and signal.getsignal(getattr(signal, name)) is not signal.SIG_IGN:
            signal.signal(getattr(signal, name), ignore_signal)
    if _deferring and not _deferring[-1].unwinding:
        _deferring[-1].stop(signum)
        return
    raise stop_for(signum)


def ignore_signal(signum, frame):
    pass


def stop_for(signum):
    """The exception a stop signal unwinds with: KeyboardInterrupt for Ctrl-C, as Python's own, else Stopped."""
    return KeyboardInterrupt() if signum == signal.SIGINT else Stopped(signum)


class Deferred:
    """A block of the main thread that a stop signal does not unwind: it is raised as the block ends, if at all.

    For cleanup that must run whole (a grader's close: its zygote, its
    folders). What the block does must be bounded: no stop ends it early,
    but in a part marked `with block.unwinding_allowed():`. Inside another
    such block, the stop passes to that one as this ends (or is raised, in a
    part of it where unwinding is allowed).
    """

    signum = None
    unwinding = False  # in a part that a stop unwinds at once, as outside any block

    def __enter__(self):
        # Signal handlers run in the main thread: a block in another thread has nothing to defer.
        self.main = threading.current_thread() is threading.main_thread()
        if self.main:
            _deferring.append(self)
        return self

    def __exit__(self, kind, value, tb):
        if not self.main:
            return False
        _deferring.remove(self)
        if self.signum is not None and _deferring and not _deferring[-1].unwinding:
            _deferring[-1].stop(self.signum)  # the enclosing block raises it: its own cleanup may not be over
        elif self.signum is not None and not (kind is not None and issubclass(kind, (KeyboardInterrupt, Stopped))):
            raise stop_for(self.signum)  # also over another exception (a broken pipe): the stop was asked for
        return False

    def stop(self, signum):
        """Called by the signal handler (in the main thread), or by a block inside: remember the first stop."""
        if self.signum is None:
            self.signum = signum

    @contextlib.contextmanager
    def unwinding_allowed(self):
        """A part of the block that a stop unwinds at once: code that takes no lock a pool thread waits for, and may
        block (writing to a pipe nobody reads, a child to wait for). A stop already recorded is raised on entry."""
        if self.signum is not None:
            raise stop_for(self.signum)
        self.unwinding = True
        try:
            yield
        finally:
            self.unwinding = False


class Completions(Deferred):
    """Futures of a thread pool as they complete, for the main thread; a Deferred block that `wait` may end early.

        with Completions() as done:
            for ...:
                done.watch(pool.submit(...))
            while ...:
                for future in done.wait(TICK): ...   # raises Stopped (or KeyboardInterrupt) here
                    with done.unwinding_allowed():
                        show(future.result())        # output, which may block
            # and the cleanup, in a finally inside the block

    A stop signal inside the block is raised by the next `wait` (which it
    wakes at once), in a part where unwinding is allowed, or as the block
    ends: after the block's own finally clauses have run undisturbed. Leave
    it once the pool has shut down. (In another thread it defers nothing.)
    """

    def __init__(self):
        self._done = queue.SimpleQueue()  # futures, put by the pool's threads as each completes
        self._wake_r, self._wake_w = socket.socketpair()  # select() waits on sockets everywhere, Windows too
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._wakeup_was = None

    def __enter__(self):
        super().__enter__()
        if self.main:
            try:
                # A signal the kernel hands to a pool thread does not interrupt the main thread's select(): with a
                # wake-up fd, Python's own C handler writes to it, whichever thread received the signal.
                self._wakeup_was = signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)
            except BaseException:
                self.__exit__(*sys.exc_info())  # out of _deferring, the sockets closed: no block left behind
                raise
        return self

    def __exit__(self, kind, value, tb):
        try:
            if self._wakeup_was is not None:
                signal.set_wakeup_fd(self._wakeup_was)
        finally:
            self._wake_r.close()
            self._wake_w.close()
            super().__exit__(kind, value, tb)  # raises the stop, if one is to be raised here
        return False

    def watch(self, future):
        """Have `future` come out of `wait` once it completes; returns it."""
        future.add_done_callback(self._completed)
        return future

    def wait(self, timeout):
        """The watched futures completed since the last call, in no set order; [] if none did within `timeout` seconds
        (or sooner: a wake-up left over from a future already taken ends a wait early).

        Raises the stop a signal asked for, at once, whatever has completed.
        """
        if self.signum is None and self._done.empty():
            select.select([self._wake_r], [], [], timeout)
        _drain(self._wake_r)
        if self.signum is not None:
            raise stop_for(self.signum)
        completed = []
        while not self._done.empty():
            completed.append(self._done.get_nowait())
        return completed

    def stop(self, signum):
        """Called by the signal handler (in the main thread): remember the first stop, and wake `wait`."""
        super().stop(signum)
        self._poke()

    def _completed(self, future):  # in a pool thread, after the future's own lock is released
        self._done.put(future)
        self._poke()

    def _poke(self):
        try:
            self._wake_w.send(b"!")
        except OSError:  # its buffer is full (a wake-up is pending anyway), or the block has ended
            pass


def wait_readable(stream):
    """Return once `stream` (a terminal) has input, or raise the stop a signal asked for, whenever it came.

    A plain readline() misses a signal that arrives just before its read()
    starts, or that the kernel hands to another thread, and blocks until the
    next line: Ctrl-C at the prompt would do nothing. Python's C handler
    writes every caught signal to the wake-up fd, so select() here returns
    and the handler runs as it does. Only for a terminal, whose read() gives
    one line at a time, so no line waits unseen in `stream`'s buffers; a
    no-op off POSIX (select() takes only sockets on Windows) and outside the
    main thread (signal handlers run only there).
    """
    if os.name != "posix" or threading.current_thread() is not threading.main_thread() or not stream.isatty():
        return
    wake_r, wake_w = socket.socketpair()
    try:
        wake_r.setblocking(False)
        wake_w.setblocking(False)
        was = signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
        try:
            while stream.fileno() not in select.select([stream.fileno(), wake_r], [], [])[0]:
                _drain(wake_r)  # a signal whose handler did not raise (a second stop): wait on
        finally:
            signal.set_wakeup_fd(was)
    finally:
        wake_r.close()
        wake_w.close()


def _drain(sock):
    """Read a non-blocking socket until it is empty."""
    try:
        while sock.recv(4096):
            pass
    except OSError:  # BlockingIOError: nothing more to read
        pass
