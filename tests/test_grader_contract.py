"""grader.contract: the worker contract written once, and every copy held to it.

wire.CONTRACT, the signatures both stubs define, the call forms and extras
docs/participants(.ja).md lists, and the extras both stubs name.
"""
import importlib.util
import inspect
import os
import re
import unittest

from grader import contract, wire
from tests.support import ROOT, read_doc

STUBS = ("examples/worker_stub.py", "examples/worker_stub_ja.py")


def load(relpath):
    spec = importlib.util.spec_from_file_location("stub_under_test", os.path.join(ROOT, relpath))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def c1_bullet(text):
    """The contract's signatures bullet: from its start to its `<!-- rule: C1 -->` marker."""
    end = text.index("<!-- rule: C1 -->")
    return text[text.rindex("\n- ", 0, end):end]


class ContractTest(unittest.TestCase):
    def test_both_sides_check_the_signatures_of_the_one_source(self):
        from grader.worker_side import calls
        self.assertIs(wire.CONTRACT, contract.SIGNATURES)
        self.assertIs(calls.CONTRACT, contract.SIGNATURES)

    def test_each_stub_defines_exactly_the_signatures_and_names_every_extra(self):
        for relpath in STUBS:
            with self.subTest(stub=relpath):
                stub = load(relpath)
                defined = {name: "%s%s" % (name, inspect.signature(value)) for name, value in vars(stub).items()
                           if inspect.isfunction(value) and value.__module__ == stub.__name__}
                self.assertEqual(defined, contract.SIGNATURES)
                for extra in contract.EXTRAS:
                    self.assertIn(extra, stub.__doc__)

    def test_the_participants_page_lists_the_calls_in_order_and_every_extra(self):
        for relpath in ("docs/participants.md", "docs/participants.ja.md"):
            with self.subTest(doc=relpath):
                ticks = re.findall(r"`([^`]+)`", c1_bullet(read_doc(relpath)))
                self.assertEqual([tick for tick in ticks if "(" in tick], list(contract.CALLS))
                self.assertLessEqual(set(contract.EXTRAS), set(ticks))

    def test_every_call_form_is_a_call_of_a_contract_function(self):
        for call in contract.CALLS:
            self.assertIn(call.split("(")[0], contract.SIGNATURES)
        self.assertEqual(sorted({call.split("(")[0] for call in contract.CALLS}), sorted(contract.SIGNATURES))


if __name__ == "__main__":
    unittest.main()
