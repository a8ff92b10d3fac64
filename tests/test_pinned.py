"""Behaviours a mutation run of the suite showed no test held; each test here fails when one breaks.

Every test names, in its docstring, the single-point change of outbox/ or
sink/ it catches. Real SQLite files, real loopback servers, real CLI
processes.
"""
import json
import os
import sqlite3
import threading

from outbox import WrongDatabase, dispatch, init_store, intake, mark_sent, pending
from outbox import operations, readonly, store
from sink import init_sink, receive, views
from tests.support import DEADLINE, LoopbackServer, TempDirTestCase, echo_ack, ev, run_cli

UNKNOWN_VERSION = 99  # no release will reach it; the source schema moving to 2 must not make 99 acceptable
RACE_WAIT = 1.0  # seconds A's lookup lets B try; a correct receive keeps B waiting on A's write lock


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class AfterDeliveryCannotRedirectTheMarkTest(TempDirTestCase):
    """Mutants: `after_delivery(selected)` (the selection itself), or marking with the callback's copy's id."""

    def setUp(self):
        super().setUp()
        self.con = init_store(self.path("source.db"))
        self.addCleanup(self.con.close)
        for event_id in ("a", "b"):
            intake(self.con, ev(event_id))

    def sent_flags(self):
        return dict(self.con.execute("SELECT event_id, sent FROM outbox"))

    def test_rewriting_the_id_in_after_delivery_marks_the_delivered_row_only(self):
        delivered = []

        def send(event):
            delivered.append(event["id"])
            return True

        def after(event):
            event["id"] = "b"  # the next pending id, which was never sent

        self.assertEqual(dispatch(self.con, send, limit=1, after_delivery=after), 1)
        self.assertEqual(delivered, ["a"])
        self.assertEqual(self.sent_flags(), {"a": 1, "b": 0})

    def test_after_delivery_gets_a_copy_not_the_selection(self):
        seen = []

        def after(event):
            seen.append(event)
            event.clear()  # would leave dispatch with no id at all if this were its own dict

        self.assertEqual(dispatch(self.con, lambda event: True, after_delivery=after), 2)
        self.assertEqual(self.sent_flags(), {"a": 1, "b": 1})
        self.assertEqual(len(seen), 2)


class UnknownVersionIsRefusedUnchangedTest(TempDirTestCase):
    """Mutant: accepting any user_version once the application_id matches."""

    def stamp(self, path, creator):
        creator(path).close()
        con = sqlite3.connect(path, isolation_level=None)
        try:
            # Back to a rollback journal, so the file alone is the whole DB and nothing else can change.
            con.execute("PRAGMA journal_mode = DELETE")
            con.execute("PRAGMA user_version = %d" % UNKNOWN_VERSION)
        finally:
            con.close()
        return read_bytes(path)

    def assert_refused_unchanged(self, creator, opener, name):
        path = self.path(name)
        before = self.stamp(path, creator)
        with self.assertRaises(WrongDatabase) as ctx:
            opener(path)
        self.assertIn(str(UNKNOWN_VERSION), str(ctx.exception))
        self.assertEqual(read_bytes(path), before)

    def test_source(self):
        self.assert_refused_unchanged(init_store, init_store, "source.db")
        self.assert_refused_unchanged(init_store, operations.open_store_readonly, "source-ro.db")

    def test_sink(self):
        self.assert_refused_unchanged(init_sink, init_sink, "sink.db")
        self.assert_refused_unchanged(init_sink, views.open_readonly, "sink-ro.db")


class ReadOnlyConnectionCannotWriteTest(TempDirTestCase):
    """Mutant: open_readonly without `mode=ro`, relying on `query_only` alone."""

    def test_query_only_off_does_not_make_it_writable(self):
        path = self.path("source.db")
        con = init_store(path)
        intake(con, ev("a"))
        con.close()
        before = read_bytes(path)
        reader = readonly.open_readonly(path, application_id=store.APPLICATION_ID,
                                        version=store.SCHEMA_VERSION, kind="source")
        try:
            reader.execute("PRAGMA query_only = OFF")
            self.assertEqual(reader.execute("PRAGMA query_only").fetchone()[0], 0)
            with self.assertRaises(sqlite3.OperationalError) as ctx:
                reader.execute("UPDATE outbox SET sent = 1")
            self.assertIn("readonly", str(ctx.exception).replace("-", "").replace(" ", ""))
        finally:
            reader.close()
        self.assertEqual(read_bytes(path), before)
        check = init_store(path)
        try:
            self.assertEqual([event["id"] for event in pending(check)], ["a"])
        finally:
            check.close()


class DuplicateBetweenLookupAndWriteTest(TempDirTestCase):
    """Mutant: receive looks the id up before its write transaction (check, then act)."""

    def test_a_second_connection_waits_for_the_first_and_gets_a_duplicate(self):
        path = self.path("sink.db")
        con_a = init_sink(path)
        self.addCleanup(con_a.close)
        event = ev("snack-7", qty=7)
        results = {}
        fired = []

        def receive_b():
            con_b = init_sink(path)  # a connection of B's own, in B's thread
            try:
                results["b"] = receive(con_b, event)
            except Exception as exc:  # reported by the assertions below
                results["b"] = exc
            finally:
                con_b.close()

        other = threading.Thread(target=receive_b, daemon=True)

        def at_lookup(statement):
            # A is at its dedup lookup: B delivers the same event now, from another connection.
            if not fired and statement.lstrip().upper().startswith("SELECT") and "FROM inbox" in statement:
                fired.append(statement)
                other.start()
                other.join(RACE_WAIT)  # a correct receive holds the write lock here: B cannot finish
                results["b finished during A's lookup"] = not other.is_alive()

        con_a.set_trace_callback(at_lookup)
        try:
            results["a"] = receive(con_a, event)
        except Exception as exc:
            results["a"] = exc
        finally:
            con_a.set_trace_callback(None)
        self.assertTrue(fired, "receive never looked the id up in inbox")
        other.join(DEADLINE)
        self.assertFalse(other.is_alive(), "B never finished")
        self.assertEqual(results, {"a": "applied", "b": "duplicate", "b finished during A's lookup": False})
        self.assertEqual(views.inventory(con_a), [("snack", 7)])
        self.assertEqual([row[2] for row in views.deliveries(con_a)], ["applied", "duplicate"])


class CliTest(TempDirTestCase):
    """Mutants: the CLI ignoring --limit; `status` opening its DB for writing."""

    def test_dispatch_limit_is_honoured(self):
        db = self.path("source.db")
        con = init_store(db)
        for event_id in ("a", "b", "c"):
            intake(con, ev(event_id))
        con.close()
        with LoopbackServer(echo_ack) as sink:
            result = run_cli("outbox", "dispatch", "--db", db, "--url", sink.url(), "--limit", "2")
            delivered = [json.loads(body.decode())["id"] for _, _, _, body in sink.requests]
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(delivered, ["a", "b"])
        self.assertIn("marked 2 sent", result.stdout)
        con = operations.open_store_readonly(db)
        try:
            self.assertEqual([event["id"] for event in pending(con)], ["c"])
        finally:
            con.close()

    def test_status_on_a_missing_file_creates_nothing(self):
        missing = self.path("missing.db")
        result = run_cli("outbox", "status", "--db", missing, cwd=self.tmp)
        self.assertNotEqual(result.returncode, 0)
        self.assertNotIn("Traceback", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertEqual(os.listdir(self.tmp), [])


class DispatchCountTest(TempDirTestCase):
    """Mutant: dispatch counting every ACK, not only the rows its own mark_sent changed."""

    def test_a_row_marked_by_another_connection_during_send_is_not_counted(self):
        path = self.path("source.db")
        con = init_store(path)
        self.addCleanup(con.close)
        other = init_store(path)
        self.addCleanup(other.close)
        for event_id in ("a", "b"):
            intake(con, ev(event_id))

        def send(event):
            if event["id"] == "a":
                self.assertTrue(mark_sent(other, "a"))  # someone else finished it meanwhile
            return True

        self.assertEqual(dispatch(con, send), 1)
        self.assertEqual(dict(con.execute("SELECT event_id, sent FROM outbox")), {"a": 1, "b": 1})
