"""grader.registry: every check defined once, and what is made from it.

--list, the README's tables of checks (in each language), a mutant for every
new rule; and the parent side never imports the worker, the kit or the
child side.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from grader import messages
from grader.registry import CHECKS, NAMES, POINTS, RULES
from tests import grade_mutants
from tests.grade_mutants import grade
from tests.support import ROOT, python_env


class RegistryTest(unittest.TestCase):
    def test_one_definition_per_check(self):
        self.assertEqual(len(NAMES), len(set(NAMES)))
        for check in CHECKS:
            self.assertIn(check.proves, messages.MESSAGES["en"])
            # own-work judges the submission itself, not a contract function: the one check that needs none.
            self.assertTrue(check.needs or check.name == "own-work", check.name)
            self.assertTrue(callable(check.run), check.name)

    def test_list_prints_the_registry_in_order_with_each_checks_default_points(self):
        status, out, err = grade("--list", "--lang", "en")
        self.assertEqual(status, 0, err)
        self.assertEqual([line.split() for line in out.splitlines()],
                         [[name, str(POINTS[name]), "points"] for name in NAMES])

    def test_every_check_has_its_points_out_of_100(self):
        self.assertEqual(sorted(POINTS), sorted(NAMES))
        self.assertEqual(sum(POINTS.values()), 100)
        for name, points in POINTS.items():
            self.assertIs(type(points), int, name)
            self.assertGreater(points, 0, name)

    def test_the_rules_of_each_check_are_those_docs_rules_md_gives_it(self):
        with open(os.path.join(ROOT, "docs", "rules.md"), encoding="utf-8") as f:
            rows = [line.split(" | ") for line in f.read().splitlines() if re.match(r"\| [A-Z]+[0-9]+ \| ", line)]
        wanted = {}
        for cells in rows:  # | rule | what a worker must do | stated in | `check` | ...
            wanted.setdefault(cells[3].strip("`"), []).append(cells[0].lstrip("| "))
        self.assertGreater(len(rows), 40)
        self.assertEqual({name: list(rules) for name, rules in RULES.items()}, wanted)

    def test_the_readme_table_is_the_registry(self):
        # Each README's table of checks, in the registry's order, says what its language's `proves` text says.
        for name, heading, lang in (("docs/participants.md", "### The checks", "en"), ("docs/participants.ja.md", "### チェック一覧", "ja")):
            with self.subTest(readme=name):
                with open(os.path.join(ROOT, name), encoding="utf-8") as f:
                    readme = f.read()
                section = readme.split(heading, 1)[1].split("\n\n", 2)[1]
                rows = re.findall(r"(?m)^\| `([a-z-]+)` \| (.*) \|$", section)
                self.assertEqual(rows, [(check.name, messages.text(lang, check.proves)) for check in CHECKS])

    def test_every_new_rule_has_a_mutant(self):
        aimed = {mutant.check for mutant in grade_mutants.MUTANTS}
        for name in ("url-rule", "send-timeout", "pending-cost", "conflict-committed", "wrong-database", "durability",
                     "validate-event", "intake-idempotent"):
            self.assertIn(name, aimed)
        self.assertLessEqual(aimed, set(NAMES))

    def test_a_patch_that_no_longer_applies_names_its_mutant(self):
        tmp = tempfile.mkdtemp(prefix="outbox-kit-test-")
        self.addCleanup(shutil.rmtree, tmp, True)
        with self.assertRaisesRegex(grade_mutants.StalePatch, "mutant 'gone': its patch text occurs 0 times in outbox/core/store.py"):
            grade_mutants.make_mutant(tmp, "gone", [("no such text in the kit", "")], "outbox/core/store.py")

    def test_the_parent_imports_neither_the_worker_nor_the_kit(self):
        code = ("import sys; sys.path.insert(0, %r); import grader.cli; "
                "print(sorted(m for m in sys.modules if m.split('.')[0] in ('outbox', 'sink', 'worker_under_test')))" % ROOT)
        result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=python_env(), timeout=60,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(result.stdout.strip(), "[]", result.stderr)
        for name in ("calls.py", "main.py"):  # the worker's side imports nothing of the deciding side
            with open(os.path.join(ROOT, "grader", "worker_side", name), encoding="utf-8") as f:
                source = f.read()
            self.assertNotRegex(source, r"from \.+(parent|scenarios|registry|cli|checks|drivers|remote)\b|"
                                        r"import (parent|scenarios|registry|cli|checks|drivers|remote)\b")

    def test_the_registry_names_in_process_checks_as_strings_and_checks_py_has_each(self):
        """Issue 22: the registry names each in-process check by its function's name, each one of checks.py."""
        from grader import checks
        named = [check.run.child_function for check in CHECKS if hasattr(check.run, "child_function")]
        self.assertGreaterEqual(len(named), 10)  # the probe finds the in-process checks at all
        self.assertEqual(sorted(named), sorted(checks.IN_PROCESS))


if __name__ == "__main__":
    unittest.main()
