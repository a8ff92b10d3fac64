"""grader.windows: on Windows a step's Job Object ends all it started, and its folder goes with it.

Windows only (under Wine here: make test-windows); elsewhere each case is
skipped by name, with the reason. The threaded reading these children need
is tested on every system (test_grader_capture_slow).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.support import ROOT, wait_until

WINDOWS = os.name == "nt"
REASON = "Job Objects exist on Windows only (make test-windows runs these under Wine)"
# A worker that, at its import, holds a DB and a file open in its folder, in itself and in a process it starts.
HOLDER = '''
import os as _os, sqlite3 as _sqlite3, subprocess as _subprocess, sys as _sys
_held = _sqlite3.connect(_os.path.join(_os.environ["TMPDIR"], "held.db"))
_held.execute("CREATE TABLE IF NOT EXISTS t (x)")
_held.commit()
_child = _subprocess.Popen([_sys.executable, "-c", "import sys, time; f = open(sys.argv[1], 'a'); time.sleep(600)",
                            _os.path.join(_os.environ["TMPDIR"], "held.txt")])
with open(_os.environ["OUTBOX_TEST_PIDS"], "a") as _f:
    _f.write("%d\\n" % _child.pid)
'''


def alive(pid):
    """Whether process `pid` runs (kernel32: OpenProcess, then WaitForSingleObject with no wait)."""
    import ctypes
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    kernel32.OpenProcess.restype = ctypes.c_void_p
    kernel32.WaitForSingleObject.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    kernel32.CloseHandle.argtypes = [ctypes.c_void_p]
    handle = kernel32.OpenProcess(0x00100000 | 0x1000, False, pid)  # SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return False
    try:
        return kernel32.WaitForSingleObject(handle, 0) != 0  # WAIT_OBJECT_0: it has ended
    finally:
        kernel32.CloseHandle(handle)


@unittest.skipUnless(WINDOWS, REASON)
class JobTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.pids = os.path.join(self.tmp, "pids")
        self.worker = os.path.join(self.tmp, "worker.py")
        with open(os.path.join(ROOT, "examples", "worker_reference.py"), encoding="utf-8") as f:
            reference = f.read()
        with open(self.worker, "w", encoding="utf-8") as f:
            # the kit's own folder, not the one above the copy's: the copy imports the kit from where it is
            f.write(reference.replace("os.path.dirname(os.path.dirname(os.path.abspath(__file__)))", repr(ROOT))
                    + HOLDER)
        self.grader_tmp = os.path.join(self.tmp, "grader-tmp")
        os.mkdir(self.grader_tmp)
        self.env = dict(os.environ, TMPDIR=self.grader_tmp, OUTBOX_TEST_PIDS=self.pids)

    def started(self):
        with open(self.pids) as f:
            return [int(line) for line in f.read().split()]

    def test_a_worker_that_keeps_a_db_and_a_process_open_leaves_no_folder_and_no_process(self):
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "grade.py"), "--impl", self.worker, "-k", "durability"],
                              env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        self.assertIn(b"PASS durability", proc.stdout, proc.stdout[-2000:])
        self.assertTrue(self.started(), "the worker's import started no process")
        self.assertEqual([pid for pid in self.started() if alive(pid)], [])
        self.assertEqual(os.listdir(self.grader_tmp), [], "the grader left its folder behind")

    def test_a_grader_killed_mid_step_leaves_no_process_of_the_worker(self):
        with open(self.worker, "a", encoding="utf-8") as f:
            f.write("import time as _time\n_time.sleep(120)\n")  # the import hangs with the process started
        proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "grade.py"), "--impl", self.worker,
                                 "-k", "durability", "--timeout", "60"], env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: os.path.exists(self.pids) and self.started(), 60, "the worker's process")
            pid = self.started()[0]
            self.assertTrue(alive(pid))
        finally:
            proc.kill()  # TerminateProcess: nothing of the grader's runs after it
            proc.wait(60)
        wait_until(lambda: not alive(pid), 30, "the worker's process ended with the grader's job handles")


class DefaultJobsTest(unittest.TestCase):
    def test_windows_runs_twice_the_cores_at_once_and_posix_eight(self):
        from grader.cli import DEFAULT_JOBS, default_jobs
        self.assertEqual(default_jobs(windows=False, cores=2), DEFAULT_JOBS)
        self.assertEqual([default_jobs(windows=True, cores=n) for n in (1, 2, 3, 16)], [2, 4, 6, DEFAULT_JOBS])


class StatusTest(unittest.TestCase):
    """What a status means is the same on every system; on Windows, where no SIGXFSZ exists, too."""

    def test_an_exit_of_0_or_1_is_no_limit_and_a_step_the_grader_ended_is_killed_everywhere(self):
        from grader import contain, parent, windows
        limits = contain.Limits(64, 1, 3)
        for status in (0, 1, 2):
            self.assertIsNone(parent.Run("a step", status, [], "", limits=limits).limit(), status)
        self.assertEqual(windows.KILLED, -9)
        self.assertNotEqual(parent.Run("a step", windows.KILLED, [], "", limits=limits).summary(),
                            parent.Run("a step", 1, [], "", limits=limits).summary())


class ReasonTest(unittest.TestCase):
    def test_off_windows_each_case_says_why_it_is_skipped(self):
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(JobTest)
        result = unittest.TestResult()
        suite.run(result)
        if WINDOWS:
            self.assertEqual(result.skipped, [])
        else:
            self.assertEqual(sorted(reason for _, reason in result.skipped), [REASON] * suite.countTestCases())


if __name__ == "__main__":
    unittest.main()
