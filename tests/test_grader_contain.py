"""The grader's containment, rule by rule, without timing: limits, crashes, one check at a time.

Real grade.py processes on workers written to temporary folders. The time
bounds, floods, orphans and the checkout left untouched are in
tests/test_grader_contain_slow.py; the bounded capture in
tests/test_grader_capture.py.
"""
import json
import os
import platform
import subprocess
import sys
import threading
import time
import unittest

from grader import contain, messages
from grader.parent import Processes
from tests.grade_mutants import REFERENCE, grade
from tests.support import ROOT, SLOWER, WINDOWS, TempDirTestCase, posix_only, write_worker

# Wine 8 keeps a Job Object's limits but does not enforce them (grade.py names them in protections_off there);
# Windows itself does: these cases run there.
WINE_LIMITS = unittest.skipIf(WINDOWS and contain.under_wine(),
                              "under Wine: Wine 8 keeps a Job Object's memory limit but does not enforce it (Windows does)")


def checks_of(out):
    """{check name: (status, observed)} from a --json report."""
    return {c["name"]: (c["status"], c["observed"]) for c in json.loads(out)["checks"]}


class SweepTest(unittest.TestCase):
    @unittest.skipUnless(sys.platform.startswith("linux"), "the sweep finds children through /proc (Linux)")
    def test_a_child_started_through_popen_is_never_taken_for_a_stray(self):
        # The quiz's relay runs were started, then adopted: a sweep between the two killed them (exit -9).
        processes, stop = Processes(), threading.Event()

        def sweeping():
            while not stop.is_set():
                processes.sweep()

        sweeper = threading.Thread(target=sweeping)
        sweeper.start()
        try:
            said = []
            for _ in range(3):
                # The pause before exec holds Popen open while the child exists: a sweep then would find it.
                proc = processes.popen([sys.executable, "-c", "print('ran')"], stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, start_new_session=True, preexec_fn=lambda: time.sleep(0.2))
                said.append(proc.communicate(timeout=60)[0])  # a sweep may also reap it: its output is the witness
                processes.forget(proc)
        finally:
            stop.set()
            sweeper.join(60)
        self.assertEqual(said, [b"ran\n"] * 3)


class ProtectionsTest(unittest.TestCase):
    def test_the_protections_that_are_off_are_named_once(self):
        self.assertEqual(contain.protections_off(limits=True, subreaper=True), [])
        self.assertEqual(contain.protections_off(limits=False, subreaper=False), ["limits", "orphans"])
        line = messages.text("en", "cli.protections-off", off=", ".join(
            messages.text("en", "protection." + name) for name in contain.protections_off(limits=True, subreaper=False)))
        self.assertIn("setsid() or a double fork (no PR_SET_CHILD_SUBREAPER)", line)
        if sys.platform.startswith("linux"):
            self.assertEqual(contain.protect_host(), [])  # this test process is a subreaper now: harmless here

    def test_this_linux_says_nothing_about_protections(self):
        if not sys.platform.startswith("linux"):
            self.skipTest("Linux has every protection")
        status, out, err = grade("-k", "validate-event")
        self.assertEqual((status, err), (0, ""))


class OneCheckAtATimeTest(TempDirTestCase):
    """A crash or a limit hit ends one step, and fails the check that was running, and only that one."""

    def test_an_exit_fails_its_check_and_no_other(self):
        worker = write_worker(self.path("exits.py"), '''
            def pending(con, limit=16):
                os._exit(9)
        ''')
        # validate-event's step takes 5.6 s of its 10 s under Wine, alone: SLOWER times the bound there.
        status, out, err = grade("--impl", worker, "--json", "-k", "seq-order", "-k", "validate-event",
                                 "--timeout", str(10 * SLOWER))
        self.assertEqual(status, 1, err)
        checks = checks_of(out)
        self.assertEqual(checks["seq-order"], ("fail", "the seq-order check exited with status 9"))
        self.assertEqual(checks["validate-event"][0], "pass")

    @posix_only("a process ended by a signal (SIGSEGV): on Windows os.kill is TerminateProcess, an exit code")
    def test_a_crash_fails_its_check_and_no_other(self):
        worker = write_worker(self.path("crashes.py"), '''
            def mark_sent(con, event_id):
                os.kill(os.getpid(), signal.SIGSEGV)
        ''')
        status, out, err = grade("--impl", worker, "--json", "-k", "mark-sent", "-k", "exact-ack")
        self.assertEqual(status, 1, err)
        checks = checks_of(out)
        self.assertEqual(checks["mark-sent"], ("fail", "the mark-sent check was ended by signal SIGSEGV"))
        self.assertEqual(checks["exact-ack"][0], "pass")

    @posix_only("a zygote: Windows has no fork, each step there is a fresh interpreter of its own")
    def test_checks_lost_with_the_zygote_fail_and_say_so(self):
        # Nothing an honest worker does ends its zygote; if something does, the steps it was running are
        # reported lost, never passed, and later steps run as children of their own.
        worker = write_worker(self.path("regicide.py"), '''
            def mark_sent(con, event_id):
                with open("/proc/%d/stat" % os.getppid()) as f:
                    os.kill(int(f.read().rsplit(")", 1)[1].split()[1]), signal.SIGKILL)  # the zygote
                time.sleep(30)
        ''')
        if not os.path.isdir("/proc"):
            self.skipTest("the worker finds its zygote in /proc")
        status, out, err = grade("--impl", worker, "--json", "-k", "mark-sent", "--jobs", "1")
        self.assertEqual(checks_of(out)["mark-sent"], (
            "fail", "the mark-sent check ended with no exit status: the process that forked it is gone"))

    def hungry_worker(self):
        return write_worker(self.path("hungry.py"), '''
            def init_store(path):
                hoard = bytearray(%d * 1024 * 1024)
                return kit_init_store(path)
        ''' % (contain.DEFAULT_MEMORY_MIB + 512))

    @WINE_LIMITS
    def test_memory_over_the_limit_fails_the_running_check_naming_the_limit_and_the_flag(self):
        worker = self.hungry_worker()
        status, out, err = grade("--impl", worker, "--json", "-k", "mark-sent", "-k", "crash-after-ack", "-k", "validate-event")
        checks = checks_of(out)
        self.assertEqual(checks["mark-sent"], (
            "fail", "the mark-sent check ran out of memory: limit 1024 MiB; --memory raises it"))
        self.assertEqual(checks["crash-after-ack"], ("fail", "the intake ran out of memory: limit 1024 MiB; --memory raises it"))
        self.assertEqual(checks["validate-event"][0], "pass")
        self.assertEqual(json.loads(out)["limits"]["memory_mib"], 1024)

    @unittest.skipIf(platform.python_implementation() == "PyPy",
                     "PyPy maps about 300 MiB of address space before any code runs (its GC nursery and arenas): "
                     "under RLIMIT_AS 256 MiB the step cannot even load _sqlite3_cffi, and pypy3 itself does not "
                     "start (\"cannot allocate nursery\")")
    @WINE_LIMITS
    def test_memory_flag_lowers_the_limit_and_the_failure_names_it(self):
        worker = self.hungry_worker()
        status, out, err = grade("--impl", worker, "--json", "-k", "mark-sent", "--memory", "256")
        self.assertEqual(checks_of(out)["mark-sent"], (
            "fail", "the mark-sent check ran out of memory: limit 256 MiB; --memory raises it"))

    @posix_only("a limit on the size of a file a process writes (RLIMIT_FSIZE): Windows has none, as its report says")
    def test_a_file_over_the_size_limit_fails_the_running_check(self):
        worker = write_worker(self.path("writer.py"), '''
            def init_store(path):
                with open("big.bin", "wb") as f:
                    for _ in range(12):
                        f.write(b"x" * 1024 * 1024)
                return kit_init_store(path)
        ''')
        status, out, err = grade("--impl", worker, "--json", "-k", "mark-sent", "-k", "validate-event", "--file-size", "8")
        checks = checks_of(out)
        self.assertEqual(checks["mark-sent"], (
            "fail", "the mark-sent check wrote a file past the size limit: 8 MiB; --file-size raises it"))
        self.assertEqual(checks["validate-event"][0], "pass")
        status, out, err = grade("--impl", worker, "--json", "-k", "mark-sent", "--file-size", "16")
        self.assertEqual(checks_of(out)["mark-sent"][0], "pass")

    @posix_only("the worker lowers its own CPU limit through the resource module, which Windows lacks")
    def test_cpu_time_over_the_limit_is_named(self):
        # The worker lowers its own CPU limit, so that it runs out long before --timeout: the grader must
        # still report the signal as the CPU limit, not as a crash.
        worker = write_worker(self.path("spinner.py"), '''
            import resource

            def init_store(path):
                resource.setrlimit(resource.RLIMIT_CPU, (1, resource.getrlimit(resource.RLIMIT_CPU)[1]))
                while True:
                    pass
        ''')
        status, out, err = grade("--impl", worker, "--json", "-k", "mark-sent", "--timeout", "30")
        self.assertEqual(checks_of(out)["mark-sent"], (
            "fail", "the mark-sent check used up its CPU time: limit 32 s; --timeout raises it"))

    def test_a_worker_sees_its_checks_folder_as_home_tmp_and_working_directory(self):
        worker = write_worker(self.path("where.py"), '''
            import tempfile

            def init_store(path):
                folder = os.path.dirname(os.path.realpath(path))
                expected = (folder, os.path.join(folder, "home"), os.path.join(folder, "tmp"))
                seen = tuple(os.path.realpath(p) for p in (os.getcwd(), os.path.expanduser("~"), tempfile.gettempdir()))
                if seen != expected:
                    raise RuntimeError("saw %r, not %r" % (seen, expected))
                return kit_init_store(path)
        ''')
        status, out, err = grade("--impl", worker, "--json", "-k", "mark-sent", "-k", "crash-after-ack", "-k", "proxy-ignored")
        self.assertEqual(status, 0, out + err)



@posix_only("OUTBOX_KIT_NO_LINUX makes a POSIX system without Linux's calls (macOS); Windows takes its own path")
class WithoutLinuxTest(unittest.TestCase):
    """macOS by construction: the grader with every Linux-only call off (OUTBOX_KIT_NO_LINUX=1), as there."""

    def test_the_kit_passes_and_the_run_says_what_is_off(self):
        from tests.support import python_env
        status, out, err = grade("--json", env=python_env(OUTBOX_KIT_NO_LINUX="1"))
        report = json.loads(out)
        self.assertEqual((status, report["passed"], report["failed"]), (0, 24, 0), err[-2000:])
        # No subreaper: a process that left its session may outlive its step, and the run says so.
        self.assertEqual(report["protections_off"], ["orphans"])
        self.assertIn(messages.text("en", "protection.orphans"), err)
        off = report["isolation"]["off"]
        self.assertEqual(sorted(off), ["landlock", "namespaces", "network", "seccomp", "uid"])
        self.assertEqual(set(off.values()), {"made unavailable by OUTBOX_KIT_NO_LINUX"})


class WorkerEnvironmentTest(TempDirTestCase):
    def test_the_hosts_stream_settings_never_reach_the_worker_which_runs_in_utf_8(self):
        # A host with PYTHONUNBUFFERED and a code page for its streams: the worker's steps get neither, on any
        # system, and print "✓" as they would on Linux (a Windows pipe's cp1252 has no such character).
        from tests.support import python_env
        worker = write_worker(self.path("env.py"), """
            kit_validate_event = validate_event

            def validate_event(event):
                import os as _os, sys as _sys
                got = sorted(k for k in ("PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONPATH") if k in _os.environ)
                if got or not _sys.flags.utf8_mode:
                    raise RuntimeError("the host's %s reached the worker; utf8_mode %d" % (got, _sys.flags.utf8_mode))
                print("\u2713 checked")
                return kit_validate_event(event)
        """)
        status, out, err = grade("--json", "-k", "validate-event", "--impl", worker,
                                 env=python_env(PYTHONUNBUFFERED="1", PYTHONIOENCODING="cp1252", PYTHONUTF8="0"))
        check = json.loads(out)["checks"][0]
        self.assertEqual((status, check["status"]), (0, "pass"), check["observed"])


@posix_only("fork, which the steps forked by a zygote need: there is none to compare with on Windows")
class WithoutForkTest(unittest.TestCase):
    """Windows' process model here: each step a fresh interpreter that imports the worker (OUTBOX_KIT_NO_FORK=1)."""

    def test_the_kit_and_the_stub_get_the_verdicts_they_get_with_fork(self):
        from tests.support import python_env
        stub = os.path.join(ROOT, "examples", "worker_stub.py")
        for impl in (REFERENCE, stub):
            with self.subTest(impl=os.path.basename(impl)):
                # Each step a fresh interpreter: on PyPy under load one took past the default 10 s bound.
                reports = [json.loads(grade("--json", "--timeout", str(10 * SLOWER), "--impl", impl,
                                            env=python_env(**extra))[1])
                           for extra in ({"OUTBOX_KIT_NO_FORK": "1"}, {})]
                # The stub's observations too (they are fixed); the kit's hold timings and its sinks' ports.
                spawned, forked = ([(c["name"], c["status"], c["observed"] if impl == stub else None)
                                    for c in r["checks"]] for r in reports)
                self.assertEqual(spawned, forked)
                self.assertIsNone(reports[0]["import_output"])  # no import of its own without fork
                self.assertEqual(reports[1]["import_output"], {"printed": 0, "dropped": 0})


if __name__ == "__main__":
    unittest.main()
