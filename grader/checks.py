"""The in-process checks, decided in the grader's own process: each calls the worker's functions in one step.

Each check gets `impl` (remote.Remote: every call a request to the step,
which imported the worker) and a fresh DB path in its check's folder; it
raises Fail or returns (expected, observed). The probes (a competing
writer, the rows marked so far, the trap a URL must not reach) run here,
on the grader's own connections and sockets; the step only makes calls.
"""
import contextlib
import copy
import hashlib
import json
import math
import os
import shutil
import socket
import sqlite3

from . import common, network
from . import corpus
from .common import SNACK, Fail, bounded, expect, msg, read_only, rows
from .corpus import checks as corpus_checks
from .remote import Handle, RemoteError

IN_PROCESS = {}  # function name -> in-process check; the registry names which check runs which
SEEDED = set()  # the in-process checks that run a corpus: they get the run's seed too


def in_process(function):
    """Make `function(impl, db)` runnable as the step of check `--check <its name>`."""
    IN_PROCESS[function.__name__] = function
    return function


def seeded(function):
    """An in-process check that runs a corpus: called as `function(impl, db, seed=--seed)`."""
    SEEDED.add(function.__name__)
    return in_process(function)


def mro(exc):
    """The class names of an exception's MRO: as the step gave them for a worker's, or the grader's own."""
    return list(exc.mro) if isinstance(exc, RemoteError) else [c.__name__ for c in type(exc).__mro__]


def describe(exc):
    return exc.message if isinstance(exc, RemoteError) else common.describe(exc)


def describe_value(value):
    if isinstance(value, Handle):
        return "%s (%s)" % (value.shown, value.type_name)
    return common.describe_value(value)


def connect(impl, opener, path):
    """Call the worker's init_store or init_sink; Fail unless it gives a sqlite3.Connection (a handle to it)."""
    con = getattr(impl, opener)(path)
    expect(isinstance(con, Handle) and con.is_connection, msg("impl.connection", opener=opener),
           msg("impl.returned", value=describe_value(con)))
    return con


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
    expect(exc is not None, expected, msg("call.returned"))
    expect(kind in mro(exc), expected, wrong_class(kind, exc))
    return exc


def wrong_class(kind, exc):
    names = mro(exc)
    return common.wrong_class(kind, names[0] if names else "?", names, describe(exc))


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
        return rows(con.execute(sql, params))
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
        with stopped_clocks(impl, now):
            impl.intake(con, {"id": event_id, "sku": "seq", "qty": 1})
    watcher = read_only(db)
    try:
        before = (watcher.execute("PRAGMA data_version").fetchone()[0], rows(watcher.execute("SELECT * FROM outbox")))
        first = impl.pending(con, 16)
        expect(not con.in_transaction, msg("seq.closed"), msg("seq.open"))
        state = (watcher.execute("PRAGMA data_version").fetchone()[0], rows(watcher.execute("SELECT * FROM outbox")))
        expect(state == before, msg("seq.read-only"), msg("seq.changed"))
        expect(isinstance(first, list), msg("seq.list"), msg("seq.gave", got=describe_value(first)))
        for event in first:
            expect(isinstance(event, dict), msg("seq.dicts"), msg("seq.not-dict", value=describe_value(event)))
            expect(set(event) == EVENT_KEYS, msg("seq.dicts"), msg("seq.keys", keys=keys_of(event)))
        expect(ids(first) == ["z", "a", "m"], msg("seq.order"), msg("seq.gave", got=repr(ids(first))))
        expect(first[0] == {"id": "z", "sku": "seq", "qty": 1}, msg("seq.values"), msg("seq.gave", got=repr(first[0])))
        second = impl.pending(con, 1)
        expect(ids(second) == ["z"], msg("seq.limit-one"), msg("seq.gave", got=repr(ids(second))))
        after = (watcher.execute("PRAGMA data_version").fetchone()[0], rows(watcher.execute("SELECT * FROM outbox")))
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


@contextlib.contextmanager
def stopped_clocks(impl, now):
    """Every clock of the step's time module a worker might read reads `now` (seconds) while the block runs."""
    impl.set_clock(now)
    try:
        yield
    finally:
        impl.set_clock(None)


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
    found = query(db, "SELECT seq FROM outbox WHERE event_id = ?", (event_id,))
    return found[0][0] if found else None


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
    first_calls, first_flags = list(calls), ["%s=%d" % item for item in sorted(flags.items())]
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
    return msg("stop-on-first-failure.passed"), msg("stop.observed", first_calls=first_calls, flags=first_flags,
                                                    resumed=resumed)  # lists: each language joins them


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
        expect(not in_transaction(con), msg("lock.outside"), msg("lock.in-transaction", id=event["id"]))
        other = bounded(sqlite3.connect(db, isolation_level=None, timeout=0))
        try:
            other.execute("PRAGMA busy_timeout = 0").fetchall()  # a row: read it, or PyPy keeps the statement open
            try:
                other.execute("BEGIN IMMEDIATE")
                other.execute("ROLLBACK")
            except sqlite3.OperationalError as exc:
                raise Fail(msg("lock.begin"), msg("lock.could-not", id=event["id"], error=str(exc)))
        finally:
            other.close()
        second = connect(impl, "init_store", db)
        second.execute("PRAGMA busy_timeout = 0").fetchall()  # a row: read it, or PyPy keeps the statement open
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


def in_transaction(con):
    """The worker connection's in_transaction, as its step reads it (False where it has none)."""
    try:
        return con.in_transaction is True
    except RemoteError:
        return False


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
    con = bounded(sqlite3.connect(db, isolation_level=None, timeout=1))
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
        raised_by.append(mro(exc)[0])
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
        expect(not impl.returned_an_argument(), msg("validate.new", event=repr(good)), msg("validate.same"))
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
    return rows(watcher.execute("SELECT * FROM outbox")), rows(watcher.execute("SELECT * FROM orders"))


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
        flags = lambda: dict(rows(watcher.execute("SELECT event_id, sent FROM outbox")))  # noqa: E731
        count = corpus_checks.mark_sent(impl, con, flags, seed, known=("a", "b"), marked=("b",))
    finally:
        watcher.close()
    return msg("mark-sent.passed"), msg("corpus.passed", count=count, seed=seed)


class NetworkGuard:
    """check_url_rule's audit hook, in the step: refuses every socket event ("all"), only connect ("connect"), or none.

    The corpus calls send_http on it: each call goes to the step under the mode armed, and what the hook
    refused there comes back with its outcome.
    """

    def __init__(self, impl):
        self.impl, self.mode = impl, None
        self.seen, self.ports = [], []

    def arm(self, mode):
        self.mode, self.seen, self.ports = mode, [], []

    def disarm(self):
        """Stop acting; (the socket events it refused, the ports a connect was refused to)."""
        self.mode = None
        return self.seen, self.ports

    def send_http(self, url, event, timeout):
        exc, value, self.seen, self.ports = self.impl.guarded("send_http", url, event, mode=self.mode, timeout=timeout)
        if exc is not None:
            raise exc
        return value


NETWORKED = {"check_url_rule"}  # in-process checks called with net=: the worker's loopback (network.py)


@seeded
def check_url_rule(impl, db, seed=corpus.DEFAULT_SEED, net=network.HOST):
    trap = net.listen()  # a loopback trap that must see nothing, where the worker's processes could reach it
    try:
        trap.setblocking(False)
        guard = NetworkGuard(impl)
        count = corpus_checks.url_rule(guard, seed, guard, trap.getsockname()[1], net.closed_port(), SNACK)
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
            outcomes = [r[0] for r in rows(watcher.execute(
                "SELECT outcome FROM deliveries WHERE event_id = ? ORDER BY rowid", (SNACK["id"],)))]
            qty = watcher.execute("SELECT coalesce(sum(qty), 0) FROM inventory WHERE sku = ?", (SNACK["sku"],)).fetchone()[0]
        finally:
            watcher.close()
        expect("Conflict" in mro(exc), msg("conflict.raises"), wrong_class("Conflict", exc))
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
    per_sku = dict(query(db, "SELECT sku, count(*) FROM inventory GROUP BY sku"))
    expect(per_sku == {"apple": 1, "pear": 1}, msg("inbox.one-row"), msg("inbox.rows-per-sku", rows=repr(per_sku)))
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
        if isinstance(con, Handle) and con.is_connection:
            con.close()
    expect(exc is not None, expected, msg("wrongdb.opened"))
    expect("WrongDatabase" in mro(exc), expected, wrong_class("WrongDatabase", exc))
    expect(file_digest(path) == before, expected, msg("wrongdb.changed", file=os.path.basename(path)))


def handed(path):
    """Give `path`, a file the grader made for the worker to write, to the owner of its folder.

    Under root each worker runs as a uid of its own that owns its folders
    (grader/box.py); a file the grader creates there is root's, 0644, and a
    worker told to open it for writing would fail for a reason of the
    grader's making ("attempt to write a readonly database").
    """
    folder = os.stat(os.path.dirname(path))
    if hasattr(os, "geteuid") and os.geteuid() == 0 and os.stat(path).st_uid != folder.st_uid:
        os.chown(path, folder.st_uid, folder.st_gid)
    return path


def takes_as_new(impl, opener, path, tables, expected):
    """Fail unless `opener(path)` gives a connection and creates its tables in that file."""
    opened = []
    exc = raised(lambda: opened.append(connect(impl, opener, path)))
    for con in opened:
        con.close()
    expect(exc is None, expected, msg("wrongdb.refused-new", error=describe(exc)))
    watcher = read_only(path)
    try:
        found = {row[0] for row in rows(watcher.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))}
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
    handed(path("empty-source.db"))
    takes_as_new(impl, "init_store", path("empty-source.db"), ("orders", "outbox"), msg("wrongdb.new-empty", opener="init_store"))
    blank = sqlite3.connect(path("blank-sink.db"))
    try:
        blank.execute("CREATE TABLE gone (x)")
        blank.execute("DROP TABLE gone")  # the file now has SQLite's header and no table
        blank.commit()
    finally:
        blank.close()
    handed(path("blank-sink.db"))
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
        columns = {table: [row[1] for row in rows(con.execute("PRAGMA table_info(%s)" % table))]
                   for table in ("orders", "outbox")}
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
            raise Fail(msg("cost.copy", count=count), common.bound_refused(exc) or msg("plain", text=describe(exc)))
        late = ["late-%d" % n for n in LATE]
        for event_id in late:
            impl.intake(con, {"id": event_id, "sku": "bulk", "qty": 1})
        got = ids(impl.pending(con, 16))
        if isinstance(got, list) and sorted(got) == sorted(late) and got != late:
            raise Fail(msg("cost.pending", count=count, ids=", ".join(late)), msg("cost.order", got=repr(got)))
        expect(got == late, msg("cost.pending", count=count, ids=", ".join(late)), msg("seq.gave", got=repr(got)))
    few = many = float("inf")
    for _ in range(3):
        # Timed in the step: a request's round trip would hide the cost of a scan.
        few = min(few, impl.best_time("pending", COST_ROUNDS, cons[SENT_FEW], 16))
        many = min(many, impl.best_time("pending", COST_ROUNDS, cons[SENT_MANY], 16))
    for con in cons.values():
        con.close()
    timings = msg("cost.timings", few=SENT_FEW, many=SENT_MANY, few_ms="%.3f" % (few * 1000), many_ms="%.3f" % (many * 1000),
                  ratio="%.1f" % (many / few if few > 0 else float("inf")))
    # Best of many calls, interleaved: the machine's noise only ever adds time, so the minimum is the cost.
    flat = msg("cost.flat", ratio="%g" % COST_RATIO, few=SENT_FEW, many=SENT_MANY)
    expect(all(0 < t < math.inf for t in (few, many)), flat, timings)  # remote.best_time refuses others; twice sure
    expect(many <= few * COST_RATIO or many < COST_FLOOR, flat, timings)
    return msg("pending-cost.passed"), timings


