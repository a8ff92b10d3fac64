"""grader/corpus/__init__.py: outcomes keep their types, a comparison can fail, and seeds reproduce."""
import unittest

from grader import corpus
from grader.common import Fail
from grader.corpus import acks, events, marks, urls

FAMILIES = (events, urls, acks, marks)


class OutcomeTest(unittest.TestCase):
    def test_values_that_compare_equal_in_python_are_different_outcomes(self):
        self.assertNotEqual(corpus.typed(True), corpus.typed(1))
        self.assertNotEqual(corpus.typed(1), corpus.typed(1.0))
        self.assertNotEqual(corpus.typed({"qty": 1}), corpus.typed({"qty": True}))
        self.assertEqual(corpus.typed({"b": 1, "a": 2}), corpus.typed({"a": 2, "b": 1}))

    def test_differs_says_why_and_none_only_for_the_rules_outcome(self):
        got_true = corpus.observed(lambda: True)
        self.assertIsNone(corpus.differs(corpus.returns(True), got_true))
        self.assertEqual(corpus.differs(corpus.returns(True), corpus.observed(lambda: 1)), "another value")
        self.assertEqual(corpus.differs(corpus.raises("ValueError"), got_true), "returned")
        raised = corpus.observed(lambda: {}["qty"])
        self.assertEqual(corpus.differs(corpus.raises("ValueError"), raised), "another class")
        self.assertIsNone(corpus.differs(corpus.raises("LookupError"), raised))
        self.assertEqual(corpus.differs(corpus.raises("KeyError", "sku"), raised), "no field named")
        self.assertEqual(corpus.differs(corpus.returns(True), raised), "raised")

    def test_a_memory_error_is_never_an_outcome(self):
        def exhausted():
            raise MemoryError()
        self.assertRaises(MemoryError, corpus.observed, exhausted)

    def test_the_graders_own_verdict_is_never_an_outcome(self):
        def refused():
            raise Fail({"id": "impl.signature", "fields": {}}, {"id": "plain", "fields": {"text": "x"}})
        self.assertRaises(Fail, corpus.observed, refused)


class SeedTest(unittest.TestCase):
    def test_a_seed_reproduces_every_corpus_and_another_seed_changes_only_the_seeded_cases(self):
        for family in FAMILIES:
            with self.subTest(family=family.__name__):
                first, again, other = family.cases(24), family.cases(24), family.cases(7)
                self.assertEqual(first, again)
                self.assertNotEqual(first, other)
                self.assertEqual(len(first), len(other))
                # Boundary first: the cases before the seeded ones do not depend on the seed.
                same = next(i for i, (a, b) in enumerate(zip(first, other)) if a != b)
                self.assertGreater(same, 50, family.__name__)
                self.assertEqual([c.n for c in first], list(range(1, len(first) + 1)))

    def test_every_family_has_a_few_hundred_cases_of_every_class_it_claims(self):
        for family in FAMILIES:
            with self.subTest(family=family.__name__):
                found = {c.cls for c in family.cases(corpus.DEFAULT_SEED)}
                self.assertEqual(sorted(found), sorted(family.CLASSES))
                self.assertGreaterEqual(len(family.cases(corpus.DEFAULT_SEED)), 140)


if __name__ == "__main__":
    unittest.main()
