"""outbox.batch: intake_many is one transaction for a batch, with intake's rules for every event in it."""
import sqlite3
import unittest

from outbox import Conflict, InvalidEvent, init_store, intake, intake_many, pending
from tests.support import TempDirTestCase, ev, source_rows


class IntakeManyTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.con = init_store(self.path("source.db"))
        self.addCleanup(self.con.close)

    def seqs_by_id(self):
        return dict(self.con.execute("SELECT event_id, seq FROM outbox"))

    def test_writes_every_order_and_outbox_row_and_returns_the_seqs_in_input_order(self):
        batch = [ev("z", qty=3), ev("a", sku="tea"), ev("m", qty=1000000)]
        seqs = intake_many(self.con, batch)
        self.assertEqual(len(seqs), 3)
        self.assertEqual(seqs, sorted(seqs))
        self.assertEqual(self.seqs_by_id(), {"z": seqs[0], "a": seqs[1], "m": seqs[2]})
        orders = self.con.execute("SELECT id, sku, qty FROM orders ORDER BY id").fetchall()
        self.assertEqual(orders, [("a", "tea", 1), ("m", "snack", 1000000), ("z", "snack", 3)])
        self.assertEqual(self.con.execute("SELECT count(*) FROM outbox WHERE sent = 0").fetchone()[0], 3)
        self.assertEqual(pending(self.con), batch)  # intake order, not id order
        self.assertFalse(self.con.in_transaction)

    def test_payloads_are_the_ones_intake_writes(self):
        other = init_store(self.path("other.db"))
        self.addCleanup(other.close)
        batch = [ev("a", qty=2), {"qty": 5, "sku": "tea", "id": "b"}]
        intake_many(self.con, batch)
        for event in batch:
            intake(other, event)
        payloads = "SELECT event_id, payload FROM outbox ORDER BY seq"
        self.assertEqual(self.con.execute(payloads).fetchall(), other.execute(payloads).fetchall())

    def test_seqs_continue_after_intake_and_intake_sees_the_batch(self):
        first = intake(self.con, ev("a"))
        seqs = intake_many(self.con, [ev("b"), ev("c")])
        self.assertGreater(seqs[0], first)
        self.assertGreater(seqs[1], seqs[0])
        self.assertEqual(intake(self.con, ev("c")), seqs[1])
        self.assertGreater(intake(self.con, ev("d")), seqs[1])

    def test_a_generator_is_accepted(self):
        seqs = intake_many(self.con, (ev("e%d" % i) for i in range(5)))
        self.assertEqual(len(set(seqs)), 5)
        self.assertEqual([e["id"] for e in pending(self.con)], ["e0", "e1", "e2", "e3", "e4"])

    def test_an_empty_batch_writes_nothing(self):
        self.assertEqual(intake_many(self.con, []), [])
        self.assertEqual(source_rows(self.con), ([], []))

    def test_arguments_are_not_modified(self):
        batch = [{"id": "a", "sku": "snack", "qty": 2}]
        intake_many(self.con, batch)
        self.assertEqual(batch, [{"id": "a", "sku": "snack", "qty": 2}])

    def test_invalid_event_names_its_index_and_field_and_nothing_is_written(self):
        intake(self.con, ev("old"))
        before = source_rows(self.con)
        cases = [
            ([ev("a"), ev("b"), ev("c", qty=0)], "event 2", "qty"),
            ([ev("a"), ev("b", qty=True)], "event 1", "qty"),
            ([ev("bad id")], "event 0", "id"),
            ([ev("a"), ev("b", sku="")], "event 1", "sku"),
            ([ev("a"), {"id": "b", "sku": "s"}], "event 1", "qty"),
            ([ev("a"), "not an event"], "event 1", "dict"),
        ]
        for batch, index, field in cases:
            with self.subTest(batch=batch):
                with self.assertRaises(InvalidEvent) as ctx:
                    intake_many(self.con, batch)
                self.assertIn(index, str(ctx.exception))
                self.assertIn(field, str(ctx.exception))
                self.assertEqual(source_rows(self.con), before)
                self.assertFalse(self.con.in_transaction)

    def test_identical_repeat_of_an_earlier_intake_returns_its_seq_and_writes_it_once(self):
        old = intake(self.con, ev("old", qty=4))
        before_old = source_rows(self.con)[1][0]
        seqs = intake_many(self.con, [ev("new1"), {"qty": 4, "id": "old", "sku": "snack"}, ev("new2")])
        self.assertEqual(seqs[1], old)
        self.assertGreater(seqs[0], old)
        self.assertGreater(seqs[2], seqs[0])
        self.assertEqual(source_rows(self.con)[1][0], before_old)  # the old row untouched
        self.assertEqual(self.seqs_by_id(), {"old": old, "new1": seqs[0], "new2": seqs[2]})
        self.assertEqual([e["id"] for e in pending(self.con)], ["old", "new1", "new2"])

    def test_repeating_a_whole_batch_returns_the_same_seqs_and_writes_nothing(self):
        batch = [ev("a"), ev("b"), ev("c")]
        seqs = intake_many(self.con, batch)
        before = source_rows(self.con)
        self.assertEqual(intake_many(self.con, batch), seqs)
        self.assertEqual(source_rows(self.con), before)

    def test_conflict_with_an_earlier_intake_writes_nothing_of_the_batch(self):
        intake(self.con, ev("old", qty=4))
        before = source_rows(self.con)
        with self.assertRaises(Conflict) as ctx:
            intake_many(self.con, [ev("new1"), ev("old", qty=5), ev("new2")])
        self.assertIn("'old'", str(ctx.exception))
        self.assertEqual(source_rows(self.con), before)
        self.assertFalse(self.con.in_transaction)

    def test_identical_repeat_within_the_batch_gets_the_same_seq(self):
        seqs = intake_many(self.con, [ev("a"), ev("b"), {"qty": 1, "sku": "snack", "id": "a"}])
        self.assertEqual(seqs[0], seqs[2])
        self.assertNotEqual(seqs[0], seqs[1])
        self.assertEqual(self.con.execute("SELECT count(*) FROM outbox").fetchone()[0], 2)

    def test_different_repeat_within_the_batch_is_a_conflict_and_writes_nothing(self):
        with self.assertRaises(Conflict) as ctx:
            intake_many(self.con, [ev("a"), ev("b"), ev("a", qty=2)])
        self.assertIn("'a'", str(ctx.exception))
        self.assertIn("event 2", str(ctx.exception))
        self.assertEqual(source_rows(self.con), ([], []))

    def test_a_database_failure_half_way_writes_nothing(self):
        intake(self.con, ev("old"))
        before = source_rows(self.con)
        # A real SQLite failure on the outbox insert of one event, after the order rows went in.
        self.con.execute(
            "CREATE TEMP TRIGGER fail_outbox BEFORE INSERT ON main.outbox WHEN NEW.event_id = 'b' "
            "BEGIN SELECT RAISE(ABORT, 'forced failure'); END"
        )
        self.addCleanup(self.con.execute, "DROP TRIGGER IF EXISTS temp.fail_outbox")
        for batch in ([ev("a"), ev("b"), ev("c")], [ev("old"), ev("a"), ev("b")]):
            with self.subTest(batch=batch):
                with self.assertRaises(sqlite3.IntegrityError) as ctx:
                    intake_many(self.con, batch)
                self.assertIn("forced failure", str(ctx.exception))
                self.assertFalse(self.con.in_transaction)
                self.assertEqual(source_rows(self.con), before)

    def test_seqs_are_right_after_the_top_rows_were_deleted(self):
        # A retention job may delete old sent rows, the newest included; seq
        # must still never be reused and the returned seqs must match the rows.
        seqs = intake_many(self.con, [ev("a"), ev("b"), ev("c")])
        self.con.execute("DELETE FROM outbox WHERE event_id IN ('b', 'c')")
        new = intake_many(self.con, [ev("d"), ev("e")])
        self.assertGreater(new[0], seqs[2])
        self.assertEqual(self.seqs_by_id(), {"a": seqs[0], "d": new[0], "e": new[1]})

    def test_a_large_batch_is_one_transaction(self):
        statements = []
        self.con.set_trace_callback(statements.append)
        self.addCleanup(self.con.set_trace_callback, None)
        before = self.con.total_changes
        seqs = intake_many(self.con, [ev("e%05d" % i, qty=1 + i % 9) for i in range(5000)])
        self.assertEqual(len(set(seqs)), 5000)
        self.assertEqual(self.con.total_changes - before, 10000)
        self.assertEqual(statements.count("BEGIN IMMEDIATE"), 1)
        self.assertEqual(statements.count("COMMIT"), 1)
        self.assertEqual(self.con.execute("SELECT count(*) FROM outbox").fetchone()[0], 5000)


if __name__ == "__main__":
    unittest.main()
