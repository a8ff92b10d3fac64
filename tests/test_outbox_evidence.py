"""`python -m outbox evidence`: the crash-after-ACK story against a real sink server (issue 7), and the readings
in process: each says what the relay will do, and shows what the sink holds when it differs (issue 18)."""
import json
import sqlite3
import subprocess
import sys
import textwrap
import unittest

from outbox.ops import attempts, evidence, operations, relay, sinklook
from outbox import dispatch, init_store, intake
from outbox.core.errors import NoAnswer, UntrustedAck
from sink.core import inbox
from sink.server import make_server
from tests.support import ROOT, TempDirTestCase, python_env, run_relay

CRASH_AFTER_ACK = textwrap.dedent("""
    import os, sys
    from outbox import dispatch, init_store, send_http
    from outbox.ops import attempts
    con = init_store(sys.argv[1])
    dispatch(con, lambda event: send_http(sys.argv[2], event), after_delivery=lambda event: os._exit(73),
             **attempts.hooks(con))  # as the relay and the dispatch command record it
""")


def python(*args):
    return subprocess.run([sys.executable] + list(args), cwd=ROOT, env=python_env(), timeout=60,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)


class CrashAfterAckLadderTest(TempDirTestCase):
    def ladder(self, *extra):
        result = python("-m", "outbox", "evidence", "snack-7", "--db", self.source, *extra)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result

    def test_the_ladder_at_each_stage(self):
        self.source, sink_db = self.path("source.db"), self.path("sink.db")
        server = make_server(sink_db, "127.0.0.1", 0)
        server.start()
        self.addCleanup(server.stop)
        url = server.url() + "/events"
        con = init_store(self.source)
        intake(con, {"id": "snack-7", "sku": "snack", "qty": 7})
        con.close()

        stage = json.loads(self.ladder("--sink", sink_db, "--json").stdout)
        self.assertEqual(stage["order"]["qty"], 7)
        self.assertEqual((stage["outbox"]["state"], stage["outbox"]["attempts"]), ("pending", 0))
        self.assertEqual(stage["sink"], {"inbox": "absent", "payload": None, "payload_matches": None,
                                         "deliveries": {"count": 0, "outcomes": {}}})
        self.assertIn("waiting for delivery", stage["reading"])

        crashed = python("-c", CRASH_AFTER_ACK, self.source, url)
        self.assertEqual(crashed.returncode, 73, crashed.stderr)
        stage = json.loads(self.ladder("--sink", sink_db, "--json").stdout)
        self.assertEqual((stage["outbox"]["state"], stage["outbox"]["attempts"], stage["outbox"]["last_error"]),
                         ("pending", 1, None))
        self.assertEqual(stage["sink"], {"inbox": "present", "payload": '{"id":"snack-7","qty":7,"sku":"snack"}',
                                         "payload_matches": True, "deliveries": {"count": 1, "outcomes": {"applied": 1}}})
        self.assertEqual(stage["reading"], "applied at the sink, not marked sent: a re-dispatch is safe and will "
                                           "be a duplicate; do not delete")
        text = self.ladder("--sink", sink_db).stdout.splitlines()
        self.assertEqual([line.split(":")[0] for line in text],
                         ["order row (source)", "outbox row (source)", "inbox row (sink)", "deliveries (sink)",
                          "reading"])
        self.assertIn("payload matches", text[2])
        blind = self.ladder().stdout
        self.assertIn("not observed (no --sink given)", blind)
        self.assertIn("cannot tell whether the sink applied it", blind)

        redelivered = python("-m", "outbox", "dispatch", "--db", self.source, "--url", url)
        self.assertEqual(redelivered.returncode, 0, redelivered.stderr)
        stage = json.loads(self.ladder("--sink", sink_db, "--json").stdout)
        self.assertEqual((stage["outbox"]["state"], stage["outbox"]["attempts"]), ("sent", 2))
        self.assertEqual(stage["sink"]["deliveries"], {"count": 2, "outcomes": {"applied": 1, "duplicate": 1}})
        self.assertIn("delivered and applied once", stage["reading"])

        sink_status = json.loads(python("-m", "sink", "status", "--db", sink_db, "--json").stdout)
        self.assertEqual((sink_status["applied"], sink_status["duplicates"], sink_status["inventory"]),
                         (1, 1, {"snack": 7}))

    def test_a_foreign_sink_with_only_the_contract_columns(self):
        self.source, foreign = self.path("source.db"), self.path("foreign.db")
        con = init_store(self.source)
        intake(con, {"id": "snack-7", "sku": "snack", "qty": 7})
        con.close()
        con = sqlite3.connect(foreign)
        con.execute("CREATE TABLE inbox (event_id TEXT PRIMARY KEY)")
        con.execute("CREATE TABLE deliveries (event_id TEXT, outcome TEXT)")
        con.execute("INSERT INTO inbox VALUES ('snack-7')")
        con.execute("INSERT INTO deliveries VALUES ('snack-7', 'applied')")
        con.commit()
        con.close()
        stage = json.loads(self.ladder("--sink", foreign, "--json").stdout)
        self.assertEqual(stage["sink"]["inbox"], "present")
        self.assertIsNone(stage["sink"]["payload_matches"])  # this sink keeps no payload: not called a match
        self.assertIn("applied at the sink, not marked sent", stage["reading"])
        not_a_sink = python("-m", "outbox", "evidence", "snack-7", "--db", self.source, "--sink", self.source)
        self.assertEqual(not_a_sink.returncode, 1)
        self.assertIn("not a sink DB", not_a_sink.stderr)


class ReadingTest(TempDirTestCase):
    """evidence.gather in process, on real files: the reading agrees with what relay.run then does."""

    def setUp(self):
        super().setUp()
        self.source = init_store(self.path("source.db"))
        self.addCleanup(self.source.close)
        intake(self.source, {"id": "snack-7", "sku": "snack", "qty": 7})
        sink = inbox.init_sink(self.path("sink.db"))
        sink.close()
        self.sink = sinklook.open_sink_readonly(self.path("sink.db"))
        self.addCleanup(self.sink.close)

    def fail(self, error, times=1):
        for _ in range(times):
            with self.assertRaises(type(error)):
                dispatch(self.source, lambda event: (_ for _ in ()).throw(error), **attempts.hooks(self.source))

    def ladder(self, **options):
        return evidence.gather(self.source, "snack-7", self.sink, **options)

    def relay_sends(self, max_attempts):
        """Whether relay.run, started now with `max_attempts`, sends the item before it alerts or returns."""
        sent = []

        def send(event):
            sent.append(event["id"])
            raise UntrustedAck("status 409", kind="conflict")

        try:
            run_relay(self.path("source.db"), send, stop=lambda: len(sent) > 20, max_attempts=max_attempts)
        except relay.HeadStuck:
            pass
        return bool(sent)

    def test_refused_up_to_max_attempts_the_reading_and_the_relay_agree(self):
        self.fail(UntrustedAck("POST: status 409; not marking it sent", kind="conflict"), times=3)
        stuck = self.ladder(max_attempts=3)
        self.assertIn("alerts at once without sending it", stuck["reading"])
        self.assertIn("retry", stuck["reading"])
        self.assertNotIn("will be retried", stuck["reading"])
        going_on = self.ladder(max_attempts=4)["reading"]
        self.assertIn("the sink refused it 3 time(s) (last: conflict): the relay sends it again, and alerts at 4",
                      going_on)
        self.assertFalse(self.relay_sends(max_attempts=3))
        self.assertTrue(self.relay_sends(max_attempts=4))

    def test_an_outage_reads_as_retried_for_ever(self):
        self.fail(NoAnswer("POST: no complete response (refused); not marking it sent"), times=7)
        reading = self.ladder(max_attempts=3)["reading"]
        self.assertIn("did not answer its last attempt (no-answer; 7 attempt(s) so far): the relay keeps retrying",
                      reading)
        self.assertNotIn("alerts", reading)
        self.assertTrue(self.relay_sends(max_attempts=3))  # 7 transient failures do not count toward 3

    def test_a_conflicting_payload_is_shown_and_never_read_as_safe_to_re_send(self):
        con = inbox.init_sink(self.path("sink.db"))
        inbox.receive(con, {"id": "snack-7", "sku": "snack", "qty": 5})
        for _ in range(3):
            with self.assertRaises(Exception):
                inbox.receive(con, {"id": "snack-7", "sku": "snack", "qty": 7})
        con.close()
        ladder = self.ladder()
        self.assertIs(ladder["sink"]["payload_matches"], False)
        self.assertEqual(ladder["sink"]["payload"], '{"id":"snack-7","qty":5,"sku":"snack"}')
        self.assertEqual(ladder["sink"]["deliveries"], {"count": 4, "outcomes": {"applied": 1, "conflict": 3}})
        self.assertIn("409 conflict", ladder["reading"])
        self.assertNotIn("safe", ladder["reading"])
        text = evidence.lines(ladder)
        self.assertIn('payload (sink):       {"id":"snack-7","qty":5,"sku":"snack"}', text)
        self.assertIn('payload (source):     {"id":"snack-7","qty":7,"sku":"snack"}', text)
        self.assertIn("deliveries (sink):    4 (applied 1, conflict 3)", text)

    def test_the_history_shows_every_record_and_both_payloads_of_a_correction(self):
        operations.quarantine(self.source, "snack-7", "sink holds qty 5")
        operations.requeue(self.source, "snack-7", {"id": "snack-7", "sku": "snack", "qty": 5})
        operations.quarantine(self.source, "snack-7", "again")
        text = evidence.lines(self.ladder())
        history = [line for line in text if line.startswith("history (source):")]
        self.assertEqual(len(history), 2, text)
        self.assertIn('corrected from {"id":"snack-7","qty":7,"sku":"snack"} to {"id":"snack-7","qty":5,'
                      '"sku":"snack"}', history[0])
        self.assertIn("requeued on", history[0])
        self.assertIn("(again)", history[1])
        operations.requeue(self.source, "snack-7")
        self.fail(UntrustedAck("status 400", kind="rejected"))
        operations.retry(self.source, "snack-7")
        text = evidence.lines(self.ladder())
        self.assertTrue(any(line.startswith("history (source):     retried on") and "1 refused (last failure: "
                            "rejected)" in line for line in text), text)


if __name__ == "__main__":
    unittest.main()
