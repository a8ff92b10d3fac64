"""The README says what the code does: checks, commands and the example all exist and run."""
import os
import re
import subprocess
import sys
import unittest

from tests.support import ROOT, TempDirTestCase, python_env

with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as _f:
    README = _f.read()


def run(*args, env=None):
    return subprocess.run([sys.executable] + list(args), cwd=ROOT, env=env or python_env(), timeout=60,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)


class ReadmeTest(TempDirTestCase):
    def test_first_command_is_the_grader_and_the_test_command_is_make_test(self):
        commands = re.findall(r"```sh\n(.*?)```", README, re.S)
        self.assertTrue(commands[0].strip().startswith("python grade.py"), commands[0])
        self.assertIn("make test", commands[0])
        with open(os.path.join(ROOT, ".ci", "run")) as f:
            ci = f.read()
        self.assertLess(ci.index("make test"), ci.index("grade.py"))

    def test_every_check_is_documented(self):
        names = run("grade.py", "--list").stdout.split()
        self.assertGreaterEqual(len(names), 12)
        for name in names:
            self.assertIn("| `%s` |" % name, README)

    def test_every_cli_command_has_help_and_is_in_the_readme(self):
        for package, commands in (("outbox", ("intake", "pending", "dispatch", "status")), ("sink", ("serve", "show"))):
            for command in commands:
                result = run("-m", package, command, "--help")
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn("--db", result.stdout)
                self.assertIn("python -m %s %s" % (package, command), README)
        self.assertEqual(run("grade.py", "--help").returncode, 0)

    def test_the_python_example_runs(self):
        example = re.search(r"```python\n(.*?)```", README, re.S).group(1)
        example = example.replace("/tmp/", self.tmp + "/")
        result = run("-c", example)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.strip(), "1")


if __name__ == "__main__":
    unittest.main()
