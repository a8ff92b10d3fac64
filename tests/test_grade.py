"""grade.py passes the kit, fails readably, and behaves as a command line should.

The mutants (one classic mistake each, which the grader must kill) are in
tests/grade_mutants.py and run from tests/test_grade_mutants_*.py; the
message table, the registry and the README table in tests/test_grade_messages.py;
the command line (usage errors, signals, pipes, directories) in tests/test_grade_cli.py.
"""
import json
import os
import subprocess
import sys
import textwrap
import time
import unittest

from tests.grade_mutants import grade
from tests.support import ROOT, TempDirTestCase, children_running, python_env

sys.path.insert(0, ROOT)
from grader import __version__  # noqa: E402
from grader.registry import NAMES  # noqa: E402


class GradeReferenceTest(unittest.TestCase):
    def test_the_kit_passes_every_check(self):
        status, out, err = grade("--json")
        report = json.loads(out)
        failed = [c for c in report["checks"] if not c["ok"]]
        self.assertEqual(failed, [], err[-2000:])
        self.assertEqual(status, 0)
        self.assertEqual([c["name"] for c in report["checks"]], list(NAMES))
        self.assertEqual(report["version"], __version__)
        phases = report["evidence"]["crash-after-ack"]
        self.assertEqual([p["outbox"] for p in phases], ["pending", "pending", "sent"])
        self.assertEqual([p["inventory"] for p in phases], [0, 7, 7])
        self.assertEqual(phases[-1]["deliveries"], ["applied", "duplicate"])
        # JSON types, not their Python spellings: true, not "True"; null where nothing was sent.
        self.assertEqual([p["ack"] for p in phases], [None, [True], [True]])
        self.assertEqual([p["order"] for p in phases], [True, True, True])
        self.assertEqual(phases[1]["phase"], "publisher #1 (exit 73)")
        self.assertEqual(phases[1]["phase_message"]["id"], "phase.publisher-exit")
        for check in report["checks"]:
            self.assertEqual(check["status"], "pass")
            self.assertIsInstance(check["expected_message"]["id"], str)

    def test_text_report_has_a_line_per_check_and_the_evidence_table(self):
        status, out, err = grade("-k", "crash-after-ack", "-k", "exact-ack")
        self.assertEqual(status, 0, out + err)
        self.assertRegex(out, r"(?m)^PASS crash-after-ack +expected: ")
        self.assertRegex(out, r"(?m)^PASS exact-ack +expected: ")
        self.assertIn("Evidence for snack-7, crash-after-ack", out)
        for row in ("order row (source)", "outbox (source)", "inbox row (sink)", "deliveries (sink)", "ACK seen (publisher)"):
            self.assertIn(row, out)
        self.assertTrue(out.rstrip().endswith("grade: 2 passed, 0 failed"), out[-200:])

    def test_version_is_the_kits_and_the_changelogs(self):
        status, out, err = grade("--version")
        self.assertEqual((status, out.strip()), (0, "grade.py %s" % __version__))
        for package in ("outbox", "sink"):
            result = subprocess.run([sys.executable, "-c", "import %s; print(%s.__version__)" % (package, package)],
                                    cwd=ROOT, env=python_env(), stdout=subprocess.PIPE, universal_newlines=True, timeout=60)
            self.assertEqual(result.stdout.strip(), __version__, package)
        with open(os.path.join(ROOT, "CHANGELOG.md"), encoding="utf-8") as f:
            changelog = f.read()
        self.assertIn("## %s" % __version__, changelog)
        for name in ("url-rule", "send-timeout", "pending-cost", "conflict-committed", "wrong-database", "durability"):
            self.assertIn("`%s`" % name, changelog)


class GradeFailureModesTest(TempDirTestCase):
    def write_worker(self, body, name="worker.py"):
        path = self.path(name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(body))
        return path

    def test_the_stub_fails_every_check_readably(self):
        status, out, err = grade("--impl", os.path.join(ROOT, "examples", "worker_stub.py"), "--json")
        self.assertEqual(status, 1)
        report = json.loads(out)
        self.assertEqual(report["passed"], 0)
        self.assertEqual(report["failed"], len(NAMES))
        for check in report["checks"]:
            self.assertEqual(check["status"], "fail")
            self.assertIn("NotImplementedError", check["observed"], check)
        self.assertNotIn("Traceback", err)

    def test_a_missing_function_is_named(self):
        worker = self.write_worker('''
            import sys, os
            sys.path.insert(0, %r)
            from outbox import init_store, intake, pending, mark_sent, send_http, validate_event
            from sink import init_sink, receive
        ''' % ROOT)
        status, out, err = grade("--impl", worker, "-k", "stop-on-first-failure", "-k", "seq-order")
        self.assertEqual(status, 1)
        self.assertRegex(out, r"FAIL stop-on-first-failure .*\n.*observed: missing function\(s\): dispatch")
        self.assertRegex(out, r"PASS seq-order")

    def test_an_exception_class_named_otherwise_gets_the_rule(self):
        worker = self.write_worker('''
            import sys
            sys.path.insert(0, %r)
            import outbox
            from outbox import init_store, intake, pending, mark_sent, dispatch, validate_event
            from sink import init_sink, receive

            class NoAnswer(Exception):
                pass

            def send_http(url, event, *, timeout=5.0):
                try:
                    return outbox.send_http(url, event, timeout=timeout)
                except outbox.DeliveryError as exc:
                    raise NoAnswer(str(exc))
        ''' % ROOT)
        status, out, err = grade("--impl", worker, "-k", "dropped-response")
        self.assertEqual(status, 1, out + err)
        self.assertIn("a failed delivery must raise DeliveryError or a subclass", out)
        self.assertIn("got NoAnswer, whose bases are Exception, BaseException, object", out)

    def test_a_hanging_implementation_is_a_timeout_not_a_hung_grader(self):
        marker = "hang-%d" % os.getpid()
        worker = self.write_worker('''
            import time
            MARKER = %r
            def init_store(path):
                time.sleep(3600)
            intake = pending = mark_sent = dispatch = send_http = init_sink = receive = validate_event = init_store
        ''' % marker)
        started = time.monotonic()
        status, out, err = grade("--impl", worker, "-k", "exact-ack", "-k", "crash-after-ack", "--timeout", "1", timeout=30)
        self.assertLess(time.monotonic() - started, 20)
        self.assertEqual(status, 1)
        self.assertRegex(out, r"FAIL exact-ack .*\n.*timed out after 1 s")
        self.assertRegex(out, r"FAIL crash-after-ack .*\n.*timed out after 1 s")
        if os.path.isdir("/proc"):
            self.assertEqual(children_running(worker), [])


if __name__ == "__main__":
    unittest.main()
