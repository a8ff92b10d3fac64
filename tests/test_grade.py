"""grade.py passes the kit, fails readably, and behaves as a command line should.

The mutants (one classic mistake each, which the grader must kill) are in
tests/grade_mutants.py and run from tests/test_grade_mutants_*.py; the
message table, the registry and the README table in tests/test_grade_messages.py.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import unittest

from tests.grade_mutants import GRADE, grade
from tests.support import ROOT, TempDirTestCase, python_env, wait_until

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

    def test_usage_errors_exit_2_with_one_line(self):
        text_file = self.write_worker("just words\n", name="notes.txt")
        broken = self.write_worker("def init_store(:\n", name="broken.py")
        cases = (
            (["-k", "no-such-check"], "unknown check"),
            (["--impl", self.path("missing.py")], "no such file"),
            (["--timeout", "0"], "--timeout must be more than 0 and at most 3600 seconds, got 0"),
            (["--impl", text_file], "is not a Python module: its name does not end in .py"),
            (["--impl", broken], "is not a Python module: line 1"),
        )
        for args, words in cases:
            with self.subTest(args=args):
                status, out, err = grade(*args)
                self.assertEqual(status, 2, args)
                self.assertIn("grade.py: error: ", err)
                self.assertIn(words, err)
                self.assertNotIn("Traceback", err)

    def test_no_writable_temporary_directory_is_a_grader_error(self):
        status, out, err = grade("-k", "exact-ack", env=python_env(TMPDIR=self.path("no-such-dir")))
        self.assertEqual(status, 3, out + err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("grader error", err)
        self.assertIn("TMPDIR", err)
        self.assertNotIn("Traceback", err)

    def test_runs_from_any_directory_and_leaves_nothing_behind(self):
        tmp, cwd = self.path("tmp"), self.path("elsewhere")
        os.mkdir(tmp)
        os.mkdir(cwd)
        status, out, err = grade("-k", "exact-ack", "-k", "conflict", cwd=cwd, env=python_env(TMPDIR=tmp))
        self.assertEqual(status, 0, out + err)
        self.assertEqual(os.listdir(tmp), [])
        self.assertEqual(os.listdir(cwd), [])

    def test_a_closed_stdout_ends_quietly_with_0(self):
        proc = subprocess.Popen([sys.executable, GRADE, "-k", "exact-ack", "-k", "seq-order"], cwd=ROOT, env=python_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        self.addCleanup(stop, proc)
        proc.stdout.readline()  # `| head -1`: read one line, then leave
        proc.stdout.close()
        err = proc.stderr.read()
        proc.stderr.close()
        self.assertEqual(proc.wait(60), 0, err)
        self.assertNotIn("Traceback", err)

    def test_dev_mode_sees_no_resource_warning(self):
        proc = subprocess.run(
            [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", GRADE, "-k", "dropped-response", "-k", "receive-atomic",
             "-k", "send-timeout", "-k", "untrusted-ack"],
            cwd=ROOT, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertNotIn("ResourceWarning", proc.stderr)
        self.assertNotIn("Exception ignored", proc.stderr)

    def start_hanging_grader(self):
        worker = self.write_worker('''
            import time
            def init_store(path):
                time.sleep(3600)
            intake = pending = mark_sent = dispatch = send_http = init_sink = receive = validate_event = init_store
        ''')
        tmp = self.path("tmp")
        os.mkdir(tmp)
        proc = subprocess.Popen([sys.executable, GRADE, "--impl", worker], cwd=ROOT, env=python_env(TMPDIR=tmp),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        self.addCleanup(stop, proc)
        wait_until(lambda: children_running(worker), what="the grader's children")
        return proc, worker, tmp

    def test_sigterm_and_sighup_stop_children_and_remove_temporary_files(self):
        if not os.path.isdir("/proc"):
            self.skipTest("finding the grader's children needs /proc")
        for signum, exit_status in ((signal.SIGTERM, 143), (signal.SIGHUP, 129)):
            with self.subTest(signal=signum):
                proc, worker, tmp = self.start_hanging_grader()
                proc.send_signal(signum)
                out, err = proc.communicate(timeout=30)
                self.assertEqual(proc.returncode, exit_status)
                self.assertIn("interrupted", err)
                self.assertNotIn("Traceback", err)
                self.assertEqual(children_running(worker), [])
                self.assertEqual(os.listdir(tmp), [])
                shutil.rmtree(tmp)

    def test_children_end_when_the_grader_is_killed(self):
        if not os.path.isdir("/proc"):
            self.skipTest("finding the grader's children needs /proc")
        proc, worker, tmp = self.start_hanging_grader()
        proc.kill()  # SIGKILL: no handler runs; the children must notice on their own
        proc.communicate(timeout=30)
        wait_until(lambda: children_running(worker) == [], what="orphaned children to exit")


def stop(proc):
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def children_running(marker):
    """PIDs of live processes whose command line mentions `marker` (Linux /proc; callers skip without it)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = f.read().decode("utf-8", "replace")
            with open("/proc/%s/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and "grade.py" in cmdline and "--role" in cmdline and state != "Z":
            found.append(int(pid))
    return found


if __name__ == "__main__":
    unittest.main()
