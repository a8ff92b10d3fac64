"""`pip install .` offline with the kit's own build backend, and the three commands it installs, run from elsewhere.

pip is told to use no index (and gets no proxy), so a build dependency from a
registry would fail here; the wheel is then listed member by member. Skipped
by name where this interpreter has no pip.
"""
import base64
import hashlib
import os
import subprocess
import sys
import unittest
import zipfile

from tests.support import DEADLINE, ROOT, TempDirTestCase, python_env

sys.path.insert(0, os.path.join(ROOT, "backend"))
import kitbuild  # noqa: E402


def have_pip():
    return subprocess.run([sys.executable, "-m", "pip", "--version"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def offline_env(**extra):
    env = python_env(**extra)
    for name in list(env):
        if name.lower().endswith("_proxy"):
            del env[name]
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


@unittest.skipUnless(have_pip(), "no pip for this interpreter: pip install . cannot be tried")
class PipInstallTest(TempDirTestCase):
    def test_pip_install_offline_gives_three_commands_that_work_from_another_folder(self):
        site = self.path("site")
        done = subprocess.run([sys.executable, "-m", "pip", "install", ROOT, "--no-index", "--target", site, "-q"],
                              cwd=self.tmp, env=offline_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=DEADLINE * 18)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        elsewhere = self.path("elsewhere")
        os.mkdir(elsewhere)
        env = offline_env()
        env["PYTHONPATH"] = site  # what --target asks for; a venv or the user's site needs nothing
        for command, args, words in (("outbox", ["--help"], "COMMAND"), ("outbox-sink", ["--help"], "serve"),
                                     ("outbox-grade", ["-k", "crash-after-ack"], "1 passed, 0 failed")):
            with self.subTest(command=command):
                script = os.path.join(site, "bin", command)
                ran = subprocess.run([script] + args, cwd=elsewhere, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, universal_newlines=True, timeout=DEADLINE * 12)
                self.assertEqual(ran.returncode, 0, ran.stdout + ran.stderr)
                self.assertIn(words, ran.stdout)
        self.assertEqual(os.listdir(elsewhere), [], "a command wrote into the folder it was run from")

    def test_the_wheel_holds_only_the_kit_and_a_record_that_checks(self):
        name = kitbuild.build_wheel(self.tmp)
        self.assertEqual(name, "outbox_kit-%s-py3-none-any.whl" % kitbuild.version())
        with zipfile.ZipFile(self.path(name)) as wheel:
            names = wheel.namelist()
            record = wheel.read("outbox_kit-%s.dist-info/RECORD" % kitbuild.version()).decode("utf-8")
            contents = {member: wheel.read(member) for member in names}
        tops = {member.split("/", 1)[0] for member in names}
        self.assertEqual(tops, {"outbox", "sink", "grader", "grade.py", "outbox_kit-%s.dist-info" % kitbuild.version()})
        self.assertFalse([member for member in names if "__pycache__" in member or member.startswith("tests")])
        for line in record.splitlines():
            member, digest, size = line.rsplit(",", 2)
            if member.endswith("RECORD"):
                continue
            data = contents[member]
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
            self.assertEqual((digest, int(size)), ("sha256=" + expected, len(data)), member)
        self.assertEqual(len(record.splitlines()), len(names))


if __name__ == "__main__":
    unittest.main()
