"""Issue 7, in process: schema upgrade, attempt records, quarantine and requeue, purge, backoff, metrics text.

The relay's loop in process is tests/test_ops_relay_loop.py.
"""
import ast
import glob
import os
import random
import re
import sqlite3
import time
import unittest

from outbox import dispatch, init_store, intake, intake_many, mark_sent, pending
from outbox import attempts, backoff, operations, prometheus, retention, store
from outbox.cli_ops import render_status
from outbox.errors import Conflict, NotAcknowledged, OutboxError, UntrustedAck, WrongDatabase
from sink import inbox, metrics, views
from tests.support import ROOT, TempDirTestCase, build_v1, file_bytes, parse_prometheus


def ev(event_id, qty=1, sku="snack"):
    return {"id": event_id, "sku": sku, "qty": qty}


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


class AttemptRecordTest(TempDirTestCase):
    def test_the_attempt_is_committed_before_send_and_holds_no_lock_across_it(self):
        path = self.path("s.db")
        con = init_store(path)
        self.addCleanup(con.close)
        intake(con, ev("a"))
        seen = []

        def send(event):
            other = sqlite3.connect(path, isolation_level=None, timeout=0)
            try:
                other.execute("PRAGMA busy_timeout = 0")
                other.execute("BEGIN IMMEDIATE")  # fails at once if anyone holds the write lock
                seen.append(other.execute("SELECT attempts FROM outbox WHERE event_id = 'a'").fetchone()[0])
                other.execute("COMMIT")
            finally:
                other.close()
            return True

        self.assertEqual(dispatch(con, send, **attempts.hooks(con)), 1)
        self.assertEqual(seen, [1])
        self.assertEqual(con.execute("PRAGMA synchronous").fetchone()[0], 2)  # restored to FULL

    def test_a_failure_is_recorded_and_the_original_exception_re_raised(self):
        con = init_store(self.path("s.db"))
        self.addCleanup(con.close)
        intake(con, ev("a"))
        boom = RuntimeError("refused\nsecond line " + "x" * 600)
        for attempt in (1, 2):
            with self.assertRaises(RuntimeError) as caught:
                dispatch(con, lambda e: (_ for _ in ()).throw(boom), **attempts.hooks(con))
            self.assertIs(caught.exception, boom)
        head = operations.head(con)
        self.assertEqual(head["attempts"], 2)
        self.assertTrue(head["last_error"].startswith("RuntimeError: refused second line x"))
        self.assertLessEqual(len(head["last_error"]), 500)
        self.assertNotIn("\n", head["last_error"])
        with self.assertRaises(OutboxError):
            dispatch(con, lambda e: "ok", **attempts.hooks(con))
        self.assertIn("NotAcknowledged", operations.head(con)["last_error"])

    def test_bookkeeping_keeps_a_lower_synchronous_setting(self):
        con = init_store(self.path("s.db"))
        self.addCleanup(con.close)
        con.execute("PRAGMA synchronous = OFF")
        intake(con, ev("a"))
        attempts.record_attempt(con, "a")
        self.assertEqual(con.execute("PRAGMA synchronous").fetchone()[0], 0)


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
        self.assertAlmostEqual(figures["oldest_pending_age_s"], 3600, delta=30)
        self.assertEqual(figures["head"]["id"], "b")
        samples = parse_prometheus(render_status(figures))
        self.assertAlmostEqual(samples[("outbox_oldest_pending_age_seconds", ())], 3600, delta=30)


class BackoffTest(unittest.TestCase):
    def test_bounds_grow_exponentially_up_to_the_cap(self):
        top = lambda: 1.0 - 1e-12
        bounds = [backoff.delay(n, 0.5, 10.0, rand=top) for n in range(1, 8)]
        for got, want in zip(bounds, (0.5, 1, 2, 4, 8, 10, 10)):
            self.assertAlmostEqual(got, want, places=6)
        self.assertEqual(backoff.delay(5, 0.5, 10.0, rand=lambda: 0.0), 0.0)
        self.assertEqual(backoff.delay(10 ** 6, 0.5, 10.0, rand=lambda: 0.5), 5.0)  # no overflow

    def test_full_jitter_spreads_over_the_whole_range(self):
        source = random.Random(7)
        draws = [backoff.delay(4, 1.0, 100.0, rand=source.random) for _ in range(2000)]
        self.assertTrue(all(0 <= d < 8.0 for d in draws))
        self.assertLess(min(draws), 0.4)
        self.assertGreater(max(draws), 7.6)
        self.assertAlmostEqual(sum(draws) / len(draws), 4.0, delta=0.4)

    def test_bad_arguments(self):
        for args in ((0, 1, 1), (True, 1, 1), (1, -1, 1), (1, 1, float("inf")), (1.5, 1, 1)):
            with self.assertRaises(ValueError):
                backoff.delay(*args)


class MetricsTextTest(TempDirTestCase):
    def test_every_figure_is_a_gauge(self):
        """Each can go down as well as up: typed as a counter, rate() and alerts on it would lie."""
        con = init_store(self.path("s.db"))
        self.addCleanup(con.close)
        text = render_status(operations.figures(con))
        types = re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)
        self.assertGreaterEqual(len(types), 7)
        self.assertEqual({kind for _, kind in types}, {"gauge"})
        self.assertIn(("outbox_head_permanent_failures", "gauge"), types)

    def test_outbox_status_parses_as_the_text_format(self):
        con = init_store(self.path("s.db"))
        self.addCleanup(con.close)
        intake(con, ev("a"))
        intake(con, ev("b"))
        mark_sent(con, "a")
        attempts.record_attempt(con, "b")
        samples = parse_prometheus(render_status(operations.figures(con)))
        self.assertEqual(samples[("outbox_pending", ())], 1)
        self.assertEqual(samples[("outbox_sent", ())], 1)
        self.assertEqual(samples[("outbox_quarantined", ())], 0)
        self.assertEqual(samples[("outbox_head_attempts", ())], 1)
        self.assertGreaterEqual(samples[("outbox_oldest_pending_age_seconds", ())], 0)

    def test_sink_metrics_parse_as_the_text_format(self):
        con = inbox.init_sink(self.path("k.db"))
        self.addCleanup(con.close)
        inbox.receive(con, ev("a", sku="snack:v1.x"))
        inbox.receive(con, ev("a", sku="snack:v1.x"))
        with self.assertRaises(Conflict):
            inbox.receive(con, ev("a", qty=2, sku="snack:v1.x"))
        status = views.status(con)
        self.assertEqual((status["applied"], status["duplicates"], status["conflicts"]), (1, 1, 1))
        self.assertRegex(status["last_delivery_at"], r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\Z")
        samples = parse_prometheus(metrics.render(status))
        for outcome, want in (("applied", 1), ("duplicate", 1), ("conflict", 1)):
            self.assertEqual(samples[("sink_deliveries_total", (("outcome", outcome),))], want)
        self.assertEqual(samples[("sink_inventory_qty", (("sku", "snack:v1.x"),))], 1)
        escaped = "\n".join(prometheus.family("x_total", "counter", "h", [({"k": 'a"b\\c\nd'}, 1)])) + "\n"
        self.assertEqual(parse_prometheus(escaped), {("x_total", (("k", 'a\\"b\\\\c\\nd'),)): 1})

    def test_the_sink_s_last_delivery_is_its_latest(self):
        con = inbox.init_sink(self.path("k.db"))
        self.addCleanup(con.close)
        inbox.receive(con, ev("a"))
        inbox.receive(con, ev("b"))
        inbox.receive(con, ev("a"))
        times = (1000.0, 3000.0, 2000.0)  # arrival order is not time order: the latest is the second
        for seq, at in zip((1, 2, 3), times):
            con.execute("UPDATE deliveries SET received_at = ? WHERE seq = ?", (at, seq))
        status = views.status(con)
        self.assertEqual(status["last_delivery_unix"], 3000.0)
        self.assertEqual(status["last_delivery_at"], "1970-01-01T00:50:00Z")
        samples = parse_prometheus(metrics.render(status))
        self.assertEqual(samples[("sink_last_delivery_timestamp_seconds", ())], 3000.0)
        text = metrics.render(status)
        self.assertIn("# TYPE sink_last_delivery_timestamp_seconds gauge", text)
        self.assertIn("# TYPE sink_deliveries_total counter", text)

    def test_an_empty_sink(self):
        con = inbox.init_sink(self.path("k.db"))
        self.addCleanup(con.close)
        status = views.status(con)
        self.assertEqual(status["last_delivery_at"], None)
        self.assertEqual(status["inventory"], {})
        parse_prometheus(metrics.render(status))

    def test_the_parser_rejects_broken_text(self):
        for text in ("outbox_pending 1\n", "# HELP a x\n# TYPE a gauge\na 1 2 3\n", "# HELP a x\n# TYPE a gauge\na 1",
                     "# HELP 1a x\n# TYPE 1a gauge\n1a 1\n"):
            with self.assertRaises(AssertionError):
                parse_prometheus(text)
        with self.assertRaises(ValueError):
            prometheus.family("bad-name", "gauge", "x", [])


class ArchitectureTest(unittest.TestCase):
    def test_the_outbox_package_never_imports_sink(self):
        for path in glob.glob(os.path.join(ROOT, "outbox", "*.py")):
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module or ""]
                for name in names:
                    self.assertNotEqual(name.split(".")[0], "sink", path)


if __name__ == "__main__":
    unittest.main()
