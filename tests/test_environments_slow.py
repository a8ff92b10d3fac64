"""A read-only copy of the kit, run by an unprivileged user: the suite and the grader pass, nothing is left behind.

The kit's files are copied into a temporary directory and made read-only
for everyone (chmod -R a-w); `nobody` then runs `tests/run.py` and
`grade.py` from inside the copy, with TMPDIR set to an empty directory of
its own, which must be empty again afterwards. Needs root (to become
`nobody`); skipped otherwise. The interpreter is this one if `nobody` may
run it, else the system's python3 (an interpreter under /root/.pyenv is out
of that user's reach, as it would be on a real host). Its own module, so it
runs in parallel with the rest of the suite.
"""
import os
import subprocess
import unittest

from tests.support import (
    TempDirTestCase, checked_by_make_test, copy_kit, give_to_unprivileged, posix_only, python_env, set_tree_mode,
    tree_listing, unprivileged_python,
)

# The nested suite: the modules that write files or start the CLIs, the races
# between processes on one sink DB (a mutant patched into a writable copy of
# the read-only kit) and the read-only monitoring. Left out, to keep the
# outer suite well under its 3 minutes on a loaded 2-core machine: the
# grader's modules (grade.py itself runs in full below), test_sink_server and
# test_outbox_sender (sockets, and no file but their temporary DBs),
# test_docs and test_layout (they only read the kit), and the environment
# modules themselves (no recursion). The whole suite passes there too: see
# CONTRIBUTING.md, "Tests".
NESTED_MODULES = (
    "tests.test_outbox_store", "tests.test_outbox_dispatch", "tests.test_outbox_db", "tests.test_outbox_event",
    "tests.test_outbox_readonly", "tests.test_sink_inbox", "tests.test_outbox_cli", "tests.test_sink_cli",
)
RUN_TIMEOUT = 300  # seconds for the nested suite or the grader; a bound, not a speed target


@posix_only("another user to run the copy (setpriv --reuid=nobody) and a tree made read-only by chmod")
class ReadOnlyCopyTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.python, reason = unprivileged_python()
        if self.python is None:
            self.skipTest(reason)
        again = checked_by_make_test(self.python[-1])
        if again:
            self.skipTest(again)
        os.chmod(self.tmp, 0o755)
        self.kit = self.path("kit")
        os.mkdir(self.kit)
        copy_kit(self.kit)
        self.addCleanup(set_tree_mode, self.kit, writable=True)  # before the removal, which runs last
        self.before = tree_listing(self.kit)
        self.tmpdir = self.path("tmp")
        os.mkdir(self.tmpdir)
        give_to_unprivileged(self.tmpdir)

    def run_in_copy(self, *args):
        env = python_env(TMPDIR=self.tmpdir, PYTHONPATH=self.kit, HOME=self.tmpdir)
        return subprocess.run(self.python + list(args), cwd=self.kit, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=RUN_TIMEOUT)

    def assert_nothing_left(self):
        self.assertEqual(os.listdir(self.tmpdir), [], "left behind in TMPDIR")
        self.assertEqual(tree_listing(self.kit), self.before, "written into the read-only copy")

    def test_the_copy_is_really_read_only_for_that_user(self):
        result = self.run_in_copy("-c", "open('written-here', 'w')")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("PermissionError", result.stderr)
        self.assert_nothing_left()

    def test_suite_passes(self):
        result = self.run_in_copy(os.path.join("tests", "run.py"), *NESTED_MODULES)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr[-3000:])
        self.assertRegex(result.stdout, r"\b[1-9]\d* passed, 0 failed")
        self.assert_nothing_left()

    def test_grader_passes(self):
        result = self.run_in_copy("grade.py")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        self.assertRegex(result.stdout, r"\b[1-9]\d* passed, 0 failed")
        self.assert_nothing_left()


if __name__ == "__main__":
    unittest.main()
