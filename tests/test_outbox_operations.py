"""outbox.ops.operations, in process: quarantine and requeue, retry, purge, the history kept apart, the figures.

The command line over the same functions is tests/test_outbox_cli_ops.py.
"""
import time
import unittest

from outbox.ops import attempts, operations, retention
from outbox import dispatch, init_store, intake, intake_many, mark_sent, pending
from outbox.cli.ops import render_status
from outbox.core.errors import Conflict, NotAcknowledged, OutboxError, UntrustedAck
from tests.support import TempDirTestCase, ev, parse_prometheus


class QuarantineTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.con = init_store(self.path("s.db"))
        self.addCleanup(self.con.close)
        for event_id in ("a", "b", "c", "d"):
            intake(self.con, ev(event_id))

    def test_quarantine_leaves_the_line_records_overtakers_and_requeue_goes_to_the_tail(self):
        con = self.con
        operations.quarantine(con, "a", "sink refuses it")
        self.assertEqual([e["id"] for e in pending(con)], ["b", "c", "d"])
        self.assertEqual(con.execute("SELECT sent FROM outbox WHERE event_id = 'a'").fetchone()[0], 0)
        self.assertEqual(dispatch(con, lambda e: True, 2), 2)
        figures = operations.figures(con)
        self.assertEqual((figures["pending"], figures["sent"], figures["quarantined"]), (1, 2, 1))
        new_seq = operations.requeue(con, "a", ev("a", qty=3))
        self.assertEqual(new_seq, 5)
        self.assertEqual(intake(con, ev("e")), 6)  # the counter moved with it: no seq is ever reused
        self.assertEqual([e["id"] for e in pending(con)], ["d", "a", "e"])
        self.assertEqual(pending(con)[1], ev("a", qty=3))
        self.assertEqual(con.execute("SELECT qty FROM orders WHERE id = 'a'").fetchone()[0], 3)
        _, row, _ = operations.observe(con, "a")
        self.assertEqual(row["quarantine"]["seq"], 1)
        self.assertEqual(row["quarantine"]["new_seq"], 5)
        self.assertEqual(row["quarantine"]["overtaken_by"], [2, 3])
        self.assertEqual(row["quarantine"]["reason"], "sink refuses it")
        self.assertEqual(row["attempts"], 0)

    def test_refusals_change_nothing(self):
        con = self.con
        mark_sent(con, "b")
        operations.quarantine(con, "c", "x")
        snapshot = lambda: (con.execute("SELECT * FROM outbox ORDER BY seq").fetchall(),
                            con.execute("SELECT * FROM orders ORDER BY id").fetchall(),
                            con.execute("SELECT * FROM quarantines").fetchall())
        before = snapshot()
        for call in (lambda: operations.quarantine(con, "b", "sent"), lambda: operations.quarantine(con, "nope", "x"),
                     lambda: operations.quarantine(con, "c", "again"), lambda: operations.requeue(con, "b"),
                     lambda: operations.requeue(con, "nope"), lambda: operations.requeue(con, "a"),
                     lambda: operations.requeue(con, "c", ev("other")), lambda: operations.requeue(con, "c", ev("c", qty=0)),
                     lambda: operations.quarantine(con, "a", ""), lambda: operations.quarantine(con, "a", "two\nlines")):
            with self.assertRaises((OutboxError, ValueError)):
                call()
        self.assertEqual(snapshot(), before)

    def test_purge_removes_only_old_sent_rows(self):
        con = self.con
        mark_sent(con, "a")
        mark_sent(con, "b")
        operations.quarantine(con, "c", "x")
        self.assertEqual(retention.purge(con, 3600), 0)
        self.assertEqual(retention.purge(con, 0, batch=1), 2)
        self.assertEqual(con.execute("SELECT event_id FROM outbox ORDER BY seq").fetchall(), [("c",), ("d",)])
        self.assertEqual(con.execute("SELECT count(*) FROM orders").fetchone()[0], 4)

    def test_an_id_whose_outbox_row_was_purged_cannot_be_taken_in_again(self):
        con = self.con
        mark_sent(con, "a")
        self.assertEqual(retention.purge(con, 0), 1)
        rows = lambda: (con.execute("SELECT * FROM orders ORDER BY id").fetchall(),
                        con.execute("SELECT * FROM outbox ORDER BY seq").fetchall())
        before = rows()
        for call in (lambda: intake(con, ev("a")), lambda: intake_many(con, [ev("new-1"), ev("a")])):
            with self.assertRaises(Conflict) as caught:
                call()
            self.assertIn("purged", str(caught.exception))
            self.assertEqual(rows(), before)  # nothing written, new-1 included
        self.assertFalse(con.in_transaction)

    def test_durations(self):
        self.assertEqual([retention.parse_duration(t) for t in ("0s", "30s", "15m", "12h", "7d")],
                         [0, 30, 900, 43200, 604800])
        for bad in ("", "7", "1w", "-1s", "1.5h", " 1s", "1s ", "1S", None):
            with self.assertRaises(ValueError) as caught:
                retention.parse_duration(bad)
            self.assertIn("30s, 15m, 12h, 7d", str(caught.exception))
            self.assertNotIn("0s means", str(caught.exception))  # true of purge alone, which says so itself
        # Over ten years is refused, naming the bound, never cut down; 5000 digits are never made an int.
        self.assertEqual(retention.parse_duration("3650d"), retention.MAX_DURATION_S)
        for big in ("3651d", "315360001s", "1234567890s", "9" * 5000 + "s"):
            with self.assertRaises(ValueError) as caught:
                retention.parse_duration(big)
            self.assertIn("at most 3650d, got '" + big[:10], str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            retention.parse_duration("7w", retention.PURGE_RULE)
        self.assertIn("0s means every sent row, got '7w'", str(caught.exception))


class HistoryTest(TempDirTestCase):
    """The operator's records: every quarantine and retry of an id, kept apart from the purgeable outbox rows."""

    def setUp(self):
        super().setUp()
        self.con = init_store(self.path("s.db"))
        self.addCleanup(self.con.close)
        for event_id in ("a", "b", "c", "d", "e"):
            intake(self.con, ev(event_id))

    def history(self, event_id):
        return operations.observe(self.con, event_id)[2]

    def test_every_quarantine_of_an_id_is_kept_with_its_own_overtakers(self):
        con = self.con
        operations.quarantine(con, "a", "first")
        self.assertTrue(mark_sent(con, "b"))
        operations.requeue(con, "a", ev("a", qty=4))  # a goes to seq 6
        self.assertTrue(mark_sent(con, "c"))  # after the requeue: no longer an overtaker of the first record
        operations.quarantine(con, "a", "second")
        self.assertTrue(mark_sent(con, "d"))  # seq 4 < 6: not an overtaker of the second either
        intake(con, ev("f"))
        self.assertTrue(mark_sent(con, "f"))  # seq 7 > 6: overtakes the second
        records = self.history("a")["quarantines"]
        self.assertEqual([(r["reason"], r["seq"], r["new_seq"], r["overtaken_by"]) for r in records],
                         [("first", 1, 6, [2]), ("second", 6, None, [7])])
        self.assertEqual(records[0]["original_payload"], '{"id":"a","qty":1,"sku":"snack"}')
        self.assertEqual(records[0]["corrected_payload"], '{"id":"a","qty":4,"sku":"snack"}')
        _, row, _ = operations.observe(con, "a")
        self.assertEqual(row["quarantine"]["reason"], "second")  # the latest, as before

    def test_a_requeued_item_starts_with_no_refusals_and_the_record_keeps_them(self):
        con = self.con
        refusal = UntrustedAck("POST: status 409; not marking it sent", kind="conflict")
        for _ in range(2):
            with self.assertRaises(UntrustedAck):
                dispatch(con, lambda event: (_ for _ in ()).throw(refusal), **attempts.hooks(con))
        self.assertEqual(operations.head(con)["permanent_failures"], 2)
        operations.quarantine(con, "a", "refused")
        operations.requeue(con, "a")
        _, row, history = operations.observe(con, "a")
        self.assertEqual((row["attempts"], row["permanent_failures"], row["last_error"], row["last_error_kind"]),
                         (0, 0, None, None))
        self.assertEqual(history["quarantines"][0]["attempts"], 2)

    def test_a_requeue_without_a_correction_records_no_payloads(self):
        operations.quarantine(self.con, "a", "x")
        operations.requeue(self.con, "a")
        record = self.history("a")["quarantines"][0]
        self.assertEqual((record["original_payload"], record["corrected_payload"]), (None, None))

    def test_purge_never_deletes_the_history(self):
        con = self.con
        operations.quarantine(con, "a", "held")
        attempts.record_failure(con, "b", NotAcknowledged("no"))
        operations.retry(con, "b")
        dispatch(con, lambda event: True)  # b, c, d, e overtake a
        operations.requeue(con, "a", ev("a", qty=2))
        dispatch(con, lambda event: True)
        self.assertEqual(retention.purge(con, 0), 5)
        self.assertEqual(con.execute("SELECT count(*) FROM outbox").fetchone()[0], 0)
        order, row, history = operations.observe(con, "a")
        self.assertIsNone(row)
        self.assertEqual(order["qty"], 2)
        self.assertEqual(len(history["quarantines"]), 1)
        self.assertEqual(history["quarantines"][0]["overtaken_by"], [2, 3, 4, 5])
        self.assertEqual(len(operations.observe(con, "b")[2]["retries"]), 1)

    def test_the_overtakers_of_an_open_quarantine_outlive_a_purge_and_end_at_its_requeue(self):
        con = self.con
        overtakers = lambda: self.history("a")["quarantines"][0]["overtaken_by"]
        operations.quarantine(con, "a", "held")
        self.assertEqual(dispatch(con, lambda event: True), 4)  # b, c, d, e overtake a
        self.assertEqual(overtakers(), [2, 3, 4, 5])
        self.assertEqual(retention.purge(con, 0), 4)
        self.assertEqual(overtakers(), [2, 3, 4, 5])  # the purge kept what it deleted
        intake(con, ev("f"))
        self.assertTrue(mark_sent(con, "f"))
        self.assertEqual(overtakers(), [2, 3, 4, 5, 6])
        self.assertEqual(operations.requeue(con, "a"), 7)
        intake(con, ev("g"))
        self.assertEqual(dispatch(con, lambda event: True), 2)  # a, then g: after the requeue, no overtaker
        self.assertEqual(retention.purge(con, 0), 3)
        self.assertEqual(overtakers(), [2, 3, 4, 5, 6])

    def test_retry_resets_the_attempt_record_in_place_and_keeps_it(self):
        con = self.con
        for _ in range(3):
            with self.assertRaises(NotAcknowledged):
                dispatch(con, lambda event: False, **attempts.hooks(con))
        reset = operations.retry(con, "a")
        self.assertEqual(reset, {"attempts": 3, "permanent_failures": 3, "last_error_kind": "not-acknowledged",
                                 "last_error": reset["last_error"]})
        self.assertIn("NotAcknowledged", reset["last_error"])
        head = operations.head(con)
        self.assertEqual((head["id"], head["seq"], head["attempts"], head["permanent_failures"], head["last_error"],
                          head["last_error_kind"]), ("a", 1, 0, 0, None, None))
        record = self.history("a")["retries"][0]
        self.assertEqual((record["seq"], record["attempts"], record["permanent_failures"], record["last_error_kind"]),
                         (1, 3, 3, "not-acknowledged"))
        self.assertEqual([e["id"] for e in pending(con)], ["a", "b", "c", "d", "e"])  # no reordering

    def test_a_retried_head_says_so_until_it_is_delivered(self):
        # Issue 29: retry clears the refusals the alert read; `retried` keeps the incident open until a delivery.
        con = self.con
        self.assertEqual(operations.head(con)["retried"], 0)
        for times in (1, 2):
            with self.assertRaises(NotAcknowledged):
                dispatch(con, lambda event: False, **attempts.hooks(con))
            operations.retry(con, "a")
            self.assertEqual((operations.head(con)["id"], operations.head(con)["retried"]), ("a", times))
        self.assertTrue(mark_sent(con, "a"))
        self.assertEqual((operations.head(con)["id"], operations.head(con)["retried"]), ("b", 0))
        with self.assertRaises(NotAcknowledged):
            dispatch(con, lambda event: False, **attempts.hooks(con))
        operations.retry(con, "b")
        operations.quarantine(con, "b", "bad sku")
        operations.requeue(con, "b")  # back at the tail, in a new place: its retries were for the old one
        self.assertEqual([(item["id"], item["retried"]) for item in [operations.head(con)]], [("c", 0)])
        for event_id in ("c", "d", "e"):
            self.assertTrue(mark_sent(con, event_id))
        self.assertEqual((operations.head(con)["id"], operations.head(con)["retried"]), ("b", 0))

    def test_retry_of_an_item_last_refused_as_a_conflict_needs_force(self):
        con = self.con

        def conflicting(event):
            raise UntrustedAck("POST for %r: status 409; not marking it sent" % event["id"], kind="conflict")

        with self.assertRaises(UntrustedAck):
            dispatch(con, conflicting, **attempts.hooks(con))
        before = (con.execute("SELECT * FROM outbox ORDER BY seq").fetchall(),
                  con.execute("SELECT count(*) FROM retries").fetchone()[0])
        with self.assertRaises(OutboxError) as caught:
            operations.retry(con, "a")
        for words in ("'a' was last refused as a conflict", "requeue", "--force"):
            self.assertIn(words, str(caught.exception))
        self.assertEqual((con.execute("SELECT * FROM outbox ORDER BY seq").fetchall(),
                          con.execute("SELECT count(*) FROM retries").fetchone()[0]), before)
        reset = operations.retry(con, "a", force=True)
        self.assertEqual((reset["attempts"], reset["permanent_failures"], reset["last_error_kind"]), (1, 1, "conflict"))
        self.assertEqual(operations.head(con)["last_error_kind"], None)

    def test_retry_refuses_a_sent_unknown_or_quarantined_id_and_changes_nothing(self):
        con = self.con
        mark_sent(con, "b")
        operations.quarantine(con, "c", "held")
        before = (con.execute("SELECT * FROM outbox ORDER BY seq").fetchall(),
                  con.execute("SELECT count(*) FROM retries").fetchone()[0])
        for event_id, words in (("b", "it is sent"), ("nope", "no outbox row"), ("c", "requeue")):
            with self.assertRaises(OutboxError) as caught:
                operations.retry(con, event_id)
            self.assertIn(words, str(caught.exception))
        self.assertEqual((con.execute("SELECT * FROM outbox ORDER BY seq").fetchall(),
                          con.execute("SELECT count(*) FROM retries").fetchone()[0]), before)

    def test_quarantined_lists_every_item_out_of_line_in_seq_order(self):
        con = self.con
        operations.quarantine(con, "d", "fourth")
        attempts.record_failure(con, "b", NotAcknowledged("no"))
        operations.quarantine(con, "b", "second")
        mark_sent(con, "a")
        items = operations.quarantined(con)
        self.assertEqual([(i["id"], i["seq"], i["reason"], i["permanent_failures"], i["last_error_kind"])
                          for i in items], [("b", 2, "second", 1, "not-acknowledged"), ("d", 4, "fourth", 0, None)])
        self.assertTrue(all(i["quarantined_at"] <= time.time() for i in items))
        operations.requeue(con, "b")
        self.assertEqual([i["id"] for i in operations.quarantined(con)], ["d"])


class FiguresTest(TempDirTestCase):
    def test_the_oldest_pending_age_is_the_oldest_item_s(self):
        con = init_store(self.path("s.db"))
        self.addCleanup(con.close)
        for event_id in ("a", "b", "c"):
            intake(con, ev(event_id))
        now = time.time()
        # Taken in an hour, a minute and a second ago; the oldest (the head) is sent.
        for event_id, age in (("a", 7200), ("b", 3600), ("c", 60)):
            con.execute("UPDATE outbox SET created_at = ? WHERE event_id = ?", (now - age, event_id))
        mark_sent(con, "a")
        figures = operations.figures(con)
        # b's age when figures ran: an hour plus the time this test has taken since `now`, rounded to 1 ms.
        self.assertTrue(3600 - 0.001 <= figures["oldest_pending_age_s"] <= 3600 + (time.time() - now) + 0.001,
                        figures["oldest_pending_age_s"])
        self.assertEqual(figures["head"]["id"], "b")
        samples = parse_prometheus(render_status(figures))
        self.assertEqual(samples[("outbox_oldest_pending_age_seconds", ())], figures["oldest_pending_age_s"])


if __name__ == "__main__":
    unittest.main()
