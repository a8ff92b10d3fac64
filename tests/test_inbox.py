"""sink.inbox: applied / duplicate / conflict, the rows each writes, atomicity, refusing foreign files."""

import os
import sqlite3

import outbox.errors
from outbox import store
from outbox.event import canonical, digest
from sink import Conflict, InvalidEvent, WrongDatabase, inbox, init_sink, receive, views
from tests.support import TempDirTestCase


def snapshot(con):
    """Every row of the three sink tables, for before/after comparisons."""
    return {
        "inbox": con.execute("SELECT * FROM inbox ORDER BY event_id").fetchall(),
        "inventory": con.execute("SELECT * FROM inventory ORDER BY sku").fetchall(),
        "deliveries": con.execute("SELECT * FROM deliveries ORDER BY seq").fetchall(),
    }


class StoreTestCase(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.db_path = self.path("sink.db")
        self.con = init_sink(self.db_path)
        self.addCleanup(self.con.close)

    def outcomes(self):
        return [row[0] for row in self.con.execute("SELECT outcome FROM deliveries ORDER BY seq")]

    def stock(self):
        return dict(self.con.execute("SELECT sku, qty FROM inventory"))


class ReceiveTest(StoreTestCase):
    def test_new_event_is_applied_with_its_inbox_row_inventory_and_delivery(self):
        event = {"id": "e1", "sku": "apple", "qty": 3}
        self.assertEqual(receive(self.con, event), "applied")
        self.assertEqual(
            self.con.execute("SELECT event_id, digest, payload FROM inbox").fetchall(),
            [("e1", digest(event), canonical(event))],
        )
        self.assertEqual(self.stock(), {"apple": 3})
        rows = self.con.execute("SELECT event_id, outcome, digest, received_at FROM deliveries").fetchall()
        self.assertEqual([r[:3] for r in rows], [("e1", "applied", digest(event))])
        self.assertIsInstance(rows[0][3], float)
        self.assertFalse(self.con.in_transaction)

    def test_identical_copy_is_a_duplicate_and_only_logged(self):
        receive(self.con, {"id": "e1", "sku": "apple", "qty": 3})
        inbox_before = self.con.execute("SELECT * FROM inbox").fetchall()
        # Key order does not matter: the digest is of the canonical form.
        self.assertEqual(receive(self.con, {"qty": 3, "sku": "apple", "id": "e1"}), "duplicate")
        self.assertEqual(self.con.execute("SELECT * FROM inbox").fetchall(), inbox_before)
        self.assertEqual(self.stock(), {"apple": 3})
        self.assertEqual(self.outcomes(), ["applied", "duplicate"])

    def test_different_payload_is_a_committed_conflict_and_changes_nothing_else(self):
        receive(self.con, {"id": "e1", "sku": "apple", "qty": 3})
        inbox_before = self.con.execute("SELECT * FROM inbox").fetchall()
        with self.assertRaises(Conflict) as caught:
            receive(self.con, {"id": "e1", "sku": "apple", "qty": 4})
        self.assertIs(Conflict, outbox.errors.Conflict)
        self.assertIn("e1", str(caught.exception))
        self.assertFalse(self.con.in_transaction)
        self.assertEqual(self.con.execute("SELECT * FROM inbox").fetchall(), inbox_before)
        self.assertEqual(self.stock(), {"apple": 3})
        self.assertEqual(self.outcomes(), ["applied", "conflict"])
        conflict_digest = self.con.execute("SELECT digest FROM deliveries WHERE outcome = 'conflict'").fetchone()[0]
        self.assertEqual(conflict_digest, digest({"id": "e1", "sku": "apple", "qty": 4}))
        # Committed: a second connection sees the conflict row.
        other = sqlite3.connect(self.db_path)
        self.addCleanup(other.close)
        self.assertEqual(other.execute("SELECT count(*) FROM deliveries WHERE outcome = 'conflict'").fetchone()[0], 1)

    def test_inventory_sums_per_sku_across_events(self):
        for event_id, sku, qty in (("e1", "apple", 2), ("e2", "pear", 3), ("e3", "apple", 5), ("e4", "pear", 1)):
            self.assertEqual(receive(self.con, {"id": event_id, "sku": sku, "qty": qty}), "applied")
        receive(self.con, {"id": "e3", "sku": "apple", "qty": 5})
        self.assertEqual(self.stock(), {"apple": 7, "pear": 4})
        self.assertEqual(self.con.execute("SELECT count(*) FROM inbox").fetchone()[0], 4)
        self.assertEqual(self.outcomes(), ["applied"] * 4 + ["duplicate"])

    def test_invalid_event_raises_naming_the_field_and_writes_nothing(self):
        receive(self.con, {"id": "e1", "sku": "apple", "qty": 3})
        before = snapshot(self.con)
        cases = [
            ({"id": "e2", "sku": "apple", "qty": 0}, "qty"),
            ({"id": "e2", "sku": "apple", "qty": True}, "qty"),
            ({"id": "e2", "sku": "apple", "qty": 1.0}, "qty"),
            ({"id": "", "sku": "apple", "qty": 1}, "id"),
            ({"id": "e2", "sku": "a b", "qty": 1}, "sku"),
            ({"id": "e2", "sku": "apple"}, "qty"),
            ({"id": "e2", "sku": "apple", "qty": 1, "note": "x"}, "note"),
            (["e2", "apple", 1], "dict"),
            # The same id as an applied event: refused as invalid, not logged as a conflict.
            ({"id": "e1", "sku": "apple", "qty": -3}, "qty"),
        ]
        for event, field in cases:
            with self.subTest(event=event):
                with self.assertRaises(InvalidEvent) as caught:
                    receive(self.con, event)
                self.assertIn(field, str(caught.exception))
                self.assertFalse(self.con.in_transaction)
        self.assertEqual(snapshot(self.con), before)

    def test_argument_is_not_modified(self):
        event = {"id": "e1", "sku": "apple", "qty": 3}
        receive(self.con, event)
        self.assertEqual(event, {"id": "e1", "sku": "apple", "qty": 3})


class AtomicityTest(StoreTestCase):
    """A failure at the last statement of receive's transaction leaves nothing behind."""

    def force_failure(self, table, operation):
        # TEMP: lives only on this connection, leaves the file's schema alone.
        self.con.execute(
            "CREATE TEMP TRIGGER forced_failure BEFORE %s ON %s BEGIN SELECT RAISE(ABORT, 'forced'); END"
            % (operation, table)
        )
        self.addCleanup(self.con.execute, "DROP TRIGGER IF EXISTS temp.forced_failure")

    def assert_fails_and_changes_nothing(self, event):
        before = snapshot(self.con)
        with self.assertRaises(sqlite3.DatabaseError) as caught:
            receive(self.con, event)
        self.assertIn("forced", str(caught.exception))
        self.assertFalse(self.con.in_transaction)
        self.assertEqual(snapshot(self.con), before)

    def test_failure_logging_a_new_event_rolls_back_inbox_and_inventory(self):
        receive(self.con, {"id": "e0", "sku": "apple", "qty": 1})
        self.force_failure("deliveries", "INSERT")
        self.assert_fails_and_changes_nothing({"id": "e1", "sku": "apple", "qty": 3})
        self.assert_fails_and_changes_nothing({"id": "e2", "sku": "pear", "qty": 3})

    def test_failure_updating_inventory_rolls_back_the_inbox_row(self):
        receive(self.con, {"id": "e0", "sku": "apple", "qty": 1})
        self.force_failure("inventory", "UPDATE")
        self.assert_fails_and_changes_nothing({"id": "e1", "sku": "apple", "qty": 3})

    def test_failure_logging_a_duplicate_or_conflict_writes_no_row(self):
        receive(self.con, {"id": "e1", "sku": "apple", "qty": 3})
        self.force_failure("deliveries", "INSERT")
        self.assert_fails_and_changes_nothing({"id": "e1", "sku": "apple", "qty": 3})
        self.assert_fails_and_changes_nothing({"id": "e1", "sku": "apple", "qty": 4})

    def test_connection_is_usable_after_a_failure(self):
        self.force_failure("deliveries", "INSERT")
        self.assert_fails_and_changes_nothing({"id": "e1", "sku": "apple", "qty": 3})
        self.con.execute("DROP TRIGGER temp.forced_failure")
        self.assertEqual(receive(self.con, {"id": "e1", "sku": "apple", "qty": 3}), "applied")
        self.assertEqual(self.stock(), {"apple": 3})


class InitSinkTest(TempDirTestCase):
    def test_connection_settings(self):
        con = init_sink(self.path("sink.db"))
        self.addCleanup(con.close)
        self.assertIsNone(con.isolation_level)
        self.assertEqual(con.execute("PRAGMA journal_mode").fetchone()[0], "wal")
        self.assertEqual(con.execute("PRAGMA synchronous").fetchone()[0], 2)  # FULL
        self.assertGreater(con.execute("PRAGMA busy_timeout").fetchone()[0], 0)
        self.assertEqual(con.execute("PRAGMA user_version").fetchone()[0], inbox.SCHEMA_VERSION)
        self.assertEqual(con.execute("PRAGMA application_id").fetchone()[0], inbox.APPLICATION_ID)
        tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        self.assertLessEqual({"inbox", "inventory", "deliveries"}, tables)

    def test_reopening_keeps_everything(self):
        path = self.path("sink.db")
        con = init_sink(path)
        receive(con, {"id": "e1", "sku": "apple", "qty": 3})
        before = snapshot(con)
        con.close()
        con = init_sink(path)
        self.addCleanup(con.close)
        self.assertEqual(snapshot(con), before)
        self.assertEqual(receive(con, {"id": "e1", "sku": "apple", "qty": 3}), "duplicate")

    def assert_refused_unchanged(self, path):
        with open(path, "rb") as f:
            before = f.read()
        with self.assertRaises(WrongDatabase):
            init_sink(path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_refuses_a_source_db_unchanged(self):
        path = self.path("source.db")
        con = store.init_store(path)
        store.intake(con, {"id": "o1", "sku": "apple", "qty": 3})
        con.close()
        self.assert_refused_unchanged(path)
        con = store.init_store(path)  # still a working source DB
        self.addCleanup(con.close)
        self.assertEqual(store.pending(con), [{"id": "o1", "sku": "apple", "qty": 3}])

    def test_refuses_a_garbage_file_unchanged(self):
        path = self.path("garbage.db")
        with open(path, "wb") as f:
            f.write(b"this is not a database, it is a shopping list\n" * 100)
        self.assert_refused_unchanged(path)

    def test_refuses_a_foreign_sqlite_db_unchanged(self):
        path = self.path("other.db")
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE inventory (sku TEXT, qty INTEGER)")
        con.commit()
        con.close()
        self.assert_refused_unchanged(path)


class OpenReadonlyTest(TempDirTestCase):
    def test_reads_a_sink_db_and_cannot_write(self):
        path = self.path("sink.db")
        con = init_sink(path)
        receive(con, {"id": "e1", "sku": "apple", "qty": 3})
        receive(con, {"id": "e1", "sku": "apple", "qty": 3})
        con.close()
        reader = views.open_readonly(path)
        self.addCleanup(reader.close)
        self.assertEqual(views.inventory(reader), [("apple", 3)])
        self.assertEqual(
            [(r[0], r[1], r[2]) for r in views.deliveries(reader)], [(1, "e1", "applied"), (2, "e1", "duplicate")]
        )
        with self.assertRaises(sqlite3.DatabaseError):
            reader.execute("DELETE FROM inventory")

    def test_missing_file_is_refused_and_not_created(self):
        path = self.path("missing.db")
        with self.assertRaises(WrongDatabase):
            views.open_readonly(path)
        self.assertEqual(os.listdir(self.tmp), [])

    def test_empty_source_and_garbage_files_are_refused_unchanged(self):
        empty = self.path("empty.db")
        open(empty, "wb").close()
        source = self.path("source.db")
        store.init_store(source).close()
        garbage = self.path("garbage.db")
        with open(garbage, "wb") as f:
            f.write(b"\x00garbage" * 64)
        for path in (empty, source, garbage):
            with self.subTest(path=os.path.basename(path)):
                with open(path, "rb") as f:
                    before = f.read()
                with self.assertRaises(WrongDatabase):
                    views.open_readonly(path)
                with open(path, "rb") as f:
                    self.assertEqual(f.read(), before)
