"""sink.views: the sink DB read without writing: the read-only opener, the inventory and the deliveries."""
import os
import sqlite3
import unittest

from outbox.core import store
from sink import WrongDatabase, init_sink, receive, views
from tests.support import TempDirTestCase


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

    def test_status_reads_every_figure_from_one_snapshot(self):
        path = self.path("sink.db")
        writer = init_sink(path)
        self.addCleanup(writer.close)
        receive(writer, {"id": "e1", "sku": "apple", "qty": 3})
        reader = views.open_readonly(path)
        self.addCleanup(reader.close)
        statements = []

        def commit_between(sql):
            # A receipt committed after status() read the counts and before it read the inventory.
            statements.append(sql)
            if "FROM inventory" in sql:
                receive(writer, {"id": "e2", "sku": "apple", "qty": 4})

        reader.set_trace_callback(commit_between)
        figures = views.status(reader)
        reader.set_trace_callback(None)
        self.assertTrue(any("FROM inventory" in sql for sql in statements), statements)
        self.assertEqual((figures["applied"], figures["inventory"]), (1, {"apple": 3}))  # e2 in none of them
        self.assertFalse(reader.in_transaction)
        self.assertEqual(views.status(reader)["inventory"], {"apple": 7})

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


if __name__ == "__main__":
    unittest.main()
