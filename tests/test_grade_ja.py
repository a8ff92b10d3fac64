"""`grade.py --lang ja`: the Japanese report, read the way a participant reads it.

Real grade.py processes on the stub (every check FAILs) and on the kit (every
check PASSes); the language chosen by the option or by LANG / LC_ALL; and a
Japanese table that is really translated, not English copied over.
"""
import json
import os
import re
import string
import subprocess
import sys
import unittest

from tests.grade_mutants import GRADE, TIME_BOUND
from tests.support import ROOT, python_env

sys.path.insert(0, ROOT)
from grader import messages  # noqa: E402
from grader.cli import display_width  # noqa: E402
from grader.registry import NAMES  # noqa: E402

STUB = os.path.join(ROOT, "examples", "worker_stub.py")
# Ids whose text is the same in every language: program values, verdicts, and labels
# made only of identifiers (outbox, deliveries) followed by a value.
SAME_IN_EVERY_LANGUAGE = {"plain", "verdict.pass", "verdict.fail", "verdict.error", "evidence.not-sent",
                          "case.ack-string", "outbox.is", "deliveries.are", "conflict.deliveries"}
# English sentence templates of the report: none may survive in a Japanese one.
ENGLISH_TEMPLATES = ("expected:", "observed:", "grading ", "graded in", "grade:", "passed", "failed",
                     "raised", "check runs", "Evidence for", "observation", "Traceback")


def grade(*args, **env):
    """Run grade.py with `env` on top of a locale-free environment; (status, stdout, stderr) as UTF-8."""
    environ = {k: v for k, v in python_env().items() if not k.startswith("LC_") and k != "LANG"}
    environ.update(env)
    proc = subprocess.run([sys.executable, GRADE] + list(args), cwd=ROOT, env=environ, timeout=TIME_BOUND,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")


def check_lines(out, verdict):
    """{check name: (expected text, observed text)} for every `verdict` line of a Japanese report."""
    found = re.findall(r"(?m)^%s (\S+) +期待: (.+)\n {28}観測: (.+)$" % verdict, out)
    return {name: (expected, observed) for name, expected, observed in found}


def fill(template):
    return template.format(**{name: "<%s>" % name for _, name, _, _ in string.Formatter().parse(template) if name})


class JapaneseTableTest(unittest.TestCase):
    def test_every_message_is_translated_not_copied(self):
        english, japanese = messages.MESSAGES["en"], messages.MESSAGES["ja"]
        copied = sorted(i for i in english if fill(english[i]) == fill(japanese[i]) and i not in SAME_IN_EVERY_LANGUAGE)
        self.assertEqual(copied, [])
        for message_id in SAME_IN_EVERY_LANGUAGE:
            self.assertIn(message_id, english)

    def test_sentences_are_japanese(self):
        # Each translated message holds some kana or kanji; the English left in it is identifiers and values.
        for message_id, template in messages.MESSAGES["ja"].items():
            if message_id in SAME_IN_EVERY_LANGUAGE:
                continue
            with self.subTest(message_id=message_id):
                self.assertRegex(template, "[\u3000-\u30ff\u4e00-\u9fff]")

    def test_the_two_report_lines_stay_aligned(self):
        expected = messages.text("ja", "report.expected", verdict="FAIL", name="mark-sent", expected="x")
        observed = messages.text("ja", "report.observed", blank="", observed="x")
        self.assertEqual(display_width(expected.split("期待")[0]), display_width(observed.split("観測")[0]))


class JapaneseReportTest(unittest.TestCase):
    def test_the_stub_gets_a_readable_all_fail_report_in_japanese(self):
        status, out, err = grade("--lang", "ja", "--impl", STUB)
        self.assertEqual(status, 1, err)
        self.assertEqual(err, "")
        self.assertTrue(out.startswith("採点対象: examples/worker_stub.py\n"), out[:200])
        lines = check_lines(out, "FAIL")
        self.assertEqual(sorted(lines), sorted(NAMES))
        for name, (expected, observed) in lines.items():
            with self.subTest(check=name):
                self.assertRegex(expected, "[\u3000-\u30ff\u4e00-\u9fff]")
                self.assertRegex(observed, "[\u3000-\u30ff\u4e00-\u9fff]")
        self.assertRegex(out, r"\n採点時間: [0-9.]+秒\n採点結果: 合格 0、不合格 %d\n\Z" % len(NAMES))
        for template in ENGLISH_TEMPLATES:
            self.assertNotIn(template, out)
        # Three English words in a row would be a sentence left untranslated (the stub's errors are class names).
        self.assertEqual(re.findall(r"\b[A-Za-z]+ [a-z]+ [a-z]+\b", out), [])

    def test_the_kit_passes_and_prints_the_evidence_tables_in_japanese(self):
        status, out, err = grade("--lang", "ja")
        self.assertEqual(status, 0, out + err)
        self.assertEqual(sorted(check_lines(out, "PASS")), sorted(NAMES))
        self.assertIn("\n採点結果: 合格 %d、不合格 0\n" % len(NAMES), out)
        for name in ("crash-after-ack", "dropped-response"):
            with self.subTest(scenario=name):
                title = messages.text("ja", "evidence.title", name=name)
                self.assertIn("\n" + title + "\n", out)
                table = out.split(title + "\n", 1)[1].split("\n\n", 1)[0].splitlines()
                labels = [line.split("  ")[1] for line in table]
                self.assertEqual(labels, [messages.text("ja", label) for label in (
                    "evidence.observation", "evidence.order", "evidence.outbox", "evidence.inbox",
                    "evidence.deliveries", "evidence.ack", "evidence.inventory")])
                self.assertIn(messages.text("ja", "evidence.after", phase=messages.text("ja", "phase.intake")), table[0])
                self.assert_aligned(table)
        for template in ENGLISH_TEMPLATES:
            self.assertNotIn(template, out)

    def assert_aligned(self, table):
        """Every row's cells start at the header's columns, counted in display width (a kanji takes two)."""
        def starts(line):
            columns, width = [], 0
            for gap, cell in re.findall(r"( {2,})(\S+(?: \S+)*)", line):
                width += len(gap)
                columns.append(width)
                width += display_width(cell)
            return columns
        header = starts(table[0])
        self.assertEqual(len(header), 4, table[0])
        for line in table[1:]:
            self.assertEqual(starts(line), header, "\n".join(table))


class LanguageChoiceTest(unittest.TestCase):
    def test_lang_ja_in_the_environment_chooses_japanese(self):
        status, out, err = grade("--impl", STUB, "-k", "mark-sent", LANG="ja_JP.UTF-8")
        self.assertEqual(status, 1, err)
        self.assertIn("FAIL mark-sent", out)
        self.assertIn("\n採点結果: 合格 0、不合格 1\n", out)

    def test_lc_all_comes_before_lang(self):
        status, out, err = grade("--impl", STUB, "-k", "mark-sent", LANG="en_US.UTF-8", LC_ALL="ja_JP.UTF-8")
        self.assertIn("\n採点結果: 合格 0、不合格 1\n", out)
        status, out, err = grade("--impl", STUB, "-k", "mark-sent", LANG="ja_JP.UTF-8", LC_ALL="C.UTF-8")
        self.assertIn("\ngrade: 0 passed, 1 failed\n", out)

    def test_the_option_wins_over_the_environment(self):
        status, out, err = grade("--lang", "en", "--impl", STUB, "-k", "mark-sent", LANG="ja_JP.UTF-8")
        self.assertIn("\ngrade: 0 passed, 1 failed\n", out)
        self.assertNotRegex(out, "[\u3000-\u30ff\u4e00-\u9fff]")
        status, out, err = grade("--impl", STUB, "-k", "mark-sent")
        self.assertIn("\ngrade: 0 passed, 1 failed\n", out)

    def test_json_stays_language_neutral(self):
        status, out, err = grade("--lang", "ja", "--json", "--impl", STUB, "-k", "mark-sent")
        check = json.loads(out)["checks"][0]
        self.assertEqual((status, check["name"], check["status"]), (1, "mark-sent", "fail"))
        self.assertEqual(check["expected"], "the mark-sent check runs to its verdict")
        self.assertEqual(check["expected_message"], {"id": "check.runs", "fields": {"name": "mark-sent"}})

    def test_a_usage_error_is_one_japanese_line(self):
        status, out, err = grade("--lang", "ja", "-k", "no-such-check")
        self.assertEqual((status, out), (2, ""))
        self.assertRegex(err, r"\Agrade\.py: error: 'no-such-check' というチェックはありません。[^\n]*\n\Z")


if __name__ == "__main__":
    unittest.main()
