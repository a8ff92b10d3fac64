#!/usr/bin/env python3
"""grade.py: prove "two deliveries, one application" with real processes and real files.

    python grade.py                      grade this kit (examples/worker_reference.py)
    python grade.py --impl worker.py     grade another implementation of the same contract
    python grade.py -k crash-after-ack   run one check (repeat -k for more)
    python grade.py --json               a machine-readable report on stdout

Every check runs the implementation in child processes of its own (this file,
started again with a hidden --role), so a crash, a hang or a bad import in the
implementation becomes a FAIL with a reason, never a crashed or hung grader.
The grader itself never imports the implementation: it observes the source and
sink DBs through read-only connections of its own, and runs its own loopback
servers. Exit status: 0 every check passed, 1 some check failed, 2 usage error.
"""
import argparse
import concurrent.futures
import contextlib
import http.client
import http.server
import importlib.util
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

ROOT = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(ROOT, "examples", "worker_reference.py")
CONTRACT = ("validate_event", "init_store", "intake", "pending", "mark_sent", "dispatch", "send_http", "init_sink", "receive")
SNACK = {"id": "snack-7", "sku": "snack", "qty": 7}
PUBLISHER_CRASH = 73  # the publisher's after_delivery hook dies with this status
INTAKE_CRASH = 75  # the intake child dies with this status right after the first COMMIT
SINK_CRASH = 74  # sink.faults.CRASH_EXIT: the sink's crash faults exit with this status
MARK = "@@grade "  # prefix of the protocol lines a child writes on stdout
DEFAULT_TIMEOUT = 10.0


class Fail(Exception):
    """A check's expectation did not hold: what was expected, what was observed."""

    def __init__(self, expected, observed):
        super().__init__(expected, observed)
        self.expected = expected
        self.observed = observed


def expect(condition, expected, observed):
    if not condition:
        raise Fail(expected, observed)


def describe(exc):
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = text if len(text) <= 200 else text[:197] + "..."
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__


# --------------------------------------------------------------------------
# Child side: this file started again with --role. Only these functions ever
# touch the implementation under test.
# --------------------------------------------------------------------------


def say(kind, **fields):
    fields["kind"] = kind
    sys.stdout.write(MARK + json.dumps(fields) + "\n")
    sys.stdout.flush()


def load_impl(path, needed):
    """Import the worker module from `path`; Fail naming any missing function."""
    spec = importlib.util.spec_from_file_location("worker_under_test", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        raise Fail("%s imports cleanly" % path, "import failed: %s" % describe(exc))
    missing = [name for name in needed if not callable(getattr(module, name, None))]
    expect(not missing, "the worker defines %s" % ", ".join(needed), "missing function(s): %s" % ", ".join(missing))
    return module


def connect(impl, opener, path):
    """Call the worker's init_store or init_sink; Fail unless it gives a sqlite3.Connection."""
    con = getattr(impl, opener)(path)
    expect(isinstance(con, sqlite3.Connection), "%s returns a sqlite3.Connection" % opener,
           "it returned %s" % describe_value(con))
    return con


def describe_value(value):
    text = repr(value)
    return "%s (%s)" % (text if len(text) <= 80 else text[:77] + "...", type(value).__name__)


def crash_after_first_commit(con, status):
    """Exit the process at the first statement after the first COMMIT on `con` (a real crash)."""
    committed = []

    def trace(statement):
        if committed:
            os._exit(status)
        if statement.lstrip().upper().startswith(("COMMIT", "END")):
            committed.append(statement)

    con.set_trace_callback(trace)
    return committed


def role_intake(impl, args):
    con = connect(impl, "init_store", args.db)
    committed = crash_after_first_commit(con, INTAKE_CRASH) if args.crash_after_first_commit else None
    for event in json.loads(args.events):
        say("intake", id=event["id"], seq=impl.intake(con, event))
        if committed:
            os._exit(INTAKE_CRASH)  # nothing ran after the COMMIT: crash here, as if the power went
    say("done")


def role_publish(impl, args):
    con = connect(impl, "init_store", args.db)
    for event in json.loads(args.events or "[]"):
        impl.intake(con, event)

    def send(event):
        event_id = event.get("id") if isinstance(event, dict) else None
        result = impl.send_http(args.url, event)
        say("ack", id=event_id, result=repr(result))  # flushed before any hook can crash
        return result

    def crash(event):
        os._exit(PUBLISHER_CRASH)  # no finally, no close: the process just stops

    try:
        marked = impl.dispatch(con, send, after_delivery=crash if args.crash_after_ack else None)
    except Exception as exc:
        say("error", type=type(exc).__name__, mro=[c.__name__ for c in type(exc).__mro__], message=describe(exc))
        sys.exit(1)
    say("done", marked=repr(marked))


def role_sink(impl, args):
    # Imported only now: when the worker is a copy of this kit (the mutant
    # tests), its own `sink` package is the one already on sys.path.
    from sink import server as sink_server

    stop = []
    # Only a flag: Event.set() from a handler can deadlock on the lock wait() holds.
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    httpd = sink_server.make_server(
        args.db, "127.0.0.1", 0, timeout=args.timeout, fault=args.fault,
        init_sink=lambda path: connect(impl, "init_sink", path), receive=impl.receive,
    )
    httpd.start()
    say("listening", url=httpd.url())
    while not stop:
        time.sleep(0.02)  # how soon a SIGTERM is noticed
    httpd.stop()


def role_check(impl, args):
    """Run one in-process check against the implementation and report its verdict."""
    expected, observed = IN_PROCESS_CHECKS[args.check](impl, args.db)
    say("verdict", ok=True, expected=expected, observed=observed)


def exit_with_parent(parent):
    """Poll until the grader is gone, then end this child: no orphan outlives a killed grader."""
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(1)


def child_main(args):
    # The grader's pid comes from its command line: a child started just as the
    # grader died would otherwise take its new parent (init) for the grader.
    parent = args.parent if args.parent is not None else os.getppid()
    threading.Thread(target=exit_with_parent, args=(parent,), daemon=True).start()
    needed = ROLE_NEEDS[args.role] if args.role != "check" else CHECK_NEEDS[args.check]
    try:
        impl = load_impl(args.impl, needed)
        ROLES[args.role](impl, args)
    except Fail as fail:
        say("verdict", ok=False, expected=fail.expected, observed=fail.observed)
        sys.exit(1)
    except Exception as exc:
        say("error", type=type(exc).__name__, mro=[c.__name__ for c in type(exc).__mro__], message=describe(exc))
        traceback.print_exc()  # to the child's stderr, which the grader keeps for the report
        sys.exit(1)
    sys.exit(0)


# In-process checks: each gets the implementation and a fresh DB path, raises
# Fail or returns (expected, observed) for the PASS line.


def _sent_flags(db):
    con = read_only(db)
    try:
        return dict(con.execute("SELECT event_id, sent FROM outbox ORDER BY seq"))
    finally:
        con.close()


def raised(call):
    """Run `call()`; return the exception it raised, or None if it returned. A Fail passes through."""
    try:
        call()
    except Fail:
        raise
    except Exception as exc:
        return exc
    return None


def expect_raises(call, kind, expected):
    """Fail unless `call()` raises an exception whose class, or a base of it, is named `kind`; return it.

    By name, so a worker's own Conflict or DeliveryError classes count.
    """
    exc = raised(call)
    expect(exc is not None, expected, "it returned normally")
    expect(kind in [c.__name__ for c in type(exc).__mro__], expected, "it raised %s" % describe(exc))
    return exc


def _ids(events):
    try:
        return [e["id"] for e in events]
    except Exception:
        return repr(events)


def check_seq_order(impl, db):
    """Seq order beats id and clock order; limits outside 1-16 refused; pending writes nothing."""
    con = connect(impl, "init_store", db)
    real_time, real_time_ns = time.time, time.time_ns
    clock = [1700000000.9, 1700000000.9, 1699999990.0]  # z and a in one second, then the clock steps back
    try:
        for event_id in ("z", "a", "m"):
            now = clock.pop(0)
            time.time, time.time_ns = (lambda now=now: now), (lambda now=now: int(now * 1e9))
            impl.intake(con, {"id": event_id, "sku": "seq", "qty": 1})
    finally:
        time.time, time.time_ns = real_time, real_time_ns
    watcher = read_only(db)
    # Not closed on purpose: the child process ends right after the check.
    before = (watcher.execute("PRAGMA data_version").fetchone()[0], watcher.execute("SELECT * FROM outbox").fetchall())
    first = impl.pending(con, 16)
    expect(_ids(first) == ["z", "a", "m"], "pending in intake (seq) order z, a, m", "pending gave %s" % (_ids(first),))
    expect(first[0] == {"id": "z", "sku": "seq", "qty": 1}, "events as dicts with exactly id, sku, qty", "pending gave %r" % (first[0],))
    second = impl.pending(con, 1)
    expect(_ids(second) == ["z"], "pending(con, 1) gives only z, again", "it gave %s" % (_ids(second),))
    after = (watcher.execute("PRAGMA data_version").fetchone()[0], watcher.execute("SELECT * FROM outbox").fetchall())
    expect(after == before, "pending changes nothing (outbox rows and data_version)", "the outbox changed while only pending ran")
    for bad in (0, 17, True, "16"):
        expect_raises(lambda: impl.pending(con, bad), "ValueError", "limit %r refused with ValueError" % (bad,))
    return "seq order z, a, m over id and clock order; limits 0, 17, True, '16' refused; pending read-only", "as expected"


def check_stop_on_first_failure(impl, db):
    """Dispatch stops at B's exception, lets it out unchanged, and resumes at B."""
    con = connect(impl, "init_store", db)
    for event_id in ("A", "B", "C"):
        impl.intake(con, {"id": event_id, "sku": "stop", "qty": 1})
    calls = []
    boom = ConnectionResetError("the grader's send failed on B")

    def send(event):
        calls.append(event["id"])
        if event["id"] == "B":
            flags = _sent_flags(db)
            expect(flags.get("B") == 0, "B not marked sent before its send returned", "B was already sent=1 while send ran")
            raise boom
        return True

    exc = raised(lambda: impl.dispatch(con, send))
    expect(exc is not None, "B's exception reaches the caller", "dispatch returned normally (the error was swallowed)")
    expect(exc is boom, "B's own exception object reaches the caller", "got %s instead" % describe(exc))
    expect(calls == ["A", "B"], "send called for A and B, never C", "send was called for %s" % calls)
    flags = _sent_flags(db)
    expect(flags == {"A": 1, "B": 0, "C": 0}, "A sent; B and C pending", "sent flags %s" % flags)
    calls.clear()
    marked = impl.dispatch(con, lambda e: calls.append(e["id"]) or True)
    expect(calls == ["B", "C"], "a second call resumes at B, then C", "it sent %s" % calls)
    flags = _sent_flags(db)
    expect(flags == {"A": 1, "B": 1, "C": 1} and marked == 2, "all sent, second call returns 2", "flags %s, returned %r" % (flags, marked))
    return "A sent, B's exception out unchanged, C untouched; the next call sends B then C", "as expected"


def check_no_lock_during_send(impl, db):
    """No write lock is held while send runs."""
    con = connect(impl, "init_store", db)
    impl.intake(con, {"id": "first", "sku": "lock", "qty": 1})
    done = []

    def send(event):
        in_transaction = getattr(con, "in_transaction", False)
        expect(not in_transaction, "dispatch's own connection is outside any transaction while send runs",
               "con.in_transaction is True inside send")
        other = sqlite3.connect(db, isolation_level=None, timeout=0)
        try:
            other.execute("PRAGMA busy_timeout = 0")
            try:
                other.execute("BEGIN IMMEDIATE")
                other.execute("ROLLBACK")
            except sqlite3.OperationalError as exc:
                raise Fail("a second connection can BEGIN IMMEDIATE while send runs", "it could not: %s" % exc)
        finally:
            other.close()
        second = connect(impl, "init_store", db)
        second.execute("PRAGMA busy_timeout = 0")
        try:
            impl.intake(second, {"id": "taken-during-send", "sku": "lock", "qty": 1})
        except Fail:
            raise
        except Exception as exc:
            raise Fail("an intake on a second connection succeeds while send runs", "it failed: %s" % describe(exc))
        finally:
            second.close()
        done.append(event["id"])
        return True

    impl.dispatch(con, send, 1)
    expect(done == ["first"], "send ran once, for 'first'", "send ran for %s" % done)
    flags = _sent_flags(db)
    expect(flags == {"first": 1, "taken-during-send": 0}, "first sent; the order taken in during send pending", "sent flags %s" % flags)
    return "BEGIN IMMEDIATE and an intake on a second connection (busy_timeout 0) succeed inside send", "as expected"


def check_callback_mutation(impl, db):
    """The item dispatch selected is marked, whatever the callback does to its copy."""
    con = connect(impl, "init_store", db)
    for event_id in ("B", "C"):
        impl.intake(con, {"id": event_id, "sku": "mut", "qty": 1})

    def send(event):
        event["id"] = "C"  # rewrite the argument to the next pending id
        return True

    impl.dispatch(con, send, 1)
    flags = _sent_flags(db)
    expect(flags == {"B": 1, "C": 0}, "the selected item B marked, C still pending", "sent flags %s" % flags)
    return "the callback rewrote B's id to C; B marked, C pending", "as expected"


def check_exact_ack(impl, db):
    """Only an exact True from send is an ACK."""
    con = connect(impl, "init_store", db)
    impl.intake(con, {"id": "only", "sku": "ack", "qty": 1})
    seen = []
    for result in (1, "ok", None, {"ack": True}):
        exc = raised(lambda: impl.dispatch(con, lambda event: result))
        expect(exc is not None, "send returning %r is no ACK: dispatch raises" % (result,), "dispatch returned normally")
        seen.append("%r -> %s" % (result, type(exc).__name__))
        flags = _sent_flags(db)
        expect(flags == {"only": 0}, "send returning %r leaves the item pending" % (result,), "sent flags %s" % flags)
    return "1, 'ok', None and {'ack': True} from send are not ACKs", "; ".join(seen)


def check_validate_event(impl, db):
    """Valid events come back as new dicts; each broken rule is a ValueError naming its field."""
    good = {"qty": 1000000, "sku": "a.b_c:d-e", "id": "9" + "x" * 63}
    out = impl.validate_event(good)
    expect(out == good and out is not good, "a valid event comes back as an equal, NEW dict", "got %r" % (out,))
    bad = (
        ("qty", dict(good, qty=True)), ("qty", dict(good, qty=0)), ("qty", dict(good, qty=1000001)),
        ("qty", dict(good, qty="7")), ("qty", dict(good, qty=1.0)), ("id", dict(good, id="")),
        ("id", dict(good, id="a b")), ("id", dict(good, id="x" * 65)), ("id", dict(good, id="-a")),
        ("id", dict(good, id=7)), ("sku", dict(good, sku="s/1")), ("sku", dict(good, sku="é")),
        ("extra", dict(good, extra=1)), ("qty", {"id": "a", "sku": "b"}), (None, ["a", "b", 1]),
    )
    for field, event in bad:
        exc = expect_raises(lambda: impl.validate_event(event), "ValueError", "%r refused with a ValueError" % (event,))
        expect(field is None or field in str(exc), "the error for %r names %r" % (event, field), "message: %s" % exc)
    return "valid events copied; %d broken ones refused, each naming its field" % len(bad), "as expected"


def check_intake_idempotent(impl, db):
    """The same event again writes nothing; the same id with another payload is a Conflict."""
    con = connect(impl, "init_store", db)
    seq = impl.intake(con, {"id": "dup", "sku": "idem", "qty": 2})
    watcher = read_only(db)
    before = watcher.execute("SELECT * FROM outbox").fetchall(), watcher.execute("SELECT * FROM orders").fetchall()
    again = impl.intake(con, {"qty": 2, "sku": "idem", "id": "dup"})
    expect(again == seq, "the same event again returns the same seq %r" % (seq,), "it returned %r" % (again,))
    expect_raises(lambda: impl.intake(con, {"id": "dup", "sku": "idem", "qty": 3}), "Conflict",
                  "another payload for 'dup' raises Conflict")
    after = watcher.execute("SELECT * FROM outbox").fetchall(), watcher.execute("SELECT * FROM orders").fetchall()
    expect(after == before, "neither the repeat nor the conflict wrote a row", "orders/outbox changed")
    return "same event: same seq, nothing written; another payload: Conflict, nothing written", "as expected"


def check_mark_sent(impl, db):
    """mark_sent marks exactly one row: True, then False; an unknown id is a KeyError."""
    con = connect(impl, "init_store", db)
    for event_id in ("a", "b"):
        impl.intake(con, {"id": event_id, "sku": "mark", "qty": 1})
    first, second = impl.mark_sent(con, "b"), impl.mark_sent(con, "b")
    expect(first is True and second is False, "mark_sent gives True, then False", "it gave %r, then %r" % (first, second))
    expect(_sent_flags(db) == {"a": 0, "b": 1}, "only b is sent", "sent flags %s" % _sent_flags(db))
    expect_raises(lambda: impl.mark_sent(con, "nope"), "KeyError", "an unknown id raises KeyError")
    expect(_sent_flags(db) == {"a": 0, "b": 1}, "the unknown id changed nothing", "sent flags %s" % _sent_flags(db))
    return "True, then False, KeyError for an unknown id; only that row marked", "as expected"


IN_PROCESS_CHECKS = {
    "validate-event": check_validate_event,
    "intake-idempotent": check_intake_idempotent,
    "mark-sent": check_mark_sent,
    "seq-order": check_seq_order,
    "stop-on-first-failure": check_stop_on_first_failure,
    "no-lock-during-send": check_no_lock_during_send,
    "callback-mutation": check_callback_mutation,
    "exact-ack": check_exact_ack,
}
CHECK_NEEDS = {
    "validate-event": ("validate_event",),
    "intake-idempotent": ("init_store", "intake"),
    "mark-sent": ("init_store", "intake", "mark_sent"),
    "seq-order": ("init_store", "intake", "pending"),
    "stop-on-first-failure": ("init_store", "intake", "dispatch"),
    "no-lock-during-send": ("init_store", "intake", "dispatch"),
    "callback-mutation": ("init_store", "intake", "dispatch"),
    "exact-ack": ("init_store", "intake", "dispatch"),
}
ROLES = {"intake": role_intake, "publish": role_publish, "sink": role_sink, "check": role_check}
ROLE_NEEDS = {
    "intake": ("init_store", "intake"),
    "publish": ("init_store", "intake", "dispatch", "send_http"),
    "sink": ("init_sink", "receive"),
}


# --------------------------------------------------------------------------
# Parent side: processes, servers and observations of the grader's own.
# --------------------------------------------------------------------------


class Processes:
    """Every child the grader starts, so that none outlives it (timeouts, Ctrl-C, SIGTERM)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._live = set()
        self.stopping = False

    def start(self, cmd, env):
        with self._lock:
            if self.stopping:
                raise Fail("the grader keeps running", "the grader was interrupted")
            proc = subprocess.Popen(
                cmd, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                universal_newlines=True, start_new_session=True,
            )
            self._live.add(proc)
        return proc

    def kill(self, proc):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # its whole session: the child and anything it started
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        with self._lock:
            self._live.discard(proc)

    def forget(self, proc):
        with self._lock:
            self._live.discard(proc)

    def kill_all(self):
        with self._lock:
            self.stopping = True
            live = list(self._live)
        for proc in live:
            self.kill(proc)


PROCESSES = Processes()


class Run:
    """What one child did: exit status, its protocol lines, the tail of its stderr."""

    def __init__(self, what, status, lines, stderr, timed_out=False):
        self.what = what
        self.status = status
        self.lines = lines
        self.stderr = stderr
        self.timed_out = timed_out

    def first(self, kind):
        return next((line for line in self.lines if line.get("kind") == kind), None)

    def all(self, kind):
        return [line for line in self.lines if line.get("kind") == kind]

    def summary(self):
        """One line saying why this child did not do what it should have."""
        if self.timed_out:
            return "%s timed out (killed)" % self.what
        verdict = self.first("verdict")
        if verdict and not verdict["ok"]:
            return "%s: expected %s; observed %s" % (self.what, verdict["expected"], verdict["observed"])
        error = self.first("error")
        if error:
            return "%s raised %s" % (self.what, error["message"])
        tail = self.stderr.strip().splitlines()[-1:] if self.stderr.strip() else []
        return "%s exited with status %s%s" % (self.what, self.status, (": " + tail[0][:200]) if tail else "")


def parse_lines(stdout):
    lines = []
    for raw in stdout.splitlines():
        if raw.startswith(MARK):
            with contextlib.suppress(ValueError):
                lines.append(json.loads(raw[len(MARK):]))
    return lines


class Grader:
    """Runs checks for one implementation; owns the temp dir and the child command line."""

    def __init__(self, impl, timeout, keep):
        self.impl = impl
        self.timeout = timeout
        self.tmp = tempfile.mkdtemp(prefix="outbox-grade-")
        self.keep = keep
        self.evidence = {}

    def close(self):
        if not self.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def workdir(self, name):
        path = os.path.join(self.tmp, name)
        os.mkdir(path)
        return path

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        env.pop("PYTHONPATH", None)
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # leave no __pycache__ beside the worker
        env.update(extra)
        return env

    def command(self, role, *args):
        return [sys.executable, os.path.join(ROOT, "grade.py"), "--role", role, "--parent", str(os.getpid()),
                "--impl", self.impl] + list(args)

    def run(self, what, role, *args, env=None):
        """Run a child to completion within the time bound; never raises for the child's sake."""
        proc = PROCESSES.start(self.command(role, *args), env or self.env())
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            PROCESSES.kill(proc)
            return Run(what, None, [], "", timed_out=True)
        PROCESSES.forget(proc)
        return Run(what, proc.returncode, parse_lines(out), err[-4000:])

    @contextlib.contextmanager
    def sink(self, db, fault=None):
        """The implementation's init_sink/receive behind the kit's HTTP server, in a process of its own."""
        args = ["--db", db, "--timeout", "%g" % min(self.timeout, 5.0)] + (["--fault", fault] if fault else [])
        proc = PROCESSES.start(self.command("sink", *args), self.env())
        handle = SinkProcess(proc)
        try:
            handle.url = handle.wait_listening(self.timeout)
            yield handle
        finally:
            handle.stop(self.timeout)


class SinkProcess:
    """A running `--role sink` child: its address once it listens, its exit status once it stops."""

    def __init__(self, proc):
        self.proc = proc
        self.url = None
        self.status = None
        self._lines = []
        self._stderr = []
        self._ready = threading.Event()
        threading.Thread(target=self._read, args=(proc.stdout, self._lines), daemon=True).start()
        threading.Thread(target=self._read, args=(proc.stderr, self._stderr), daemon=True).start()

    def _read(self, stream, into):
        for raw in stream:
            into.append(raw)
            if raw.startswith(MARK):
                self._ready.set()
        self._ready.set()  # EOF: the process is gone

    def wait_listening(self, timeout):
        self._ready.wait(timeout)
        for line in parse_lines("".join(self._lines)):
            if line.get("kind") == "listening":
                return line["url"] + "/events"
        why = parse_lines("".join(self._lines))
        reason = next((l for l in why if l.get("kind") in ("verdict", "error")), None)
        if reason and reason["kind"] == "verdict":
            raise Fail(reason["expected"], "sink process: " + reason["observed"])
        if reason:
            raise Fail("the sink process starts and listens", "it raised %s" % reason["message"])
        raise Fail("the sink process listens within %gs" % timeout, "it printed no address (%s)" % self.tail())

    def tail(self):
        text = "".join(self._stderr).strip().splitlines()
        return text[-1][:200] if text else "no output"

    def wait_exit(self, timeout):
        try:
            self.status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.status = None
        return self.status

    def stop(self, timeout):
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        PROCESSES.kill(self.proc)


class FakeSink:
    """A loopback HTTP server of the grader's own that answers /events with a fixed behaviour.

    `answer(event_id) -> (status, headers, body bytes)`; `hits` counts every
    request that reached it, whatever its path or method (a trap must see none).
    """

    def __init__(self, answer=None):
        owner = self
        self.hits = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self):
                owner.hits.append((self.command, self.path))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, 65536)) if length > 0 else b""
                try:
                    event_id = json.loads(body.decode("utf-8")).get("id")
                except (ValueError, AttributeError):
                    event_id = None
                status, headers, payload = answer(event_id) if answer else (502, [], b'{"error": "trap"}')
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_HEAD = do_CONNECT = _any

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path="/events"):
        return "http://127.0.0.1:%d%s" % (self.server.server_address[1], path)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.thread.join(5)
        self.server.server_close()


def ack_body(event_id, **extra):
    body = {"ack": True, "id": event_id}
    body.update(extra)
    return json.dumps(body).encode("utf-8")


def read_only(path):
    """The grader's own observer: read-only, and query_only as a second line of defence."""
    if not os.path.exists(path):
        raise Fail("a DB file at %s" % os.path.basename(path), "no such file")
    con = sqlite3.connect("file:%s?mode=ro" % urllib.parse.quote(path), uri=True, timeout=5, isolation_level=None)
    con.execute("PRAGMA query_only = ON")
    return con


def observe_source(path, event_id):
    try:
        con = read_only(path)
        try:
            order = con.execute("SELECT count(*) FROM orders WHERE id = ?", (event_id,)).fetchone()[0]
            rows = con.execute("SELECT sent, payload FROM outbox WHERE event_id = ?", (event_id,)).fetchall()
        finally:
            con.close()
    except (sqlite3.Error, Fail) as exc:
        return {"error": "source DB unreadable: %s" % (exc.observed if isinstance(exc, Fail) else exc)}
    outbox = "absent" if not rows else ("sent" if rows[0][0] == 1 else "pending" if rows[0][0] == 0 else repr(rows[0][0]))
    return {"order": order == 1, "outbox": outbox if len(rows) <= 1 else "%d rows" % len(rows), "payload": rows[0][1] if rows else None}


def observe_sink(path, event_id, sku):
    try:
        con = read_only(path)
        try:
            inbox = con.execute("SELECT count(*) FROM inbox WHERE event_id = ?", (event_id,)).fetchone()[0]
            outcomes = [r[0] for r in con.execute("SELECT outcome FROM deliveries WHERE event_id = ? ORDER BY rowid", (event_id,))]
            qty = con.execute("SELECT coalesce(sum(qty), 0) FROM inventory WHERE sku = ?", (sku,)).fetchone()[0]
        finally:
            con.close()
    except (sqlite3.Error, Fail) as exc:
        return {"error": "sink DB unreadable: %s" % (exc.observed if isinstance(exc, Fail) else exc)}
    return {"inbox": inbox == 1, "deliveries": outcomes, "inventory": qty}


class Scenario:
    """Observations of snack-7 after each phase, kept for the evidence table."""

    def __init__(self, grader, name, source, sink_db):
        self.grader, self.name, self.source, self.sink_db = grader, name, source, sink_db
        self.phases = []
        grader.evidence[name] = self.phases

    def observe(self, phase, ack="-"):
        src = observe_source(self.source, SNACK["id"])
        snk = observe_sink(self.sink_db, SNACK["id"], SNACK["sku"]) if os.path.exists(self.sink_db) else {
            "inbox": False, "deliveries": [], "inventory": 0}
        for seen in (src, snk):
            expect("error" not in seen, "readable DBs after %s" % phase, seen.get("error"))
        row = {"phase": phase, "order": src["order"], "outbox": src["outbox"], "inbox": snk["inbox"],
               "deliveries": snk["deliveries"], "ack": ack, "inventory": snk["inventory"]}
        self.phases.append(row)
        return row


def need_ok(run):
    expect(run.status == 0, "%s succeeds" % run.what, run.summary())
    return run


def delivery_error(run, expected):
    """The child's error line, which must be a DeliveryError (by class name, anywhere in its MRO)."""
    error = run.first("error")
    expect(run.status == 1 and error is not None and "DeliveryError" in error["mro"], expected, run.summary())
    return error


def acks(run):
    return ", ".join(a["result"] for a in run.all("ack")) or "none"


# --------------------------------------------------------------------------
# The checks run by the parent. Each returns (expected, observed) or raises Fail.
# --------------------------------------------------------------------------


def scenario_crash_after_ack(g):
    work = g.workdir("crash-after-ack")
    source, sink_db = os.path.join(work, "source.db"), os.path.join(work, "sink.db")
    story = Scenario(g, "crash-after-ack", source, sink_db)
    need_ok(g.run("intake", "intake", "--db", source, "--events", json.dumps([SNACK])))
    row = story.observe("intake")
    expect(row["order"] and row["outbox"] == "pending", "snack-7 taken in: order row and pending outbox row", row)
    with g.sink(sink_db) as sink:
        first = g.run("publisher #1", "publish", "--db", source, "--url", sink.url, "--crash-after-ack")
        row = story.observe("publisher #1 (exit %s)" % first.status, ack=acks(first))
        expect(first.status == PUBLISHER_CRASH, "publisher #1 dies in after_delivery with status 73", first.summary())
        expect(row["outbox"] == "pending", "after the crash snack-7 is still pending in the source", "outbox %s" % row["outbox"])
        expect(row["inventory"] == 7 and row["deliveries"] == ["applied"], "the sink applied snack-7 once: inventory 7",
               "inventory %s, deliveries %s" % (row["inventory"], row["deliveries"]))
        second = g.run("publisher #2", "publish", "--db", source, "--url", sink.url)
        row = story.observe("publisher #2 (exit %s)" % second.status, ack=acks(second))
        need_ok(second)
    expect(row["deliveries"] == ["applied", "duplicate"], "the sink saw 2 deliveries: applied, then duplicate",
           "deliveries %s" % row["deliveries"])
    expect(row["inventory"] == 7, "inventory still 7 after the second delivery", "inventory %s" % row["inventory"])
    expect(row["outbox"] == "sent", "snack-7 sent after publisher #2", "outbox %s" % row["outbox"])
    return "exit 73 after the ACK; pending + inventory 7; then 2 deliveries, 1 application, sent", \
        "deliveries %s, inventory %d, outbox %s" % (row["deliveries"], row["inventory"], row["outbox"])


def scenario_dropped_response(g):
    work = g.workdir("dropped-response")
    source, sink_db = os.path.join(work, "source.db"), os.path.join(work, "sink.db")
    story = Scenario(g, "dropped-response", source, sink_db)
    need_ok(g.run("intake", "intake", "--db", source, "--events", json.dumps([SNACK])))
    story.observe("intake")
    with g.sink(sink_db, fault="drop-after-commit") as sink:
        first = g.run("publisher #1", "publish", "--db", source, "--url", sink.url)
        error = first.first("error")
        row = story.observe("publisher #1 (%s)" % (error["type"] if error else "exit %s" % first.status), ack=acks(first))
        error = delivery_error(first, "publisher #1 fails with a DeliveryError (no response)")
        expect(row["outbox"] == "pending", "snack-7 stays pending", "outbox %s" % row["outbox"])
        expect(row["inventory"] == 7, "the sink committed the receipt: inventory 7", "inventory %s" % row["inventory"])
        second = g.run("publisher #2", "publish", "--db", source, "--url", sink.url)
        row = story.observe("publisher #2 (exit %s)" % second.status, ack=acks(second))
        need_ok(second)
    expect(row["deliveries"] == ["applied", "duplicate"], "applied, then a duplicate ACK", "deliveries %s" % row["deliveries"])
    expect(row["inventory"] == 7 and row["outbox"] == "sent", "inventory 7 and snack-7 sent",
           "inventory %s, outbox %s" % (row["inventory"], row["outbox"]))
    return "no response after commit: error, pending, inventory 7; reconnect: duplicate ACK, sent", \
        "%s; then deliveries %s, inventory %d, outbox %s" % (error["message"], row["deliveries"], row["inventory"], row["outbox"])


UNTRUSTED = (
    ("wrong id", lambda event_id: (200, [("Content-Type", "application/json")], ack_body("someone-else"))),
    ("oversized", lambda event_id: (200, [("Content-Type", "application/json")], ack_body(event_id, pad="x" * 5000))),
    ("ack \"true\"", lambda event_id: (200, [("Content-Type", "application/json")],
                                       json.dumps({"ack": "true", "id": event_id}).encode())),
)


def scenario_untrusted_ack(g):
    work = g.workdir("untrusted-ack")
    reasons = []
    # The trap answers with a perfect ACK for snack-7: only not asking it keeps the item pending.
    with FakeSink(lambda event_id: (200, [], ack_body(SNACK["id"]))) as trap:
        cases = [(name, answer) for name, answer in UNTRUSTED]
        # 302: the redirect that a default urllib opener follows, even for a POST (as a GET).
        cases.append(("redirect", lambda event_id: (302, [("Location", trap.url())], b"")))
        for name, answer in cases:
            with FakeSink(answer) as fake:
                source = os.path.join(work, name.replace(" ", "-").replace('"', "") + ".db")
                run = g.run("publisher (%s)" % name, "publish", "--db", source, "--url", fake.url(), "--events", json.dumps([SNACK]))
                error = delivery_error(run, "%s: dispatch fails with a DeliveryError" % name)
                state = observe_source(source, SNACK["id"])
                expect(state.get("outbox") == "pending", "%s: snack-7 stays pending" % name, state)
                # The reason, without the "POST <url> for 'snack-7': " every message starts with.
                reasons.append("%s -> %s" % (name, error["message"].split("': ", 1)[-1]))
        expect(not trap.hits, "the redirect target sees no request", "it saw %s" % trap.hits)
    return "wrong-id, oversized, \"ack\": \"true\" and redirected ACKs leave snack-7 pending", " | ".join(reasons)


def scenario_proxy_ignored(g):
    work = g.workdir("proxy-ignored")
    source = os.path.join(work, "source.db")
    with FakeSink() as trap, FakeSink(lambda event_id: (200, [("Content-Type", "application/json")], ack_body(event_id))) as sink:
        env = g.env(HTTP_PROXY=trap.url(""), http_proxy=trap.url(""))
        run = g.run("publisher", "publish", "--db", source, "--url", sink.url(), "--events", json.dumps([SNACK]), env=env)
        expect(not trap.hits, "the proxy trap sees nothing", "it saw %s" % trap.hits)
        need_ok(run)
        expect(len(sink.hits) == 1, "the sink got the request directly", "it saw %s" % sink.hits)
    state = observe_source(source, SNACK["id"])
    expect(state.get("outbox") == "sent", "snack-7 sent", state)
    return "HTTP_PROXY and http_proxy point at a trap; delivery goes direct", "trap 0 requests, sink 1, snack-7 sent"


def scenario_conflict(g):
    work = g.workdir("conflict")
    source, sink_db = os.path.join(work, "source.db"), os.path.join(work, "sink.db")
    other = dict(SNACK, qty=9)
    with g.sink(sink_db) as sink:
        status, body = post(sink.url, SNACK, g.timeout)
        expect(status == 200, "snack-7 (qty 7) is applied: 200", "status %s, body %s" % (status, body))
        run = g.run("publisher", "publish", "--db", source, "--url", sink.url, "--events", json.dumps([other]))
        delivery_error(run, "publishing snack-7 with qty 9 fails with a DeliveryError")
        status, body = post(sink.url, other, g.timeout)
    expect(status == 409, "the same id with another payload gets 409", "status %s, body %s" % (status, body))
    snk = observe_sink(sink_db, SNACK["id"], SNACK["sku"])
    expect(snk.get("inventory") == 7, "inventory untouched: 7", snk)
    src = observe_source(source, SNACK["id"])
    expect(src.get("outbox") == "pending" and json.loads(src.get("payload") or "{}").get("qty") == 9,
           "the qty-9 outbox row untouched and pending", src)
    return "409 for snack-7 with qty 9; inventory 7; the outbox row pending", \
        "409 %s; deliveries %s" % (body.strip()[:80], snk.get("deliveries"))


def post(url, event, timeout):
    """The grader's own POST to a sink; returns (status, body text) or raises Fail."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        body = json.dumps(event).encode()
        conn.request("POST", "/events", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read(4096).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as exc:
        raise Fail("an HTTP answer from the sink", describe(exc))
    finally:
        conn.close()


def scenario_intake_atomic(g):
    work = g.workdir("intake-atomic")
    source = os.path.join(work, "source.db")
    run = g.run("intake", "intake", "--db", source, "--events", json.dumps([SNACK]), "--crash-after-first-commit")
    expect(run.status == INTAKE_CRASH, "the intake process dies right after its first COMMIT (status %d)" % INTAKE_CRASH,
           run.summary())
    state = observe_source(source, SNACK["id"])
    expect("error" not in state, "a readable source DB", state.get("error"))
    expect(state["order"] and state["outbox"] == "pending", "the first commit holds both the order and its outbox row",
           "order row %s, outbox %s" % ("present" if state["order"] else "absent", state["outbox"]))
    return "a crash right after intake's first COMMIT leaves order and outbox row together", "order present, outbox pending"


def scenario_receive_atomic(g):
    work = g.workdir("receive-atomic")
    seen = []
    for fault, whole in (("crash-before-commit", False), ("crash-after-commit", True)):
        source, sink_db = os.path.join(work, fault + "-source.db"), os.path.join(work, fault + "-sink.db")
        need_ok(g.run("intake", "intake", "--db", source, "--events", json.dumps([SNACK])))
        with g.sink(sink_db, fault=fault) as sink:
            run = g.run("publisher", "publish", "--db", source, "--url", sink.url)
            status = sink.wait_exit(g.timeout)
        expect(status == SINK_CRASH, "%s: the sink process exits with %d" % (fault, SINK_CRASH), "status %s" % status)
        expect(run.status == 1, "%s: the publisher gets no ACK" % fault, run.summary())
        snk = observe_sink(sink_db, SNACK["id"], SNACK["sku"])
        expect("error" not in snk, "a readable sink DB", snk.get("error"))
        want = {"inbox": whole, "deliveries": ["applied"] if whole else [], "inventory": 7 if whole else 0}
        expect(snk == want, "%s: %s" % (fault, "the whole receipt, committed" if whole else "nothing applied"),
               "inbox row %s, deliveries %s, inventory %s" % (snk["inbox"], snk["deliveries"], snk["inventory"]))
        with g.sink(sink_db) as sink:
            need_ok(g.run("publisher (restarted sink)", "publish", "--db", source, "--url", sink.url))
        snk = observe_sink(sink_db, SNACK["id"], SNACK["sku"])
        expect(snk.get("inventory") == 7, "%s, then a restarted sink: inventory 7" % fault, snk)
        seen.append("%s: %s" % (fault, ", ".join(snk["deliveries"])))
    return "a sink crash inside receive applies all or nothing; after a restart inventory is 7", "; ".join(seen)


def in_process(name):
    def scenario(g):
        db = os.path.join(g.workdir(name), "source.db")
        run = g.run(name, "check", "--check", name, "--db", db)
        verdict = run.first("verdict")
        if run.status == 0 and verdict and verdict["ok"]:
            return verdict["expected"], verdict["observed"]
        if verdict and not verdict["ok"]:
            raise Fail(verdict["expected"], verdict["observed"])
        raise Fail(IN_PROCESS_CHECKS[name].__doc__.rstrip("."), run.summary())
    return scenario


CHECKS = (
    ("crash-after-ack", scenario_crash_after_ack),
    ("dropped-response", scenario_dropped_response),
    ("untrusted-ack", scenario_untrusted_ack),
    ("proxy-ignored", scenario_proxy_ignored),
    ("seq-order", in_process("seq-order")),
    ("stop-on-first-failure", in_process("stop-on-first-failure")),
    ("no-lock-during-send", in_process("no-lock-during-send")),
    ("callback-mutation", in_process("callback-mutation")),
    ("exact-ack", in_process("exact-ack")),
    ("conflict", scenario_conflict),
    ("validate-event", in_process("validate-event")),
    ("intake-idempotent", in_process("intake-idempotent")),
    ("mark-sent", in_process("mark-sent")),
    ("intake-atomic", scenario_intake_atomic),
    ("receive-atomic", scenario_receive_atomic),
)
CHECK_NAMES = [name for name, _ in CHECKS]


# --------------------------------------------------------------------------
# Report and command line.
# --------------------------------------------------------------------------


def run_check(grader, name, scenario):
    started = time.monotonic()
    try:
        expected, observed = scenario(grader)
        ok = True
    except Fail as fail:
        ok, expected, observed = False, fail.expected, fail.observed
    except Exception as exc:  # a bug in the grader itself: still a readable line, never a crash
        ok, expected, observed = False, "the check runs", "grader error: %s" % describe(exc)
    return {"name": name, "ok": ok, "expected": str(expected), "observed": str(observed),
            "seconds": round(time.monotonic() - started, 3)}


def evidence_table(evidence):
    lines = []
    for name in ("crash-after-ack", "dropped-response"):
        phases = evidence.get(name)
        if not phases:
            continue
        lines.append("")
        lines.append("Evidence for snack-7, %s (each row a separate observation; none proves the next):" % name)
        rows = (
            ("order row (source)", lambda p: "present" if p["order"] else "absent"),
            ("outbox (source)", lambda p: p["outbox"]),
            ("inbox row (sink)", lambda p: "present" if p["inbox"] else "absent"),
            ("deliveries (sink)", lambda p: ", ".join(p["deliveries"]) or "none"),
            ("ACK seen (publisher)", lambda p: p["ack"]),
            ("inventory snack (sink)", lambda p: str(p["inventory"])),
        )
        table = [["observation"] + ["after " + p["phase"] for p in phases]]
        table += [[label] + [show(p) for p in phases] for label, show in rows]
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        for r in table:
            lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    return lines


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="grade.py", description="Prove 'two deliveries, one application' with real processes, and grade a worker module.")
    parser.add_argument("--impl", default=REFERENCE, metavar="PATH",
                        help="worker module to grade (default: this kit, %(default)s)")
    parser.add_argument("-k", dest="only", action="append", metavar="NAME",
                        help="run only this check (repeatable): " + ", ".join(CHECK_NAMES))
    parser.add_argument("--json", action="store_true", help="print a machine-readable report instead of text")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help="time bound of each child process step (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=4, help="checks run at once (default: %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary DBs and print where they are")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    # The child side: this file started again by the grader.
    parser.add_argument("--role", choices=sorted(ROLES), help=argparse.SUPPRESS)
    parser.add_argument("--check", choices=sorted(IN_PROCESS_CHECKS), help=argparse.SUPPRESS)
    parser.add_argument("--parent", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--events", help=argparse.SUPPRESS)
    parser.add_argument("--fault", help=argparse.SUPPRESS)
    parser.add_argument("--crash-after-ack", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--crash-after-first-commit", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        return args
    for name in args.only or ():
        if name not in CHECK_NAMES:
            parser.error("unknown check %r; the checks are: %s" % (name, ", ".join(CHECK_NAMES)))
    if not 0 < args.timeout <= 3600:  # also refuses nan and inf
        parser.error("--timeout must be a number of seconds from 0 to 3600, got %g" % args.timeout)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1, got %d" % args.jobs)
    args.impl = os.path.abspath(args.impl)
    if not os.path.isfile(args.impl):
        parser.error("--impl %s: no such file" % args.impl)
    return args


def interrupted(signum, frame):
    # SIGTERM and SIGHUP (a closed terminal) take the same way out as Ctrl-C,
    # so every finally below runs: children are killed, temporary DBs removed.
    raise KeyboardInterrupt


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.role:
        child_main(args)
    if args.list:
        for name in CHECK_NAMES:
            print(name)
        return 0
    signal.signal(signal.SIGTERM, interrupted)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, interrupted)
    selected = [(name, fn) for name, fn in CHECKS if not args.only or name in args.only]
    grader = Grader(args.impl, args.timeout, args.keep)
    started = time.monotonic()
    results = []
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
    try:
        futures = [pool.submit(run_check, grader, name, fn) for name, fn in selected]
        if not args.json:
            print("grading %s" % os.path.relpath(args.impl))
        for future in futures:
            result = future.result()
            results.append(result)
            if not args.json:
                print("%s %-22s expected: %s" % ("PASS" if result["ok"] else "FAIL", result["name"], result["expected"]))
                print("     %-22s observed: %s" % ("", result["observed"]))
                sys.stdout.flush()
    except KeyboardInterrupt:
        print("grade.py: interrupted; stopping children and removing temporary files", file=sys.stderr)
        return 130
    finally:
        PROCESSES.kill_all()
        pool.shutdown(wait=True)
        grader.close()
    passed = sum(1 for r in results if r["ok"])
    failed = len(results) - passed
    seconds = time.monotonic() - started
    if args.json:
        report = {"impl": args.impl, "passed": passed, "failed": failed, "seconds": round(seconds, 3),
                  "checks": results, "evidence": grader.evidence, "kept": grader.tmp if args.keep else None}
        print(json.dumps(report, indent=2))
    else:
        for line in evidence_table(grader.evidence):
            print(line)
        print("")
        if args.keep:
            print("temporary DBs kept in %s" % grader.tmp)
        print("graded in %.1fs" % seconds)
        print("grade: %d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        # `python grade.py | head`: the reader left; the checks and clean-up already ran.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
