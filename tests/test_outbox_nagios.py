"""outbox.export.nagios: `python -m outbox status --check` judges the figures the Nagios/Icinga plugin way (real processes)."""
import os
import sqlite3
import subprocess
import unittest

from outbox import __version__, init_store, intake
from tests.support import DEADLINE, PYTHON, ROOT, LoopbackServer, TempDirTestCase, echo_ack, python_env, reply, run_cli


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
        self.assertEqual(perf["head_refused"], "1;0;;0")  # its WARNING threshold is in the warn field

    def test_a_retried_head_stays_a_warning_until_it_is_delivered(self):
        # Issue 29: retry sets the refusals back to 0; the incident is over only once the head is delivered.
        with LoopbackServer(lambda handler, body: reply(handler, 409, '{"error": "conflict"}')) as sink:
            self.assertEqual(outbox("dispatch", "--db", self.db, "--url", sink.url()).returncode, 1)
        self.assertEqual(outbox("retry", "a", "--db", self.db, "--force").returncode, 0)
        status, summary, perf = self.check()
        self.assertEqual(status, 1, summary)
        self.assertIn("head a was retried by hand 1 time(s) and is not delivered yet", summary)
        self.assertEqual((perf["head_refused"], perf["head_retried"]), ("0;0;;0", "1;0;;0"))
        with LoopbackServer(echo_ack) as sink:
            self.assertEqual(outbox("dispatch", "--db", self.db, "--url", sink.url()).returncode, 0)
        status, summary, perf = self.check()
        self.assertEqual(status, 0, summary)
        self.assertEqual(perf["head_retried"], "0;0;;0")

    def test_the_plugin_guidelines_short_flags_are_the_long_ones(self):
        self.age("b", 600)
        self.assertEqual(self.check("-c", "15m")[0], self.check("--max-age", "15m")[0])
        self.assertEqual(self.check("-c", "15m")[0], 0)
        self.assertEqual(self.check("-c", "5m")[0], 2)
        self.assertEqual(self.check("-t", "5")[0], 2)

    def test_bad_arguments_are_unknown_with_one_line_on_stdout(self):
        for extra in (("-w", "x"), ("--max-age", "forever"), ("--bogus",), ("-t", "0")):
            with self.subTest(extra=extra):
                result = outbox("status", "--db", self.db, "--check", *extra)
                self.assertEqual(result.returncode, 3, result.stdout + result.stderr)
                self.assertEqual(len(result.stdout.splitlines()), 1, result.stdout)
                self.assertTrue(result.stdout.startswith("OUTBOX UNKNOWN - "), result.stdout)
                self.assertEqual(result.stderr, "")
        bad = outbox("status", "--db", self.db, "-w", "1")  # without --check: a usage error as before
        self.assertEqual(bad.returncode, 2)

    def test_version_and_help_exit_0(self):
        for flag in ("-V", "--version"):
            result = outbox("status", "--db", self.db, "--check", flag)
            self.assertEqual((result.returncode, result.stdout.strip()), (0, "outbox-kit %s" % __version__))
        self.assertEqual(outbox("status", "--check", "--help").returncode, 0)

    def test_a_check_that_cannot_finish_in_its_timeout_is_unknown(self):
        # The figures' read stands still (a hung disk, say): -t ends the plugin with UNKNOWN.
        program = ("import sys, time\n"
                   "from outbox.cli import main as cli\n"
                   "from outbox.ops import operations\n"
                   "operations.figures = lambda con: time.sleep(60)\n"
                   "sys.exit(cli.main(sys.argv[1:]))\n")
        result = subprocess.run([PYTHON, "-c", program, "status", "--db", self.db, "--check", "-t", "0.5"],
                                cwd=ROOT, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                universal_newlines=True, timeout=DEADLINE * 3)
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertEqual(result.stdout, "OUTBOX UNKNOWN - no figures within the 0.5s timeout (-t)\n")


if __name__ == "__main__":
    unittest.main()
