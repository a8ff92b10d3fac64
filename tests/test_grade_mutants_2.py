"""grade.py must be able to fail: the second half of the mutants (tests/grade_mutants.py), each killed by its check.

The same test as tests/test_grade_mutants_1.py, on the other half, in a worker
process of its own so the two halves run in parallel.
"""
import unittest

from tests import test_grade_mutants_1 as first_half


class MutantTest(first_half.MutantTest):
    part = 1


if __name__ == "__main__":
    unittest.main()
