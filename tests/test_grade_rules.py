"""docs/rules.md holds: every rule the worker docs state has a row, a check and mutants that break it.

A rule is marked where docs/participants.md or docs/lab.md states it (`<!-- rule: ID -->`
after it); docs/rules.md gives each one a row: its check and the mutants of
tests/grade_mutants.py that break it. This module checks the table against
the docs, the registry and the mutants; tests/test_grade_mutants_*.py run
each mutant with -k on the check its row names, so the runs that prove a row
are the mutant tests' own, never repeated here. It also grades the worker
written from the docs alone (tests/workers/independent.py): it must pass.
"""
import json
import os
import re
import sys
import unittest

from tests import grade_mutants
from tests.grade_mutants import grade
from tests.support import ROOT

sys.path.insert(0, ROOT)
from grader import corpus  # noqa: E402
from grader.corpus import acks, events, marks, urls  # noqa: E402
from grader.registry import NAMES  # noqa: E402

MARKER = re.compile(r"<!-- rule: ([A-Z][0-9]+(?:, [A-Z][0-9]+)*) -->")
ROW = re.compile(r"^\| ([A-Z][0-9]+) \| (.+?) \| (.+?) \| `([a-z-]+)` \| (.+) \| (.+?) \|$", re.M)
# How a row's check covers its rule: a corpus (its family, its size, the classes of input it probes) or a scenario.
CORPUS = re.compile(r"(?:corpus `(\w+)` of (\d+) cases, classes: |コーパス `(\w+)`（(\d+)件、分類: )(.+?)）?$")
SCENARIO = ("scenario: ", "シナリオ: ")
FAMILIES = {"events": (events, "validate-event"), "urls": (urls, "url-rule"), "acks": (acks, "untrusted-ack"),
            "marks": (marks, "mark-sent")}
INDEPENDENT = os.path.join(ROOT, "tests", "workers", "independent.py")
# The one sentence on the callbacks' copies, in the same words wherever a worker reads about dispatch.
COPIES = ("`send` and `after_delivery` each get a copy of their own of the selected event (a new dict with "
          "`id`, `sku`, `qty`); `dispatch` marks with the id of its own selection, so rewriting a copy changes nothing")
COPIES_JA = ("`send` と `after_delivery` は、選ばれたイベントのコピー（`id`・`sku`・`qty` を持つ新しいdict）をそれぞれ"
             "自分専用に受け取ります。`dispatch` は自分が選んだIDで完了印を付けるので、コピーを書き換えても何も変わりません")


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def table(text):
    """[(rule id, check, [mutants])] from a rules table."""
    return [(rule, check, re.findall(r"`([^`]+)`", mutants)) for rule, _, _, check, mutants, _ in ROW.findall(text)]


def coverage(text):
    """{rule id: (family, size, [classes])} for the rows a corpus covers, {rule id: None} for the scenarios."""
    found = {}
    for rule, _, _, _, _, cover in ROW.findall(text):
        match = CORPUS.match(cover)
        if match:
            family, size = match.group(1) or match.group(3), int(match.group(2) or match.group(4))
            found[rule] = (family, size, re.findall(r"`([a-z0-9-]+)`", match.group(5)))
        else:
            found[rule] = None if cover.startswith(SCENARIO) and len(cover) > 20 else cover
    return found


def markers(text):
    return {rule for found in MARKER.findall(text) for rule in found.split(", ")}


def bullets(section):
    """The top-level bullets of the lists in `section`, each with its continuation and nested lines."""
    items, current = [], None
    for line in section.splitlines():
        if line.startswith("- "):
            current = [line]
            items.append(current)
        elif current is not None and line.startswith(" ") and line.strip():
            current.append(line)
        else:
            current = None
    return ["\n".join(item) for item in items]


def words(text):
    """`text` with every run of whitespace, and a docstring's line breaks, as one space; a line break between two
    characters that are not ASCII as nothing, since Japanese wraps with no space between its words."""
    text = re.sub(r"(?<=[^\x00-\x7f])[ \t]*\n[ \t]*(?=[^\x00-\x7f])", "", text)
    return " ".join(text.split())


class RulesTableTest(unittest.TestCase):
    rules = table(read("docs", "rules.md"))

    def test_every_row_names_a_check_and_mutants_that_fail_by_it(self):
        self.assertGreater(len(self.rules), 50)
        ids = [rule for rule, _, _ in self.rules]
        self.assertEqual(len(ids), len(set(ids)), "a rule id twice")
        for rule, check, mutants in self.rules:
            with self.subTest(rule=rule):
                self.assertIn(check, NAMES)
                self.assertTrue(mutants, "no mutant")
                for mistake in mutants:
                    self.assertIn(mistake, grade_mutants.BY_MISTAKE)
                    # tests/test_grade_mutants_*.py run each mutant with -k on exactly this check.
                    self.assertEqual(grade_mutants.BY_MISTAKE[mistake].check, check, mistake)

    def test_every_check_proves_a_rule_and_every_mutant_breaks_one(self):
        self.assertEqual(sorted(set(NAMES) - {check for _, check, _ in self.rules}), [])
        named = [mistake for _, _, mutants in self.rules for mistake in mutants]
        self.assertEqual(sorted(m for m in named if named.count(m) > 1), [], "a mutant in two rows")
        self.assertEqual(sorted(set(grade_mutants.BY_MISTAKE) - set(named)), [], "mutants in no row")

    def test_every_marked_rule_has_a_row_and_every_row_a_mark(self):
        marked = markers(read("docs", "participants.md")) | markers(read("docs", "lab.md"))
        ids = {rule for rule, _, _ in self.rules}
        self.assertEqual(sorted(marked - ids), [], "rules marked in the docs without a row")
        self.assertEqual(sorted(ids - marked), [], "rows for rules the docs do not mark")

    def test_every_guarantee_the_lab_and_the_readme_list_is_marked(self):
        lab = read("docs", "lab.md")
        lists = re.findall(r"It must guarantee:\n\n(.*?)\n\nProved by:", lab, re.S)
        self.assertEqual(len(lists), 8, "one list per step")
        readme = read("docs", "participants.md")
        lists.append(readme.split("### The worker contract", 1)[1].split("Not part of the contract", 1)[0])
        for section in lists:
            for bullet in bullets(section):
                self.assertRegex(bullet, MARKER, "a rule without its mark:\n" + bullet)

    def test_the_japanese_table_has_the_same_rows(self):
        self.assertEqual(table(read("docs", "rules.ja.md")), self.rules)
        self.assertEqual(coverage(read("docs", "rules.ja.md")), coverage(read("docs", "rules.md")))

    def test_every_row_says_how_its_check_covers_it_and_the_corpora_are_as_large_as_it_says(self):
        covered = coverage(read("docs", "rules.md"))
        checks = dict((rule, check) for rule, check, _ in self.rules)
        self.assertEqual(sorted(covered), sorted(checks))
        claimed = {}
        for rule, cover in covered.items():
            with self.subTest(rule=rule):
                self.assertFalse(isinstance(cover, str), "neither a corpus nor a scenario: %r" % (cover,))
                if cover is None:
                    continue
                family, size, classes = cover
                module, check = FAMILIES[family]
                self.assertEqual(checks[rule], check, "the corpus runs in another check")
                self.assertEqual(size, len(module.cases(corpus.DEFAULT_SEED)))
                self.assertTrue(classes)
                self.assertEqual(sorted(set(classes) - set(module.CLASSES)), [], "classes the corpus does not have")
                claimed.setdefault(family, set()).update(classes)
        for family, (module, _) in FAMILIES.items():
            self.assertEqual(sorted(set(module.CLASSES) - claimed.get(family, set())), [], "classes no row names")

    def test_the_callbacks_copies_in_the_same_words_in_readme_lab_and_stubs(self):
        for sentence, places in ((COPIES, (("docs", "participants.md"), ("docs", "lab.md"), ("examples", "worker_stub.py"))),
                                 (COPIES_JA, (("docs", "participants.ja.md"), ("docs", "lab.ja.md"),
                                              ("examples", "worker_stub_ja.py")))):
            for where in places:
                text = re.sub(r"<!--.*?-->", "", read(*where))
                self.assertTrue(sentence in words(text), "%s does not say: %s" % (os.path.join(*where), sentence))


class IndependentWorkerTest(unittest.TestCase):
    def test_a_worker_written_from_the_docs_alone_passes_every_check(self):
        status, out, err = grade("--impl", INDEPENDENT, "--json")
        report = json.loads(out)
        failed = ["%s: %s / %s" % (c["name"], c["expected"], c["observed"]) for c in report["checks"] if not c["ok"]]
        self.assertEqual(failed, [], err[-2000:])
        self.assertEqual((status, [c["name"] for c in report["checks"]]), (0, list(NAMES)))


if __name__ == "__main__":
    unittest.main()
