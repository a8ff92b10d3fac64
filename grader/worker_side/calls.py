"""The calls a step makes for the deciding side, and the callbacks it hands the worker; it never judges a result.

One request at a time on the step's protocol socket (a JSON line from
remote.py), one answer (a MARK line). While a call is in the worker, a
callback the worker calls (`send`, `after_delivery`) asks the deciding side
and serves the requests that come before its answer, so calls nest as they
would in one process. Objects that cannot cross (a connection, an exception)
stay here behind a handle (wire.py).
"""
import builtins
import json
import os
import re
import sys
import time
import traceback

from .. import contain, wire
from ..common import MARK
from ..wire import CONTRACT

TEXT = 4096  # characters of an exception's str() that cross
NETWORK_EVENTS = frozenset((
    "socket.__new__", "socket.bind", "socket.connect", "socket.getaddrinfo", "socket.gethostbyname",
    "socket.gethostbyname_ex", "socket.gethostbyaddr", "socket.getnameinfo", "socket.sendto", "socket.sendmsg",
))


class NetworkBlocked(Exception):
    """Raised by the step's audit hook: a socket operation before the URL was refused."""


class Ended(BaseException):
    """The deciding side has gone: nothing is left to answer."""


def say(kind, **fields):
    fields["kind"] = kind
    contain.say(MARK + wire.dumps(fields))


def text_of(exc):
    """str(exc), cut; a __str__ that raises is named instead (one that hangs runs into the step's time bound)."""
    try:
        text = str(exc)
    except BaseException as error:  # noqa: B902
        return "<str() raised %s>" % wire.type_name(error)
    return wire.cut(text, TEXT) if isinstance(text, str) else "<str() gave no str>"


def describe(exc):
    """`Type: first line of the message`, at most 200 characters (as common.describe, for any exception)."""
    text = text_of(exc).strip()
    text = text.splitlines()[0] if text else ""
    text = wire.cut(text)
    return "%s: %s" % (wire.type_name(exc), text) if text else wire.type_name(exc)


class Callback:
    """A function of the deciding side, as the worker sees it: it says what it was called with, returns its answer."""

    def __init__(self, server, number):
        self._server, self._number = server, number

    def __call__(self, *args, **kwargs):
        return self._server.callback(self._number, args, kwargs)

    def __repr__(self):
        return "<function of the grader's>"  # what a call the report shows says of it, the same in every run


class Server:
    """One step's calls: the worker module, the objects behind handles, the exceptions the deciding side raised."""

    def __init__(self, module, fd):
        self.module, self.fd = module, fd
        self.objects, self.numbers = {}, {}
        self.raised = {}  # token -> the exception raised here for an exception of the deciding side
        self.named = {}  # id(exception) -> (it, the innermost contract function it left)
        self.crash = None  # (status, the list exit_after_first_commit fills) once armed
        self.buffer = b""
        self.calls = 0
        self.guard = None

    # Values across the socket.
    def keep(self, value):
        number = self.numbers.get(id(value))
        if number is None or self.objects[number] is not value:
            number = len(self.objects) + 1
            self.objects[number], self.numbers[id(value)] = value, number
        return {"$h": number, "type": wire.type_name(value), "mro": wire.mro_names(value), "repr": wire.safe_repr(value),
                "connection": is_connection(value)}

    def local(self, fields):
        if "$r" in fields:
            return self.objects[fields["$r"]]
        return Callback(self, fields["$h"])

    def out(self, value):
        return wire.encode(value, self.keep)

    def into(self, value):
        return wire.decode(value, self.local)

    # The loop.
    def read(self):
        while b"\n" not in self.buffer:
            data = os.read(self.fd, 65536)
            if not data:
                raise Ended()
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line.decode("utf-8"))

    def serve(self):
        """Answer requests until asked to exit; the step's exit status."""
        try:
            while True:
                request = self.read()
                if request["op"] == "exit":
                    return request["status"]
                self.answer(request)
        except Ended:
            return 1

    def callback(self, number, args, kwargs):
        self.calls += 1
        mine = self.calls
        say("callback", id=mine, of=number, args=[self.out(a) for a in args], kwargs={k: self.out(v) for k, v in kwargs.items()})
        while True:
            request = self.read()
            if request["op"] == "exit":
                flush_and_exit(request["status"])
            if request["op"] != "reply" or request["id"] != mine:
                self.answer(request)
                continue
            for arg, state in zip(args, request.get("args_after", ())):
                wire.write_back(arg, self.into(state))
            if "exit" in request:
                flush_and_exit(request["exit"])
            if "raise" in request:
                raise self.exception(request["raise"])
            return self.into(request["value"])

    def exception(self, spec):
        if "$r" in spec:
            return self.objects[spec["$r"]]  # the worker's own exception, raised again as it was
        kind = getattr(builtins, spec["type"], None)
        if not (isinstance(kind, type) and issubclass(kind, Exception)):
            kind = RuntimeError
        exc = kind(spec["message"])
        self.raised[spec["token"]] = exc
        return exc

    def answer(self, request):
        number = request["id"]
        args = [self.into(a) for a in request.get("args", ())]
        kwargs = {k: self.into(v) for k, v in request.get("kwargs", {}).items()}
        name = request.get("fn")
        try:
            value = getattr(self, "op_" + request["op"])(request, name, args, kwargs)
        except MemoryError:
            say("reply", id=number, limit="memory")
            return
        except SystemExit as exc:  # the worker called sys.exit(): its status, as a process of its own ends
            flush_and_exit(exc.code if isinstance(exc.code, int) else 1)
        except Ended:
            raise
        except Exception as exc:
            say("reply", id=number, error=self.error(exc, name))
            self.after_call()
            return
        except BaseException as exc:  # noqa: B902 (KeyboardInterrupt and the like, from the worker: its process ends)
            say("reply", id=number, error=dict(self.error(exc, name), fatal=True))
            flush_and_exit(1)
        say("reply", id=number, value=self.out(value), args_after=[self.out(a) for a in args],
            same=[i for i, a in enumerate(args) if a is value])
        self.after_call()

    def after_call(self):
        if self.crash and self.crash[1]:
            REAL_EXIT(self.crash[0])  # nothing ran after the COMMIT: the process crashes here

    def error(self, exc, name):
        token = next((t for t, e in self.raised.items() if e is exc), None)
        named = self.named.get(id(exc))
        named = named if named and named[0] is exc else None
        return {"type": wire.type_name(exc), "mro": wire.mro_names(exc), "message": describe(exc), "text": text_of(exc),
                "function": named[1] if named else None, "call": named[2] if named else None,
                "frames": worker_frames(exc), "token": token,
                "signature": isinstance(exc, Signature),
                "handle": self.keep(exc)["$h"]}  # so that a callback can raise it again, as it was

    # The operations.
    def contract(self, name):
        function = getattr(self.module, name)
        signature = CONTRACT[name]

        def call(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            except TypeError as exc:
                if exc.__traceback__.tb_next is None:  # raised by the call itself: the parameters are not the stub's
                    raise Signature(name, signature, describe(exc)) from None
                self.name_it(exc, name, args, kwargs)
                raise
            except BaseException as exc:  # noqa: B902
                self.name_it(exc, name, args, kwargs)
                raise
        return call

    def name_it(self, exc, name, args, kwargs):
        """Mark `exc` with the innermost contract function it left, and the call: `name(args, kwargs)`, each clipped."""
        if id(exc) not in self.named or self.named[id(exc)][0] is not exc:
            call = "%s(%s)" % (name, ", ".join([clipped(a) for a in args] +
                                               ["%s=%s" % (k, clipped(v)) for k, v in kwargs.items()]))
            self.named[id(exc)] = (exc, name, call)

    def op_call(self, request, name, args, kwargs):
        if name not in CONTRACT:
            raise KeyError(name)
        return self.contract(name)(*args, **kwargs)

    def op_require(self, request, name, args, kwargs):
        return [n for n in request["names"] if not callable(getattr(self.module, n, None))]

    def op_getattr(self, request, name, args, kwargs):
        return getattr(self.objects[request["of"]], request["name"])

    def op_apply(self, request, name, args, kwargs):
        return self.objects[request["of"]](*args, **kwargs)

    def op_clock(self, request, name, args, kwargs):
        """Every clock of the time module a worker might read gives `now` from here on (None: the real clocks again)."""
        now = request["now"]
        for clock, real in REAL_CLOCKS.items():
            if now is None:
                setattr(time, clock, real)
            else:
                setattr(time, clock, (lambda: int(now * 1e9)) if clock.endswith("_ns") else (lambda: now))

    def op_guarded(self, request, name, args, kwargs):
        """The contract call under the audit hook armed in `mode` ("all", "connect" or None).

        [how it ended, what it gave, its error, the refused socket events, the ports a connect was refused to].
        """
        if self.guard is None:
            self.guard = NetworkGuard()
        self.guard.arm(request.get("mode"))
        try:
            result = self.contract(name)(*args, **kwargs)
        except Exception as exc:
            seen, ports = self.guard.disarm()
            return ["raised", None, self.error(exc, name), seen, ports]
        finally:
            self.guard.disarm()
        seen, ports = self.guard.disarm()
        return ["returned", result, None, seen, ports]

    def op_best_time(self, request, name, args, kwargs):
        """The fastest of `rounds` calls of the contract function, in seconds: timed here, where no socket adds to it."""
        call = self.contract(name)
        clock = REAL_CLOCKS["perf_counter"]  # taken before the worker's import: time.perf_counter is the worker's to patch
        best = float("inf")
        for _ in range(request["rounds"]):
            started = clock()
            call(*args, **kwargs)
            best = min(best, clock() - started)
        return best

    def op_crash_after_first_commit(self, request, name, args, kwargs):
        self.crash = (request["status"], EXIT_AFTER_FIRST_COMMIT[0](args[0], request["status"]))

    def op_kit(self, request, name, args, kwargs):
        """The modules this process loaded from the kit's folder since the kit was taken off sys.path."""
        return kit_modules()


class Signature(TypeError):
    """A contract function was called with the stub's parameters and refused them."""

    def __init__(self, name, signature, error):
        super().__init__(error)
        self.function, self.signature, self.error = name, signature, error


class NetworkGuard:
    """The audit hook of check_url_rule: refuses every socket event ("all"), only connect ("connect"), or none."""

    def __init__(self):
        self.mode = None
        self.seen, self.ports = [], []
        sys.addaudithook(self.hook)  # for the life of this step's process; it acts only while armed

    def arm(self, mode):
        self.mode, self.seen, self.ports = mode, [], []

    def disarm(self):
        """Stop acting; (the socket events it refused, the ports a connect was refused to)."""
        self.mode = None
        return list(self.seen), list(self.ports)

    def hook(self, event, args):
        if self.mode == "all" and event in NETWORK_EVENTS:
            self.seen.append(event)
            raise NetworkBlocked("the grader refused %s: the URL had to be refused first" % event)
        if self.mode == "connect" and event == "socket.connect":
            address = args[1]
            self.ports.append(address[1] if isinstance(address, tuple) and len(address) >= 2 else address)
            raise NetworkBlocked("the grader refused the connection: the port it was to is what it checks")


def is_connection(value):
    import sqlite3
    return isinstance(value, sqlite3.Connection)


def flush_and_exit(status):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: B902
            pass
    REAL_EXIT(status)


CLOCKS = ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns")
REAL_CLOCKS = {clock: getattr(time, clock) for clock in CLOCKS}  # before the worker's import: its patches miss these
REAL_EXIT = os._exit  # likewise: a worker that sets os._exit = a no-op does not survive the grader's exits
WORKER = {"file": None}  # the worker's file, set by main.py's load_impl
FRAMES = 3  # innermost frames of the worker's own a report shows
EXIT_AFTER_FIRST_COMMIT = []  # sink.faults.exit_after_first_commit, set by main.py before the kit leaves sys.path
KIT = []  # the kit's folder, set by main.py


def kit_modules():
    root = KIT[0] if KIT else None
    found = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if root and isinstance(path, str) and name not in ("__main__", "worker_under_test") and \
                os.path.abspath(path).startswith(root + os.sep):
            found.append(name)
    return sorted(found)


def worker_frames(exc):
    """[{file, line, function, code}] for the innermost FRAMES frames of `exc` in the worker's own code.

    Its own code: its file, and files beside or below it that are not the kit's or the grader's; every
    other frame (the grader's calls, the kit's packages, the standard library) is left out.
    """
    path = WORKER["file"]
    if path is None:
        return []
    folder = os.path.dirname(path)
    root = KIT[0] if KIT else None
    frames = []
    for frame in traceback.extract_tb(exc.__traceback__):
        where = os.path.abspath(frame.filename)
        if where == path or (where.startswith(folder + os.sep) and not (root and where.startswith(root + os.sep))):
            frames.append({"file": os.path.relpath(where, folder), "line": frame.lineno, "function": frame.name,
                           "code": (frame.line or "")[:200]})
    return frames[-FRAMES:]


def clipped(value):
    """repr(value), at most 80 characters; a file path as its name alone (the folder is the grader's)."""
    if isinstance(value, str) and os.path.isabs(value):
        value = os.path.basename(value)
    try:
        text = repr(value)
    except Exception:  # a worker's object whose repr raises
        text = "<%s>" % wire.type_name(value)
    text = re.sub(r" object at 0x[0-9a-fA-F]+>", ">", text)  # the same call reads the same in every run
    return text if len(text) <= 80 else text[:77] + "..."
