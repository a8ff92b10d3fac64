"""The crash matrix catches a broken kit: mutants with one classic mistake each break an invariant.

The mutants are test_grade's patches (one list of mistakes for the whole
suite), applied to a copy of the kit that the torture children import. Each
is run at the point aimed at it; its own module so it runs beside the slice.
"""
import functools
import os
import shutil

from tests.grade_mutants import MUTANTS, make_mutant
from tests.support import ROOT, TempDirTestCase, run_two_at_a_time
from tests.torture import matrix, points

# (mistake in grade_mutants.MUTANTS, the run that must catch it, words of the violation it must report)
CAUGHT = (
    ("sent=1 saved before sending", ("in-send", points.EXIT, 1), "is marked sent but the sink never applied it"),
    ("sink without dedup", ("after-ack", points.EXIT, 1), "was applied 2 times"),
    ("intake in two commits", ("between-inserts", points.EXIT, 1), "its intake never returned"),
    ("pending that marks rows", ("after-pending", points.KILL, 0), "is marked sent but the sink never applied it"),
)


class MutantsAreCaughtTest(TempDirTestCase):
    def test_each_mutant_breaks_an_invariant_of_the_run_aimed_at_it(self):
        mutants = {mutant.mistake: (mutant.path, mutant.edits) for mutant in MUTANTS}
        calls = []
        for number, (mistake, (key, mode, index), _) in enumerate(CAUGHT):
            root = self.path("mutant-%d" % number)
            path, edits = mutants[mistake]
            make_mutant(root, mistake, edits, path)
            shutil.copytree(os.path.join(ROOT, "tests"), os.path.join(root, "tests"), copy_function=shutil.copy,
                            ignore=shutil.ignore_patterns("__pycache__"))
            calls.append(functools.partial(
                matrix.run_case, points.BY_KEY[key], mode, index, self.path("run-%d" % number), root=root
            ))
        results = run_two_at_a_time(calls)
        for (mistake, _, words), result in zip(CAUGHT, results):
            with self.subTest(mistake=mistake):
                self.assertTrue(any(words in v for v in result.violations), result.violations)
