"""grader/corpus/events.py: the validate_event corpus, its classes, and the kit's reference against it."""
import copy
import unittest

from grader.corpus import DEFAULT_SEED, differs, events, observed
from outbox.core.event import validate_event


class EventCorpusTest(unittest.TestCase):
    def test_the_kits_validate_event_gives_the_rules_outcome_on_every_case(self):
        for seed in (DEFAULT_SEED, 7):
            for case in events.cases(seed):
                event = copy.deepcopy(case.args[0])
                why = differs(events.reference_outcome(event), observed(lambda: validate_event(event)))
                self.assertIsNone(why, (seed, case))

    def test_each_class_holds_the_inputs_it_names(self):
        by_class = {}
        for case in events.cases(DEFAULT_SEED):
            by_class.setdefault(case.cls, []).append(case.args[0])
        valid = [events.reference_outcome(e)["kind"] for e in by_class["valid"]]
        self.assertEqual(set(valid), {"returned"})
        for cls, events_of in by_class.items():
            if cls != "valid":
                self.assertEqual({events.reference_outcome(e)["kind"] for e in events_of}, {"raised"}, cls)
        names = [e[f] for e in by_class["name-non-ascii-digit"] for f in ("id", "sku") if e[f] != events.BASE[f]]
        self.assertTrue(all(any(c.isnumeric() and not c.isascii() for c in n) for n in names))
        self.assertIn(True, [e["qty"] for e in by_class["qty-bool"]])
        self.assertTrue(any(e.get("id", "").endswith("\n") for e in by_class["name-whitespace"] if isinstance(e, dict)))
        self.assertEqual({len(e["id"]) for e in by_class["name-length"] if e["id"] != events.BASE["id"]} & {0, 65},
                         {0, 65})

    def test_a_mistake_of_one_rule_differs_somewhere(self):
        import re
        loose = re.compile(r"[^\W_][\w.:-]{0,63}$")  # \w and $: non-ASCII names and a trailing newline pass

        def lenient(event):
            if not isinstance(event, dict) or set(event) != {"id", "sku", "qty"}:
                raise ValueError("keys: id, sku, qty")
            for field in ("id", "sku"):
                if not isinstance(event[field], str) or not loose.match(event[field]):
                    raise ValueError(field)
            if isinstance(event["qty"], bool) or not isinstance(event["qty"], int) or not 1 <= event["qty"] <= 10 ** 6:
                raise ValueError("qty")
            return dict(event)

        wrong = [c.cls for c in events.cases(DEFAULT_SEED)
                 if differs(events.reference_outcome(c.args[0]), observed(lambda: lenient(c.args[0])))]
        self.assertIn("name-non-ascii-digit", wrong)
        self.assertIn("name-whitespace", wrong)


if __name__ == "__main__":
    unittest.main()
