"""outbox.export.prometheus: the text format from both sides (outbox status, sink.metrics), read by a strict parser."""
import re
import unittest

from outbox.ops import attempts, operations
from outbox import init_store, intake, mark_sent
from outbox.export import prometheus
from outbox.cli.ops import render_status
from outbox.core.errors import Conflict
from sink.core import inbox
from sink import metrics, views
from tests.support import TempDirTestCase, ev, parse_prometheus


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


if __name__ == "__main__":
    unittest.main()
