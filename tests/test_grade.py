"""grade.py passes the kit, fails readably, and refuses a Python below the floor with one line.

The mutants (one classic mistake each, which the grader must kill) are in
tests/grade_mutants.py and run from tests/test_grade_mutants_*.py; the
grader's modules have theirs in tests/test_grader_*.py: the message table in
test_grader_messages.py, the registry and the README table in
test_grader_registry.py, the command line (usage errors, signals, pipes,
directories) in test_grader_cli.py.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import unittest

from grader import __version__
from grader.registry import NAMES
from tests.all_pythons import below_floor_env
from tests.grade_mutants import GRADE, grade
from tests.support import ROOT, TempDirTestCase, children_running, posix_only, python_env, write_worker


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
        return write_worker(self.path(name), body, kit=False)

    def test_the_stub_fails_every_check_readably(self):
        status, out, err = grade("--impl", os.path.join(ROOT, "examples", "worker_stub.py"), "--json")
        self.assertEqual(status, 1)
        report = json.loads(out)
        self.assertEqual(report["passed"], 1)
        # The stub is its own work (own-work passes); every check of the contract fails.
        self.assertEqual(report["failed"], len(NAMES) - 1)
        for check in report["checks"]:
            if check["name"] == "own-work":
                self.assertEqual((check["status"], check["observed"]), ("pass", "as expected"))
                continue
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
        # Bounded here by grade()'s own timeout; how soon a hanging step ends, on the clock, is
        # tests/test_grader_contain_slow.py's (ContainedRunTest, which times every run it grades).
        status, out, err = grade("--impl", worker, "-k", "exact-ack", "-k", "crash-after-ack", "--timeout", "1", timeout=30)
        self.assertEqual(status, 1)
        self.assertRegex(out, r"FAIL exact-ack .*\n.*timed out after 1 s")
        self.assertRegex(out, r"FAIL crash-after-ack .*\n.*timed out after 1 s")
        if os.path.isdir("/proc"):
            self.assertEqual(children_running(worker), [])


def pyenv_python(version):
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    if shutil.which("pyenv"):
        result = subprocess.run(["pyenv", "root"], stdout=subprocess.PIPE, universal_newlines=True, timeout=30)
        root = result.stdout.strip() or root
    path = os.path.join(root, "versions", version, "bin", "python")
    return path if os.access(path, os.X_OK) else None


@posix_only("pyenv's interpreters below the floor (versions/*/bin/python) are POSIX builds: Windows cannot run them")
class PythonFloorTest(unittest.TestCase):
    def run_below_the_floor(self, args, message):
        """Run `args` under every interpreter below 3.8 that pyenv has: one line, `message`, exit 2, no stdout."""
        tried = 0
        for version in ("2.7.18", "3.6.15", "3.7.16"):
            python = pyenv_python(version)
            if python is None:
                continue
            tried += 1
            with self.subTest(version=version, args=args):
                result = subprocess.run([python] + args, cwd=ROOT, env=below_floor_env(python_env()), timeout=60,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
                self.assertEqual((result.returncode, result.stdout), (2, ""), result.stderr)
                self.assertRegex(result.stderr, r"\A%s; this is Python %s\n\Z" % (re.escape(message), re.escape(version)))
        if not tried:
            self.skipTest("no Python older than 3.8 under pyenv here")

    def test_an_old_python_gets_one_line_and_exit_2(self):
        self.run_below_the_floor([GRADE], "grade.py: needs Python 3.8 or newer")

    def test_the_other_entry_points_below_the_floor_for_real(self):
        """Issue 22: G50 names four entry points; each runs under an old interpreter, not only grade.py."""
        for args in (["tests/run.py"], ["-m", "outbox", "status"], ["-m", "sink", "show"]):
            self.run_below_the_floor(args, "outbox-kit needs Python 3.8 or newer")


if __name__ == "__main__":
    unittest.main()
