"""grade.py must pass the kit, and must be able to fail.

Mutants are copies of the kit with one classic mistake each, made at test time
from the small patches below (so there is no second code base to maintain). A
patch whose text no longer occurs exactly once fails loudly: keep the anchor
in step with the reference when it changes.
"""
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import unittest

from tests.support import ROOT, TempDirTestCase, python_env, wait_until

GRADE = os.path.join(ROOT, "grade.py")
REFERENCE = os.path.join("examples", "worker_reference.py")
TIME_BOUND = 120  # seconds any single grader run in this file may take

# (mistake, the check that must catch it, file, [(text in the reference, text in the mutant), ...])
MUTANTS = (
    ("sent=1 saved before sending", "crash-after-ack", "outbox/dispatch.py",
     [("    for selected in batch:\n", "    for selected in batch:\n        mark_sent(con, selected[\"id\"])\n")]),
    ("pending that marks rows", "seq-order", "outbox/store.py",
     [("    rows = con.execute(PENDING_SQL, (limit,)).fetchall()\n",
       "    rows = con.execute(PENDING_SQL, (limit,)).fetchall()\n"
       "    con.execute(\"UPDATE outbox SET sent = 1 WHERE seq IN (SELECT seq FROM outbox WHERE sent = 0 ORDER BY seq LIMIT ?)\", (limit,))\n")]),
    ("order by id", "seq-order", "outbox/store.py", [("ORDER BY seq LIMIT ?\"", "ORDER BY event_id LIMIT ?\"")]),
    ("order by created_at", "seq-order", "outbox/store.py",
     [("ORDER BY seq LIMIT ?\"", "ORDER BY created_at LIMIT ?\"")]),
    ("continue after a failure", "stop-on-first-failure", "outbox/dispatch.py",
     [("    marked = 0\n", "    marked = 0\n    failure = None\n"),
      ("        result = send(dict(selected))\n",
       "        try:\n            result = send(dict(selected))\n        except Exception as exc:\n"
       "            failure = failure or exc\n            continue\n"),
      ("    return marked\n", "    if failure is not None:\n        raise failure\n    return marked\n")]),
    ("error swallowed", "stop-on-first-failure", "outbox/dispatch.py",
     [("        result = send(dict(selected))\n",
       "        try:\n            result = send(dict(selected))\n        except Exception:\n            return marked\n")]),
    ("truthy ACK accepted", "exact-ack", "outbox/dispatch.py", [("        if result is not True:\n", "        if not result:\n")]),
    ("write transaction held during send", "no-lock-during-send", "outbox/dispatch.py",
     [("    marked = 0\n", "    marked = 0\n    con.execute(\"BEGIN IMMEDIATE\")\n"),
      ("        if mark_sent(con, selected[\"id\"]):\n",
       "        if con.execute(\"UPDATE outbox SET sent = 1 WHERE event_id = ? AND sent = 0\", (selected[\"id\"],)).rowcount:\n"),
      ("    return marked\n", "    con.execute(\"COMMIT\")\n    return marked\n")]),
    ("mark using the callback's dict", "callback-mutation", "outbox/dispatch.py",
     [("        result = send(dict(selected))\n", "        result = send(selected)\n")]),
    ("redirects followed", "untrusted-ack", "outbox/sender.py",
     [("urllib.request.ProxyHandler({}), _RefuseRedirects(),", "urllib.request.ProxyHandler({}), urllib.request.HTTPRedirectHandler(),")]),
    ("proxy variables honoured", "proxy-ignored", "outbox/sender.py",
     [("urllib.request.ProxyHandler({}),", "urllib.request.ProxyHandler(),")]),
    ("wrong-id ACK accepted", "untrusted-ack", "outbox/sender.py", [("    elif ack[\"id\"] != event_id:\n", "    elif False:\n")]),
    ("oversized ACK accepted", "untrusted-ack", "outbox/sender.py", [("MAX_ACK_BYTES = 4096\n", "MAX_ACK_BYTES = 1 << 20\n")]),
    ("sink without dedup", "crash-after-ack", "sink/inbox.py",
     [("        if row is None:\n", "        if True:\n"), ("\"INSERT INTO inbox ", "\"INSERT OR REPLACE INTO inbox ")]),
    ("inbox and inventory in separate commits", "receive-atomic", "sink/inbox.py",
     [("                (event[\"id\"], event_digest, payload, now),\n            )\n",
       "                (event[\"id\"], event_digest, payload, now),\n            )\n"
       "            con.execute(\"COMMIT\")\n            con.execute(\"BEGIN IMMEDIATE\")\n")]),
    ("intake in two commits", "intake-atomic", "outbox/store.py",
     [("            (event[\"id\"], event[\"sku\"], event[\"qty\"], now),\n        )\n",
       "            (event[\"id\"], event[\"sku\"], event[\"qty\"], now),\n        )\n"
       "        con.execute(\"COMMIT\")\n        con.execute(\"BEGIN IMMEDIATE\")\n")]),
    ("conflict ACKed as a duplicate", "conflict", "sink/inbox.py",
     [("            outcome = CONFLICT\n", "            outcome = DUPLICATE\n")]),
    ("a bool accepted as qty", "validate-event", "outbox/event.py",
     [("isinstance(qty, bool) or not isinstance", "not isinstance")]),
    ("intake ignores a conflicting payload", "intake-idempotent", "outbox/store.py",
     [("            if row[1] != payload:\n", "            if False:\n")]),
    ("mark_sent reports a sent row as newly marked", "mark-sent", "outbox/store.py",
     [(" WHERE event_id = ? AND sent = 0\",", " WHERE event_id = ?\",")]),
)


def grade(*args, timeout=TIME_BOUND, env=None):
    """Run grade.py; return (exit status, stdout, stderr)."""
    proc = subprocess.run(
        [sys.executable, GRADE] + list(args), cwd=ROOT, env=env or python_env(), timeout=timeout,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
    )
    return proc.returncode, proc.stdout, proc.stderr


def make_mutant(root, edits, path):
    """Copy the kit's packages and reference worker under `root`, then apply `edits` to `path`."""
    for folder in ("outbox", "sink", "examples"):
        shutil.copytree(os.path.join(ROOT, folder), os.path.join(root, folder),
                        ignore=shutil.ignore_patterns("__pycache__"))
    target = os.path.join(root, path)
    with open(target) as f:
        text = f.read()
    for old, new in edits:
        count = text.count(old)
        if count != 1:
            raise AssertionError("mutant anchor occurs %d times in %s (want 1): %r" % (count, path, old))
        text = text.replace(old, new)
    with open(target, "w") as f:
        f.write(text)
    return os.path.join(root, REFERENCE)


class GradeReferenceTest(unittest.TestCase):
    def test_the_kit_passes_every_check(self):
        status, out, err = grade("--json")
        report = json.loads(out)
        failed = [c for c in report["checks"] if not c["ok"]]
        self.assertEqual(failed, [], err[-2000:])
        self.assertEqual(status, 0)
        names = [c["name"] for c in report["checks"]]
        for name in ("crash-after-ack", "dropped-response", "untrusted-ack", "proxy-ignored", "seq-order",
                     "stop-on-first-failure", "no-lock-during-send", "callback-mutation", "exact-ack", "conflict"):
            self.assertIn(name, names)
        phases = report["evidence"]["crash-after-ack"]
        self.assertEqual([p["outbox"] for p in phases], ["pending", "pending", "sent"])
        self.assertEqual([p["inventory"] for p in phases], [0, 7, 7])
        self.assertEqual(phases[-1]["deliveries"], ["applied", "duplicate"])

    def test_text_report_has_a_line_per_check_and_the_evidence_table(self):
        status, out, err = grade("-k", "crash-after-ack", "-k", "exact-ack")
        self.assertEqual(status, 0, out + err)
        self.assertRegex(out, r"(?m)^PASS crash-after-ack +expected: ")
        self.assertRegex(out, r"(?m)^PASS exact-ack +expected: ")
        self.assertIn("Evidence for snack-7, crash-after-ack", out)
        for row in ("order row (source)", "outbox (source)", "inbox row (sink)", "deliveries (sink)", "ACK seen (publisher)"):
            self.assertIn(row, out)
        self.assertTrue(out.rstrip().endswith("grade: 2 passed, 0 failed"), out[-200:])


class MutantTest(TempDirTestCase):
    def test_every_mutant_fails_the_check_that_targets_it(self):
        def judge(index, mutant):
            mistake, check, path, edits = mutant
            worker = make_mutant(self.path("m%02d" % index), edits, path)
            status, out, err = grade("--impl", worker, "-k", check, "--json", "--timeout", "8")
            report = json.loads(out)
            return mistake, check, status, report["checks"][0]

        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            verdicts = list(pool.map(lambda pair: judge(*pair), enumerate(MUTANTS)))
        escaped = ["%s (%s: %s)" % (mistake, check, result["observed"])
                   for mistake, check, status, result in verdicts if result["ok"] or status != 1]
        self.assertEqual(escaped, [], "mutants the grader did not catch")
        for mistake, check, status, result in verdicts:
            self.assertEqual(result["name"], check)
            self.assertNotIn("grader error", result["observed"], mistake)


class GradeFailureModesTest(TempDirTestCase):
    def write_worker(self, body):
        path = self.path("worker.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(body))
        return path

    def test_the_stub_fails_every_check_readably(self):
        status, out, err = grade("--impl", os.path.join(ROOT, "examples", "worker_stub.py"), "--json")
        self.assertEqual(status, 1)
        report = json.loads(out)
        self.assertEqual(report["passed"], 0)
        self.assertEqual(report["failed"], len(grade("--list")[1].split()))
        for check in report["checks"]:
            self.assertFalse(check["ok"])
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
        self.assertRegex(out, r"FAIL exact-ack .*\n.*timed out")
        self.assertRegex(out, r"FAIL crash-after-ack .*\n.*timed out")
        self.assertEqual(children_running(worker), [])

    def test_usage_errors_exit_2_without_traceback(self):
        for args in (["-k", "no-such-check"], ["--impl", self.path("missing.py")], ["--timeout", "0"]):
            status, out, err = grade(*args)
            self.assertEqual(status, 2, args)
            self.assertIn("grade.py: error:", err)
            self.assertNotIn("Traceback", err)

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
        for signum in (signal.SIGTERM, signal.SIGHUP):
            with self.subTest(signal=signum):
                proc, worker, tmp = self.start_hanging_grader()
                proc.send_signal(signum)
                out, err = proc.communicate(timeout=30)
                self.assertEqual(proc.returncode, 130)
                self.assertIn("interrupted", err)
                self.assertNotIn("Traceback", err)
                self.assertEqual(children_running(worker), [])
                self.assertEqual(os.listdir(tmp), [])
                shutil.rmtree(tmp)

    def test_children_end_when_the_grader_is_killed(self):
        proc, worker, tmp = self.start_hanging_grader()
        proc.kill()  # SIGKILL: no handler runs; the children must notice on their own
        proc.communicate(timeout=30)
        wait_until(lambda: children_running(worker) == [], what="orphaned children to exit")


def stop(proc):
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def children_running(marker):
    """PIDs of live processes whose command line mentions `marker` (Linux /proc)."""
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
