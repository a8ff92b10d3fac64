"""The deciding side's view of a step: the worker's functions as calls it makes, their answers as data.

A Session drives one step (worker_side/calls.py) over its protocol socket:
each call is a request, its answer a value, a handle (an object the step
keeps: a connection, a cursor) or a RemoteError. Callbacks handed to the
worker (`send`, `after_delivery`) run here, in the grader's process; a Fail
inside one ends the step at once (the worker cannot catch it) and is the
verdict. Nothing the step says is trusted beyond what its own calls return:
the checks observe the DBs, servers and exit statuses themselves.
"""
import math
import os
import queue
import select

from . import wire
from .capture import OVER
from .wire import CONTRACT
from .common import Fail, msg

MAX_NESTING = 40  # callbacks within calls within callbacks: deeper is the worker's loop, refused
WAIT = 0.05  # seconds between two looks at whether the step is still there
FEED_MAX = 4  # answers and callbacks waiting to be read: the step sends one and waits, so more is a flood
SAID_MAX = 20  # lines of the step's own (verdict, error, limit) kept for the report
SAID_BYTES = 16 * 1024  # of each, as JSON: the step's own are under 8 KiB; a larger one is dropped unkept
LISTED = {"mro": 20, "events": 100, "ports": 100, "kit": 200}  # items of a list from the step that are read


class StepEnded(BaseException):
    """The step is gone (it exited, crashed, hit a limit or its time bound): no answer will come.

    A BaseException, so that no check's `except Exception` takes it for the
    error a worker's call raised.
    """


class Crash(Exception):
    """Raised by a callback of the grader's: the worker's process ends at once with `status`, as a crash."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


def text(value, limit=wire.SHOWN):
    return wire.cut(value if isinstance(value, str) else repr(value), limit)


class RemoteError(Exception):
    """An exception a worker's call raised, as its step described it: its class name, MRO, message."""

    def __init__(self, fields):
        self.type = text(fields.get("type", "?"))
        self.mro = names(fields.get("mro"), self.type)
        self.message = text(fields.get("message", self.type))
        self.text = text(fields.get("text", ""), 4096)
        self.function = contract_name(fields.get("function"))
        self.call = text(fields["call"], 200) if self.function and isinstance(fields.get("call"), str) else None
        self.frames = frames_of(fields.get("frames"))
        self.handle = fields.get("handle") if type(fields.get("handle")) is int else None
        super().__init__(self.text)

    def __str__(self):
        return self.text


class Handle:
    """An object the step keeps: its attributes and calls are requests; its type and repr as the step gave them."""

    def __init__(self, session, fields):
        self._session = session
        self._number = fields.get("$h") if type(fields.get("$h")) is int else -1
        self.type_name = text(fields.get("type", "?"))
        self.mro = names(fields.get("mro"), self.type_name)
        self.shown = text(fields.get("repr", "?"))
        self.is_connection = fields.get("connection") is True

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._session.request("getattr", of=self._number, name=name)

    def __call__(self, *args, **kwargs):
        return self._session.call("apply", args, kwargs, of=self._number)

    def __repr__(self):
        return self.shown


class Remote:
    """The worker module, as the checks call it: `impl.intake(con, event)` is a request to the step."""

    def __init__(self, session):
        self._session = session

    def __getattr__(self, name):
        if contract_name(name) is None:
            raise AttributeError(name)
        return lambda *args, **kwargs: self._session.call("call", args, kwargs, fn=name)

    def guarded(self, name, *args, mode="all", **kwargs):
        """Call `name` under the step's audit hook in `mode` ("all": every socket refused, "connect": connect only).

        (exception or None, value, refused socket events, ports a connect was refused to).
        """
        answer = self._session.call("guarded", args, kwargs, fn=name, mode=mode)
        if not (isinstance(answer, list) and len(answer) == 5 and isinstance(answer[3], list) and isinstance(answer[4], list)):
            return RemoteError({"type": "?", "message": "an answer that is not the grader's"}), None, [], []
        events = [text(e) for e in answer[3][:LISTED["events"]]]
        ports = [p if type(p) is int else text(p) for p in answer[4][:LISTED["ports"]]]
        if answer[0] == "raised":
            fields = answer[2] if isinstance(answer[2], dict) else {}
            error = self._session.error(fields, name)
            if isinstance(error, Fail):
                raise error  # the call itself refused the stub's parameters
            return error, None, events, ports
        return None, answer[1], events, ports

    def best_time(self, name, rounds, *args):
        """The fastest of `rounds` calls of `name`, timed in the step (no socket round trip in it).

        Measured in the worker's own process, with the clock the step took
        before the worker's import: a worker can still lie about it from
        there, so it is trusted as far as a time can be: a float above 0 and
        finite, else a RemoteError (the worker's failed check, never a pass).
        """
        seconds = self._session.call("best_time", args, {}, fn=name, rounds=rounds)
        if not (type(seconds) is float and 0 < seconds < math.inf):
            raise RemoteError({"type": "?", "message": "the step timed %s as %s, not a time" % (name, text(seconds))})
        return seconds

    def returned_an_argument(self):
        """Whether the last call gave back one of the objects it was given, not a new one."""
        return self._session.same

    def set_clock(self, now):
        self._session.request("clock", now=now)

    def crash_after_first_commit(self, con, status):
        self._session.call("crash_after_first_commit", (con,), {}, status=status)

    def kit_modules(self):
        found = self._session.request("kit")
        return [text(name) for name in found[:LISTED["kit"]]] if isinstance(found, list) else []


class Session:
    """One step's conversation: requests out on its protocol socket, answers and callbacks in from its lines."""

    def __init__(self):
        self.feed = queue.Queue()
        self.callbacks, self.tokens = {}, {}
        self.fail = None  # the first Fail a callback raised: the verdict
        self.said = []  # the step's own lines that are no answer (its import failed, say): at most SAID_MAX
        self.crashed = None  # the exit status the grader gave the step when it ended it (a Crash, a Fail)
        self.kill = lambda: None  # ends the step now (Grader.run sets it): a crash is the grader's act, not asked
        self.number = self.depth = 0
        self.same = False  # whether the last call returned one of its own arguments (the same object)
        self.running = []  # the contract functions running now, outermost first (None: a callback of the grader's)
        self.answered = False  # whether the step ever answered: until then, a hang is its import's
        self.ended_in = None  # self.running when the step was first found gone
        self.fd = self.reader = None

    def attach(self, fd, reader):
        self.fd, self.reader = fd, reader
        if os.name == "posix":  # a socket pair there; on Windows two pipes, which select cannot wait on (send)
            os.set_blocking(fd, False)  # the reading thread reads only what select found there

    def on_line(self, line):
        """A line of the step's (called by its reading thread): answers queued for `wait`, its own lines kept, within bounds.

        Never blocks, so that the reading thread keeps the step's deadline.
        The step sends one answer or callback and waits: more than FEED_MAX
        unread is a flood, and ends the step as a limit, as capture.Lines does.
        """
        kind = line.get("kind")
        if kind in ("reply", "callback"):
            if self.feed.qsize() < FEED_MAX:
                self.feed.put(line)
                return
            line = dict(OVER)
        if kind in ("verdict", "error", "limit") or line == OVER:
            if line == OVER:
                self.kill()
                if OVER not in self.said:
                    self.said.append(dict(OVER))  # kept whatever the count: the step's verdict
            elif len(self.said) < SAID_MAX and len(wire.dumps(line)) <= SAID_BYTES:
                self.said.append(line)

    # Values.
    def keep(self, value):
        if isinstance(value, Handle):
            return {"$r": value._number}
        if callable(value):
            number = len(self.callbacks) + 1
            self.callbacks[number] = value
            return {"$h": number}
        raise TypeError("the grader cannot send %r to a step" % (value,))

    def encode(self, value):
        return wire.encode(value, self.keep)

    def decode(self, value):
        try:
            return wire.decode(value, lambda fields: Handle(self, fields))
        except Exception:  # noqa: B902 (an answer the step forged: what its own call returns, and no more)
            return "<an answer the grader could not read>"

    # The conversation.
    def send(self, message):
        """Write `message` to the step; StepEnded once it is gone.

        The socket is non-blocking (attach): a step that reads nothing never
        holds the grader here for more than WAIT at a time; while its reading
        thread lives it ends the step at its deadline, and then this write fails.
        """
        data = memoryview((wire.dumps(message) + "\n").encode("utf-8"))
        while data:
            try:
                data = data[os.write(self.fd, data):]
            except BlockingIOError:
                if not self.reader.is_alive():
                    raise self.ended()
                select.select([], [self.fd], [], WAIT)
            except OSError:
                raise self.ended()

    def wait(self):
        while True:
            try:
                line = self.feed.get(timeout=WAIT)
            except queue.Empty:
                if not self.reader.is_alive() and self.feed.empty():
                    raise self.ended()
                continue
            if isinstance(line, dict):
                return line

    def call(self, op, args, kwargs, **fields):
        """A request whose dict and list arguments come back as the step left them (a call may change them)."""
        self.running.append(contract_name(fields.get("fn")))
        try:
            answer = self.request(op, args=[self.encode(a) for a in args],
                                  kwargs={k: self.encode(v) for k, v in kwargs.items()}, **fields)
        finally:
            self.running.pop()
        value, after, self.same = answer
        if isinstance(after, list):
            for arg, state in zip(args, after):
                wire.write_back(arg, self.decode(state))
        return value

    def request(self, op, **fields):
        self.number += 1
        number = self.number
        fields.update(op=op, id=number)
        self.send(fields)
        while True:
            line = self.wait()
            kind = line.get("kind")
            if kind == "reply" and type(line.get("id")) is int and line["id"] == number:
                self.answered = True
                break
            if kind == "callback":
                self.run_callback(line)
        if "limit" in line:
            self.said.append({"kind": "limit", "limit": "memory"})
            raise self.ended()
        if "error" in line:
            error = line["error"] if isinstance(line["error"], dict) else {}
            if error.get("fatal"):
                self.said.append(dict(kind="error", stage=None, **fields_of(RemoteError(error))))
                raise self.ended()
            raise self.error(error, fields.get("fn"))
        value = self.decode(line.get("value"))
        return (value, line.get("args_after"), line.get("same") not in (None, [])) if "args" in fields else value

    def error(self, fields, function):
        token = fields.get("token")
        if type(token) is int and token in self.tokens:
            return self.tokens[token]  # the grader's own exception, passed through the worker's code
        function = contract_name(function)
        if fields.get("signature") is True and function is not None:
            return Fail(msg("impl.signature", signature=CONTRACT[function]),
                        msg("impl.signature-error", function=function, error=text(fields.get("text", ""))))
        return RemoteError(fields)

    def run_callback(self, line):
        """Run the grader's callback the step asked for; answer it, or end the step (a Crash, a Fail).

        A Crash or a Fail ends the step here, by the grader's own hand: a
        worker's process asked to exit could undo what it did first.
        """
        of, number = line.get("of"), line.get("id")
        function = self.callbacks.get(of) if type(of) is int else None
        args = [self.decode(a) for a in line.get("args", [])] if isinstance(line.get("args"), list) else []
        kwargs = line.get("kwargs") if isinstance(line.get("kwargs"), dict) else {}
        kwargs = {str(k): self.decode(v) for k, v in kwargs.items()}
        reply = {"op": "reply", "id": number if type(number) is int else None}
        self.depth += 1
        self.running.append(None)
        try:
            if function is None or self.depth > MAX_NESTING:
                raise RuntimeError("no such callback, or callbacks nested past %d" % MAX_NESTING)
            reply["value"] = self.encode(function(*args, **kwargs))
        except Crash as crash:
            self.crashed = crash.status
        except Fail as fail:
            self.fail = self.fail or fail
            self.crashed = 1  # the verdict is made: the step ends now, before it can hide the cause
        except RemoteError as exc:
            reply["raise"] = {"$r": exc.handle} if exc.handle is not None else {
                "type": "RuntimeError", "message": exc.message, "token": 0}
        except Exception as exc:
            token = len(self.tokens) + 1
            self.tokens[token] = exc
            reply["raise"] = {"type": type(exc).__name__, "message": str(exc), "token": token}
        finally:
            self.depth -= 1
            self.running.pop()
        if self.crashed is not None:
            self.kill()
            raise self.ended()
        reply["args_after"] = [self.after(a) for a in args]
        self.send(reply)

    def after(self, arg):
        """What a callback's argument became, for the step to write back; None if it cannot cross (a 20 KiB str)."""
        if isinstance(arg, Handle):
            return None
        try:
            return self.encode(arg)
        except TypeError:
            return None

    def ended(self):
        """StepEnded, the contract functions that were running when the step was first found gone kept for now_running."""
        if self.ended_in is None:
            self.ended_in = list(self.running)
        return StepEnded()

    def now_running(self):
        """A "call" record: the contract function that runs now (None: the grader's own code), "import" before any answer.

        A hang then names the function that did not return, and never one that already had.
        """
        if not self.answered:
            return {"kind": "call", "function": "import"}
        running = self.ended_in if self.ended_in is not None else self.running
        return {"kind": "call", "function": running[-1] if running else None}

    def close(self, status=0):
        """Say the step is over (it exits with `status`), if it is still there to hear it."""
        try:
            self.send({"op": "exit", "status": status if isinstance(status, int) else 1})
        except StepEnded:
            pass


def contract_name(value):
    """`value` if it names a contract function, else None (a list or a dict from the step is no name)."""
    return value if isinstance(value, str) and value in CONTRACT else None


def names(value, default):
    """The class names of an MRO as the step gave them: at most LISTED["mro"] of them, each cut; [default] if none."""
    return [text(c) for c in value[:LISTED["mro"]]] if isinstance(value, list) else [default]


def fields_of(exc):
    """The fields of an "error" line (parent.Run reads them) for a RemoteError."""
    return {"type": exc.type, "mro": exc.mro, "message": exc.message, "function": exc.function, "call": exc.call,
            "frames": exc.frames}


FRAMES = 3  # of the worker's own, at most, that a report shows


def frames_of(value):
    """The step's frames of the worker's own code, as data of known shape: [{file, line, function, code}]."""
    if not isinstance(value, list):
        return []
    frames = []
    for frame in value[-FRAMES:]:
        if isinstance(frame, dict):
            line = frame.get("line")
            frames.append({"file": text(frame.get("file", "?"), 200), "line": line if isinstance(line, int) else 0,
                           "function": text(frame.get("function", "?"), 200), "code": text(frame.get("code", ""), 200)})
    return frames
