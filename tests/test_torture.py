"""A fast slice of `make torture`, and proof that its invariants can fail.

The slice kills real processes at a few points of the matrix (both kill
modes, publisher, sink and intake) and runs a short soak. The rest proves
the harness is not a rubber stamp: a point that is never reached and
tampered DB files are violations (mutants of the kit: test_torture_mutants).
"""
import functools
import sqlite3

from outbox import init_store, intake, mark_sent
from sink import init_sink, receive
from tests.support import TempDirTestCase, run_two_at_a_time
from tests.torture import invariants, matrix, points, soak

# (point, mode, index of the target event, deliveries of the target after recovery)
SLICE = (
    ("after-ack", points.EXIT, 1, 2),
    ("sink-committed", points.KILL, 1, 2),
    ("before-commit", points.KILL, 1, 1),
    ("after-commit", points.EXIT, 3, 2),
    ("between-inserts", points.KILL, 1, 0),
)


class MatrixSliceTest(TempDirTestCase):
    def test_each_point_of_the_slice_holds_every_invariant_after_recovery(self):
        results = run_two_at_a_time(
            functools.partial(matrix.run_case, points.BY_KEY[key], mode, index, self.path("%s-%s" % (key, mode)))
            for key, mode, index, _ in SLICE
        )
        for (key, mode, index, target_deliveries), result in zip(SLICE, results):
            with self.subTest(point=key, mode=mode):
                self.assertEqual(result.violations, [])
                self.assertIsNone(result.skipped)
                self.assertEqual(result.hit_deliveries, target_deliveries)
                # One delivery for every other event: the crash hit only its target.
                self.assertEqual(result.deliveries, len(points.EVENTS) - 1 + target_deliveries)

    def test_a_point_that_is_never_reached_is_a_violation(self):
        result = matrix.run_case(points.BY_KEY["in-send"], points.EXIT, len(points.EVENTS), self.path("never"))
        self.assertEqual(len(result.violations), 1, result.violations)
        self.assertIn("ended before '@at'", result.violations[0])

    def test_the_soak_kills_alternate_and_every_invariant_holds(self):
        logged = []
        result = soak.run_soak(7, self.path("soak"), events=40, kills=2, log=logged.append)
        self.assertEqual(result.violations, [])
        self.assertEqual(result.kills, 2)
        self.assertEqual([line.split(": ")[1].split(",")[0] for line in logged], ["publisher", "sink"])
        self.assertGreaterEqual(result.deliveries, result.events)
        self.assertLessEqual(result.deliveries, result.events + 2)


class InvariantsTest(TempDirTestCase):
    """The checker on files written by the kit in this process, then tampered with by hand."""

    def setUp(self):
        super().setUp()
        self.source, self.sink = self.path("source.db"), self.path("sink.db")
        con, sink_con = init_store(self.source), init_sink(self.sink)
        try:
            for event in points.EVENTS:
                intake(con, event)
                receive(sink_con, event)
                mark_sent(con, event["id"])
        finally:
            con.close()
            sink_con.close()

    def check(self, hits=None):
        return invariants.check(self.source, self.sink, points.EVENTS, hits=hits or {}, recovered=True).violations

    def tamper(self, path, *statements):
        con = sqlite3.connect(path, isolation_level=None)
        try:
            for statement in statements:
                con.execute(statement)
        finally:
            con.close()

    def test_files_written_by_the_kit_hold_every_invariant(self):
        self.assertEqual(self.check(), [])

    def test_a_second_application_and_an_extra_delivery_are_violations(self):
        self.tamper(self.sink, "INSERT INTO deliveries (event_id, outcome, digest, received_at) "
                               "SELECT event_id, 'applied', digest, 0 FROM inbox WHERE event_id = 'ord-2'")
        violations = self.check()
        self.assertIn("ord-2 was applied 2 times, expected 1", violations)
        self.assertIn("ord-2 has 2 deliveries, at most 1 allowed (1 + crashes that hit it)", violations)
        self.assertNotIn("ord-2 has 2 deliveries, at most 2 allowed (1 + crashes that hit it)", self.check({"ord-2": 1}))

    def test_inventory_that_is_not_the_sum_of_applied_events_is_a_violation(self):
        self.tamper(self.sink, "UPDATE inventory SET qty = qty + 1 WHERE sku = 'apple'")
        self.assertTrue(any(v.startswith("inventory ") for v in self.check()))

    def test_a_lost_outbox_row_a_pending_row_and_a_sent_but_unapplied_row_are_violations(self):
        self.tamper(self.source, "DELETE FROM outbox WHERE event_id = 'ord-1'",
                    "UPDATE outbox SET sent = 0 WHERE event_id = 'ord-3'")
        self.tamper(self.sink, "DELETE FROM inbox WHERE event_id = 'ord-4'")
        violations = self.check()
        self.assertIn("ord-1 was taken in but its outbox row is gone", violations)
        self.assertIn("ord-3 is still pending after recovery", violations)
        self.assertIn("ord-4 is marked sent but the sink never applied it", violations)
