"""outbox.core.upgrade: an older source DB upgraded in place, in one transaction; a newer one refused unchanged.

UpgradeTest builds release 1's file with the tests' own SQL
(tests.support.build_v1). UpgradeFromOldReleasesTest takes files written by
the code of schema 1 and of release 2.0.0 from tests/fixtures (the SQL
those releases' own code left, see make_old_dbs.py): every row and every
column they had must survive, sent_at included; a failed upgrade leaves the
file as it was; the read-only commands refuse them unchanged and name the
upgrade.
"""
import json
import os
import sqlite3
import subprocess
import sys
import unittest

from outbox import init_store, intake, mark_sent, pending
from outbox.ops import operations
from outbox.core import store
from outbox.core.errors import WrongDatabase
from tests import fixtures
from tests.support import ROOT, TempDirTestCase, build_v1, ev, file_bytes, python_env, tree_listing


class UpgradeTest(TempDirTestCase):
    def test_a_v1_file_is_upgraded_in_place_and_keeps_every_row(self):
        path = self.path("v1.db")
        build_v1(path, ["z-1", "a-1", "m-1"], sent=["z-1"])
        con = init_store(path)
        self.addCleanup(con.close)
        self.assertEqual(con.execute("PRAGMA user_version").fetchone()[0], 3)
        self.assertEqual(con.execute("SELECT seq, event_id, sent FROM outbox ORDER BY seq").fetchall(),
                         [(1, "z-1", 1), (2, "a-1", 0), (3, "m-1", 0)])
        self.assertEqual(con.execute("SELECT count(*) FROM orders").fetchone()[0], 3)
        self.assertEqual([e["id"] for e in pending(con)], ["a-1", "m-1"])
        self.assertEqual(intake(con, ev("b-1")), 4)  # the seq counter survived
        self.assertTrue(mark_sent(con, "a-1"))
        operations.quarantine(con, "m-1", "test")
        self.assertEqual([e["id"] for e in pending(con)], ["b-1"])

    def test_an_upgrade_that_fails_half_way_leaves_the_file_as_it_was(self):
        path = self.path("v1.db")
        build_v1(path, ["a-1"])
        con = sqlite3.connect(path, isolation_level=None)
        con.execute("CREATE TABLE quarantine_overtaken (x)")  # the upgrade's fourth statement from the end will fail
        con.close()
        with self.assertRaises(sqlite3.OperationalError):
            init_store(path)
        con = sqlite3.connect(path)
        self.addCleanup(con.close)
        self.assertEqual(con.execute("PRAGMA user_version").fetchone()[0], 1)
        columns = [row[1] for row in con.execute("PRAGMA table_info(outbox)")]
        self.assertEqual(columns, ["seq", "event_id", "payload", "sent", "created_at", "sent_at"])
        self.assertIsNone(con.execute("SELECT name FROM sqlite_master WHERE name = 'quarantines'").fetchone())

    def test_a_read_only_opener_refuses_a_v1_file_with_the_upgrade_command_and_changes_nothing(self):
        path = self.path("v1.db")
        build_v1(path, ["a-1"])
        before = file_bytes(path)
        with self.assertRaises(WrongDatabase) as caught:
            operations.open_store_readonly(path)
        self.assertIn("python -m outbox upgrade --db %s" % path, str(caught.exception))
        self.assertEqual(file_bytes(path), before)

    def test_a_newer_file_is_refused_byte_for_byte_unchanged(self):
        path = self.path("newer.db")
        init_store(path).close()
        con = sqlite3.connect(path, isolation_level=None)
        con.execute("PRAGMA user_version = %d" % (store.SCHEMA_VERSION + 1))
        con.close()
        before = file_bytes(path)
        for opener in (init_store, operations.open_store_readonly):
            with self.assertRaises(WrongDatabase) as caught:
                opener(path)
            self.assertIn("newer release", str(caught.exception))
        self.assertEqual(file_bytes(path), before)

    def test_the_pending_query_reads_the_partial_index(self):
        con = init_store(self.path("s.db"))
        self.addCleanup(con.close)
        plan = " ".join(row[3] for row in con.execute("EXPLAIN QUERY PLAN " + store.PENDING_SQL, (16,)))
        self.assertIn("USING INDEX outbox_pending", plan)
        self.assertNotIn("TEMP B-TREE", plan)


OLD_TABLES = {1: ("orders", "outbox", "sqlite_sequence"),
              2: ("orders", "outbox", "quarantines", "quarantine_overtaken", "sqlite_sequence")}


def outbox(*args):
    return subprocess.run([sys.executable, "-m", "outbox"] + list(args), cwd=ROOT, env=python_env(), timeout=60,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)


def tables(path, names):
    """{table: sorted list of {column: value}} through a fresh connection."""
    con = sqlite3.connect(path)
    try:
        found = {}
        for name in names:
            cur = con.execute("SELECT * FROM %s" % name)  # the names are this module's own constants
            columns = [d[0] for d in cur.description]
            found[name] = sorted((dict(zip(columns, row)) for row in cur), key=lambda row: sorted(row.items(),
                                                                                                    key=repr))
        return found
    finally:
        con.close()


def columns(path):
    """{table: [column names]} of every table, through a fresh connection."""
    con = sqlite3.connect(path)
    try:
        names = [name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {name: [row[1] for row in con.execute("PRAGMA table_info(%s)" % name)] for name in names}
    finally:
        con.close()


def pragma(path, name):
    con = sqlite3.connect(path)
    try:
        return con.execute("PRAGMA %s" % name).fetchone()[0]
    finally:
        con.close()


class UpgradeFromOldReleasesTest(TempDirTestCase):
    def old_file(self, schema):
        path = self.path("schema%d.db" % schema)
        fixtures.load(schema, path)
        self.assertEqual(pragma(path, "user_version"), schema)
        return path

    def assert_upgraded_keeping_everything(self, schema):
        path = self.old_file(schema)
        before = tables(path, OLD_TABLES[schema])
        self.assertTrue(any(row["sent_at"] for row in before["outbox"]))  # the history has sent rows
        result = outbox("upgrade", "--db", path)
        self.assertEqual((result.returncode, result.stdout.strip()), (0, "source DB %s is at schema 3" % path),
                         result.stderr)
        self.assertEqual(pragma(path, "user_version"), 3)
        self.assertEqual(pragma(path, "integrity_check"), "ok")
        after = tables(path, OLD_TABLES[schema] + ("retries",))
        for name in OLD_TABLES[schema]:
            kept = [{column: row[column] for column in before[name][0]} for row in after[name]]
            self.assertEqual(kept, before[name], name)  # every row, every column it had, sent_at included
        self.assertEqual(after["retries"], [])
        for row in after["outbox"]:
            self.assertEqual((row["permanent_failures"], row["last_error_kind"]), (0, None))
        return path, before, after

    def test_a_schema_1_file(self):
        path, before, after = self.assert_upgraded_keeping_everything(1)
        for row in after["outbox"]:
            self.assertEqual((row["attempts"], row["quarantined_at"]), (0, None))
        con = init_store(path)
        try:
            self.assertEqual([event["id"] for event in store.pending(con)], ["m-3", "b-4"])
            self.assertEqual(store.intake(con, {"id": "n-5", "sku": "snack", "qty": 1}), 5)  # seq counter kept
        finally:
            con.close()

    def test_a_file_of_release_2_0_0(self):
        path, before, after = self.assert_upgraded_keeping_everything(2)
        for row in after["quarantines"]:
            self.assertIsNone(row["original_payload"])  # 2.0.0 did not keep it: said so, not made up
        self.assertEqual(len(after["orders"]), 7)
        self.assertEqual([row["event_id"] for row in after["outbox"] if row["sent"]], ["b-2", "d-4"])

        ladder = json.loads(outbox("evidence", "c-3", "--db", path, "--json").stdout)
        records = ladder["history"]["quarantines"]
        self.assertEqual([(r["seq"], r["reason"]) for r in records],
                         [(3, "sink holds qty 1; source says 3"), (8, "quarantined a second time")])
        self.assertEqual(records[0]["overtaken_by"], [4])
        self.assertEqual(records[0]["corrected_payload"], '{"id":"c-3","qty":1,"sku":"crate"}')
        text = outbox("evidence", "c-3", "--db", path).stdout
        self.assertIn("corrected from (not recorded before schema 3) to", text)
        self.assertEqual(text.count("history (source):     quarantined at seq"), 2)

        purged = json.loads(outbox("evidence", "a-1", "--db", path, "--json").stdout)
        self.assertIsNone(purged["outbox"])
        self.assertEqual(purged["order"]["qty"], 1)

        # f-6 failed 5 times under 2.0.0 with a 409; the kind of those failures was never recorded, so the
        # relay tries it again rather than alert without a try, and evidence says the same.
        refused = json.loads(outbox("evidence", "f-6", "--db", path, "--json").stdout)
        self.assertEqual((refused["outbox"]["attempts"], refused["outbox"]["permanent_failures"]), (5, 0))
        self.assertIn("5 attempt(s) so far, none refused: the relay sends it again", refused["reading"])

    def test_an_upgraded_file_has_the_schema_a_new_file_gets(self):
        """outbox.core.upgrade's history and outbox.core.store.SCHEMA end alike: every table, column, index and constraint."""
        def shape(path):
            con = sqlite3.connect(path)
            try:
                return sorted((kind, name, "".join(sql.split())) for kind, name, sql in con.execute(
                    "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL"))
            finally:
                con.close()

        new = self.path("new.db")
        init_store(new).close()
        for schema in (1, 2):
            with self.subTest(schema=schema):
                path = self.old_file(schema)
                init_store(path).close()
                self.assertEqual(shape(path), shape(new))

    def test_an_upgrade_that_fails_half_way_leaves_the_file_as_it_was(self):
        for schema in (1, 2):
            with self.subTest(schema=schema):
                path = self.old_file(schema)
                con = sqlite3.connect(path, isolation_level=None)
                con.execute("CREATE TABLE retries (x)")  # the 2 -> 3 step's CREATE TABLE will fail on it
                con.close()
                before = tables(path, OLD_TABLES[schema]), columns(path)
                with self.assertRaises(sqlite3.OperationalError):
                    init_store(path)
                self.assertEqual(pragma(path, "user_version"), schema)  # 1 -> 2 rolled back too, for schema 1
                self.assertEqual((tables(path, OLD_TABLES[schema]), columns(path)), before)

    def test_read_only_commands_refuse_an_old_file_unchanged_and_name_the_upgrade(self):
        for schema in (1, 2):
            path = self.old_file(schema)
            listing, before = tree_listing(self.tmp), file_bytes(path)
            for args in (["status", "--db", path], ["pending", "--db", path], ["quarantined", "--db", path],
                         ["evidence", "c-3", "--db", path]):
                with self.subTest(schema=schema, command=args[0]):
                    result = outbox(*args)
                    self.assertEqual(result.returncode, 1, result.stderr)
                    self.assertIn("schema %d, this code reads 3" % schema, result.stderr)
                    self.assertIn("python -m outbox upgrade --db %s" % path, result.stderr)
                    self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            with self.assertRaises(WrongDatabase):
                operations.open_store_readonly(path)
            self.assertEqual((tree_listing(self.tmp), file_bytes(path)), (listing, before))

    def test_the_fixtures_are_what_their_releases_wrote(self):
        """The stamp and tables each fixture claims; a regenerated fixture that lost them fails here."""
        for schema, names in OLD_TABLES.items():
            path = self.old_file(schema)
            con = sqlite3.connect(path)
            try:
                found = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                self.assertEqual(con.execute("PRAGMA application_id").fetchone()[0], store.APPLICATION_ID)
            finally:
                con.close()
            self.assertEqual(found, set(names))
            self.assertTrue(os.path.getsize(fixtures.sql_path(schema)) > 0)


if __name__ == "__main__":
    unittest.main()
