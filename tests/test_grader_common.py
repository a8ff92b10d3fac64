"""grader/common.py: the grader's own connections to a worker's DBs, and the kit's constants it keeps a copy of.

The grader's parent side never imports the kit, so the two constants it
shares with it (the sink's crash status, the busy timeout) are copies; this
module keeps each equal to the kit's own.
"""
import os
import sqlite3
import sys
import unittest

import outbox.core.db
import sink.faults
from tests.support import ROOT, TempDirTestCase, tree_listing

sys.path.insert(0, ROOT)
from grader import common  # noqa: E402


class KitConstantsTest(unittest.TestCase):
    def test_the_copies_of_the_kits_constants_are_the_kits(self):
        self.assertEqual(common.SINK_CRASH, sink.faults.CRASH_EXIT)
        self.assertEqual(common.BUSY_TIMEOUT_S, outbox.core.db.BUSY_TIMEOUT_S)


class ReadOnlyObserverTest(TempDirTestCase):
    def test_the_observer_cannot_write_and_creates_no_db(self):
        path = self.path("worker.db")
        writer = sqlite3.connect(path, isolation_level=None)
        self.addCleanup(writer.close)
        writer.execute("PRAGMA journal_mode = WAL").fetchall()  # consumed: PyPy keeps an unread statement open
        writer.execute("CREATE TABLE t (x)")
        writer.execute("INSERT INTO t VALUES (1)")  # in the -wal only, while the writer holds the file open
        observer = common.read_only(path)
        self.addCleanup(observer.close)
        self.assertEqual(observer.execute("SELECT x FROM t").fetchall(), [(1,)])
        with self.assertRaises(sqlite3.Error):
            observer.execute("INSERT INTO t VALUES (2)")  # query_only
        observer.execute("PRAGMA query_only = OFF")
        with self.assertRaises(sqlite3.Error):
            observer.execute("INSERT INTO t VALUES (2)")  # mode=ro, underneath
        self.assertEqual(writer.execute("SELECT count(*) FROM t").fetchone()[0], 1)
        listing = tree_listing(self.tmp)
        with self.assertRaises(common.Fail):
            common.read_only(self.path("missing.db"))
        self.assertEqual(tree_listing(self.tmp), listing, "the observer created a file")
        self.assertFalse(os.path.exists(self.path("missing.db")))


# Minutes of work for SQLite (a billion rows, none returned): endless for the grader, bounded for the test.
ENDLESS = ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 1000000000) "
           "SELECT n AS id FROM r WHERE n < 0")


class BoundedReadTest(TempDirTestCase):
    """A worker's DB decides what the grader's own queries cost: views are refused, and every statement is bounded."""

    def worker_db(self, *statements):
        path = self.path("worker.db")
        writer = sqlite3.connect(path, isolation_level=None)
        try:
            for statement in statements:
                writer.execute(statement)
        finally:
            writer.close()
        return path

    def test_a_view_in_place_of_a_contract_table_is_a_failed_check_not_a_query(self):
        path = self.worker_db("CREATE TABLE outbox (seq INTEGER PRIMARY KEY)", "CREATE VIEW Orders AS " + ENDLESS)
        with self.assertRaises(common.Fail) as caught:
            common.read_only(path)
        self.assertEqual(caught.exception.expected, common.msg("db.table", table="orders"))
        self.assertEqual(caught.exception.observed, common.msg("db.not-table", table="orders", kind="view"))

    def test_a_statement_that_does_not_end_is_interrupted_at_its_deadline(self):
        path = self.worker_db("CREATE VIEW endless AS " + ENDLESS)
        con = common.bounded(sqlite3.connect(path), seconds=0.2)
        self.addCleanup(con.close)
        with self.assertRaises(sqlite3.OperationalError) as caught:
            con.execute("SELECT count(*) FROM endless").fetchall()
        self.assertTrue(common.interrupted(caught.exception))
        # The deadline is each statement's own: the next one runs in full.
        self.assertEqual(con.execute("SELECT 1").fetchall(), [(1,)])

    def test_the_grader_connections_are_bounded(self):
        path = self.worker_db("CREATE VIEW endless AS " + ENDLESS)
        saved, common.QUERY_S = common.QUERY_S, 0.2  # the grader's bound, made short for the test
        try:
            con = common.connect(path)
        finally:
            common.QUERY_S = saved
        self.addCleanup(con.close)
        with self.assertRaises(sqlite3.OperationalError) as caught:
            con.execute("SELECT * FROM endless").fetchall()
        self.assertTrue(common.interrupted(caught.exception))

    def test_a_value_over_the_bound_is_refused_not_read_and_is_the_workers_verdict(self):
        if not hasattr(sqlite3.Connection, "setlimit"):
            self.skipTest("Connection.setlimit is Python 3.11+; before, the worker's file size bounds a value")
        from grader.classroom import run_check
        from grader.registry import Check
        path = self.worker_db("CREATE TABLE outbox (seq INTEGER PRIMARY KEY, payload TEXT)",
                              "INSERT INTO outbox (payload) VALUES ('{}')",
                              "INSERT INTO outbox (payload) VALUES (substr(hex(zeroblob(%d)), 1, %d))"
                              % (common.VALUE_BYTES, common.VALUE_BYTES + 1))
        con = common.read_only(path)
        self.addCleanup(con.close)
        self.assertEqual(con.execute("SELECT payload FROM outbox WHERE seq = 1").fetchall(), [("{}",)])
        with self.assertRaises(sqlite3.Error) as caught:
            con.execute("SELECT payload FROM outbox WHERE seq = 2").fetchall()
        self.assertTrue(common.too_big(caught.exception))

        class Grader:
            def for_check(self, check):
                return None

        check = Check("huge", "proves.huge", (), lambda context: con.execute("SELECT payload FROM outbox").fetchall())
        result = run_check(Grader(), check, "en")
        self.assertEqual(result["status"], "fail", result)
        self.assertIn("over %d bytes" % common.VALUE_BYTES, result["observed"])


    def test_a_read_takes_at_most_its_bound_of_rows(self):
        path = self.worker_db("CREATE TABLE deliveries (event_id TEXT)",
                              "INSERT INTO deliveries WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                              "WHERE i < 11) SELECT 'snack-7' FROM n")
        con = common.read_only(path)
        self.addCleanup(con.close)
        self.assertEqual(len(common.rows(con.execute("SELECT * FROM deliveries"), limit=11)), 11)
        with self.assertRaises(common.Fail) as caught:
            common.rows(con.execute("SELECT * FROM deliveries"), limit=10)
        self.assertEqual(caught.exception.observed, common.msg("db.rows-over", limit=10, budget=common.MAX_BYTES))
        with self.assertRaises(common.Fail):  # 11 values of 7 bytes: over a budget of 70
            common.rows(con.execute("SELECT * FROM deliveries"), budget=70)
        self.assertEqual(len(common.rows(con.execute("SELECT * FROM deliveries"), budget=77)), 11)

    def test_a_table_that_computes_what_it_shows_is_refused_before_a_read(self):
        for statements, observed in (
                (["CREATE TABLE outbox (seq INTEGER PRIMARY KEY, payload TEXT GENERATED ALWAYS AS (zeroblob(1000)) VIRTUAL)"],
                 common.msg("db.generated-column", table="outbox", column="payload")),
                (["CREATE TABLE outbox (seq INTEGER PRIMARY KEY)",
                  "ALTER TABLE outbox ADD COLUMN pad BLOB GENERATED ALWAYS AS (zeroblob(1000)) VIRTUAL"],
                 common.msg("db.generated-column", table="outbox", column="pad")),
                (["CREATE TABLE deliveries (%s, pad BLOB GENERATED ALWAYS AS (zeroblob(1000)) VIRTUAL)"
                  % ", ".join("c%d" % n for n in range(common.MAX_COLUMNS + 5))],  # past the column bound
                 # 3.11+: the table is over the column bound, refused as a whole; before, its generated column
                 common.msg("db.columns-bounded", limit=common.MAX_COLUMNS) if hasattr(sqlite3.Connection, "setlimit")
                 else common.msg("db.generated-column", table="deliveries", column="pad")),
                (["CREATE VIRTUAL TABLE inbox USING rtree(id, x0, x1)"], common.msg("db.virtual-table", table="inbox"))):
            with self.subTest(statements=statements):
                for name in ("worker.db", "worker.db-wal", "worker.db-shm"):
                    if os.path.exists(self.path(name)):
                        os.remove(self.path(name))
                try:
                    path = self.worker_db(*statements)
                except sqlite3.OperationalError as exc:  # an SQLite without generated columns or rtree
                    self.skipTest("this SQLite cannot build the case: %s" % exc)
                with self.assertRaises(common.Fail) as caught:
                    common.read_only(path).close()
                self.assertEqual(caught.exception.observed, observed)

    def test_a_result_of_more_columns_than_the_bound_is_refused(self):
        if not hasattr(sqlite3.Connection, "setlimit"):
            self.skipTest("Connection.setlimit is Python 3.11+")
        path = self.worker_db("CREATE TABLE notes (%s)" % ", ".join("c%d" % n for n in range(common.MAX_COLUMNS + 1)))
        con = common.bounded(sqlite3.connect(path))
        self.addCleanup(con.close)
        with self.assertRaises(sqlite3.Error):
            con.execute("SELECT * FROM notes").fetchall()


if __name__ == "__main__":
    unittest.main()
