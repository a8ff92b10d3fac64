"""The child side of the grader: grade.py started again with --role, in a process of its own.

The only module that imports and calls the worker under test. Each role or
in-process check reports through protocol lines (MARK + JSON, on a pipe of
their own: stdout and stderr are the worker's) and its exit status; it never
imports the parent side (parent.py, scenarios.py). contain.py has already set
the limits when main() runs.
"""
import argparse
import contextlib
import copy
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import sys
import time
import traceback

from . import box, common, contain
from . import corpus
from .contract import SIGNATURES as CONTRACT  # the worker contract, written once
from .corpus import checks as corpus_checks
from .common import (
    INTAKE_CRASH, MARK, PUBLISHER_CRASH, SNACK, Fail, closed_port, describe, describe_value, expect, msg, read_only,
)

IN_PROCESS = {}  # function name -> in-process check; the registry names which check runs which
SEEDED = set()  # the in-process checks that run a corpus: they get the run's seed too


def in_process(function):
    """Make `function(impl, db)` runnable as `--role check --check <its name>`."""
    IN_PROCESS[function.__name__] = function
    return function


def seeded(function):
    """An in-process check that runs a corpus: called as `function(impl, db, seed=--seed)`."""
    SEEDED.add(function.__name__)
    return in_process(function)


def say(kind, **fields):
    fields["kind"] = kind
    contain.say(MARK + json.dumps(fields))


def say_error(exc, stage=None):
    """Report an exception; `stage` "dispatch" when dispatch raised it (so the delivery rules apply to it).

    `function` names the contract function it came out of, if it came out of one; `frames` are the innermost
    frames of its traceback that ran in the worker's own code.
    """
    say("error", type=type(exc).__name__, mro=[c.__name__ for c in type(exc).__mro__], message=describe(exc), stage=stage,
        function=getattr(exc, "grader_function", None), call=getattr(exc, "grader_call", None), frames=worker_frames(exc))


WORKER = {"file": None}  # the worker's file, once load_impl has imported it
GRADER_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the kit's and the grader's code
FRAMES = 3  # innermost frames of the worker's own a report shows


def worker_frames(exc):
    """[{file, line, function, code}] for the innermost FRAMES frames of `exc` in the worker's own code.

    Its own code: its file, and files beside or below it that are not the kit's or the grader's; every
    other frame (the grader's calls, the kit's packages, the standard library) is left out.
    """
    path = WORKER["file"]
    if path is None:
        return []
    folder = os.path.dirname(path)
    frames = []
    for frame in traceback.extract_tb(exc.__traceback__):
        where = os.path.abspath(frame.filename)
        if where == path or (where.startswith(folder + os.sep) and not where.startswith(GRADER_ROOT + os.sep)):
            frames.append({"file": os.path.relpath(where, folder), "line": frame.lineno, "function": frame.name,
                           "code": (frame.line or "")[:200]})
    return frames[-FRAMES:]


def json_value(value):
    """`value` itself when JSON has the same type (true, 1, "ok", null), else its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


class Worker:
    """The worker module as the checks see it: each contract function wrapped by `contract_call`."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        value = getattr(self._module, name)
        return contract_call(name, value) if name in CONTRACT and callable(value) else value


CALLS = []  # the contract functions running now, outermost first
ANNOUNCED = [None]  # the one the parent was last told of


def announce():
    """Tell the parent which contract function runs now (None: the grader's own code), when that changed.

    A hang then names the function that did not return, and never one that already had.
    """
    top = CALLS[-1] if CALLS else None
    if top != ANNOUNCED[0]:
        ANNOUNCED[0] = top
        say("call", function=top)


def contract_call(name, function):
    """`function` that names itself in what it raises.

    An exception leaving it carries `grader_function` (the innermost contract
    function it left, so send_http inside dispatch names send_http), which the
    error line reports. A TypeError raised by the call itself, before any line
    of the worker ran, means its parameters are not the stub's: that is a Fail
    naming the signature.
    """
    def call(*args, **kwargs):
        CALLS.append(name)
        announce()
        try:
            return function(*args, **kwargs)
        except TypeError as exc:
            if exc.__traceback__.tb_next is None:  # raised by the call, not inside the function
                raise Fail(msg("impl.signature", signature=CONTRACT[name]),
                           msg("impl.signature-error", function=name, error=describe(exc))) from None
            name_it(exc, name, args, kwargs)
            raise
        except BaseException as exc:
            name_it(exc, name, args, kwargs)
            raise
        finally:
            CALLS.pop()
            announce()
    return call


def name_it(exc, name, args, kwargs):
    """Mark `exc` with the innermost contract function it left, and the call: `name(args, kwargs)`, each clipped."""
    if getattr(exc, "grader_function", None) is None:
        try:
            exc.grader_function = name
            exc.grader_call = "%s(%s)" % (name, ", ".join([clipped(a) for a in args] +
                                                           ["%s=%s" % (k, clipped(v)) for k, v in kwargs.items()]))
        except AttributeError:  # an exception type without a __dict__: left unnamed
            pass


def clipped(value):
    """repr(value), at most 80 characters; a file path as its name alone (the folder is the grader's)."""
    if isinstance(value, str) and os.path.isabs(value):
        value = os.path.basename(value)
    try:
        text = repr(value)
    except Exception:  # a worker's object whose repr raises
        text = "<%s>" % type(value).__name__
    text = re.sub(r" object at 0x[0-9a-fA-F]+>", ">", text)  # the same call reads the same in every run
    return text if len(text) <= 80 else text[:77] + "..."


def blame(expected, observed):
    """An earlier worker function broke a rule this step depends on: say so as this child's verdict, and end now.

    Ending at once keeps a worker that catches exceptions from hiding the
    cause behind a later symptom.
    """
    say("verdict", ok=False, expected=expected, observed=observed)
    os._exit(1)


def load_impl(path, needed):
    """Import the worker module from `path`; Fail naming any missing function. Returns it as a Worker."""
    WORKER["file"] = os.path.abspath(path)
    say("call", function="import")  # until "ready" or the first call: a hang is the import's
    spec = importlib.util.spec_from_file_location("worker_under_test", path)  # audit: G51
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except MemoryError:
        raise  # the memory limit, which main() reports as such
    except BaseException as exc:
        raise Fail(msg("impl.imports", path=path), msg("impl.import-failed", error=describe(exc)))
    require(module, needed)
    return Worker(module)


def require(module, needed):
    missing = [name for name in needed if not callable(getattr(module, name, None))]  # audit: G59
    expect(not missing, msg("impl.defines", names=", ".join(needed)), msg("impl.missing", names=", ".join(missing)))


def connect(impl, opener, path):
    """Call the worker's init_store or init_sink; Fail unless it gives a sqlite3.Connection."""
    con = getattr(impl, opener)(path)
    expect(isinstance(con, sqlite3.Connection), msg("impl.connection", opener=opener),
           msg("impl.returned", value=describe_value(con)))
    return con


def raised(call):
    """Run `call()`; return the exception it raised, or None if it returned. A Fail passes through."""
    try:
        call()
    except (Fail, MemoryError):  # a MemoryError is the memory limit, never the error a rule asks for
        raise
    except Exception as exc:
        return exc
    return None


def expect_raises(call, kind, expected):
    """Fail unless `call()` raises an exception whose class, or a base of it, is named `kind`; return it.

    By name, so a worker's own Conflict or DeliveryError classes count.
    """
    exc = raised(call)
    expect(exc is not None, expected, msg("call.returned"))
    expect(kind in [c.__name__ for c in type(exc).__mro__], expected, wrong_class(kind, exc))
    return exc


def wrong_class(kind, exc):
    return common.wrong_class(kind, type(exc).__name__, [c.__name__ for c in type(exc).__mro__], describe(exc))


# --------------------------------------------------------------------------
# Roles: the child halves of the parent's scenarios.
# --------------------------------------------------------------------------


def role_intake(impl, args):
    con = connect(impl, "init_store", args.db)
    committed = None
    if args.crash_after_first_commit:
        # The sink's crash-after-commit trace, the kit's one copy; imported only now, as role_sink imports the server.
        from sink.faults import exit_after_first_commit

        committed = exit_after_first_commit(con, INTAKE_CRASH)
    for event in json.loads(args.events):
        say("intake", id=event["id"], seq=json_value(impl.intake(con, event)))
        if committed:
            os._exit(INTAKE_CRASH)  # nothing ran after the COMMIT: the process crashes here
    say("done")


def role_publish(impl, args):
    con = connect(impl, "init_store", args.db)
    for event in json.loads(args.events or "[]"):
        impl.intake(con, event)

    def send(event):
        if not isinstance(event, dict) or set(event) != EVENT_KEYS:
            blame(msg("publish.event"), msg("publish.event-keys", keys=keys_of(event)))
        result = impl.send_http(args.url, event)
        say("ack", id=event["id"], result=json_value(result))  # flushed before any hook can crash
        if result is not True:
            blame(msg("rule.send-http-true"), msg("publish.send-http-returned", value=describe_value(result)))
        return result

    def crash(event):
        os._exit(PUBLISHER_CRASH)  # no finally, no close: the process just stops

    try:
        marked = impl.dispatch(con, send, after_delivery=crash if args.crash_after_ack else None)
    except MemoryError:
        raise
    except Exception as exc:
        say_error(exc, stage="dispatch")
        sys.exit(1)
    say("done", marked=json_value(marked))


def role_send(impl, args):
    """send_http(url, snack-7, timeout=--send-timeout) to --url, or to each URL of --urls (a JSON list), in turn.

    Reports how each call ended and how long it took, one "sent" line per URL.
    """
    if args.corpus == "acks":
        corpus_checks.send_acks(impl, args.url, args.seed, lambda n, got: say("outcome", n=n, outcome=got),
                                args.part, args.parts)
        return
    for url in json.loads(args.urls) if args.urls else [args.url]:
        started = time.monotonic()
        try:
            result = impl.send_http(url, dict(SNACK), timeout=args.send_timeout)
        except (Fail, MemoryError):
            raise
        except Exception as exc:
            say("sent", url=url, seconds=round(time.monotonic() - started, 3), result=None, shown=None,
                type=type(exc).__name__, mro=[c.__name__ for c in type(exc).__mro__], message=describe(exc))
            continue
        say("sent", url=url, seconds=round(time.monotonic() - started, 3), result=json_value(result),
            shown=describe_value(result), type=None, mro=[], message=None)


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
    extra = {"seed": args.seed} if args.check in SEEDED else {}
    expected, observed = IN_PROCESS[args.check](impl, args.db, **extra)
    say("verdict", ok=True, expected=expected, observed=observed)


def role_zygote(impl, args):
    """Stay ready with the worker imported, and fork each step's process from here (contain.serve).

    A step so forked starts from the state right after the import, as a new
    process that imported the worker would, without importing it again.
    """
    from sink import server  # noqa: F401  (imported once here, after the worker, as role_sink would)

    say("ready")
    contain.serve(args.control, lambda argv: step(impl, argv), contain.cpu_seconds(args.timeout))


def step(impl, argv):
    """One step, in a process forked from the zygote: the role argv names, run as main() would run it."""
    args = parse_args(argv)
    needs = [name for name in args.needs.split(",") if name]

    def run():
        require(impl, needs)
        ROLES[args.role](impl, args)

    return conclude(run)


ROLES = {"intake": role_intake, "publish": role_publish, "send": role_send, "sink": role_sink, "check": role_check,
         "zygote": role_zygote}


# --------------------------------------------------------------------------
# In-process checks: each gets the implementation and a fresh DB path (its
# folder is the check's own), raises Fail or returns (expected, observed).
# --------------------------------------------------------------------------


EVENT_KEYS = frozenset(("id", "sku", "qty"))


def keys_of(value):
    """A dict's keys, sorted, as a list's repr ("['id', 'qty', 'seq', 'sku']"); anything else as its value and type."""
    if not isinstance(value, dict):
        return describe_value(value)
    return repr(sorted(value, key=repr))


def query(db, sql, params=()):
    """Every row `sql` gives on a read-only connection of the grader's own to `db`."""
    con = read_only(db)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def sent_flags(db):
    return dict(query(db, "SELECT event_id, sent FROM outbox ORDER BY seq"))


def ids(events):
    try:
        return [e["id"] for e in events]
    except Exception:
        return repr(events)


@in_process
def check_seq_order(impl, db):
    con = connect(impl, "init_store", db)
    # z and a in one second, then every clock steps back: the wall clock, and those a worker might read instead.
    for event_id, now in (("z", 1700000000.9), ("a", 1700000000.9), ("m", 1699999990.0)):
        with stopped_clocks(now):
            impl.intake(con, {"id": event_id, "sku": "seq", "qty": 1})
    watcher = read_only(db)
    try:
        before = (watcher.execute("PRAGMA data_version").fetchone()[0], watcher.execute("SELECT * FROM outbox").fetchall())
        first = impl.pending(con, 16)
        expect(not con.in_transaction, msg("seq.closed"), msg("seq.open"))
        state = (watcher.execute("PRAGMA data_version").fetchone()[0], watcher.execute("SELECT * FROM outbox").fetchall())
        expect(state == before, msg("seq.read-only"), msg("seq.changed"))
        expect(isinstance(first, list), msg("seq.list"), msg("seq.gave", got=describe_value(first)))
        for event in first:
            expect(isinstance(event, dict), msg("seq.dicts"), msg("seq.not-dict", value=describe_value(event)))
            expect(set(event) == EVENT_KEYS, msg("seq.dicts"), msg("seq.keys", keys=keys_of(event)))
        expect(ids(first) == ["z", "a", "m"], msg("seq.order"), msg("seq.gave", got=repr(ids(first))))
        expect(first[0] == {"id": "z", "sku": "seq", "qty": 1}, msg("seq.values"), msg("seq.gave", got=repr(first[0])))
        second = impl.pending(con, 1)
        expect(ids(second) == ["z"], msg("seq.limit-one"), msg("seq.gave", got=repr(ids(second))))
        after = (watcher.execute("PRAGMA data_version").fetchone()[0], watcher.execute("SELECT * FROM outbox").fetchall())
        expect(after == before, msg("seq.read-only"), msg("seq.changed"))
    finally:
        watcher.close()
    for bad in (0, 17, True, "16"):
        expect_raises(lambda: impl.pending(con, bad), "ValueError", msg("seq.bad-limit", limit=repr(bad)))
    # A seq is never reused: with the row of the highest seq gone (as a purge would delete a sent
    # row), the next intake still gets a higher seq than any the file ever gave.
    top = delete_top_row(db)
    returned = impl.intake(con, {"id": "n", "sku": "seq", "qty": 1})
    seq = seq_of(db, "n")
    expect(isinstance(seq, int) and seq > top, msg("seq.never-reused", top=top), msg("seq.reused", seq=repr(seq)))
    # With rows gone, a count or another table's rowid is no longer the seq: intake returns the outbox row's own.
    expect(type(returned) is int and returned == seq, msg("seq.returned-after-delete", seq=seq),
           msg("idem.returned", value=describe_value(returned)))
    return msg("seq-order.passed"), msg("as-expected")


CLOCKS = ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns")


@contextlib.contextmanager
def stopped_clocks(now):
    """Every clock of the time module a worker might read reads `now` (seconds) while the block runs."""
    real = {name: getattr(time, name) for name in CLOCKS}
    for name in CLOCKS:
        setattr(time, name, (lambda now=now: int(now * 1e9)) if name.endswith("_ns") else (lambda now=now: now))
    try:
        yield
    finally:
        for name, clock in real.items():
            setattr(time, name, clock)


def delete_top_row(db):
    """With the grader's own connection, delete the outbox row with the highest seq and its order; return that seq.

    As a purge of a sent record would: both rows gone, so neither a count nor the orders table's rowid is the seq.
    """
    con = common.connect(db)
    try:
        con.execute("BEGIN IMMEDIATE")
        top, event_id = con.execute("SELECT seq, event_id FROM outbox ORDER BY seq DESC LIMIT 1").fetchone()
        con.execute("DELETE FROM outbox WHERE seq = ?", (top,))
        con.execute("DELETE FROM orders WHERE id = ?", (event_id,))
        con.execute("COMMIT")
    finally:
        con.close()
    return top


def seq_of(db, event_id):
    """The seq of `event_id`'s outbox row, read by the grader, or None."""
    rows = query(db, "SELECT seq FROM outbox WHERE event_id = ?", (event_id,))
    return rows[0][0] if rows else None


@in_process
def check_stop_on_first_failure(impl, db):
    con = connect(impl, "init_store", db)
    for event_id in ("A", "B", "C"):
        impl.intake(con, {"id": event_id, "sku": "stop", "qty": 1})
    calls = []
    boom = ConnectionResetError("the grader's send failed on B")

    def send(event):
        calls.append(event["id"])
        if event["id"] == "B":
            flags = sent_flags(db)
            expect(flags.get("B") == 0, msg("stop.b-not-marked"), msg("stop.b-marked", value=repr(flags.get("B"))))
            raise boom
        return True

    exc = raised(lambda: impl.dispatch(con, send))
    expect(exc is not None, msg("stop.error-out"), msg("stop.swallowed"))
    expect(exc is boom, msg("stop.same-error"), msg("stop.other-error", error=describe(exc)))
    expect(calls == ["A", "B"], msg("stop.calls"), msg("stop.called", ids=repr(calls)))
    flags = sent_flags(db)
    expect(flags == {"A": 1, "B": 0, "C": 0}, msg("stop.flags"), msg("sent-flags", flags=repr(flags)))
    first_calls, first_flags = list(calls), ", ".join("%s=%d" % item for item in sorted(flags.items()))
    del calls[:]
    marked = impl.dispatch(con, lambda e: calls.append(e["id"]) or True)
    expect(calls == ["B", "C"], msg("stop.resumes"), msg("stop.sent", ids=repr(calls)))
    resumed = list(calls)
    flags = sent_flags(db)
    expect(flags == {"A": 1, "B": 1, "C": 1} and marked == 2, msg("stop.all-sent"),
           msg("stop.flags-returned", flags=repr(flags), marked=repr(marked)))
    # after_delivery fails on D: D stays pending, E is never sent, and that very exception reaches the caller.
    for event_id in ("D", "E"):
        impl.intake(con, {"id": event_id, "sku": "stop", "qty": 1})
    hook_error = RuntimeError("the grader's after_delivery failed on D")

    def after_delivery(event):
        if event["id"] == "D":
            raise hook_error

    del calls[:]
    exc = raised(lambda: impl.dispatch(con, lambda e: calls.append(e["id"]) or True, 16, after_delivery=after_delivery))
    expect(exc is not None, msg("stop.after-error-out"), msg("stop.swallowed"))
    flags = sent_flags(db)
    expect(flags.get("D") == 0, msg("stop.after-pending"), msg("sent-flags", flags=repr(flags)))
    expect(exc is hook_error, msg("stop.after-same-error"), msg("stop.other-error", error=describe(exc)))
    expect(calls == ["D"] and flags.get("E") == 0, msg("stop.after-stops"),
           msg("stop.flags-called", flags=repr(flags), ids=repr(calls)))
    return msg("stop-on-first-failure.passed"), msg("stop.observed", first_calls=", ".join(first_calls),
                                                    flags=first_flags, resumed=", ".join(resumed))


LOCK_BATCH = ("first", "second", "third")


@in_process
def check_no_lock_during_send(impl, db):
    con = connect(impl, "init_store", db)
    for event_id in LOCK_BATCH:
        impl.intake(con, {"id": event_id, "sku": "lock", "qty": 1})
    done = []

    def send(event):
        # Each item before this one is marked, committed: another connection sees it, before the next send.
        flags = sent_flags(db)
        earlier = {event_id: flags.get(event_id) for event_id in done}
        expect(all(flag == 1 for flag in earlier.values()), msg("lock.each-committed", id=event["id"]),
               msg("lock.earlier", flags=repr(earlier)))
        expect(not getattr(con, "in_transaction", False), msg("lock.outside"), msg("lock.in-transaction", id=event["id"]))
        other = sqlite3.connect(db, isolation_level=None, timeout=0)
        try:
            other.execute("PRAGMA busy_timeout = 0")
            try:
                other.execute("BEGIN IMMEDIATE")
                other.execute("ROLLBACK")
            except sqlite3.OperationalError as exc:
                raise Fail(msg("lock.begin"), msg("lock.could-not", id=event["id"], error=str(exc)))
        finally:
            other.close()
        second = connect(impl, "init_store", db)
        second.execute("PRAGMA busy_timeout = 0")
        try:
            impl.intake(second, {"id": "taken-during-%d" % len(done), "sku": "lock", "qty": 1})
        except Fail:
            raise
        except Exception as exc:
            raise Fail(msg("lock.intake"), msg("lock.intake-failed", id=event["id"], error=describe(exc)))
        finally:
            second.close()
        done.append(event["id"])
        return True

    impl.dispatch(con, send, len(LOCK_BATCH))
    expect(done == list(LOCK_BATCH), msg("lock.sent-each"), msg("lock.sent-for", ids=repr(done)))
    flags = sent_flags(db)
    want = dict({event_id: 1 for event_id in LOCK_BATCH}, **{"taken-during-%d" % n: 0 for n in range(len(LOCK_BATCH))})
    expect(flags == want, msg("lock.flags"), msg("sent-flags", flags=repr(flags)))
    return msg("no-lock-during-send.passed"), msg("as-expected")


@in_process
def check_callback_mutation(impl, db):
    con = connect(impl, "init_store", db)
    for event_id in ("B", "C", "D"):
        impl.intake(con, {"id": event_id, "sku": "mut", "qty": 1})
    sent = []

    def send(event):
        sent.append(event["id"])
        event["id"] = "C"  # rewrite the argument to the next pending id
        return True

    impl.dispatch(con, send, 1)
    # Sending more than one event would mark C through the batch, whatever the rewrite did: say so first.
    expect(sent == ["B"], msg("mutation.one"), msg("mutation.sent", ids=repr(sent)))
    flags = sent_flags(db)
    expect(flags == {"B": 1, "C": 0, "D": 0}, msg("mutation.flags"), msg("sent-flags", flags=repr(flags)))
    seen = []

    def send_rewriting(event):
        event["id"], event["qty"] = "D", 999  # after_delivery must not see this: its copy is its own
        return True

    def after_delivery(event):
        seen.append(dict(event))
        event["id"] = "D"  # rewrite the argument to the next pending id

    impl.dispatch(con, send_rewriting, 1, after_delivery=after_delivery)
    expect(seen == [{"id": "C", "sku": "mut", "qty": 1}], msg("mutation.after-copy"), msg("mutation.after-got", got=repr(seen)))
    flags = sent_flags(db)
    expect(flags == {"B": 1, "C": 1, "D": 0}, msg("mutation.after-flags"), msg("sent-flags", flags=repr(flags)))
    return msg("callback-mutation.passed"), msg("as-expected")


@in_process
def check_batch_limit(impl, db):
    con = connect(impl, "init_store", db)
    for event_id in ("z", "a", "m", "k"):  # seq order is not id order
        impl.intake(con, {"id": event_id, "sku": "batch", "qty": 1})
    sent = []
    marked = impl.dispatch(con, lambda event: sent.append(event["id"]) or True, 2)
    expect(len(sent) <= 2, msg("batch.limit"), msg("batch.sent", ids=repr(sent)))
    expect(sent == ["z", "a"], msg("batch.order"), msg("batch.sent", ids=repr(sent)))
    flags = sent_flags(db)
    expect(flags == {"z": 1, "a": 1, "m": 0, "k": 0}, msg("batch.flags"), msg("sent-flags", flags=repr(flags)))
    expect(marked == 2, msg("batch.returns"), msg("call.gave", value=describe_value(marked)))
    del sent[:]

    def send(event):
        sent.append(event["id"])
        if event["id"] == "m":
            mark_elsewhere(db, "k")  # k is marked by another connection before dispatch gets to it
        return True

    marked = impl.dispatch(con, send, 2)
    expect(sent == ["m", "k"], msg("batch.next"), msg("batch.sent", ids=repr(sent)))
    expect(marked == 1, msg("batch.counts"), msg("batch.counted", value=describe_value(marked)))
    # dispatch(con, send), its limit left out: the stub's default, 16, with 20 pending.
    waiting = ["default-%02d" % n for n in range(20)]
    for event_id in waiting:
        impl.intake(con, {"id": event_id, "sku": "batch", "qty": 1})
    del sent[:]
    marked = impl.dispatch(con, lambda event: sent.append(event["id"]) or True)
    expect(sent == waiting[:16], msg("batch.default"), msg("batch.sent-count", count=len(sent), ids=repr(sent[:3])))
    return msg("batch-limit.passed"), msg("as-expected")


def mark_elsewhere(db, event_id):
    """With the grader's own connection, set sent = 1 on `event_id`'s outbox row (called while send runs)."""
    con = sqlite3.connect(db, isolation_level=None, timeout=1)
    try:
        con.execute("UPDATE outbox SET sent = 1 WHERE event_id = ?", (event_id,))
    except sqlite3.OperationalError as exc:  # dispatch holds a write lock while send runs: that rule, by name
        raise Fail(msg("lock.begin"), msg("lock.could-not", error=str(exc)))
    finally:
        con.close()


@in_process
def check_exact_ack(impl, db):
    con = connect(impl, "init_store", db)
    impl.intake(con, {"id": "only", "sku": "ack", "qty": 1})
    raised_by = []  # the class of what dispatch raised, for 1, "ok", None and {"ack": True} in turn
    for result in (1, "ok", None, {"ack": True}):
        exc = raised(lambda: impl.dispatch(con, lambda event: result))
        expect(exc is not None, msg("ack.raises", result=repr(result)), msg("ack.returned"))
        raised_by.append(type(exc).__name__)
        flags = sent_flags(db)
        expect(flags == {"only": 0}, msg("ack.pending", result=repr(result)), msg("sent-flags", flags=repr(flags)))
    return msg("exact-ack.passed"), msg("exact-ack.observed", one=raised_by[0], ok=raised_by[1], none=raised_by[2],
                                        dict=raised_by[3])


GOOD_EVENT = {"qty": 1000000, "sku": "a.b_c:d-e" + "s" * 55, "id": "9" + "x" * 63}  # both names 64 characters
# (the field the message must name, the rule broken: a message id, the event)
BAD_EVENTS = (
    ("qty", "bad.bool", dict(GOOD_EVENT, qty=True)),
    ("qty", "bad.bool", dict(GOOD_EVENT, qty=False)),
    ("qty", "bad.zero", dict(GOOD_EVENT, qty=0)),
    ("qty", "bad.too-many", dict(GOOD_EVENT, qty=1000001)),
    ("qty", "bad.str-qty", dict(GOOD_EVENT, qty="7")),
    ("qty", "bad.float", dict(GOOD_EVENT, qty=7.0)),
    ("id", "bad.empty", dict(GOOD_EVENT, id="")),
    ("id", "bad.65", dict(GOOD_EVENT, id="x" * 65)),
    ("sku", "bad.65", dict(GOOD_EVENT, sku="s" * 65)),
    ("id", "bad.space", dict(GOOD_EVENT, id="a b")),
    ("id", "bad.first", dict(GOOD_EVENT, id="-a")),
    ("id", "bad.newline", dict(GOOD_EVENT, id="abc\n")),
    ("sku", "bad.newline", dict(GOOD_EVENT, sku="snack\n")),
    ("id", "bad.non-ascii-letter", dict(GOOD_EVENT, id="caf\u00e9")),
    ("id", "bad.non-ascii-letter", dict(GOOD_EVENT, id="\u00e9t\u00e9")),
    ("sku", "bad.non-ascii-digit", dict(GOOD_EVENT, sku="box\u0663")),
    ("id", "bad.non-ascii-digit", dict(GOOD_EVENT, id="\u0663")),
    ("id", "bad.int-id", dict(GOOD_EVENT, id=7)),
    ("sku", "bad.slash", dict(GOOD_EVENT, sku="s/1")),
    ("extra", "bad.extra", dict(GOOD_EVENT, extra=1)),
    ("qty", "bad.missing", {"id": "a", "sku": "b"}),
    (None, "bad.not-dict", ["a", "b", 1]),
)


@seeded
def check_validate_event(impl, db, seed=corpus.DEFAULT_SEED):
    for good in (GOOD_EVENT, {"id": "a", "sku": "Z", "qty": 1}, {"id": "A-1:b.c_d", "sku": "0", "qty": 999999}):
        given = dict(good)
        out = impl.validate_event(given)
        expect(out == good, msg("validate.valid", event=repr(good)), msg("validate.got", got=repr(out)))
        expect(out is not given, msg("validate.new", event=repr(good)), msg("validate.same"))
        expect(given == good, msg("validate.untouched", event=repr(good)), msg("validate.changed", got=repr(given)))
    for field, rule, event in BAD_EVENTS:
        given = copy.deepcopy(event)
        exc = expect_raises(lambda: impl.validate_event(given), "ValueError",
                            msg("validate.refused", event=repr(event), rule=msg(rule)))
        expect(field is None or field in str(exc), msg("validate.names", event=repr(event), field=field),
               msg("validate.message", message=str(exc)))
        expect(given == event, msg("validate.untouched", event=repr(event)), msg("validate.changed", got=repr(given)))
    count = corpus_checks.validate_event(impl, seed)
    return msg("validate-event.passed", count=len(BAD_EVENTS)), msg("corpus.passed", count=count, seed=seed)


INVALID_INTAKES = (dict(SNACK, qty=True), dict(SNACK, id="snack 7"), dict(SNACK, extra=1))


def tables(watcher):
    return watcher.execute("SELECT * FROM outbox").fetchall(), watcher.execute("SELECT * FROM orders").fetchall()


@in_process
def check_intake_idempotent(impl, db):
    con = connect(impl, "init_store", db)
    event = {"id": "dup", "sku": "idem", "qty": 2}
    watcher = read_only(db)
    try:
        for invalid in INVALID_INTAKES:
            before = tables(watcher)
            expect_raises(lambda: impl.intake(con, dict(invalid)), "ValueError", msg("idem.invalid", event=repr(invalid)))
            expect(tables(watcher) == before, msg("idem.invalid-nothing", event=repr(invalid)), msg("idem.changed"))
        seq = impl.intake(con, dict(event))
        stored = watcher.execute("SELECT seq FROM outbox WHERE event_id = ?", ("dup",)).fetchone()
        expect(stored is not None and type(seq) is int and seq == stored[0],
               msg("idem.returns-seq", seq=repr(stored[0] if stored else None)), msg("idem.returned", value=describe_value(seq)))
        payload = watcher.execute("SELECT payload FROM outbox WHERE event_id = ?", ("dup",)).fetchone()
        try:
            stored = json.loads(payload[0]) if payload else None
        except (TypeError, ValueError):
            stored = None
        expect(stored == event, msg("rule.payload"), msg("payload.got", payload=repr(payload[0] if payload else None)))
        before = tables(watcher)
        again = []
        exc = raised(lambda: again.append(impl.intake(con, {"qty": 2, "sku": "idem", "id": "dup"})))  # keys in another order
        expect(exc is None, msg("idem.same-seq", seq=repr(seq)), msg("idem.repeat-raised", error=describe(exc)))
        expect(again == [seq], msg("idem.same-seq", seq=repr(seq)), msg("idem.returned", value=describe_value(again[0])))
        expect_raises(lambda: impl.intake(con, {"id": "dup", "sku": "idem", "qty": 3}), "Conflict", msg("idem.conflict"))
        expect_raises(lambda: impl.intake(con, {"id": "dup", "sku": "other", "qty": 2}), "Conflict",
                      msg("idem.conflict-sku"))
        expect(tables(watcher) == before, msg("idem.nothing-written"), msg("idem.changed"))
    finally:
        watcher.close()
    return msg("intake-idempotent.passed"), msg("as-expected")


@seeded
def check_mark_sent(impl, db, seed=corpus.DEFAULT_SEED):
    con = connect(impl, "init_store", db)
    for event_id in ("a", "b"):
        impl.intake(con, {"id": event_id, "sku": "mark", "qty": 1})
    first = impl.mark_sent(con, "b")
    flags = sent_flags(db)  # another connection: what mark_sent committed
    expect(flags == {"a": 0, "b": 1}, msg("mark.only-b"), msg("sent-flags", flags=repr(flags)))
    second = impl.mark_sent(con, "b")
    expect(first is True and second is False, msg("mark.true-false"), msg("mark.gave", first=repr(first), second=repr(second)))
    expect_raises(lambda: impl.mark_sent(con, "nope"), "KeyError", msg("mark.unknown"))
    expect(sent_flags(db) == {"a": 0, "b": 1}, msg("mark.unknown-nothing"), msg("sent-flags", flags=repr(sent_flags(db))))
    # The corpus, on the same DB (a and b in it, b sent): ids a pattern, a letter case or a loose comparison confuse.
    for event_id in corpus.marks.STORED:
        impl.intake(con, {"id": event_id, "sku": "mark", "qty": 1})
    watcher = read_only(db)
    try:
        count = corpus_checks.mark_sent(impl, con, lambda: dict(watcher.execute("SELECT event_id, sent FROM outbox")), seed,
                                        known=("a", "b"), marked=("b",))
    finally:
        watcher.close()
    return msg("mark-sent.passed"), msg("corpus.passed", count=count, seed=seed)


# The URL rule. Every event by which a socket is made, connected or a name
# looked up; while armed, the audit hook refuses each one, so a worker that
# skips the URL check can reach nothing, not even a DNS server.
NETWORK_EVENTS = frozenset((
    "socket.__new__", "socket.bind", "socket.connect", "socket.getaddrinfo", "socket.gethostbyname",
    "socket.gethostbyname_ex", "socket.gethostbyaddr", "socket.getnameinfo", "socket.sendto", "socket.sendmsg",
))
class NetworkBlocked(Exception):
    """Raised by the grader's audit hook: a socket operation before the URL was refused."""


class NetworkGuard:
    """The audit hook of check_url_rule: refuses every socket event ("all"), only connect ("connect"), or none."""

    def __init__(self):
        self.mode = None
        self.seen, self.ports = [], []
        sys.addaudithook(self.hook)  # for the life of this child process; it acts only while armed

    def arm(self, mode):
        self.mode, self.seen, self.ports = mode, [], []

    def disarm(self):
        """Stop acting; (the socket events it refused, the ports a connect was refused to)."""
        self.mode = None
        return self.seen, self.ports

    def hook(self, event, args):
        if self.mode == "all" and event in NETWORK_EVENTS:
            self.seen.append(event)
            raise NetworkBlocked("the grader refused %s: the URL had to be refused first" % event)
        if self.mode == "connect" and event == "socket.connect":
            address = args[1]
            self.ports.append(address[1] if isinstance(address, tuple) and len(address) >= 2 else address)
            raise NetworkBlocked("the grader refused the connection: the port it was to is what it checks")


@seeded
def check_url_rule(impl, db, seed=corpus.DEFAULT_SEED):
    trap = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # a loopback trap that must see nothing
    try:
        trap.bind(("127.0.0.1", 0))
        trap.listen(8)
        trap.setblocking(False)
        count = corpus_checks.url_rule(impl, seed, NetworkGuard(), trap.getsockname()[1], closed_port(), SNACK)
        try:
            peer, _ = trap.accept()
        except (BlockingIOError, socket.timeout):
            peer = None
        if peer is not None:
            peer.close()
        expect(peer is None, msg("url.trap-empty"), msg("url.trap-hit"))
    finally:
        trap.close()
    return msg("url-rule.passed", count=count), msg("corpus.passed", count=count, seed=seed)


@in_process
def check_conflict_committed(impl, db):
    con = connect(impl, "init_sink", db)
    first = impl.receive(con, dict(SNACK))
    expect(first == "applied", msg("conflict.applied"), msg("call.gave", value=repr(first)))
    other = dict(SNACK, qty=9)
    try:
        impl.receive(con, other)
    except Fail:
        raise
    except Exception as exc:
        # Right here, while the Conflict propagates: a separate connection must already see it.
        watcher = read_only(db)
        try:
            outcomes = [r[0] for r in watcher.execute(
                "SELECT outcome FROM deliveries WHERE event_id = ? ORDER BY rowid", (SNACK["id"],))]
            qty = watcher.execute("SELECT coalesce(sum(qty), 0) FROM inventory WHERE sku = ?", (SNACK["sku"],)).fetchone()[0]
        finally:
            watcher.close()
        expect("Conflict" in [c.__name__ for c in type(exc).__mro__], msg("conflict.raises"), wrong_class("Conflict", exc))
    else:
        raise Fail(msg("conflict.raises"), msg("call.returned"))
    expect(outcomes == ["applied", "conflict"], msg("conflict.logged"), msg("conflict.deliveries", outcomes=outcomes))
    expect(qty == 7, msg("conflict.inventory"), msg("conflict.qty", qty=repr(qty)))
    return msg("conflict-committed.passed"), msg("conflict.deliveries", outcomes=outcomes)


APPLES = ({"id": "apple-1", "sku": "apple", "qty": 3}, {"id": "apple-2", "sku": "apple", "qty": 5},
          {"id": "pear-1", "sku": "pear", "qty": 2})


def sink_state(db):
    """What the grader reads in a sink DB: (inventory {sku: qty}, inbox ids, deliveries [(id, outcome)])."""
    return (dict(query(db, "SELECT sku, qty FROM inventory")),
            sorted(row[0] for row in query(db, "SELECT event_id FROM inbox")),
            query(db, "SELECT event_id, outcome FROM deliveries ORDER BY rowid"))


@in_process
def check_receive_inbox(impl, db):
    con = connect(impl, "init_sink", db)
    for event in APPLES:
        result = impl.receive(con, dict(event))
        expect(result == "applied", msg("inbox.applied", event=repr(event)), msg("call.gave", value=describe_value(result)))
    rows = dict(query(db, "SELECT sku, count(*) FROM inventory GROUP BY sku"))
    expect(rows == {"apple": 1, "pear": 1}, msg("inbox.one-row"), msg("inbox.rows-per-sku", rows=repr(rows)))
    inventory, inbox, _ = sink_state(db)
    expect(inventory == {"apple": 8, "pear": 2}, msg("inbox.adds"), msg("inbox.inventory", inventory=repr(inventory)))
    expect(inbox == ["apple-1", "apple-2", "pear-1"], msg("inbox.rows"), msg("inbox.ids", ids=repr(inbox)))
    repeat = {"qty": 3, "sku": "apple", "id": "apple-1"}  # apple-1 again, its keys in another order
    result = impl.receive(con, repeat)
    expect(result == "duplicate", msg("inbox.duplicate", event=repr(repeat)), msg("call.gave", value=describe_value(result)))
    other = {"id": "apple-1", "sku": "pear", "qty": 3}  # differs from apple-1 in its sku alone
    expect_raises(lambda: impl.receive(con, dict(other)), "Conflict", msg("inbox.conflict-sku", event=repr(other)))
    before = sink_state(db)
    invalid = {"id": "apple-3", "sku": "apple", "qty": True}
    expect_raises(lambda: impl.receive(con, dict(invalid)), "ValueError", msg("inbox.invalid", event=repr(invalid)))
    after = sink_state(db)
    expect(after == before, msg("inbox.invalid-nothing", event=repr(invalid)), msg("inbox.state", state=repr(after)))
    inventory, inbox, deliveries = after
    expect(inventory == {"apple": 8, "pear": 2}, msg("inbox.still"), msg("inbox.inventory", inventory=repr(inventory)))
    apple = [outcome for event_id, outcome in deliveries if event_id == "apple-1"]
    expect(apple == ["applied", "duplicate", "conflict"], msg("inbox.deliveries"), msg("conflict.deliveries", outcomes=apple))
    return msg("receive-inbox.passed"), msg("inbox.observed", inventory=repr(inventory), outcomes=apple)


def file_digest(path):
    """The SHA-256 of the DB file and of its -wal: what "unchanged" compares.

    A missing -wal and an empty one hold the same: nothing (a reader may
    create an empty one). The -shm is SQLite's shared-memory index, which any
    reader may write to: it is not compared.
    """
    digests = []
    for name in (path, path + "-wal"):
        content = b""
        if os.path.exists(name):
            with open(name, "rb") as f:
                content = f.read()
        digests.append(hashlib.sha256(content).hexdigest())
    return tuple(digests)


def refuses(impl, opener, path, expected):
    """Fail unless `opener(path)` raises WrongDatabase and leaves the file (and its -wal) as it was."""
    before = file_digest(path)
    opened = []
    exc = raised(lambda: opened.append(getattr(impl, opener)(path)))
    for con in opened:
        if isinstance(con, sqlite3.Connection):
            con.close()
    expect(exc is not None, expected, msg("wrongdb.opened"))
    expect("WrongDatabase" in [c.__name__ for c in type(exc).__mro__], expected, wrong_class("WrongDatabase", exc))
    expect(file_digest(path) == before, expected, msg("wrongdb.changed", file=os.path.basename(path)))


def takes_as_new(impl, opener, path, tables, expected):
    """Fail unless `opener(path)` gives a connection and creates its tables in that file."""
    opened = []
    exc = raised(lambda: opened.append(connect(impl, opener, path)))
    for con in opened:
        con.close()
    expect(exc is None, expected, msg("wrongdb.refused-new", error=describe(exc)))
    watcher = read_only(path)
    try:
        found = {row[0] for row in watcher.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        watcher.close()
    expect(set(tables) <= found, expected, msg("wrongdb.no-tables", tables=repr(sorted(found))))


@in_process
def check_wrong_database(impl, db):
    folder = os.path.dirname(db)
    path = lambda name: os.path.join(folder, name)  # noqa: E731
    source, sink = path("source.db"), path("sink.db")
    connect(impl, "init_store", source).close()
    sink_con = connect(impl, "init_sink", sink)
    try:
        # The sink process still has it open: its tables may be in sink.db-wal only, not yet in sink.db.
        refuses(impl, "init_store", sink, msg("wrongdb.refused-open", opener="init_store"))
        # What a killed sink process leaves: a copy of its file and its -wal, commits in it, no connection open.
        commit_elsewhere(sink)
        killed = path("killed-sink.db")
        for suffix in ("", "-wal"):
            if os.path.exists(sink + suffix):
                shutil.copyfile(sink + suffix, killed + suffix)
    finally:
        sink_con.close()
    refuses(impl, "init_store", killed, msg("wrongdb.refused-killed", opener="init_store"))
    for opener, other, kind in (("init_store", sink, "sink"), ("init_sink", source, "source")):
        refuses(impl, opener, other, msg("wrongdb.refused", opener=opener, kind=kind))
    with open(path("notes.txt"), "wb") as f:
        f.write(b"not a database, just text\n" * 200)
    foreign = sqlite3.connect(path("notes.db"))
    try:
        foreign.execute("CREATE TABLE notes (body TEXT)")
        foreign.execute("INSERT INTO notes VALUES ('a DB of another application')")
        foreign.commit()
    finally:
        foreign.close()
    for opener in ("init_store", "init_sink"):
        refuses(impl, opener, path("notes.txt"), msg("wrongdb.refused-text", opener=opener))
        refuses(impl, opener, path("notes.db"), msg("wrongdb.refused-foreign", opener=opener))
    # New files: a 0-byte file (nothing beside it), and an SQLite file with no table.
    open(path("empty-source.db"), "wb").close()
    takes_as_new(impl, "init_store", path("empty-source.db"), ("orders", "outbox"), msg("wrongdb.new-empty", opener="init_store"))
    blank = sqlite3.connect(path("blank-sink.db"))
    try:
        blank.execute("CREATE TABLE gone (x)")
        blank.execute("DROP TABLE gone")  # the file now has SQLite's header and no table
        blank.commit()
    finally:
        blank.close()
    takes_as_new(impl, "init_sink", path("blank-sink.db"), ("inbox", "inventory", "deliveries"),
                 msg("wrongdb.new-blank", opener="init_sink"))
    return msg("wrong-database.passed"), msg("as-expected")


def commit_elsewhere(db):
    """With the grader's own connection, commit a table of its own to `db`: commits that sit in its -wal."""
    con = common.connect(db)
    try:
        con.execute("BEGIN IMMEDIATE")
        con.execute("CREATE TABLE IF NOT EXISTS grader_commits (n INTEGER)")
        con.execute("INSERT INTO grader_commits VALUES (1)")
        con.execute("COMMIT")
    finally:
        con.close()


SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


@in_process
def check_durability(impl, db):
    folder = os.path.dirname(db)
    levels = {}
    for opener, name in (("init_store", "source.db"), ("init_sink", "sink.db")):
        path = os.path.join(folder, name)
        con = connect(impl, opener, path)
        try:
            # synchronous belongs to a connection, not to the file: read it on the worker's own.
            level = con.execute("PRAGMA synchronous").fetchone()[0]
            watcher = read_only(path)
            try:
                mode = watcher.execute("PRAGMA journal_mode").fetchone()[0]
            finally:
                watcher.close()
        finally:
            con.close()
        expect(str(mode).lower() == "wal", msg("durable.wal", opener=opener), msg("durable.mode", mode=str(mode)))
        expect(level in (2, 3), msg("durable.full", opener=opener), msg("durable.level", level=SYNCHRONOUS.get(level, level)))
        levels[opener] = SYNCHRONOUS[level]
    return msg("durability.passed"), msg("durability.observed", store=levels["init_store"], sink=levels["init_sink"])


SENT_FEW, SENT_MANY = 10, 20000
COST_RATIO = 5.0  # pending(16) with SENT_MANY sent rows may cost at most this many times more (a scan: 40x+)
COST_FLOOR = 0.0002  # seconds: no scan of SENT_MANY rows is this fast (about 60 ns a row here), whatever the ratio
COST_ROUNDS = 15
LATE = (3, 1, 2, 0)  # the pending events are taken in as late-3, late-1, late-2, late-0: seq order is not id order


def add_sent_rows(db, count):
    """With the grader's own connection, copy the sent template row `count - 1` times (orders and outbox).

    Every column of the worker's tables is copied (read from PRAGMA
    table_info), with a new id, seq and payload; sent stays 1.
    """
    con = common.connect(db)
    try:
        columns = {table: [row[1] for row in con.execute("PRAGMA table_info(%s)" % table)] for table in ("orders", "outbox")}
        new_id = "'bulk-' || n.i"
        substitute = {
            "orders": {"id": new_id},
            "outbox": {"seq": "t.seq + n.i", "event_id": new_id, "sent": "1",
                       "payload": "replace(t.payload, :template, '\"bulk-' || n.i || '\"')"},
        }
        con.execute("BEGIN IMMEDIATE")
        for table, key in (("orders", "id"), ("outbox", "event_id")):
            # Column names come from the worker's own schema, so they are quoted
            # identifiers here; every value still goes through a placeholder.
            names = ", ".join('"%s"' % c.replace('"', '""') for c in columns[table])
            values = ", ".join(substitute[table].get(c, 't."%s"' % c.replace('"', '""')) for c in columns[table])
            con.execute(
                "INSERT INTO %s (%s) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count) "
                "SELECT %s FROM n, %s AS t WHERE t.%s = :id" % (table, names, values, table, key),
                {"count": count - 1, "id": "bulk-template", "template": '"bulk-template"'},
            )
        con.execute("COMMIT")
    finally:
        con.close()


def best_time(call, rounds):
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


@in_process
def check_pending_cost(impl, db):
    folder = os.path.dirname(db)
    cons = {}
    for count in (SENT_FEW, SENT_MANY):
        path = os.path.join(folder, "sent-%d.db" % count)
        con = cons[count] = connect(impl, "init_store", path)
        impl.intake(con, {"id": "bulk-template", "sku": "bulk", "qty": 1})
        expect(impl.mark_sent(con, "bulk-template") is True, msg("cost.template"), msg("call.returned"))
        try:
            add_sent_rows(path, count)
        except sqlite3.Error as exc:
            raise Fail(msg("cost.copy", count=count), msg("plain", text=describe(exc)))
        late = ["late-%d" % n for n in LATE]
        for event_id in late:
            impl.intake(con, {"id": event_id, "sku": "bulk", "qty": 1})
        got = ids(impl.pending(con, 16))
        if isinstance(got, list) and sorted(got) == sorted(late) and got != late:
            raise Fail(msg("cost.pending", count=count, ids=", ".join(late)), msg("cost.order", got=repr(got)))
        expect(got == late, msg("cost.pending", count=count, ids=", ".join(late)), msg("seq.gave", got=repr(got)))
    few = many = float("inf")
    for _ in range(3):
        few = min(few, best_time(lambda: impl.pending(cons[SENT_FEW], 16), COST_ROUNDS))
        many = min(many, best_time(lambda: impl.pending(cons[SENT_MANY], 16), COST_ROUNDS))
    for con in cons.values():
        con.close()
    timings = msg("cost.timings", few=SENT_FEW, many=SENT_MANY, few_ms="%.3f" % (few * 1000), many_ms="%.3f" % (many * 1000),
                  ratio="%.1f" % (many / few if few > 0 else float("inf")))
    # Best of many calls, interleaved: the machine's noise only ever adds time, so the minimum is the cost.
    flat = msg("cost.flat", ratio="%g" % COST_RATIO, few=SENT_FEW, many=SENT_MANY)
    expect(many <= few * COST_RATIO or many < COST_FLOOR, flat, timings)
    return msg("pending-cost.passed"), timings


# --------------------------------------------------------------------------
# The child's command line and life cycle.
# --------------------------------------------------------------------------


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="grade.py --role")
    parser.add_argument("role", choices=sorted(ROLES))
    parser.add_argument("--impl", required=True)
    parser.add_argument("--needs", default="")
    parser.add_argument("--check", choices=sorted(IN_PROCESS))
    parser.add_argument("--control", type=int)
    parser.add_argument("--db")
    parser.add_argument("--url")
    parser.add_argument("--urls")
    parser.add_argument("--events")
    parser.add_argument("--fault")
    parser.add_argument("--timeout", type=float)
    parser.add_argument("--send-timeout", type=float)
    parser.add_argument("--crash-after-ack", action="store_true")
    parser.add_argument("--crash-after-first-commit", action="store_true")
    parser.add_argument("--seed", type=int, default=corpus.DEFAULT_SEED)
    parser.add_argument("--corpus", choices=("acks",))
    parser.add_argument("--part", type=int, default=0)
    parser.add_argument("--parts", type=int, default=1)
    return parser.parse_args(argv)


def conclude(call):
    """Run `call()`; report how it failed (a verdict, the memory limit, an error); return the exit status."""
    try:
        call()
    except Fail as fail:
        say("verdict", ok=False, expected=fail.expected, observed=fail.observed)
        return 1
    except MemoryError:
        say("limit", limit="memory")
        return 1
    except Exception as exc:
        say_error(exc)
        traceback.print_exc()  # to the child's stderr, which the grader keeps (bounded) for the report
        return 1
    return 0


def main(argv):
    # contain.enter() has made this the worker's process: its limits set, a
    # supervisor above it that ends whatever it leaves behind, and ends it if
    # the grader goes away.
    args = parse_args(argv)
    needs = [name for name in args.needs.split(",") if name]
    say("box", isolation=box.enter(os.environ.get(box.ENV)))  # audit: G70
    return conclude(lambda: ROLES[args.role](load_impl(args.impl, needs), args))
