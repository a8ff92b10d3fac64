"""The kit in the environments lab hosts have: proxies, warnings as errors, LANG=C, a far time zone, odd directories.

Each test runs real processes: a sink (`python -m sink serve`), the
publisher's commands (`python -m outbox intake/pending/dispatch/status`),
`python -m sink show` and one grader check, all in one environment, from an
empty current directory, with TMPDIR pointing at a directory of the test's
own. Afterwards the current directory and TMPDIR must be as empty as before:
nothing writes outside the DB directory it was given. The read-only copy run
by another user is in test_environments_slow (it runs in parallel).
"""
import os
import signal
import subprocess
import unittest

from tests.support import (
    DEADLINE, PYTHON, ROOT, Child, LoopbackServer, TempDirTestCase, give_to_unprivileged, posix_only, python_env,
    reply, unprivileged_python,
)

GRADE = os.path.join(ROOT, "grade.py")
PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
FAR_FROM_UTC = "Pacific/Kiritimati"  # UTC+14, the furthest ahead there is
NOISE = ("Traceback", "Warning", "Exception ignored")
RUN_TIMEOUT = 120  # seconds for one command; the grader checks here take a few


class EnvironmentTestCase(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.data = self.path("data")  # the only directory anything may write to, besides TMPDIR
        self.cwd = self.path("cwd")
        self.tmpdir = self.path("tmp")
        for directory in (self.data, self.cwd, self.tmpdir):
            os.mkdir(directory)
        self.python = [PYTHON]

    def env(self, **extra):
        env = python_env(TMPDIR=self.tmpdir)
        env.update(extra)
        return env

    def run_python(self, args, env):
        return subprocess.run(self.python + list(args), cwd=self.cwd, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=RUN_TIMEOUT)

    def assert_quiet_success(self, label, result):
        self.assertEqual(result.returncode, 0, "%s: %s" % (label, result.stderr))
        for word in NOISE:
            self.assertNotIn(word, result.stderr, label)

    def walk_through(self, env):
        """The README's by-hand walk-through: serve, intake, pending, status, dispatch, show, stop."""
        source, sink_db = os.path.join(self.data, "source.db"), os.path.join(self.data, "sink.db")
        sink = Child(["serve", "--db", sink_db, "--port", "0"], self.cwd, python=self.python, env=env)
        self.addCleanup(sink.close)
        url = sink.line().strip() + "/events"
        steps = (
            ("intake", ["-m", "outbox", "intake", "--db", source, "--id", "snack-7", "--sku", "snack", "--qty", "7"],
             "taken in snack-7"),
            ("pending", ["-m", "outbox", "pending", "--db", source], '"id": "snack-7"'),
            ("status", ["-m", "outbox", "status", "--db", source], "head snack-7 (seq 1), attempts 0"),
            ("dispatch", ["-m", "outbox", "dispatch", "--db", source, "--url", url], "marked 1 sent"),
            ("status", ["-m", "outbox", "status", "--db", source], "pending 0, sent 1"),
            ("show", ["-m", "sink", "show", "--db", sink_db], "snack"),
        )
        for label, args, expected in steps:
            result = self.run_python(args, env)
            self.assert_quiet_success(label, result)
            self.assertIn(expected, result.stdout, label)
            self.assertNotIn("taken in -", result.stdout, label)  # no negative age from a time zone mix-up
        sink.signal(signal.SIGTERM)
        self.assertEqual(sink.wait(DEADLINE), 0, sink.stderr())
        stderr = sink.stderr()
        for word in NOISE:
            self.assertNotIn(word, stderr, "sink serve")

    def grade(self, env, *checks):
        args = [GRADE] + [arg for check in checks for arg in ("-k", check)]
        result = self.run_python(args, env)
        self.assert_quiet_success("grade.py", result)
        self.assertIn("%d passed, 0 failed" % len(checks), result.stdout)

    def assert_nothing_left(self):
        self.assertEqual(os.listdir(self.cwd), [], "written to the current directory")
        self.assertEqual(os.listdir(self.tmpdir), [], "left behind in TMPDIR")


class ProxyTest(EnvironmentTestCase):
    def test_proxy_variables_point_at_a_trap_that_sees_nothing(self):
        with LoopbackServer(lambda handler, body: reply(handler, 502, "{}")) as trap:
            env = self.env(**{name: trap.url("/") for name in PROXY_VARIABLES})
            env.pop("NO_PROXY", None)
            env.pop("no_proxy", None)
            self.walk_through(env)
            self.grade(env, "crash-after-ack")
            self.assertEqual(trap.requests, [])
        self.assert_nothing_left()


class LocaleAndClockTest(EnvironmentTestCase):
    def test_lang_c(self):
        env = self.env(LANG="C", LC_ALL="C")
        for name in ("PYTHONUTF8", "PYTHONIOENCODING", "LANGUAGE"):
            env.pop(name, None)
        self.walk_through(env)
        self.grade(env, "crash-after-ack")
        self.assert_nothing_left()

    def test_time_zone_far_from_utc(self):
        env = self.env(TZ=FAR_FROM_UTC)
        self.walk_through(env)
        self.grade(env, "seq-order")
        self.assert_nothing_left()


class DirectoryTest(EnvironmentTestCase):
    def test_current_directory_not_writable(self):
        """As root a mode cannot stop a write, so the walk-through runs as an unprivileged user when it can."""
        python, _ = unprivileged_python()
        if python:
            for directory in (self.data, self.tmpdir):
                give_to_unprivileged(directory)
            os.chmod(self.tmp, 0o755)
            self.python = python
        os.chmod(self.cwd, 0o555)
        self.addCleanup(os.chmod, self.cwd, 0o755)
        env = self.env()
        self.walk_through(env)
        self.grade(env, "crash-after-ack")
        self.assert_nothing_left()

    @posix_only("a directory made unwritable by chmod (Windows' chmod sets only a file's read-only flag: a folder "
                "stays writable)")
    def test_no_writable_temporary_directory(self):
        python, reason = unprivileged_python()
        if python is None and hasattr(os, "geteuid") and os.geteuid() == 0:
            self.skipTest(reason)  # root writes into a read-only TMPDIR anyway
        self.python = python or [PYTHON]
        os.chmod(self.tmp, 0o755)
        os.chmod(self.tmpdir, 0o555)
        self.addCleanup(os.chmod, self.tmpdir, 0o755)
        result = self.run_python([GRADE], self.env())
        self.assertNotIn(result.returncode, (0, 1), result.stdout + result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertIn(self.tmpdir, result.stderr)
        self.assert_nothing_left()


class WarningsAsErrorsTest(EnvironmentTestCase):
    """No ResourceWarning anywhere: every pipe, socket, file and connection is closed."""

    DEV_ENV = {"PYTHONWARNINGS": "error", "PYTHONDEVMODE": "1"}  # inherited by every child
    DEV_FLAGS = ["-X", "dev", "-W", "error"]  # this process only

    def test_commands_with_pythonwarnings_error_and_dev_mode(self):
        self.walk_through(self.env(**self.DEV_ENV))
        self.assert_nothing_left()

    def test_commands_with_x_dev_w_error(self):
        self.python = [PYTHON] + self.DEV_FLAGS
        self.walk_through(self.env())
        self.assert_nothing_left()

    def test_grader_with_pythonwarnings_error_and_dev_mode(self):
        self.grade(self.env(**self.DEV_ENV), "crash-after-ack", "dropped-response", "receive-atomic")
        self.assert_nothing_left()

    def test_grader_with_x_dev_w_error(self):
        self.python = [PYTHON] + self.DEV_FLAGS
        self.grade(self.env(), "crash-after-ack", "dropped-response", "receive-atomic")
        self.assert_nothing_left()


if __name__ == "__main__":
    unittest.main()
