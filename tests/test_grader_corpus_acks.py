"""grader/corpus/acks.py: the ACK corpus, answered by a real loopback server, and the kit's send_http against it."""
import unittest

from grader.corpus import DEFAULT_SEED, acks, differs, observed
from grader.parent import AnswerSink
from outbox.core.sender import send_http


class AckCorpusTest(unittest.TestCase):
    def test_the_kits_send_http_gives_the_rules_outcome_on_every_answer(self):
        cases = acks.cases(DEFAULT_SEED)
        with AnswerSink({c.args[0]["id"]: acks.raw_answer(c.extra) for c in cases}) as sink:
            for case in cases:
                got = observed(lambda: send_http(sink.url(), case.args[0], timeout=5))
                self.assertIsNone(differs(acks.reference_outcome(case.args[0], case.extra), got), (case, got))
        self.assertEqual(len(sink.hits), len(cases))

    def test_the_caps_are_probed_on_both_sides_announced_or_not(self):
        sizes = {}
        for case in acks.cases(DEFAULT_SEED):
            if case.cls.startswith("body-size"):
                sizes.setdefault(case.extra["framing"], set()).add(len(case.extra["body"]))
        for framing in ("length", "close"):
            self.assertTrue({acks.MAX_ACK, acks.MAX_ACK + 1} <= sizes[framing], framing)

    def test_values_equal_to_true_in_python_and_loosely_equal_ids_are_refused(self):
        refused = [c for c in acks.cases(DEFAULT_SEED) if acks.reference_outcome(c.args[0], c.extra)["kind"] == "raised"]
        bodies = [c.extra["body"] for c in refused]
        self.assertTrue(any('"ack": 1,' in b for b in bodies))
        self.assertTrue(any('"ack": 1.0,' in b for b in bodies))
        self.assertTrue(any('"id": 1000' in b for b in bodies))  # the int where the str "1000" was sent
        self.assertTrue(any('"id": "ACK-' in b for b in bodies))


if __name__ == "__main__":
    unittest.main()
