"""`make zipapp` (backend/): outbox-kit.pyz, one file, run from another folder with nothing installed.

The archive is built by backend/kitbuild.py into a temporary directory and
run by a fresh interpreter whose working directory is elsewhere and whose
PYTHONPATH is empty, as on a host where only that file was copied.
"""
import os
import subprocess
import sys
import zipfile

from tests.support import DEADLINE, TempDirTestCase, python_env

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "backend"))
import kitbuild  # noqa: E402


def clean_env():
    env = python_env()
    env.pop("PYTHONPATH", None)
    return env


class ZipappTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.pyz = kitbuild.build_zipapp(self.path("outbox-kit.pyz"))
        self.elsewhere = self.path("elsewhere")
        os.mkdir(self.elsewhere)

    def run_pyz(self, *args, timeout=DEADLINE * 6):
        return subprocess.run([sys.executable, self.pyz] + list(args), cwd=self.elsewhere, env=clean_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=timeout)

    def test_the_archive_holds_only_the_kit_and_its_main(self):
        with zipfile.ZipFile(self.pyz) as archive:
            names = archive.namelist()
        self.assertIn("__main__.py", names)
        self.assertIn("grade.py", names)
        self.assertIn("grader/worker_reference.py", names)
        tops = {name.split("/", 1)[0] for name in names}
        self.assertEqual(tops, {"__main__.py", "grade.py", "outbox", "sink", "grader"})

    def test_each_command_runs_from_the_archive(self):
        for command, words in (("outbox", "COMMAND"), ("sink", "serve")):
            with self.subTest(command=command):
                done = self.run_pyz(command, "--help")
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertIn(words, done.stdout)
        done = self.run_pyz("grade", "--list")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("crash-after-ack", done.stdout)

    def test_a_grade_from_the_archive_runs_real_children_and_leaves_nothing(self):
        before = set(os.listdir(self.tmp))
        env_tmp = self.path("tmp")
        os.mkdir(env_tmp)
        env = clean_env()
        env["TMPDIR"] = env_tmp
        done = subprocess.run([sys.executable, self.pyz, "grade", "-k", "crash-after-ack"], cwd=self.elsewhere,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=DEADLINE * 12)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("1 passed, 0 failed", done.stdout)
        self.assertEqual(os.listdir(env_tmp), [], "the unpacked kit is removed")
        self.assertEqual(set(os.listdir(self.tmp)) - before, {"tmp"})

    def test_no_command_or_an_unknown_one_is_a_usage_error(self):
        for args in ((), ("publish",)):
            with self.subTest(args=args):
                done = self.run_pyz(*args)
                self.assertEqual(done.returncode, 2)
                self.assertIn("usage: python3 outbox-kit.pyz {outbox,sink,grade}", done.stderr)
                self.assertNotIn("Traceback", done.stderr)
        done = self.run_pyz("--help")
        self.assertEqual((done.returncode, done.stderr), (0, ""))
