"""grade.py must be able to fail: a third of the mutants (tests/grade_mutants.py), each killed by its check.

Each mutant breaks one rule of docs/rules.md. The check aimed at it must
fail, with the message that names that rule (and, for its `also` checks,
the message that names the earlier function at fault), and that failure
must read in Japanese too (rendered from the report's message ids). One
class run per set of checks (grade_mutants.judge_all), with -k on exactly those checks;
tests/test_grade_mutants_2.py and _3.py take the other thirds, each in a
worker process of its own.
"""
import os
import shutil
import stat
import unittest

from tests import grade_mutants
from tests.support import ROOT, TempDirTestCase
from tests.test_grader_messages_ja import english_words, in_japanese

PART = 0  # this module grades MUTANTS[PART::PARTS]
PARTS = 3


class MutantTest(TempDirTestCase):
    part = PART

    def test_every_mutant_fails_the_check_that_targets_it_with_its_message(self):
        verdicts = grade_mutants.judge_all(self.tmp, grade_mutants.MUTANTS[self.part::PARTS])
        escaped = ["%s (%s: %s)" % (mutant.mistake, mutant.check, results[mutant.check]["observed"])
                   for mutant, status, results in verdicts if results[mutant.check]["ok"] or status != 1]
        self.assertEqual(escaped, [], "mutants the grader did not catch")
        for mutant, status, results in verdicts:
            with self.subTest(mistake=mutant.mistake):
                for check, message, words in [(mutant.check, mutant.message, mutant.words)] + [
                        (check, message, None) for check, message in mutant.also]:
                    result = results[check]
                    self.assertEqual(result["status"], "fail", check)
                    self.assertNotIn("grader error", result["observed"], check)
                    self.assertTrue(grade_mutants.says(result, message, words),
                                    "%s should say %s%s; it said: %s / %s" % (
                                        check, message, " (%r)" % words if words else "", result["expected"],
                                        result["observed"]))
                    # With --lang ja the same failure reads in Japanese: no English beyond names and the worker's text.
                    for key in ("expected_message", "observed_message"):
                        japanese = in_japanese(result[key])
                        self.assertEqual(english_words(japanese), [], "%s, %s in Japanese: %s" % (check, key, japanese))


class ReadOnlyCheckoutTest(TempDirTestCase):
    def test_mutants_are_made_from_a_read_only_checkout(self):
        checkout = self.path("checkout")
        for folder in ("outbox", "sink", "examples"):
            shutil.copytree(os.path.join(ROOT, folder), os.path.join(checkout, folder), copy_function=shutil.copy,
                            ignore=shutil.ignore_patterns("__pycache__"))
        for folder, dirs, files in os.walk(checkout):
            for name in files:
                os.chmod(os.path.join(folder, name), 0o444)
        original = grade_mutants.ROOT
        grade_mutants.ROOT = checkout
        try:
            worker = grade_mutants.make_mutant(self.path("mutant"), "order by id", grade_mutants.BY_MISTAKE["order by id"].edits,
                                               "outbox/core/store.py")
        finally:
            grade_mutants.ROOT = original
        with open(os.path.join(self.path("mutant"), "outbox", "core", "store.py"), encoding="utf-8") as f:
            self.assertIn("ORDER BY event_id", f.read())
        self.assertTrue(os.path.isfile(worker))
        # Checked by mode, not by a failed write: root may write to a read-only file anyway.
        for name in ("store.py", "event.py"):
            self.assertTrue(os.stat(os.path.join(self.path("mutant"), "outbox", "core", name)).st_mode & stat.S_IWUSR, name)


if __name__ == "__main__":
    unittest.main()
