"""outbox.export.nagios: `python -m outbox status --check` judges the figures the Nagios/Icinga plugin way (real processes)."""
import os
import sqlite3
import unittest

from outbox import init_store, intake
from tests.support import LoopbackServer, TempDirTestCase, reply, run_cli


def outbox(*args):
    return run_cli("outbox", *args)


class CheckTest(TempDirTestCase):
    """status --check, the Nagios/Icinga plugin convention: one line, perfdata after |, exit 0/1/2/3."""

    def setUp(self):
        super().setUp()
        self.db = self.path("source.db")
        con = init_store(self.db)
        for event_id in ("a", "b", "c"):
            intake(con, {"id": event_id, "sku": "s", "qty": 1})
        con.close()

    def check(self, *extra):
        result = outbox("status", "--db", self.db, "--check", *extra)
        self.assertEqual(result.stderr, "")
        self.assertEqual(len(result.stdout.splitlines()), 1, result.stdout)
        summary, _, perfdata = result.stdout.strip().partition(" | ")
        return result.returncode, summary, dict(item.split("=", 1) for item in perfdata.split(" "))

    def age(self, event_id, seconds):
        con = sqlite3.connect(self.db)
        try:
            con.execute("UPDATE outbox SET created_at = created_at - ? WHERE event_id = ?", (seconds, event_id))
            con.commit()
        finally:
            con.close()

    def test_ok_critical_warning_unknown(self):
        status, summary, perf = self.check()
        self.assertEqual((status, summary.split(" - ")[0]), (0, "OUTBOX OK"))
        self.assertEqual(perf["pending"], "3;;;0")
        self.assertEqual(perf["quarantined"], "0;0;;0")
        self.assertRegex(perf["oldest_pending_age"], r"\A[0-9]+\.[0-9]{3}s;;300;0\Z")

        self.age("a", 600)
        status, summary, perf = self.check()
        self.assertEqual(status, 2, summary)
        self.assertTrue(summary.startswith("OUTBOX CRITICAL - oldest pending item waits 6"), summary)
        self.assertIn("head a", summary)
        status, summary, perf = self.check("--max-age", "15m")
        self.assertEqual(status, 0, summary)
        self.assertTrue(perf["oldest_pending_age"].endswith(";;900;0"), perf)

        self.assertEqual(outbox("quarantine", "a", "--db", self.db, "--reason", "held").returncode, 0)
        status, summary, perf = self.check()
        self.assertEqual(status, 1, summary)
        self.assertIn("1 quarantined (more than 0)", summary)
        self.assertEqual(self.check("--max-quarantined", "1")[0], 0)
        self.age("b", 600)
        self.assertEqual(self.check()[0], 2)  # CRITICAL outranks WARNING

        missing = outbox("status", "--db", self.path("missing.db"), "--check")
        self.assertEqual(missing.returncode, 3)
        self.assertTrue(missing.stdout.startswith("OUTBOX UNKNOWN - "), missing.stdout)
        self.assertFalse(os.path.exists(self.path("missing.db")))

    def test_a_head_the_sink_refuses_is_a_warning(self):
        with LoopbackServer(lambda handler, body: reply(handler, 409, '{"error": "conflict"}')) as sink:
            self.assertEqual(outbox("dispatch", "--db", self.db, "--url", sink.url()).returncode, 1)
        status, summary, perf = self.check()
        self.assertEqual(status, 1, summary)
        self.assertIn("the sink refused head a 1 time(s) (conflict)", summary)
        self.assertEqual(perf["head_refused"], "1;;;0")


if __name__ == "__main__":
    unittest.main()
