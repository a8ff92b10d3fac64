"""grader/quiz_relay.py: the quiz's two relay runs, on real files and a real sink on 127.0.0.1.

The outage run fails its first rounds against a port where nothing listens,
then delivers once the kit's sink is up there, with no alert; the refused run
ends in the relay's HeadStuck alert with the item still at the head. Each
figure it returns is checked against the DB files it leaves behind.
"""
import sys
import unittest

from tests.support import ROOT, TempDirTestCase, read_rows as rows

sys.path.insert(0, ROOT)
from grader import quiz_relay  # noqa: E402


class OutageTest(TempDirTestCase):
    def test_the_relay_rides_out_the_outage_and_delivers_once_the_sink_is_up(self):
        run = quiz_relay.outage(self.tmp)
        self.assertEqual((run["failures"], run["kinds"], run["sent"], run["alert"]),
                         (quiz_relay.OUTAGE_FAILURES, {"no-answer": quiz_relay.OUTAGE_FAILURES}, 1, None))
        self.assertEqual(len(run["waits"]), quiz_relay.OUTAGE_FAILURES)
        self.assertTrue(all(wait >= 0 for wait in run["waits"]), run["waits"])
        # min(cap, base * 2^(n-1)): doubling until the cap cuts the last one.
        self.assertEqual(run["bounds"], [0.02, 0.04, 0.08, 0.1])
        self.assertIn("sink unreachable since", run["lines"][0])
        self.assertIn("sink back after", run["lines"][-1])
        self.assertEqual(rows(self.path("relay-outage-source.db"), "SELECT event_id, sent FROM outbox"), [("snack-7", 1)])
        self.assertEqual(rows(self.path("relay-outage-sink.db"), "SELECT outcome FROM deliveries"), [("applied",)])


class RefusedTest(TempDirTestCase):
    def test_a_head_the_sink_refuses_ends_in_the_alert_and_stays_pending(self):
        run = quiz_relay.refused(self.tmp)
        self.assertEqual((run["refusals"], run["kind"], run["max_attempts"], run["outbox"]),
                         (quiz_relay.MAX_ATTEMPTS, "conflict", quiz_relay.MAX_ATTEMPTS, "pending"))
        self.assertTrue(run["alert"].startswith("ALERT: head item 'snack-7' (seq 1) was refused by the sink 3 time(s)"),
                        run["alert"])
        self.assertEqual(len(run["lines"]), quiz_relay.MAX_ATTEMPTS)
        self.assertEqual(rows(self.path("relay-refused-source.db"), "SELECT event_id, sent FROM outbox"), [("snack-7", 0)])
        self.assertEqual(rows(self.path("relay-refused-sink.db"), "SELECT outcome FROM deliveries"),
                         [("applied",)] + [("conflict",)] * quiz_relay.MAX_ATTEMPTS)
        self.assertEqual(rows(self.path("relay-refused-sink.db"), "SELECT qty FROM inventory"), [(7,)])


if __name__ == "__main__":
    unittest.main()
