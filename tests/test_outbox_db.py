"""outbox.core.db: opening a kit DB for writing, on both sides; durability and refusing a file of an unknown version.

durability="full" | "process" on init_store, init_sink and open_db: the
pragma, refusals, a killed writer. A file whose user_version no release
wrote is refused byte for byte unchanged, by the writers and the readers.
"""
import os
import signal
import sqlite3
import subprocess
import unittest

from outbox import OutboxError, WrongDatabase, init_store, intake, pending
from outbox.core import db
from outbox.ops import operations
from sink import init_sink, receive, views
from tests.support import ROOT, WINDOWS, Child, TempDirTestCase, file_bytes


FULL, NORMAL = 2, 1  # what PRAGMA synchronous reads back


OPENERS = (("init_store", init_store), ("init_sink", init_sink))


BAD = ("FULL", "Process", "normal", "off", "", None, 1, True, b"full")


# A child that commits one event with durability="process", says so, then
# waits to be killed: no close, no checkpoint, no clean exit.
KILLED_WRITER = """
import sys, time
from outbox import init_store, intake
from sink import init_sink, receive
side, path = sys.argv[1], sys.argv[2]
event = {"id": "snack-7", "sku": "snack", "qty": 7}
if side == "source":
    intake(init_store(path, durability="process"), event)
else:
    receive(init_sink(path, durability="process"), event)
print("committed", flush=True)
time.sleep(60)
"""


class DurabilityTest(TempDirTestCase):
    def synchronous(self, con):
        return con.execute("PRAGMA synchronous").fetchone()[0]

    def test_full_is_the_default(self):
        for name, opener in OPENERS:
            with self.subTest(opener=name):
                con = opener(self.path(name + ".db"))
                self.addCleanup(con.close)
                self.assertEqual(self.synchronous(con), FULL)
                explicit = opener(self.path(name + ".db"), durability="full")
                self.addCleanup(explicit.close)
                self.assertEqual(self.synchronous(explicit), FULL)

    def test_process_is_synchronous_normal_in_wal_mode(self):
        for name, opener in OPENERS:
            with self.subTest(opener=name):
                con = opener(self.path(name + ".db"), durability="process")
                self.addCleanup(con.close)
                self.assertEqual(self.synchronous(con), NORMAL)
                self.assertEqual(con.execute("PRAGMA journal_mode").fetchone()[0], "wal")
                self.assertGreater(con.execute("PRAGMA busy_timeout").fetchone()[0], 0)
                self.assertIsNone(con.isolation_level)

    def test_the_mode_belongs_to_the_connection_not_the_file(self):
        path = self.path("source.db")
        fast = init_store(path, durability="process")
        self.addCleanup(fast.close)
        intake(fast, {"id": "a", "sku": "snack", "qty": 1})
        safe = init_store(path)
        self.addCleanup(safe.close)
        self.assertEqual(self.synchronous(safe), FULL)
        self.assertEqual(self.synchronous(fast), NORMAL)
        self.assertEqual(pending(safe), [{"id": "a", "sku": "snack", "qty": 1}])

    def test_a_bad_value_names_itself_and_the_choices_and_creates_no_file(self):
        for name, opener in OPENERS:
            for value in BAD:
                with self.subTest(opener=name, value=value):
                    path = self.path("%s-%r.db" % (name, value))
                    with self.assertRaises(ValueError) as ctx:
                        opener(path, durability=value)
                    message = str(ctx.exception)
                    self.assertIn("durability", message)
                    self.assertIn(repr(value), message)
                    self.assertIn("'full'", message)
                    self.assertIn("'process'", message)
                    self.assertEqual(os.listdir(self.tmp), [])

    def test_a_bad_value_leaves_an_existing_db_byte_for_byte_unchanged(self):
        path = self.path("source.db")
        con = init_store(path)
        intake(con, {"id": "a", "sku": "snack", "qty": 1})
        con.close()
        names = sorted(os.listdir(self.tmp))
        with open(path, "rb") as f:
            before = f.read()
        with self.assertRaises(ValueError):
            init_store(path, durability="off")
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before)
        self.assertEqual(sorted(os.listdir(self.tmp)), names)

    def test_open_db_checks_it_too(self):
        path = self.path("x.db")
        with self.assertRaises(ValueError):
            db.open_db(path, application_id=1, version=1, schema=(), kind="test", durability="none")
        self.assertFalse(os.path.exists(path))
        self.assertEqual(sorted(db.DURABILITY), ["full", "process"])

    def test_a_commit_in_process_mode_survives_the_process_being_killed(self):
        for side in ("source", "sink"):
            with self.subTest(side=side):
                path = self.path(side + ".db")
                child = Child([side, path], ROOT, program=KILLED_WRITER, stdin=subprocess.DEVNULL)
                try:
                    self.assertEqual(child.line().strip(), "committed")
                    child.proc.kill()  # SIGKILL on POSIX; TerminateProcess on Windows, whose exit status is 1
                    self.assertEqual(child.wait(), 1 if WINDOWS else -signal.SIGKILL)
                finally:
                    child.close()
                if side == "source":
                    con = operations.open_store_readonly(path)
                    self.addCleanup(con.close)
                    self.assertEqual(pending(con), [{"id": "snack-7", "sku": "snack", "qty": 7}])
                else:
                    con = init_sink(path)
                    self.addCleanup(con.close)
                    self.assertEqual(views.inventory(con), [("snack", 7)])
                    self.assertEqual(receive(con, {"id": "snack-7", "sku": "snack", "qty": 7}), "duplicate")


UNKNOWN_VERSION = 99  # no release will reach it; the source schema moving to 2 must not make 99 acceptable


class UnknownVersionIsRefusedUnchangedTest(TempDirTestCase):
    """Mutant: accepting any user_version once the application_id matches."""

    def stamp(self, path, creator):
        creator(path).close()
        con = sqlite3.connect(path, isolation_level=None)
        try:
            # Back to a rollback journal, so the file alone is the whole DB and nothing else can change.
            con.execute("PRAGMA journal_mode = DELETE").fetchall()  # consumed: PyPy keeps an unread statement open
            con.execute("PRAGMA user_version = %d" % UNKNOWN_VERSION)
        finally:
            con.close()
        return file_bytes(path)

    def assert_refused_unchanged(self, creator, opener, name):
        path = self.path(name)
        before = self.stamp(path, creator)
        with self.assertRaises(WrongDatabase) as ctx:
            opener(path)
        self.assertIn(str(UNKNOWN_VERSION), str(ctx.exception))
        self.assertEqual(file_bytes(path), before)

    def test_source(self):
        self.assert_refused_unchanged(init_store, init_store, "source.db")
        self.assert_refused_unchanged(init_store, operations.open_store_readonly, "source-ro.db")

    def test_sink(self):
        self.assert_refused_unchanged(init_sink, init_sink, "sink.db")
        self.assert_refused_unchanged(init_sink, views.open_readonly, "sink-ro.db")


class LookTest(TempDirTestCase):
    def test_a_file_it_cannot_read_is_an_outbox_error_not_a_wrong_database_and_stays_unchanged(self):
        """Issue 22: db.look's docstring names the OutboxError it raises for a file SQLite cannot read at all."""
        path = self.path("locked.db")
        holder = sqlite3.connect(path, isolation_level=None)
        self.addCleanup(holder.close)
        holder.execute("CREATE TABLE t (x)")
        holder.execute("BEGIN EXCLUSIVE")  # rollback-journal mode: no other connection may even read
        before = file_bytes(path)
        con = sqlite3.connect(path, isolation_level=None, timeout=0)
        self.addCleanup(con.close)
        with self.assertRaises(OutboxError) as caught:
            db.look(con, path, application_id=1, version=1, kind="source")
        self.assertNotIsInstance(caught.exception, WrongDatabase)
        self.assertIn("cannot open source DB", str(caught.exception))
        self.assertEqual(file_bytes(path), before)


if __name__ == "__main__":
    unittest.main()
