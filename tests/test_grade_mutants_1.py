"""grade.py must be able to fail: the first half of the mutants (tests/grade_mutants.py), each killed by its check."""
import concurrent.futures
import unittest

from tests import grade_mutants
from tests.support import TempDirTestCase

PART = 0  # this module grades MUTANTS[PART::PARTS]; tests/test_grade_mutants_2.py the rest, in a process of its own
PARTS = 2


class MutantTest(TempDirTestCase):
    part = PART

    def test_every_mutant_fails_the_check_that_targets_it(self):
        mutants = grade_mutants.MUTANTS[self.part::PARTS]
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            verdicts = list(pool.map(lambda pair: grade_mutants.judge(self.path("m%02d" % pair[0]), pair[1]),
                                     enumerate(mutants)))
        escaped = ["%s (%s: %s)" % (mistake, check, result["observed"])
                   for mistake, check, status, result in verdicts if result["ok"] or status != 1]
        self.assertEqual(escaped, [], "mutants the grader did not catch")
        for mistake, check, status, result in verdicts:
            self.assertEqual(result["name"], check)
            self.assertEqual(result["status"], "fail", mistake)
            self.assertNotIn("grader error", result["observed"], mistake)


if __name__ == "__main__":
    unittest.main()
