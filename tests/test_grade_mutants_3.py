"""grade.py must be able to fail: the mutants MUTANTS[2::3] (tests/grade_mutants.py), each killed by its check.

The same test as tests/test_grade_mutants_1.py, on another third, in a worker
process of its own so the thirds run in parallel.
"""
import unittest

from tests import test_grade_mutants_1 as first_part


class MutantTest(first_part.MutantTest):
    part = 2


if __name__ == "__main__":
    unittest.main()
