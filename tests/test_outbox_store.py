"""outbox.core.store, the source DB's guarantee: init_store, intake, pending, mark_sent, on real SQLite files.

intake_many (outbox.batch) is tests/test_outbox_batch.py's.
"""
import os
import sqlite3
import unittest
from unittest import mock

from outbox import Conflict, InvalidEvent, WrongDatabase, init_store, intake, mark_sent, pending
from outbox.ops.operations import open_store_readonly, quarantine
from outbox.core.store import PENDING_SQL
from sink import init_sink
from tests.support import TempDirTestCase, ev, source_rows


class InitStoreTest(TempDirTestCase):
    def test_connection_settings(self):
        con = init_store(self.path("source.db"))
        self.addCleanup(con.close)
        self.assertIsNone(con.isolation_level)
        self.assertEqual(con.execute("PRAGMA journal_mode").fetchone()[0], "wal")
        self.assertEqual(con.execute("PRAGMA synchronous").fetchone()[0], 2)  # FULL
        self.assertGreater(con.execute("PRAGMA busy_timeout").fetchone()[0], 0)
        self.assertEqual(con.execute("PRAGMA user_version").fetchone()[0], 3)  # schema 3: failure kinds, history (issue 18)
        self.assertFalse(con.in_transaction)

    def test_reopening_keeps_the_rows(self):
        path = self.path("source.db")
        con = init_store(path)
        intake(con, ev("a"))
        con.close()
        con = init_store(path)
        self.addCleanup(con.close)
        self.assertEqual(pending(con), [ev("a")])

    def assertRefusedUnchanged(self, path):
        with open(path, "rb") as f:
            before = f.read()
        with self.assertRaises(WrongDatabase) as ctx:
            init_store(path)
        self.assertIn(repr(path), str(ctx.exception))  # the message shows the path as its repr
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_refuses_a_file_that_is_not_sqlite(self):
        path = self.path("notes.txt")
        with open(path, "wb") as f:
            f.write(b"these are my notes, not a database\n" * 200)
        self.assertRefusedUnchanged(path)

    def test_refuses_another_sqlite_db(self):
        path = self.path("other.db")
        other = sqlite3.connect(path)
        other.execute("CREATE TABLE t (x)")
        other.commit()
        other.close()
        self.assertRefusedUnchanged(path)

    def test_refuses_a_sink_db(self):
        path = self.path("sink.db")
        init_sink(path).close()
        self.assertRefusedUnchanged(path)

    def test_read_only_opener_never_creates_and_cannot_write(self):
        missing = self.path("missing.db")
        with self.assertRaises(WrongDatabase):
            open_store_readonly(missing)
        self.assertFalse(os.path.exists(missing))
        path = self.path("source.db")
        init_store(path).close()
        reader = open_store_readonly(path)
        self.addCleanup(reader.close)
        with self.assertRaises(sqlite3.OperationalError):
            reader.execute("DELETE FROM outbox")

    def test_refuses_a_directory(self):
        with self.assertRaises(WrongDatabase):
            init_store(self.tmp)


class IntakeTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.con = init_store(self.path("source.db"))
        self.addCleanup(self.con.close)

    def test_writes_order_and_unsent_outbox_row(self):
        seq = intake(self.con, {"qty": 7, "sku": "snack", "id": "snack-7"})
        orders, outbox_rows = source_rows(self.con)
        self.assertEqual([o[:3] for o in orders], [("snack-7", "snack", 7)])
        self.assertEqual(len(outbox_rows), 1)
        row = self.con.execute("SELECT seq, event_id, sent FROM outbox").fetchone()
        self.assertEqual(row, (seq, "snack-7", 0))
        self.assertFalse(self.con.in_transaction)

    def test_same_event_again_returns_the_seq_and_writes_nothing(self):
        seq = intake(self.con, ev("a", qty=2))
        before = source_rows(self.con)
        self.assertEqual(intake(self.con, {"qty": 2, "id": "a", "sku": "snack"}), seq)
        self.assertEqual(source_rows(self.con), before)

    def test_same_id_different_event_is_a_conflict_and_writes_nothing(self):
        intake(self.con, ev("a", qty=2))
        before = source_rows(self.con)
        with self.assertRaises(Conflict) as ctx:
            intake(self.con, ev("a", qty=3))
        self.assertIn("'a'", str(ctx.exception))
        self.assertEqual(source_rows(self.con), before)
        self.assertFalse(self.con.in_transaction)

    def test_invalid_event_writes_nothing(self):
        with self.assertRaises(InvalidEvent):
            intake(self.con, ev("a", qty=0))
        self.assertEqual(source_rows(self.con), ([], []))

    def test_failure_after_the_order_insert_leaves_no_order_row(self):
        # A real SQLite failure, forced between the two inserts of one intake.
        self.con.execute(
            "CREATE TEMP TRIGGER fail_outbox BEFORE INSERT ON main.outbox "
            "BEGIN SELECT RAISE(ABORT, 'forced failure'); END"
        )
        with self.assertRaises(sqlite3.IntegrityError):
            intake(self.con, ev("a"))
        self.assertFalse(self.con.in_transaction)
        self.assertEqual(source_rows(self.con), ([], []))
        self.con.execute("DROP TRIGGER fail_outbox")
        intake(self.con, ev("a"))
        self.assertEqual(pending(self.con), [ev("a")])


class PendingTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.db_path = self.path("source.db")
        self.con = init_store(self.db_path)
        self.addCleanup(self.con.close)

    def test_intake_order_not_id_order(self):
        for event_id in ("z", "a", "m"):
            intake(self.con, ev(event_id))
        self.assertEqual([e["id"] for e in pending(self.con)], ["z", "a", "m"])

    def test_events_within_one_second_keep_intake_order(self):
        with mock.patch("time.time", return_value=1700000000.0):
            for event_id in ("c", "b", "a", "d"):
                intake(self.con, ev(event_id))
        self.assertEqual([e["id"] for e in pending(self.con)], ["c", "b", "a", "d"])

    def test_clock_stepped_backwards_keeps_intake_order(self):
        with mock.patch("time.time", return_value=1700000100.0):
            intake(self.con, ev("first"))
        with mock.patch("time.time", return_value=1700000000.0):
            intake(self.con, ev("second"))
        stamps = [r[0] for r in self.con.execute("SELECT created_at FROM outbox ORDER BY seq")]
        self.assertGreater(stamps[0], stamps[1])  # the clock really went back
        self.assertEqual([e["id"] for e in pending(self.con)], ["first", "second"])

    def test_limit_bounds_and_types(self):
        for i in range(20):
            intake(self.con, ev("e%02d" % i))
        self.assertEqual(len(pending(self.con, 1)), 1)
        self.assertEqual(len(pending(self.con, 16)), 16)
        self.assertEqual(len(pending(self.con)), 16)
        for bad in (0, 17, -1, True, False, "16", 1.0, None):
            with self.assertRaises(ValueError) as ctx:
                pending(self.con, bad)
            self.assertIn("limit must be an int from 1 to 16", str(ctx.exception))

    def test_pending_changes_nothing(self):
        for event_id in ("a", "b"):
            intake(self.con, ev(event_id))
        watcher = sqlite3.connect(self.db_path, isolation_level=None)
        self.addCleanup(watcher.close)
        version = watcher.execute("PRAGMA data_version").fetchone()[0]
        before = source_rows(watcher)
        first = pending(self.con)
        first[0]["id"] = "rewritten"  # the caller's copy, not the store
        self.assertEqual(pending(self.con), [ev("a"), ev("b")])
        self.assertFalse(self.con.in_transaction)
        self.assertEqual(watcher.execute("PRAGMA data_version").fetchone()[0], version)
        self.assertEqual(source_rows(watcher), before)

    def test_pending_query_uses_the_partial_index(self):
        plan = " ".join(str(row[-1]) for row in self.con.execute("EXPLAIN QUERY PLAN " + PENDING_SQL, (16,)))
        self.assertIn("USING INDEX outbox_pending", plan)
        self.assertNotIn("TEMP B-TREE", plan)  # no sort step: the index gives seq order

    def test_pending_skips_sent_rows(self):
        for event_id in ("a", "b", "c"):
            intake(self.con, ev(event_id))
        mark_sent(self.con, "b")
        self.assertEqual([e["id"] for e in pending(self.con)], ["a", "c"])


class MarkSentTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.con = init_store(self.path("source.db"))
        self.addCleanup(self.con.close)
        intake(self.con, ev("a"))
        intake(self.con, ev("b"))

    def test_marks_exactly_that_row(self):
        self.assertIs(mark_sent(self.con, "b"), True)
        rows = self.con.execute("SELECT event_id, sent FROM outbox ORDER BY seq").fetchall()
        self.assertEqual(rows, [("a", 0), ("b", 1)])
        self.assertFalse(self.con.in_transaction)

    def test_second_mark_returns_false(self):
        mark_sent(self.con, "a")
        self.assertIs(mark_sent(self.con, "a"), False)

    def test_unknown_id_raises_key_error_and_changes_nothing(self):
        before = source_rows(self.con)
        with self.assertRaises(KeyError):
            mark_sent(self.con, "nope")
        self.assertEqual(source_rows(self.con), before)
        self.assertFalse(self.con.in_transaction)

    def test_it_writes_that_row_and_nothing_else_even_past_a_quarantine(self):
        """Issue 19: the reordering a quarantine causes is the operator module's to record, not mark_sent's."""
        quarantine(self.con, "a", "held")
        tables = [name for (name,) in self.con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        others = lambda: {name: self.con.execute("SELECT * FROM %s" % name).fetchall()  # names from sqlite_master
                          for name in tables if name != "outbox"}
        before, changes = others(), self.con.total_changes
        self.assertIs(mark_sent(self.con, "b"), True)
        self.assertEqual(self.con.total_changes - changes, 1)  # one row, in one statement
        self.assertEqual(others(), before)


if __name__ == "__main__":
    unittest.main()
