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
        writer.execute("PRAGMA journal_mode = WAL")
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


if __name__ == "__main__":
    unittest.main()
