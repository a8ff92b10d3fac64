"""make bench's machinery: real interleaving, a baseline server that does the durable work, the table.

No timing is asserted here: speed is the bench's business, not the suite's.
"""
import contextlib
import http.client
import io
import json
import os
import sqlite3
from unittest import mock

from bench import run
from tests.support import TempDirTestCase, posix_only


class InterleaveTest(TempDirTestCase):
    def test_sides_alternate_a_b_then_b_a_after_one_warm_up_each(self):
        calls = []

        def side(name, value):
            def measure(tag):
                calls.append((name, tag))
                return value
            return measure

        ours, baseline, ratios = run.interleave(side("A", 3.0), side("B", 2.0), 5)
        self.assertEqual(calls, [
            ("A", "warm"), ("B", "warm"),
            ("A", "r0"), ("B", "r0"), ("B", "r1"), ("A", "r1"), ("A", "r2"), ("B", "r2"),
            ("B", "r3"), ("A", "r3"), ("A", "r4"), ("B", "r4"),
        ])
        self.assertEqual((ours, baseline, ratios), ([3.0] * 5, [2.0] * 5, [1.5] * 5))

    def test_paired_sides_take_turns_step_by_step_and_count_only_their_own_time(self):
        calls = []

        def step(name):
            def measure():
                calls.append(name)
                return 1
            return measure

        ours, baseline, ratios = run.paired(step("A"), step("B"), 5, seconds=0.01)
        self.assertEqual((len(ours), len(baseline), len(ratios)), (5, 5, 5))
        self.assertGreater(len(calls), 20)
        pairs = [calls[i:i + 2] for i in range(0, len(calls), 2)]
        self.assertTrue(all(sorted(pair) == ["A", "B"] for pair in pairs), calls[:20])
        self.assertIn(["A", "B"], pairs)
        self.assertIn(["B", "A"], pairs)
        self.assertTrue(all(rate > 0 for rate in ours + baseline))

    def test_a_row_reports_the_median_ratio_and_its_spread(self):
        measured = ([10.0, 30.0, 20.0], [10.0, 10.0, 10.0], [1.0, 3.0, 2.0])
        row = run.row("f", "events/s", measured, goal="ratio >= 0.9", met=True)
        self.assertEqual((row["ours"], row["baseline"], row["ratio"], row["ratio_min"], row["ratio_max"]),
                         (20.0, 10.0, 2.0, 1.0, 3.0))
        text = run.table([row, run.not_measured("g", "n/a (relay not built)")])
        self.assertIn("2.00 (1.00-3.00)", text)
        self.assertIn("g: n/a (relay not built)", text)

    def test_fewer_than_five_rounds_is_refused(self):
        stderr = io.StringIO()
        with self.assertRaises(SystemExit) as ctx, contextlib.redirect_stderr(stderr):
            run.main(["--rounds", "4", "--out", self.path("results.json")])
        self.assertEqual(ctx.exception.code, 2)
        self.assertIn("--rounds must be at least 5, got 4", stderr.getvalue())
        self.assertFalse(os.path.exists(self.path("results.json")))


@posix_only("bench/run.py's server children: it waits for their URL with select() on a pipe and stops them "
            "with SIGTERM")
class WholeRunTest(TempDirTestCase):
    def test_a_short_run_writes_every_row_and_a_broken_figure_fails_the_run_but_not_the_others(self):
        quick = {"figure": "quick", "unit": "events/s", "ours": 1.0, "baseline": 1.0, "ratio": 1.0, "ratio_min": 1.0,
                 "ratio_max": 1.0, "rounds": 5, "goal": "", "met": True, "note": ""}

        def broken(rounds):
            raise RuntimeError("grade.py is missing")

        out = self.path("results.json")
        # The slow in-process figures are stood in for; the servers, HTTP rows and end-to-end row are real.
        with mock.patch.multiple(run, intake_rows=lambda tmp, rounds: [quick], bulk_row=lambda tmp, rounds: quick,
                                 receive_rows=lambda tmp, rounds: [quick], pending_row=lambda tmp, rounds: quick,
                                 grade_row=broken, spawn_row=lambda rounds: quick, wine_row=lambda: quick,
                                 class_row=lambda tmp: quick,
                                 metrics_flood_row=lambda tmp, rounds: quick, churn_cpu_row=lambda tmp, rounds: quick,
                                 HTTP_SLICE_S=0.02, E2E_EVENTS=4, CEILING_SLICE_S=0.02,
                                 E2E_CAP_S=0.5), \
                contextlib.redirect_stdout(io.StringIO()) as stdout, contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(run.main(["--out", out]), 1)
        with open(out, encoding="utf-8") as f:
            results = json.load(f)
        self.assertEqual(results["sqlite"], sqlite3.sqlite_version)
        rows = {row["figure"]: row for row in results["rows"]}
        self.assertIn("error: RuntimeError: grade.py is missing", rows["grade"]["note"])
        for figure in ("sink over HTTP (full), 4 threads", "A/A: baseline server vs baseline server",
                       "end-to-end delivery, dispatch + send_http",
                       "sink over HTTP (full) vs the disk: 4 threads vs one durable commit per event, no HTTP",
                       "end-to-end vs the disk: dispatch + send_http vs two durable commits per event, no HTTP"):
            self.assertEqual(rows[figure]["rounds"], 5, figure)
            self.assertLessEqual(rows[figure]["ratio_min"], rows[figure]["ratio"])
            self.assertLessEqual(rows[figure]["ratio"], rows[figure]["ratio_max"])
        self.assertTrue(any(figure.startswith("memory") for figure in rows))
        self.assertIn("end-to-end delivery", stdout.getvalue())


class CeilingTest(TempDirTestCase):
    def test_the_disk_ceiling_pays_durable_commits_on_both_files(self):
        # A ceiling at synchronous=NORMAL, or off WAL, would flatter every ratio to it.
        source = run.raw_source(self.path("source.db"), "c", 20)
        self.addCleanup(source.close)
        sink = run.baseline_sink.connect(self.path("sink.db"))
        self.addCleanup(sink.close)
        for con in (source, sink):
            self.assertEqual(con.execute("PRAGMA synchronous").fetchone()[0], 2)  # FULL
            self.assertEqual(con.execute("PRAGMA journal_mode").fetchone()[0], "wal")
        delivered = []
        deliver = run.raw_batches(source, lambda event_id, payload: delivered.append(event_id)
                                  or run.raw_mark_sent(source, event_id))
        self.assertEqual((deliver(), deliver(), deliver()), (16, 4, 0))
        self.assertEqual(delivered, ["c-%06d" % i for i in range(20)])


@posix_only("bench/run.py's server children: it waits for their URL with select() on a pipe and stops them "
            "with SIGTERM")
class BaselineSinkTest(TempDirTestCase):
    def post(self, address, event):
        conn = http.client.HTTPConnection(address[0], address[1], timeout=10)
        try:
            conn.request("POST", "/events", json.dumps(event), {"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, json.loads(response.read().decode("utf-8"))
        finally:
            conn.close()

    def test_it_applies_once_logs_every_delivery_and_answers_like_the_sink(self):
        server = run.baseline_server(self.tmp, "baseline")
        try:
            self.assertGreater(run.post_once(server.address, {"id": "a", "sku": "snack", "qty": 7}), 0)
            self.assertEqual(self.post(server.address, {"id": "a", "sku": "snack", "qty": 7}),
                             (200, {"ack": True, "id": "a", "result": "duplicate"}))
            self.assertEqual(self.post(server.address, {"id": "a", "sku": "snack", "qty": 8})[0], 409)
            self.assertEqual(self.post(server.address, {"id": "b", "sku": "snack", "qty": 2})[1]["result"], "applied")
        finally:
            server.stop()
        self.assertIsNotNone(server.proc.returncode)
        con = sqlite3.connect(self.path("baseline.db"))
        self.addCleanup(con.close)
        self.assertEqual(con.execute("SELECT sku, qty FROM inventory").fetchall(), [("snack", 9)])
        self.assertEqual(con.execute("SELECT event_id FROM inbox ORDER BY event_id").fetchall(), [("a",), ("b",)])
        outcomes = [row[0] for row in con.execute("SELECT outcome FROM deliveries ORDER BY seq")]
        self.assertEqual(outcomes, ["applied", "duplicate", "conflict", "applied"])


if __name__ == "__main__":
    import unittest

    unittest.main()
