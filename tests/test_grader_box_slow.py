"""The box through grade.py as a lab host runs it: verdicts unchanged inside it, a hostile worker kept in it,
every layer reported, and grading that goes on where the layers are missing.

Slow: each test grades whole workers in real processes.
"""
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import unittest

from grader import box, landlock, namespaces
from tests.grade_mutants import GRADE, grade
from tests.support import ROOT, SLOWER, TempDirTestCase, checked_by_make_test, python_env, write_worker

LINUX = sys.platform.startswith("linux")
LANDLOCK = landlock.abi()[0] if LINUX else 0
NAMESPACES = LINUX and namespaces.trial() is None
REFERENCE = os.path.join(ROOT, "examples", "worker_reference.py")
STUB = os.path.join(ROOT, "examples", "worker_stub.py")
ALL_OFF = ",".join(box.LAYERS)


def verdicts(report):
    return {check["name"]: check["status"] for check in report["checks"]}


def python_another_uid_can_run():
    """(an interpreter a uid of no account can run, None) or (None, why not): the uid layer's precondition.

    Under root the grader gives each worker a uid of its own, but only with
    an interpreter that uid can reach: a pyenv one under /root is not, so
    the suite's own interpreter may grade with that layer off (it says so).
    """
    candidates = [sys.executable, shutil.which("python3", path=os.pathsep.join(("/usr/local/bin", "/usr/bin", "/bin")))]
    why = "no Python >= 3.8 that another uid can run (tried %s)" % ", ".join(map(str, candidates))
    for python in candidates:
        if python is None:
            continue
        try:
            prefix = subprocess.run([python, "-c", "import sys; assert sys.version_info >= (3, 8); print(sys.prefix)"],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True,
                                    timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if prefix and box.unreadable([os.path.realpath(python), prefix, ROOT, REFERENCE]) is None:
            return python, None
    return None, why


class BoxedGradingTest(TempDirTestCase):
    def graded(self, *args, env=None):
        # PyPy's steps, beside another module of the suite, once took url-rule past the default 10 s bound.
        status, out, err = grade("--json", "--timeout", str(10 * SLOWER), *args, env=env)
        self.assertIn(status, (0, 1), err)
        return json.loads(out)

    def test_the_reference_and_the_stub_keep_their_verdicts_in_the_box(self):
        boxed = self.graded("--impl", REFERENCE)
        self.assertEqual((boxed["passed"], boxed["failed"], boxed["errors"]), (len(boxed["checks"]), 0, 0))
        isolation = boxed["isolation"]
        self.assertEqual(isolation["landlock"], LANDLOCK or False)
        # Its own network namespace where the namespaces are on: the grader's servers were reached inside it.
        self.assertEqual("network" in isolation["off"], not isolation["namespaces"], isolation)
        stub_boxed, stub_open = (self.graded("--impl", STUB, *flag) for flag in ((), ("--isolation", "off")))
        self.assertEqual(verdicts(stub_boxed), verdicts(stub_open))
        # The stub is its own work (own-work passes, issue 23); every check of the contract fails, boxed or not.
        self.assertEqual([name for name, status in verdicts(stub_boxed).items() if status == "pass"], ["own-work"])
        self.assertEqual(stub_open["isolation"]["off"]["landlock"], "--isolation off")
        self.assertIs(stub_open["isolation"]["seccomp"], False)

    @unittest.skipUnless(hasattr(os, "geteuid") and os.geteuid() == 0, "the uid layer is root's")
    def test_under_root_each_worker_has_a_uid_of_its_own_and_the_reference_keeps_every_verdict(self):
        python, why = python_another_uid_can_run()
        if python is None or checked_by_make_test(python):
            self.skipTest(why or checked_by_make_test(python))
        proc = subprocess.run([python, GRADE, "--json", "--timeout", str(10 * SLOWER), "--impl", REFERENCE],
                              cwd=self.tmp, env=python_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
        report = json.loads(proc.stdout)
        self.assertIsInstance(report["isolation"]["uid"], int, report["isolation"])
        self.assertEqual("network" in report["isolation"]["off"], not report["isolation"]["namespaces"])
        # Files the grader makes for the worker to write (a 0-byte DB, a blank one) are the worker's uid's.
        failed = {c["name"]: c["observed"] for c in report["checks"] if c["status"] != "pass"}
        self.assertEqual(failed, {})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        # Under a TMPDIR no other uid can reach, the layer is off and says why; the verdicts stay.
        private = os.path.join(self.tmp, "private")
        os.makedirs(private, mode=0o700)
        os.chmod(private, 0o700)
        proc = subprocess.run([python, GRADE, "--json", "--impl", REFERENCE, "-k", "wrong-database"], cwd=self.tmp,
                              env=python_env(TMPDIR=private), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=300)
        report = json.loads(proc.stdout)
        self.assertIs(report["isolation"]["uid"], False)
        self.assertIn(private, report["isolation"]["off"]["uid"])
        self.assertEqual((proc.returncode, report["passed"]), (0, 1), proc.stderr)

    def test_with_every_layer_unavailable_it_says_so_and_grades_as_before(self):
        report = self.graded("--impl", REFERENCE, env=python_env(**{box.UNAVAILABLE: ALL_OFF}))
        self.assertEqual(report["passed"], len(report["checks"]))
        isolation = report["isolation"]
        self.assertEqual([isolation[layer] for layer in box.LAYERS], [False] * 4)
        for layer in box.LAYERS:
            self.assertIn(box.UNAVAILABLE, isolation["off"][layer])

    @unittest.skipUnless(LANDLOCK, "no Landlock here")
    def test_a_hostile_worker_reaches_neither_the_kit_nor_a_classmate_nor_the_grader(self):
        classmate = os.path.join(self.tmp, "classmate")
        os.makedirs(classmate)
        os.chmod(classmate, 0o777)  # only the box stands between the worker and this folder
        with open(os.path.join(classmate, "worker.py"), "w") as f:
            f.write("honest = True\n")
        planted = os.path.join(ROOT, "grader", "planted_by_a_worker.py")  # a folder that exists: only the box stops it
        self.addCleanup(lambda: os.path.exists(planted) and os.remove(planted))
        worker = write_worker(os.path.join(self.tmp, "hostile", "worker.py"), """
            import json
            for _path in (%r, %r):
                try:
                    with open(_path, "w") as _f:
                        _f.write("tampered")
                except OSError:
                    pass
            try:
                os.kill(json.loads(sys.argv[sys.argv.index("--contain") + 1])["parent"], signal.SIGSTOP)
            except (OSError, ValueError):
                pass
            """ % (planted, os.path.join(classmate, "worker.py")))
        report = self.graded("--impl", worker, "-k", "seq-order")
        self.assertEqual(verdicts(report), {"seq-order": "pass"})  # and grade.py was not stopped
        self.assertFalse(os.path.exists(planted))
        with open(os.path.join(classmate, "worker.py")) as f:
            self.assertEqual(f.read(), "honest = True\n")

    @unittest.skipUnless(NAMESPACES, "no unprivileged namespaces here")
    def test_a_worker_reaches_no_port_of_the_host_and_every_server_of_its_own_checks(self):
        host = socket.create_server(("127.0.0.1", 0))  # a port of the host, where a classmate's sink could be
        self.addCleanup(host.close)
        host.setblocking(False)
        worker = write_worker(os.path.join(self.tmp, "prober", "worker.py"), """
            import socket as _socket
            try:
                _socket.create_connection(("127.0.0.1", %d), 2).close()
            except OSError:
                pass
            """ % host.getsockname()[1])
        # The grader's fake sinks (zygote steps), a step with an environment of its own (proxy-ignored, a process
        # outside the zygote), the grader's own POSTs to the worker's sink (conflict), the url-rule's trap.
        names = ("untrusted-ack", "proxy-ignored", "conflict", "url-rule")
        report = self.graded("--impl", worker, *[arg for name in names for arg in ("-k", name)])
        self.assertEqual(verdicts(report), {name: "pass" for name in names})
        self.assertNotIn("network", report["isolation"]["off"])
        with self.assertRaises(BlockingIOError):
            host.accept()[0].close()

    @unittest.skipUnless(LINUX and hasattr(os, "geteuid") and os.geteuid() == 0, "a uid of its own only under root")
    def test_under_root_each_worker_of_a_class_runs_under_a_uid_of_its_own(self):
        python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
        if python is None or box.unreadable([python, ROOT, os.path.dirname(os.path.realpath(python))]):
            self.skipTest("no interpreter another user may run")
        os.chmod(self.tmp, 0o755)
        for name in ("alice.py", "bob.py"):
            os.chmod(write_worker(os.path.join(self.tmp, name)), stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
        proc = subprocess.run([python, GRADE, "--json", "--impl", self.tmp, "-k", "seq-order", "-k", "crash-after-ack"],
                              cwd=ROOT, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                              universal_newlines=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        workers = json.loads(proc.stdout)["workers"]
        uids = [worker["isolation"]["uid"] for worker in workers]
        self.assertEqual(len(set(uids)), 2, uids)
        self.assertNotIn(False, uids)
        self.assertNotIn(0, uids)


if __name__ == "__main__":
    unittest.main()
