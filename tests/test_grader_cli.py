"""grade.py as a command line: usage errors, exit statuses, signals, pipes, any directory, no leftovers."""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

from tests.grade_mutants import GRADE, grade, without_protections_off
from tests.support import (ROOT, SLOWER, TempDirTestCase, children_running, grader_children, posix_only, python_env,
                           stop, wait_until, write_worker)

# On Windows a SIGTERM "sent" to a process (Popen.send_signal, os.kill) is TerminateProcess: no handler runs, the
# exit code is 15. SIGHUP does not exist there, and grade.py has no door (as stoppable() children have) to raise one.
SIGNALS_TO_GRADE = "a signal sent to grade.py (SIGTERM, SIGHUP): on Windows os.kill is TerminateProcess, no handler runs"


class GradeCommandLineTest(TempDirTestCase):
    def write_worker(self, body, name="worker.py"):
        return write_worker(self.path(name), body, kit=False)

    def test_usage_errors_exit_2_with_one_line(self):
        text_file = self.write_worker("just words\n", name="notes.txt")
        os.mkdir(self.path("empty"))
        cases = (
            (["-k", "no-such-check"], "unknown check"),
            (["--impl", self.path("missing.py")], "no such file"),
            (["--timeout", "0"], "--timeout must be more than 0 and at most 3600 seconds, got 0"),
            (["--impl", text_file], "is not a Python module: its name does not end in .py"),
            (["--impl", self.path("empty")], "no *.py file and no */worker.py in this directory"),
            (["--memory", "64"], "--memory must be from 128 to 1048576 (MiB), got 64"),
            (["--file-size", "0"], "--file-size must be from 1 to 1048576 (MiB), got 0"),
            (["--report", os.path.join(text_file, "reports")], "--report %s: cannot write there" % os.path.join(text_file, "reports")),
        )
        for args, words in cases:
            with self.subTest(args=args):
                status, out, err = grade(*args)
                self.assertEqual(status, 2, args)
                self.assertIn("grade.py: error: ", err)
                self.assertIn(words, err)
                self.assertNotIn("Traceback", err)

    def test_a_worker_that_does_not_compile_fails_every_check_naming_the_line(self):
        # Graded, not refused: a class grades it like any other worker, and one worker alone gets the same verdicts.
        broken = self.write_worker("def init_store(:\n", name="broken.py")
        status, out, err = grade("--impl", broken, "-k", "exact-ack", "-k", "crash-after-ack", "--json")
        self.assertEqual(status, 1, err)
        report = json.loads(out)
        self.assertEqual([c["status"] for c in report["checks"]], ["fail", "fail"])
        for check in report["checks"]:
            self.assertEqual(check["expected"], "the worker compiles (Python source without a syntax error)")
            self.assertRegex(check["observed"], r"^line 1: SyntaxError: ")
        self.assertEqual(report["evidence"], {})
        self.assertNotIn("Traceback", err)

    def test_no_writable_temporary_directory_is_a_grader_error(self):
        status, out, err = grade("-k", "exact-ack", env=python_env(TMPDIR=self.path("no-such-dir")))
        self.assertEqual(status, 3, out + err)
        # Where some protections are off (Windows), grade.py says so first, on a line of its own.
        self.assertEqual(len(without_protections_off(err).strip().splitlines()), 1, err)
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
        worker = self.write_worker(HANGING_WORKER)
        tmp = self.path("tmp")
        os.mkdir(tmp)
        proc = subprocess.Popen([sys.executable, GRADE, "--impl", worker], cwd=ROOT, env=python_env(TMPDIR=tmp),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        self.addCleanup(stop, proc)
        wait_until(lambda: children_running(worker), what="the grader's children")
        return proc, worker, tmp

    @posix_only(SIGNALS_TO_GRADE)
    def test_signals_stop_children_and_remove_temporary_files(self):
        if not os.path.isdir("/proc"):
            self.skipTest("finding the grader's children needs /proc")
        for signum, exit_status in ((signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)):
            with self.subTest(signal=signum):
                proc, worker, tmp = self.start_hanging_grader()
                proc.send_signal(signum)
                out, err = proc.communicate(timeout=30)
                self.assertEqual(proc.returncode, exit_status)
                self.assertIn("interrupted", err)
                self.assertNotIn("Traceback", err)
                self.assertEqual(children_running(worker), [])
                self.assertEqual(os.listdir(tmp), [], left_in(tmp))
                shutil.rmtree(tmp)

    @posix_only(SIGNALS_TO_GRADE)
    def test_signals_during_the_cleanup_leave_nothing_behind(self):
        # Issue 23: a second Ctrl-C (or SIGTERM) while the first one's cleanup runs must not unwind it half-way.
        if not os.path.isdir("/proc"):
            self.skipTest("finding the grader's children needs /proc")
        proc, worker, tmp = self.start_hanging_grader()
        proc.send_signal(signal.SIGTERM)
        deadline, sent = time.monotonic() + 30, 0
        while proc.poll() is None and time.monotonic() < deadline:  # more signals until it has ended
            proc.send_signal((signal.SIGINT, signal.SIGTERM)[sent % 2])
            sent += 1
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(0.002)
        out, err = proc.communicate(timeout=30)
        self.assertGreater(sent, 0)
        # Whichever of SIGINT and SIGTERM was handled first decides the status. One that comes once the cleanup is
        # over, while the interpreter exits (which gives every signal its default action back), ends it by that
        # signal: a shell shows 128 + N for that too.
        self.assertIn(proc.returncode, (130, 143, -signal.SIGINT, -signal.SIGTERM), err)
        self.assertIn("interrupted", err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(children_running(worker), [])
        self.assertEqual(os.listdir(tmp), [], left_in(tmp))

    @posix_only(SIGNALS_TO_GRADE)
    def test_a_signal_just_after_the_main_thread_took_a_lock_does_not_hang_the_grader(self):
        # concurrent.futures.wait takes every future's lock in turn: a stop raised half-way left some held, and the
        # pool threads (then the grader's own shutdown) waited on them for ever. Each driver sends SIGTERM right
        # after the main thread has taken the K-th threading.Condition lock once the steps run, K = 1..12: on the
        # code before, most of them fell in the loop's futures.wait and hung; here the first few fall in
        # future.result() and the cleanup, and a K past the run's last lock fires in the interpreter's exit or not.
        if not os.path.isdir("/proc"):
            self.skipTest("finding the grader's children needs /proc")
        runs = []
        for k in range(1, 13):
            worker = self.write_worker(HANGING_WORKER, name="worker-%d.py" % k)
            files = {name: self.path("%s-%d" % (name, k)) for name in ("arm", "fired", "tmp")}
            os.mkdir(files["tmp"])
            driver = self.write_worker(LOCK_DRIVER % dict(files, k=k, grade=GRADE), name="driver-%d.py" % k)
            proc = subprocess.Popen([sys.executable, driver, "--impl", worker, "--timeout", str(2 * SLOWER),
                                     "-k", "intake-atomic", "-k", "dropped-response"], cwd=ROOT,
                                    env=python_env(TMPDIR=files["tmp"]),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
            self.addCleanup(stop, proc)
            runs.append((k, proc, files, worker))
        # All twelve watched at once, in one look at /proc a round: each grader's steps run only for its 2 s
        # timeouts (4 s on PyPy), so waiting on them one by one could find a later grader already done (under load).
        unarmed = {k: (files, worker) for k, proc, files, worker in runs}

        def arm_those_running():
            running = [cmdline for _, cmdline in grader_children()]  # one look at /proc for all twelve
            for k, (files, worker) in list(unarmed.items()):
                if any(worker in cmdline for cmdline in running):
                    open(files["arm"], "w").close()
                    del unarmed[k]
            return not unarmed
        try:
            wait_until(arm_those_running, timeout=30 * SLOWER, what="the children of every grader")
        except AssertionError:
            ended = {k: proc for k, proc, _, _ in runs if k in unarmed and proc.poll() is not None}
            raise AssertionError("graders never seen with children running: %s; of them ended: %s" % (
                sorted(unarmed), {k: (proc.returncode,) + proc.communicate() for k, proc in ended.items()}))
        fired, deadline = 0, time.monotonic() + 60 * SLOWER
        for k, proc, files, worker in runs:
            with self.subTest(k=k):
                out, err = proc.communicate(timeout=max(1, deadline - time.monotonic()))
                if not os.path.exists(files["fired"]):  # fewer locks than k in the whole run: it ends as usual
                    self.assertEqual(proc.returncode, 1, err)
                    continue
                fired += 1
                if proc.returncode == -signal.SIGTERM:  # the k-th lock came after the run, in the interpreter's exit
                    self.assertIn("grade: 0 passed, 2 failed", out)  # (PyPy takes fewer locks than CPython)
                else:
                    self.assertEqual(proc.returncode, 143, err)
                    self.assertIn("interrupted", err)
                self.assertNotIn("Traceback", err)
                self.assertEqual(os.listdir(files["tmp"]), [], left_in(files["tmp"]))
                self.assertEqual(children_running(worker), [])
        self.assertGreater(fired, 0)  # else no signal came where it is meant to

    @posix_only(SIGNALS_TO_GRADE)
    def test_a_signal_while_the_totals_are_shown_exits_with_its_status_and_no_traceback(self):
        worker = self.write_worker(HANGING_WORKER)
        driver = self.write_worker('''
            import os, runpy, signal, sys
            sys.path.insert(0, %(root)r)
            from grader import cli
            shown = cli.show_totals
            def show_totals(*args, **kwargs):
                os.kill(os.getpid(), signal.SIGTERM)
                return shown(*args, **kwargs)
            cli.show_totals = show_totals
            sys.argv[0] = %(grade)r
            runpy.run_path(%(grade)r, run_name="__main__")
        ''' % {"root": ROOT, "grade": GRADE}, name="driver.py")
        proc = subprocess.run([sys.executable, driver, "--impl", worker, "--timeout", "1", "-k", "intake-atomic"],
                              cwd=ROOT, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=120)
        self.assertEqual(proc.returncode, 143, proc.stderr)
        self.assertIn("interrupted", proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)

    def test_children_end_when_the_grader_is_killed(self):
        if not os.path.isdir("/proc"):
            self.skipTest("finding the grader's children needs /proc")
        proc, worker, tmp = self.start_hanging_grader()
        proc.kill()  # SIGKILL: no handler runs; the children must notice on their own
        proc.communicate(timeout=30)
        wait_until(lambda: children_running(worker) == [], what="orphaned children to exit")



HANGING_WORKER = '''
    import time
    def init_store(path):
        time.sleep(3600)
    intake = pending = mark_sent = dispatch = send_http = init_sink = receive = validate_event = init_store
'''

# grade.py, with every threading.Condition's lock traced: once the file `arm` exists, the k-th time the main
# thread takes such a lock it sends itself SIGTERM while holding it (and writes `fired`).
LOCK_DRIVER = '''
    import os, runpy, signal, sys, threading

    class Traced:
        def __init__(self, lock):
            self.lock = lock
        def acquire(self, *args, **kwargs):
            got = self.lock.acquire(*args, **kwargs)
            if got and not FIRED and threading.get_ident() == MAIN and os.path.exists(%(arm)r):
                TAKEN.append(True)
                if len(TAKEN) == %(k)d:
                    FIRED.append(True)
                    open(%(fired)r, "w").close()
                    os.kill(os.getpid(), signal.SIGTERM)
            return got
        def release(self):
            self.lock.release()
        def __enter__(self):
            return self.acquire()
        def __exit__(self, *exc):
            self.release()
        def __getattr__(self, name):
            return getattr(self.lock, name)

    TAKEN, FIRED, MAIN = [], [], threading.get_ident()  # not current_thread(): a starting thread is not in it yet
    untraced = threading.Condition.__init__
    threading.Condition.__init__ = lambda self, lock=None: untraced(self, Traced(lock or threading.RLock()))
    sys.argv[0] = %(grade)r
    runpy.run_path(%(grade)r, run_name="__main__")
'''


def left_in(top):
    """Every path under `top`, for a failure's message: what the grader left is what to look at."""
    return "\n".join(os.path.join(folder, name) for folder, dirs, files in os.walk(top) for name in dirs + files)


class GraderErrorTest(unittest.TestCase):
    def test_an_exception_in_the_graders_own_code_is_an_error_not_a_fail(self):
        from grader import cli
        from grader.registry import Check

        class Grader:
            def for_check(self, check):
                return None

        def broken(context):
            raise ZeroDivisionError("a bug in the grader")

        result = cli.run_check(Grader(), Check("broken", "proves.exact-ack", ("dispatch",), broken), "en")
        self.assertEqual((result["status"], result["ok"]), ("error", False))
        self.assertEqual(result["observed"], "grader error (not your worker's fault): ZeroDivisionError: a bug in the grader")
        self.assertIn("Traceback", result["traceback"])  # printed only with --debug


if __name__ == "__main__":
    unittest.main()
