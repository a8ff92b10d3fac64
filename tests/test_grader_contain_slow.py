"""Containment against workers that break each rule, through grade.py as a process: the time bound holds,
nothing is left running, nothing is written outside the temporary folder.

Wall-clock bounds live here (a *_slow module), with generous margins: a check's
time is at most (its steps + the worker's import) x --timeout, plus CONSTANT.
"""
import json
import os
import platform
import signal
import subprocess
import sys
import time
import unittest

from tests.grade_mutants import GRADE
from tests.support import (
    ROOT, WINDOWS, TempDirTestCase, children_running, python_env, stop, tree_listing, wait_until, write_worker,
)

if not WINDOWS:
    import resource  # peak memory of the grader's children: POSIX only (the class is Linux only anyway)

TIMEOUT = 3
CONSTANT = 12.0  # seconds: starting Python, killing, reaping, and a loaded 2-core machine
MIB = 1024 * 1024
NO_BOX_AROUND_PIDS = "landlock,namespaces"  # a worker that tells the test its pids, through a file of the test's


def kit_listing():
    """The checkout's files and folders, bytecode caches and git's own store aside.

    Other test processes may write caches, and a commit made in another work
    tree of the same repository adds objects under .git while this test runs.
    """
    return [p for p in tree_listing(ROOT) if "__pycache__" not in p and p.split(os.sep)[0] != ".git"]


def alive(pid):
    """Whether `pid` is a live process (a zombie is not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class ContainedRunTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        if not sys.platform.startswith("linux"):
            self.skipTest("ending setsid() orphans and reading /proc need Linux")
        for name in ("tmp", "home", "cwd"):
            os.mkdir(self.path(name))
        self.before = kit_listing()

    def grade(self, worker, *args, steps=1, unavailable=""):
        """Run grade.py on `worker`; assert the bound, no survivor, nothing written outside; (status, report, seconds).

        `unavailable`: layers of the box to do without (OUTBOX_KIT_BOX_UNAVAILABLE).
        """
        started = time.monotonic()
        env = python_env(TMPDIR=self.path("tmp"), HOME=self.path("home"), OUTBOX_KIT_BOX_UNAVAILABLE=unavailable)
        proc = subprocess.run([sys.executable, GRADE, "--impl", worker, "--json", "--timeout", str(TIMEOUT)] + list(args),
                              cwd=self.path("cwd"), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
        seconds = time.monotonic() - started
        self.assertLess(seconds, (steps + 1) * TIMEOUT + CONSTANT, proc.stderr[-2000:])
        self.assertEqual(children_running(worker), [])
        report = json.loads(proc.stdout)
        kept = [os.path.basename(report["kept"])] if report["kept"] else []  # --keep: the one folder it keeps
        for name, left in (("tmp", kept), ("home", []), ("cwd", [])):
            self.assertEqual(os.listdir(self.path(name)), left, name)
        self.assertEqual(kit_listing(), self.before)
        self.assertNotIn("Traceback", proc.stderr)
        return proc.returncode, report, seconds

    def grade_flood(self):
        """Grade a worker whose init_store prints 300 MiB and 1.4 MB on stderr; the report of its one check."""
        worker = write_worker(self.path("flood.py"), '''
            def init_store(path):
                chunk = b"x" * 1023 + b"\\n"
                for _ in range(300 * 1024):
                    os.write(1, chunk)
                os.write(2, b"and on stderr\\n" * 100000)
                return kit_init_store(path)
        ''')
        status, report, seconds = self.grade(worker, "-k", "mark-sent")
        self.assertEqual(status, 0, report)
        return report["checks"][0]

    def test_a_flood_is_counted_and_dropped_and_alone_is_no_failure(self):
        output = self.grade_flood()["output"]
        self.assertEqual(output["printed"], 300 * MIB + 1400000)
        self.assertEqual(output["dropped"], output["printed"] - 4 * 64 * 1024)

    @unittest.skipIf(platform.python_implementation() == "PyPy",
                     "the bound is CPython's: a PyPy grader, or step, peaks at 200-300 MiB with no flood at all "
                     "(its JIT and GC heap; grade.py -k mark-sent on the reference), so 150 MiB says nothing there")
    def test_a_flood_leaves_the_grader_and_its_children_far_below_its_size(self):
        self.grade_flood()
        # Whatever the flood, the grader kept its bounded part: its peak (or any child's) is far below 300 MiB.
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        self.assertLess(peak, 150 * MIB)

    def test_an_endless_flood_cannot_stretch_the_time_bound(self):
        worker = write_worker(self.path("endless.py"), '''
            def init_store(path):
                while True:
                    print("still printing")
        ''')
        status, report, seconds = self.grade(worker, "-k", "mark-sent", "-k", "crash-after-ack", steps=1)
        self.assertEqual(status, 1)
        for check in report["checks"]:
            self.assertRegex(check["observed"], r"timed out after 3 s \(killed\): your init_store did not return$")
            self.assertGreater(check["output"]["dropped"], 0)

    def test_setsid_and_double_forked_processes_end_with_their_step(self):
        pids = self.path("pids")
        worker = write_worker(self.path("daemon.py"), '''
            def escape(where):
                """Fork, setsid(), fork again: a daemon holding stdout, in a session of its own."""
                if os.fork() == 0:
                    os.setsid()
                    if os.fork() == 0:
                        with open(%r, "a") as f:
                            f.write("%%s %%d\\n" %% (where, os.getpid()))
                        time.sleep(120)
                    os._exit(0)

            escape("import")

            def init_store(path):
                escape("step")
                return kit_init_store(path)
        ''' % pids)
        # The worker writes its processes' pids outside its box, as the host sees them: the supervisor is tested as
        # it runs where Landlock and the namespaces are missing (inside them, the PID namespace ends all anyway).
        status, report, seconds = self.grade(worker, "-k", "mark-sent", "-k", "crash-after-ack", "-k", "proxy-ignored", steps=5,
                                             unavailable=NO_BOX_AROUND_PIDS)
        self.assertEqual(status, 0, report)
        with open(pids) as f:
            escaped = [line.split() for line in f.read().splitlines()]
        # One at each import (the zygote's, and proxy-ignored's child of its own), one at each init_store.
        self.assertEqual(set(where for where, _ in escaped), {"import", "step"})
        self.assertGreaterEqual(len(escaped), 5)
        self.assertEqual([pid for _, pid in escaped if alive(int(pid))], [])

    def test_a_hanging_step_whose_children_ignore_sigterm_is_ended_within_its_bound(self):
        pids = self.path("pids")
        worker = write_worker(self.path("stubborn.py"), '''
            def init_store(path):
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                if os.fork() == 0:
                    os.setsid()
                    with open(%r, "a") as f:
                        f.write("%%d\\n" %% os.getpid())
                    time.sleep(120)
                time.sleep(120)
        ''' % pids)
        status, report, seconds = self.grade(worker, "-k", "mark-sent", "-k", "dropped-response", unavailable=NO_BOX_AROUND_PIDS)
        self.assertEqual(status, 1)
        for check in report["checks"]:
            self.assertIn("timed out after 3 s", check["observed"])
        with open(pids) as f:
            self.assertEqual([pid for pid in f.read().split() if alive(int(pid))], [])

    def test_a_signal_ends_the_grader_at_once_whatever_its_steps_are_doing(self):
        worker = write_worker(self.path("sleeper.py"), '''
            def init_store(path):
                time.sleep(3600)
        ''')
        for signum in (signal.SIGTERM, signal.SIGINT):
            with self.subTest(signal=signum):
                proc = subprocess.Popen([sys.executable, GRADE, "--impl", worker, "-k", "proxy-ignored", "-k", "mark-sent",
                                         "-k", "crash-after-ack"], cwd=self.path("cwd"),
                                        env=python_env(TMPDIR=self.path("tmp"), HOME=self.path("home")),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, universal_newlines=True)
                self.addCleanup(stop, proc)
                # proxy-ignored's step is a child of its own, the others are forked by the zygote: wait for both.
                wait_until(lambda: len(children_running(worker)) >= 5, what="the grader's steps")
                started = time.monotonic()
                proc.send_signal(signum)
                err = proc.communicate(timeout=60)[1]
                self.assertLess(time.monotonic() - started, CONSTANT / 2, err)
                self.assertEqual(proc.returncode, 128 + signum)
                self.assertEqual(children_running(worker), [])
                self.assertEqual(os.listdir(self.path("tmp")), [])

    def test_relative_paths_home_and_tmp_land_in_the_checks_folder(self):
        worker = write_worker(self.path("writer.py"), '''
            import tempfile

            def init_store(path):
                with open("scratch.db", "w") as f:
                    f.write("relative")
                with open(os.path.expanduser("~/.scratch"), "w") as f:
                    f.write("home")
                os.close(tempfile.mkstemp(prefix="scratch-")[0])
                return kit_init_store(path)
        ''')
        status, report, seconds = self.grade(worker, "-k", "mark-sent", "--keep")
        self.assertEqual(status, 0, report)
        kept = report["kept"]
        self.assertTrue(kept.startswith(self.path("tmp")), kept)
        folder = os.path.join(kept, "mark-sent")
        self.assertTrue(os.path.isfile(os.path.join(folder, "scratch.db")))
        self.assertTrue(os.path.isfile(os.path.join(folder, "home", ".scratch")))
        self.assertEqual(len([n for n in os.listdir(os.path.join(folder, "tmp")) if n.startswith("scratch-")]), 1)

    def test_memory_and_file_limits_end_the_step_within_its_bound(self):
        worker = write_worker(self.path("greedy.py"), '''
            def init_store(path):
                hoard = bytearray(2048 * 1024 * 1024)

            def mark_sent(con, event_id):
                with open("big.bin", "wb") as f:
                    while True:
                        f.write(b"x" * 1024 * 1024)
        ''')
        status, report, seconds = self.grade(worker, "-k", "seq-order", "-k", "mark-sent")
        checks = {c["name"]: c["observed"] for c in report["checks"]}
        self.assertEqual(checks["seq-order"], "the seq-order check ran out of memory: limit 1024 MiB; --memory raises it")
        self.assertEqual(checks["mark-sent"], "the mark-sent check ran out of memory: limit 1024 MiB; --memory raises it")
        worker = write_worker(self.path("scribbler.py"), '''
            def mark_sent(con, event_id):
                with open("big.bin", "wb") as f:
                    while True:
                        f.write(b"x" * 1024 * 1024)
        ''')
        status, report, seconds = self.grade(worker, "-k", "mark-sent")
        self.assertEqual(report["checks"][0]["observed"],
                         "the mark-sent check wrote a file past the size limit: 64 MiB; --file-size raises it")


if __name__ == "__main__":
    unittest.main()
