"""Issue 7: `python -m outbox evidence` at each stage of the crash-after-ACK story, against a real sink server."""
import json
import sqlite3
import subprocess
import sys
import textwrap
import unittest

from outbox import init_store, intake
from sink.server import make_server
from tests.support import ROOT, TempDirTestCase, python_env

CRASH_AFTER_ACK = textwrap.dedent("""
    import os, sys
    from outbox import dispatch, init_store, send_http
    con = init_store(sys.argv[1])
    dispatch(con, lambda event: send_http(sys.argv[2], event), after_delivery=lambda event: os._exit(73))
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


if __name__ == "__main__":
    unittest.main()
