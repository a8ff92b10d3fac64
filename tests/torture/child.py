"""The torture run's child processes: a sink, a publisher and an intake that die on cue.

Owns how each crash point is reached from OUTSIDE the library: wrappers
around the callables the kit takes (send, after_delivery, receive), SQLite
trace callbacks on the connections it returns, and commands on stdin. It
uses only the public API and never checks an invariant (the parent does,
from the files).

    python -m tests.torture.child sink --db S [--point P --target ID --mode exit|kill]
    python -m tests.torture.child publisher --db S --url U [--limit N] [--point P --target ID --index K --mode M]
    python -m tests.torture.child intake --db S --event JSON [--point between-inserts --mode M]

Protocol: lines starting with "@" on stdout ("@ready URL", "@at POINT ID",
"@committed ID", "@acked ID", "@done N", "@error NAME: MESSAGE", "@stopped");
commands on stdin ("go" releases a hold, "die" is os._exit, "stop" stops
the sink). At a point in kill mode the child says "@at" and waits for the
parent's SIGKILL; every wait is bounded (HOLD_LIMIT, SERVE_LIMIT).
"""
import argparse
import json
import os
import re
import sys
import threading

from outbox import DeliveryError, dispatch, init_store, intake
from outbox.core.sender import HeldConnection
from outbox.ops import attempts
from sink import receive
from sink.server import make_server

CRASH_EXIT = 77  # died at the point (or on "die"), by os._exit
DELIVERY_FAILED = 3  # dispatch stopped on a DeliveryError: the sink is gone
STRANDED_EXIT = 78  # held or blocked past HOLD_LIMIT: the parent never came
ORPHAN_EXIT = 79  # stdin closed: the parent is gone, so is the reason to live
HOLD_LIMIT = 60.0  # seconds; far beyond any wait of the parent
SERVE_LIMIT = 600.0  # seconds a sink serves without "stop"; a whole soak fits many times
# Long enough that a publisher held by the sink (point 4) is still waiting when it is killed.
SEND_TIMEOUT = 30.0
MAX_ROUNDS = 1000  # dispatch calls per publisher process; bounds the loop

_PENDING = re.compile(r"\s*SELECT\b.*\bFROM\s+outbox\b.*\bsent\s*=\s*0\b", re.I | re.S)
_MARK = re.compile(r"\s*UPDATE\s+outbox\b.*\bSET\b.*\bsent\s*=\s*1\b", re.I | re.S)
# Any other UPDATE of outbox before the send is the attempt being recorded.
_OUTBOX_UPDATE = re.compile(r"\s*UPDATE\s+outbox\b", re.I)
_ORDERS_INSERT = re.compile(r"\s*INSERT\s+INTO\s+orders\b", re.I)
_BEGIN = re.compile(r"\s*BEGIN\b", re.I)
_OUTBOX_INSERT = re.compile(r"\s*INSERT\s+INTO\s+outbox\b", re.I)
_SAY = threading.Lock()


def say(line):
    with _SAY:
        sys.stdout.write("@" + line + "\n")
        sys.stdout.flush()


def is_commit(statement):
    words = statement.split(None, 1)
    return bool(words) and words[0].upper().rstrip(";") in ("COMMIT", "END")


class Control:
    """The child's end of the parent's commands, and the two ways to stop at a point."""

    def __init__(self, mode):
        self.mode = mode
        self.go = threading.Event()
        self.stop = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in sys.stdin:
            command = line.strip()
            if command == "go":
                self.go.set()
            elif command == "stop":
                self.stop.set()
            elif command == "die":
                say("died")
                os._exit(CRASH_EXIT)
        os._exit(ORPHAN_EXIT)

    def crash(self, label):
        """Die here: os._exit in exit mode; in kill mode say so and wait for SIGKILL."""
        say("at " + label)
        if self.mode == "exit":
            os._exit(CRASH_EXIT)
        # Nothing sets this event: the parent's SIGKILL ends the wait.
        threading.Event().wait(HOLD_LIMIT)
        os._exit(STRANDED_EXIT)

    def hold(self, line):
        """Say `line`, then wait for "go" (another process dies meanwhile)."""
        say(line)
        if not self.go.wait(HOLD_LIMIT):
            os._exit(STRANDED_EXIT)
        self.go.clear()


class PublisherGate:
    """Decides, from the calls and statements it sees, when the publisher is at its point.

    A point "after X" fires at the first checkpoint once X is complete: the
    next statement on the connection, the next call into send or
    after_delivery, or the end of a dispatch call. "after-pending" is the
    exception: it waits for dispatch's next step with the batch (a BEGIN, as
    an attempt is recorded, or the call into send), so whatever `pending`
    itself runs after its SELECT has run.
    """

    def __init__(self, control, point, target, index, batch):
        self.control = control
        self.point = point
        self.target = target
        self.index = index
        self.batch = batch
        self.armed = False
        self.batch_read = False  # after-pending: the target batch's SELECT has run
        self.awaiting_commit = False
        self.reads = 0
        self.attempts = 0
        self.current = None

    def checkpoint(self):
        if self.armed:
            self.control.crash("%s %s" % (self.point, self.target))

    def on_statement(self, statement):
        self.checkpoint()
        if self.batch_read and _BEGIN.match(statement):
            self.armed = True
            self.checkpoint()
        if _PENDING.match(statement):
            self.reads += 1
            if self.point == "after-pending" and (self.reads - 1) * self.batch == self.index:
                self.batch_read = True
        elif _MARK.match(statement):
            if self.point == "after-mark" and self.current == self.target:
                self.awaiting_commit = True
        elif _OUTBOX_UPDATE.match(statement):
            self.attempts += 1
            if self.point == "after-attempt" and self.attempts - 1 == self.index:
                self.awaiting_commit = True
        elif is_commit(statement) and self.awaiting_commit:
            self.armed = True

    def on_send(self, event):
        if self.batch_read:
            self.armed = True
        self.checkpoint()
        self.current = event["id"]
        if self.point == "in-send" and event["id"] == self.target:
            self.control.crash("%s %s" % (self.point, self.target))

    def on_ack(self, event):
        self.checkpoint()
        if event["id"] != self.target:
            return
        if self.point == "after-ack":
            self.control.crash("%s %s" % (self.point, self.target))
        if self.point == "hold-after-ack":
            self.control.hold("acked " + event["id"])


def run_publisher(args, control):
    """dispatch until nothing is pending (at most MAX_ROUNDS calls); exit code says how it ended."""
    con = init_store(args.db)
    # The relay's way: one connection held across sends, so every crash point meets it too.
    held = HeldConnection(args.url, timeout=SEND_TIMEOUT)
    try:
        gate = PublisherGate(control, args.point, args.target, args.index, args.limit)
        con.set_trace_callback(gate.on_statement)

        def send(event):
            gate.on_send(event)
            return held.send(event)

        marked = 0
        try:
            for _ in range(MAX_ROUNDS):
                # The attempt records the relay keeps (point 2 is after one is committed).
                count = dispatch(con, send, args.limit, after_delivery=gate.on_ack, **attempts.hooks(con))
                gate.checkpoint()
                if count == 0:
                    break
                marked += count
        except DeliveryError as exc:
            say("error %s: %s" % (type(exc).__name__, exc))
            return DELIVERY_FAILED
        say("done %d" % marked)
        return 0
    finally:
        held.close()
        con.set_trace_callback(None)
        con.close()


def run_sink(args, control):
    """Serve until "stop"; the receive wrapper dies or holds at the sink's point."""

    def crash(event):
        control.crash("%s %s" % (args.point, event["id"]))

    def wrapped(con, event):
        hit = isinstance(event, dict) and event.get("id") == args.target
        if not hit:
            return receive(con, event)
        if args.point == "after-request":
            crash(event)
        if args.point == "before-commit":
            # SQLite calls the trace callback as COMMIT starts, before it takes effect.
            con.set_trace_callback(lambda statement: crash(event) if is_commit(statement) else None)
            try:
                return receive(con, event)
            finally:
                con.set_trace_callback(None)
        result = receive(con, event)
        if args.point == "after-commit":
            crash(event)
        if args.point == "hold-after-commit":
            control.hold("committed " + event["id"])
        return result

    server = make_server(args.db, "127.0.0.1", 0, receive=wrapped)
    server.start()
    try:
        say("ready " + server.url())
        if not control.stop.wait(SERVE_LIMIT):
            return STRANDED_EXIT
    finally:
        server.stop()
    say("stopped")
    return 0


def run_intake(args, control):
    """One intake; at between-inserts it dies after the orders INSERT, as the outbox INSERT starts."""
    event = json.loads(args.event)
    con = init_store(args.db)
    try:
        inserted = []

        def trace(statement):
            # Whatever runs between the two inserts (a COMMIT, say) has run by now.
            if inserted and _OUTBOX_INSERT.match(statement):
                control.crash("%s %s" % (args.point, event["id"]))
            if args.point == "between-inserts" and _ORDERS_INSERT.match(statement):
                inserted.append(statement)

        con.set_trace_callback(trace)
        seq = intake(con, event)
        con.set_trace_callback(None)
    finally:
        con.close()
    say("done %d" % seq)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tests.torture.child", description=__doc__.split("\n")[0])
    parser.add_argument("role", choices=("sink", "publisher", "intake"))
    parser.add_argument("--db", required=True)
    parser.add_argument("--url", help="publisher: the sink's /events URL")
    parser.add_argument("--event", help="intake: the event as JSON")
    parser.add_argument("--limit", type=int, default=16, help="publisher: dispatch batch size (default: %(default)s)")
    parser.add_argument("--point", default=None, help="the crash point of this process (default: none)")
    parser.add_argument("--target", default=None, help="the event id the point is aimed at")
    parser.add_argument("--index", type=int, default=-1, help="the target's index in seq order")
    parser.add_argument("--mode", choices=("exit", "kill"), default="exit")
    args = parser.parse_args(argv)
    control = Control(args.mode)
    run = {"sink": run_sink, "publisher": run_publisher, "intake": run_intake}[args.role]
    return run(args, control)


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: the daemon thread reading stdin would hold stdin's lock
    # while the interpreter shuts down, which can end in a fatal error.
    os._exit(status)
