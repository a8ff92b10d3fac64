"""`grade.py --lang ja`: the Japanese report, read the way a participant reads it.

Real grade.py processes on the Japanese stub (every check FAILs), on the
kit (every check PASSes), on a class (its table, its progress lines on a pipe
and on a terminal, its HTML page), on a worker that floods and one that runs
into a limit, and the quiz in Japanese; the language chosen by the option or
by LANG / LC_ALL; a Japanese table that is really translated, not English
copied over; no English left beyond identifiers, commands and the worker's
own text; argparse and --help in Japanese; and the Japanese stub the same
contract as the English one. (README.ja.md's table of checks is compared with
the Japanese `proves` texts in test_grader_registry.py; every mutant's messages
are scanned in Japanese by test_grade_mutants_*.py.)
"""
import ast
import csv
import html
import json
import os
import re
import string
import subprocess
import sys
import textwrap
import unittest

from tests.grade_mutants import GRADE, TIME_BOUND, without_protections_off
from tests.support import (ROOT, TempDirTestCase, posix_only, python_env, run_on_a_terminal, text_of,
                           write_worker)

sys.path.insert(0, ROOT)
from grader import messages  # noqa: E402
from grader.cli import display_width  # noqa: E402
from grader.wrap import NO_BREAK_BEFORE  # noqa: E402
from grader import quiz  # noqa: E402
from grader.quiz_questions import LETTERS, QUESTIONS  # noqa: E402
from grader.registry import NAMES, POINTS  # noqa: E402

REFERENCE = os.path.join(ROOT, "examples", "worker_reference.py")
STUB = os.path.join(ROOT, "examples", "worker_stub.py")
STUB_JA = os.path.join(ROOT, "examples", "worker_stub_ja.py")
# Ids with no words to translate: program values, verdicts, and layout.
NO_WORDS = {"plain", "verdict.pass", "verdict.fail", "verdict.error", "evidence.not-sent", "case.ack-string",
            "evidence.after", "own.allowed"}
# English words a Japanese report may hold: they are names, not prose. Anything with a digit, `_`, `-`,
# `.`, `/`, `=`, quotes or brackets in it is an identifier, a path or a value already (snack-7, mark_sent,
# os._exit(73), docs/lab.ja.md, 'ok'), and so are the check names.
IDENTIFIERS = set(NAMES) | {
    # tables, columns, functions and parameters of the worker's contract; the sku of the scenarios
    "orders", "outbox", "inbox", "deliveries", "inventory", "seq", "sent", "payload", "qty", "sku", "limit",
    "pending", "dispatch", "send", "receive", "intake", "id", "snack", "apple", "con", "event", "url", "path",
    # Python and JSON literals and types; exception classes, by the name the grader judges them by
    "True", "False", "None", "true", "false", "dict", "str", "int", "bool", "float",
    "NoAnswer", "UntrustedAck", "DeliveryError", "NotAcknowledged", "Conflict", "WrongDatabase", "ValueError",
    "KeyError", "NotImplementedError",
    # SQL and SQLite words, protocol and product names, as Japanese technical writing keeps them
    "BEGIN", "IMMEDIATE", "COMMIT", "WAL", "wal", "FULL", "EXTRA", "SQLite", "Python", "ACK", "DB", "ID", "HTTP", "JSON",
    "URL", "OS",
    # a term the glossary keeps in English (docs/glossary.ja.md: 関数やモジュールの説明文)
    "docstring",
    # the kernel's names for the layers of the box each worker runs in
    "Landlock", "seccomp", "ABI", "PID", "IPC", "uid",
    "loopback", "localhost", "synchronous",
    # the lab's own words for what it leaves out (claim・lease・fencing), and a page's title (「Atomic Commit」)
    "claim", "lease", "fencing", "Atomic", "Commit",
    # the verdicts of a check line
    "PASS", "FAIL",
    # more of the same kinds: SQL of the checks' texts, pragma values, Python's own classes, the sku and table of
    # the checks, units, the language codes, environment variables and --help's metavars
    "WHERE", "INTEGER", "PRIMARY", "KEY", "AUTOINCREMENT", "OFF", "NORMAL", "delete", "object", "Exception", "Error",
    "pear", "notes", "ASCII", "KiB", "MiB", "GiB", "en", "ja", "LANG", "PATH", "NAME", "DIR", "SECONDS", "FILE", "OUT", "Gradescope", "JOBS", "MB",
    "import",
}
JAPANESE = "[\u3000-\u30ff\u4e00-\u9fff]"
# English sentence templates of the report: none may survive in a Japanese one.
ENGLISH_TEMPLATES = ("expected:", "observed:", "grading ", "graded in", "grade:", "passed", "failed",
                     "raised", "check runs", "Evidence for", "observation", "Traceback")


def grade(*args, **env):
    """Run grade.py with `env` on top of a locale-free environment; (status, stdout, stderr) as UTF-8.

    stderr comes without the line that names the protections off on this system (Windows has one).
    """
    environ = {k: v for k, v in python_env().items() if not k.startswith("LC_") and k != "LANG"}
    environ.update(env)
    proc = subprocess.run([sys.executable, GRADE] + list(args), cwd=ROOT, env=environ, timeout=TIME_BOUND,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return proc.returncode, text_of(proc.stdout), without_protections_off(text_of(proc.stderr))


def check_lines(out, verdict):
    """{check name: (expected text, observed text)} for every `verdict` line of a Japanese report."""
    found = re.findall(r"(?m)^%s (\S+) +期待: (.+)\n {28}観測: (.+)$" % verdict, out)
    return {name: (expected, observed) for name, expected, observed in found}


def fill(template):
    """`template` with each field shown as <name> (a {name:terms} field as a one-item list)."""
    fields = {name: ["<%s>" % name] if spec == "terms" else "<%s>" % name
              for _, name, spec, _ in string.Formatter().parse(template) if name}
    return messages.Formatter("en").vformat(template, (), fields)


def english_words(text):
    """The plain English words in `text` that are no identifier: what a Japanese reader should not meet.

    The worker's own text, quoted in 「」 (an exception as "Class: message",
    or any quote of several words with no Japanese in it), the sink's JSON
    answers and the repr of an object are left out: they are what the
    program said. A CamelCase word (NotAcknowledged) is a class name.
    """
    text = re.sub(r"「[A-Z][A-Za-z0-9_]*(?:: [^」]*)?」", "", text)
    text = re.sub(r"「[^」\u3000-\u30ff\u4e00-\u9fff]* [^」\u3000-\u30ff\u4e00-\u9fff]*」", "", text)
    text = re.sub(r'\{"[^{}]*\}', "", text)
    text = re.sub(r"出力: 「[^」\n]*」", "", text)  # a line the worker printed, quoted as it printed it
    text = re.sub(r"<[\w.]+ object at 0x[0-9a-fA-F]+>", "", text)  # Windows writes the address in capitals
    words = set()
    for token in re.findall(r"[!-~]+", text):
        core = token.strip(".,;:!?")
        if (re.fullmatch(r"[A-Za-z]{2,}", core) and core not in IDENTIFIERS
                and not re.fullmatch(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+", core)):
            words.add(core)
    return sorted(words)


def in_japanese(message):
    """A message dict {"id", "fields"} (as --json reports it) rendered in Japanese."""
    return messages.render(message, "ja")


def page_text(path):
    """The text a browser shows of the HTML page at `path`: no style, no script, no tags, entities decoded."""
    with open(path, encoding="utf-8") as f:
        page = f.read()
    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"(?s)<style>.*?</style>|<script>.*?</script>", "", page)))


KANA_OR_KANJI = re.compile("[\u3005\u3041-\u3096\u30a1-\u30fa\u30fc\u4e00-\u9fff]")  # not the 「・」 between items


def code_spans_touching_kana_or_kanji(text):
    """The `code` spans of `text` with kana or a kanji right before or after them (its backticks paired in order)."""
    parts = text.split("`")
    touching = []
    for n in range(1, len(parts) - 1, 2):  # odd parts are inside backticks
        before, after = parts[n - 1][-1:], parts[n + 1][:1]
        if KANA_OR_KANJI.match(before) or KANA_OR_KANJI.match(after):
            touching.append(parts[n])
    return touching


class JapaneseTableTest(unittest.TestCase):
    def test_every_message_is_translated_not_copied(self):
        english, japanese = messages.MESSAGES["en"], messages.MESSAGES["ja"]
        copied = sorted(i for i in english if fill(english[i]) == fill(japanese[i]) and i not in NO_WORDS)
        self.assertEqual(copied, [])
        for message_id in NO_WORDS:
            self.assertIn(message_id, english)

    def test_sentences_are_japanese(self):
        # Each translated message holds some kana or kanji; the English left in it is identifiers and values.
        for message_id, template in messages.MESSAGES["ja"].items():
            if message_id in NO_WORDS:
                continue
            with self.subTest(message_id=message_id):
                self.assertRegex(template, "[\u3000-\u30ff\u4e00-\u9fff]")

    def test_code_spans_stand_apart_from_japanese_by_a_space(self):
        # messages_ja's rule (issue 26): `send_http` で, never `send_http`で; the same in the quiz's texts.
        texts = dict(messages.MESSAGES["ja"])
        texts.update(("quiz %d" % n, json.dumps(question, ensure_ascii=False)) for n, question in enumerate(QUESTIONS))
        for name, template in texts.items():
            touching = code_spans_touching_kana_or_kanji(template)
            with self.subTest(message=name):
                self.assertEqual(touching, [], template)

    def test_the_two_report_lines_stay_aligned(self):
        expected = messages.text("ja", "report.expected", verdict="FAIL", name="mark-sent", expected="x")
        observed = messages.text("ja", "report.observed", blank="", observed="x")
        self.assertEqual(display_width(expected.split("期待")[0]), display_width(observed.split("観測")[0]))

    def test_program_values_read_in_japanese(self):
        for value, japanese in (("pending", "未完了"), ("sent", "完了"), ("applied", "適用"), ("duplicate", "重複"),
                                ("conflict", "衝突"), ("present", "あり"), ("absent", "なし"), ("source", "受付"),
                                ("sink", "倉庫")):
            self.assertEqual(messages.term("ja", value), japanese)
            self.assertEqual(messages.term("en", value), value)
        self.assertEqual(messages.terms("ja", ["applied", "duplicate"]), "適用・重複")
        self.assertEqual(messages.terms("ja", []), "なし")
        self.assertEqual(messages.term("ja", "2 rows"), "2 rows")  # a value with no term is shown as it is
        self.assertEqual(messages.text("ja", "wrongdb.refused", opener="init_store", kind="sink"),
                         "倉庫DBに対するinit_storeがWrongDatabaseを送出し、ファイルを変えないこと")
        self.assertEqual(messages.text("en", "deliveries-inventory-outbox", deliveries=["applied", "duplicate"],
                                       inventory=7, outbox="sent"),
                         "deliveries ['applied', 'duplicate'], inventory 7, outbox sent")
        self.assertEqual(messages.text("ja", "deliveries-inventory-outbox", deliveries=["applied", "duplicate"],
                                       inventory=7, outbox="sent"),
                         "deliveriesは適用・重複、在庫は7、outboxは完了")

    def test_the_japanese_stub_is_the_english_stub_with_japanese_docstrings(self):
        def functions(path):
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            return tree, [node for node in tree.body if isinstance(node, ast.FunctionDef)]

        english_tree, english = functions(STUB)
        japanese_tree, japanese = functions(STUB_JA)
        self.assertEqual([ast.dump(f.args) for f in japanese], [ast.dump(f.args) for f in english])
        self.assertEqual([f.name for f in japanese], [f.name for f in english])
        for f_en, f_ja in zip(english, japanese):
            with self.subTest(function=f_ja.name):
                self.assertEqual([ast.dump(n) for n in f_ja.body[1:]], [ast.dump(n) for n in f_en.body[1:]])
                self.assertRegex(ast.get_docstring(f_ja), "[\u3040-\u30ff\u4e00-\u9fff]")
        self.assertRegex(ast.get_docstring(japanese_tree), "[\u3040-\u30ff\u4e00-\u9fff]")


class JapaneseReportTest(unittest.TestCase):
    def test_the_stub_gets_a_readable_all_fail_report_in_japanese(self):
        status, out, err = grade("--lang", "ja", "--impl", STUB_JA)
        self.assertEqual(status, 1, err)
        self.assertEqual(err, "")
        self.assertTrue(out.startswith("採点対象: %s\n" % os.path.join("examples", "worker_stub_ja.py")), out[:200])
        lines = check_lines(out, "FAIL")
        # The stub is its own work (own-work passes, as in English); every check of the contract fails.
        self.assertEqual(sorted(lines), sorted(set(NAMES) - {"own-work"}))
        self.assertRegex(out, r"(?m)^PASS own-work ")
        for name, (expected, observed) in lines.items():
            with self.subTest(check=name):
                self.assertRegex(expected, "[\u3000-\u30ff\u4e00-\u9fff]")
                self.assertRegex(observed, "[\u3000-\u30ff\u4e00-\u9fff]")
        self.assertRegex(out, r"\n得点: 100点中%d点\n採点時間: [0-9.]+秒\nコーパスのシード: 24（[^\n]*）\n採点結果: 合格1件、不合格%d件\n\Z" % (POINTS["own-work"], len(NAMES) - 1))
        for template in ENGLISH_TEMPLATES:
            self.assertNotIn(template, out)
        # Three English words in a row would be a sentence left untranslated (the stub's errors are class names).
        self.assertEqual(re.findall(r"\b[A-Za-z]+ [a-z]+ [a-z]+\b", out), [])

    def test_the_kit_passes_and_prints_the_evidence_tables_in_japanese(self):
        status, out, err = grade("--lang", "ja")
        self.assertEqual(status, 0, out + err)
        self.assertEqual(english_words(out), [])
        self.assertEqual(sorted(check_lines(out, "PASS")), sorted(NAMES))
        self.assertIn("\n採点結果: 合格%d件、不合格0件\n" % len(NAMES), out)
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
                self.assertIn("1号のあと", table[0])
                self.assertLessEqual(max(display_width(line) for line in [title] + table), 100)
                self.assert_aligned(table)
                cells = {line.split("  ")[1]: line.split()[1:] for line in table[1:]}
                self.assertEqual(cells[messages.text("ja", "evidence.outbox")], ["未完了", "未完了", "完了"])
                self.assertEqual(cells[messages.text("ja", "evidence.deliveries")], ["なし", "適用", "適用・重複"])
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


class NarrowOutputTest(unittest.TestCase):
    def test_an_output_that_cannot_hold_japanese_gets_escapes_and_the_whole_report(self):
        # As on Windows, where a pipe or a file takes the ANSI code page (cp1252): there this ended the run.
        status, out, err = grade("--lang", "ja", "-k", "durability", PYTHONIOENCODING="ascii")
        self.assertEqual(status, 0, err[-2000:])
        self.assertIn("\\u63a1\\u70b9\\u7d50\\u679c", out)  # 採点結果, the report's last line, as escapes
        self.assertNotIn("UnicodeEncodeError", out + err)


class LanguageChoiceTest(unittest.TestCase):
    def test_lang_ja_in_the_environment_chooses_japanese(self):
        status, out, err = grade("--impl", STUB, "-k", "mark-sent", LANG="ja_JP.UTF-8")
        self.assertEqual(status, 1, err)
        self.assertIn("FAIL mark-sent", out)
        self.assertIn("\n採点結果: 合格0件、不合格1件\n", out)

    def test_lc_all_comes_before_lang(self):
        status, out, err = grade("--impl", STUB, "-k", "mark-sent", LANG="en_US.UTF-8", LC_ALL="ja_JP.UTF-8")
        self.assertIn("\n採点結果: 合格0件、不合格1件\n", out)
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
        self.assertTrue(check["expected"].startswith("init_store keeps this check's rule on init_store('source.db')"),
                        check["expected"])
        self.assertEqual(check["expected_message"]["id"], "check.raised")

    def test_a_usage_error_is_one_japanese_line(self):
        status, out, err = grade("--lang", "ja", "-k", "no-such-check")
        self.assertEqual((status, out), (2, ""))
        self.assertRegex(err, r"\Agrade\.py: エラー: 'no-such-check'というチェックはありません。[^\n]*\n\Z")
        # argparse's own complaints too.
        for args, line in ((["--timeout", "x"], "引数--timeout: 'x'は数値（float）として解釈できません"),
                           (["--bogus"], "認識できない引数です: --bogus"),
                           (["--impl"], "引数--impl: 値を1つ指定してください")):
            with self.subTest(args=args):
                status, out, err = grade("--lang", "ja", *args)
                self.assertEqual((status, out, err), (2, "", "grade.py: エラー: %s\n" % line))
        status, out, err = grade("--lang", "xx", LANG="ja_JP.UTF-8")
        self.assertEqual(status, 2)
        self.assertRegex(err, r"\Agrade\.py: エラー: 引数--lang: 'xx'は選べません（選べる値: [^\n]*en[^\n]*ja[^\n]*）\n\Z")

    def test_help_is_japanese_and_wrapped_by_display_width(self):
        status, out, err = grade("--lang", "ja", "--help", COLUMNS="80")
        self.assertEqual((status, err), (0, ""))
        self.assertTrue(out.startswith("使い方: grade.py [-h] [--impl PATH]"), out[:80])
        self.assertIn("\nオプション:\n", out)
        self.assertIn("このヘルプを表示して終了します", out)
        for english in ("usage:", "options:", "optional arguments:", "show this help"):
            self.assertNotIn(english, out)
        self.assertEqual(english_words(out), [])
        lines = out.splitlines()
        self.assertLessEqual(max(display_width(line) for line in lines), 80, "\n".join(lines))
        # The usage's second line starts under the first one's program name, counted in columns.
        self.assertEqual(display_width(lines[1]) - len(lines[1].lstrip()), display_width("使い方: grade.py "))
        # A check name is never cut at its hyphen.
        flat = " ".join(line.strip() for line in lines)
        for name in NAMES:
            self.assertIn(name, flat)
        self.assertNotRegex(out, r"-\n")


class JapaneseQuizTest(unittest.TestCase):
    def test_the_quiz_in_japanese_has_no_english_beyond_identifiers(self):
        answers = "".join(LETTERS[order.index("a")] + "\n" for order in quiz.orders(7, QUESTIONS))
        environ = {k: v for k, v in python_env().items() if not k.startswith("LC_") and k != "LANG"}
        environ["LANG"] = "ja_JP.UTF-8"  # the locale alone chooses Japanese
        proc = subprocess.run([sys.executable, GRADE, "--quiz", "--seed", "7"], cwd=ROOT, env=environ,
                              timeout=TIME_BOUND, input=answers.encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = text_of(proc.stdout), text_of(proc.stderr)
        self.assertEqual((proc.returncode, err), (0, ""))
        self.assertEqual(english_words(out), [])
        self.assertEqual(out.count("\n正解です。"), len(QUESTIONS))
        self.assertTrue(out.endswith("\nクイズの結果: 全%d問中%d問正解\n" % (len(QUESTIONS), len(QUESTIONS))), out[-100:])
        self.assertIn("第1問（全%d問）\nこの実行で観測したこと: crash-after-ackで、パブリッシャー1号は" % len(QUESTIONS), out)

    def test_a_wrong_answer_is_refused_in_one_japanese_sentence(self):
        environ = {k: v for k, v in python_env().items() if not k.startswith("LC_") and k != "LANG"}
        proc = subprocess.run([sys.executable, GRADE, "--quiz", "--lang", "ja"], cwd=ROOT, env=environ,
                              timeout=TIME_BOUND, input=b"a\nx\n", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(text_of(proc.stderr),
                         "grade.py: --quiz: 2問目の答え'x'は、a、b、c、dのどれでもありません（答えは1行に1つ）。\n")
        # At a terminal the same answer is asked again.
        letters = messages.text("ja", "quiz.letters-or", letters="a、b、c", last="d")
        self.assertEqual(messages.text("ja", "quiz.not-a-choice", given="x", letters=letters),
                         "'x'は選択肢にありません。a、b、c、dのどれかで答えてください。")

    def test_the_scan_finds_english_prose(self):
        self.assertEqual(english_words("outboxは「未完了」、deliveries ['applied']、the sink answered"),
                         ["answered", "sink", "the"])
        self.assertEqual(english_words("パブリッシャー1号は「NoAnswer: POST http://x for 'snack-7': no answer」で失敗"), [])
        self.assertEqual(english_words("409、本文 {\"ack\": false, \"error\": \"conflict\"}"), [])
        self.assertEqual(english_words("outboxは pending"), [])  # pending is also the function's name: the table tests catch it
        self.assertEqual(english_words("deliveriesは applied"), ["applied"])
        # What the worker said, quoted, is its own; a single English word in 「」 is not.
        self.assertEqual(english_words("メッセージ: 「invalid event: True (bool)」"), [])
        self.assertEqual(english_words("outboxは「applied」"), ["applied"])
        self.assertEqual(english_words("<sqlite3.Cursor object at 0x7f8d5f76b5c0> (Cursor) を返しました"), [])
        self.assertEqual(english_words("<sqlite3.Cursor object at 0x000000000297BEC0> (Cursor) を返しました"), [])
        self.assertEqual(english_words("基底クラスは OutboxError, Exception, object です"), [])
        self.assertEqual(english_words("it returned 2 (int)"), ["it", "returned"])


BIG_FILE = """
    def validate_event(event):
        with open("big.bin", "wb") as f:  # 2 MiB, past --file-size 1
            f.write(b"x" * (2 * 1024 * 1024))
        return dict(event)
"""
FLOOD = """
    import sys as _sys


    def validate_event(event):
        _sys.stdout.write("x" * 300000 + "\\n")  # past what the grader keeps of a stream
        _sys.stdout.flush()
        raise ValueError("validate_event is not written yet")
"""


class JapaneseClassTest(TempDirTestCase):
    """A class graded with --lang ja: the table, the progress on stderr, the page; and the lines of one worker."""

    def test_the_class_table_the_progress_and_the_page_are_japanese(self):
        big = write_worker(self.path("class", "big_file.py"), BIG_FILE)
        no_compile = write_worker(self.path("class", "no_compile.py"), "def validate_event(:\n", kit=False)
        reports = self.path("reports")
        status, out, err = grade("--lang", "ja", "--impl", REFERENCE, "--impl", STUB_JA, "--impl", big, "--impl", no_compile,
                                 "--file-size", "1", "-k", "crash-after-ack", "-k", "validate-event", "--report", reports)
        self.assertEqual(status, 1, out + err)
        lines = out.splitlines()
        self.assertRegex(lines[0], r"^ワーカー +得点 +合格数 +最初の理由$")
        self.assertRegex(out, r"\n\nクラス: 全チェックに合格したワーカーは4件中1件、合格したチェックは8件中3件、得点は52点中23点"
                              r"（[0-9.]+秒）\n\Z")
        progress = err.splitlines()
        self.assertEqual(len(progress), 4, err)
        for line in progress:  # stderr is no terminal: one line per finished worker
            self.assertRegex(line, r"^\[[1-4]/4\] (worker_reference|worker_stub_ja|big_file|no_compile): 2件中[0-2]件合格"
                                   r"（[0-9.]+秒）(、残りはおよそ[0-9]+秒)?$")
        self.assertEqual(english_words(out + err), [])
        # The page people read follows --lang (the limit big_file runs into on POSIX: the case after this one) ...
        page = page_text(os.path.join(reports, "index.html"))
        self.assertIn("grade.py: クラスの採点結果", page)
        self.assertIn("snack-7の証拠", page)
        self.assertIn("観測: 1行目: 「SyntaxError: ", page)
        self.assertEqual(english_words(page), [])
        with open(os.path.join(reports, "index.html"), encoding="utf-8") as f:
            html_text = f.read()
        self.assertIn('<html lang="ja">', html_text)
        # A heading is the table's name; the note that goes with it is a paragraph; each student's table has a header row.
        self.assertIn("<h3>snack-7の証拠: crash-after-ack</h3>\n<p>各行は別々の観測で", html_text)
        with open(os.path.join(reports, "students", "worker_reference.html"), encoding="utf-8") as f:
            self.assertIn("<tr><th>チェック</th><th>判定</th><th>配点</th><th>規則</th><th>期待と観測</th></tr>", f.read())
        # ... and the files for programs stay language-neutral: English text, message ids.
        with open(os.path.join(reports, "class.csv"), encoding="utf-8", newline="") as f:
            self.assertEqual(next(csv.reader(f))[-2:], ["passed", "total"])
        for name in ("junit.xml", "class.csv", "worker_stub_ja.json", "big_file.json"):
            with open(os.path.join(reports, name), encoding="utf-8") as f:
                self.assertNotRegex(f.read(), JAPANESE, name)

    @posix_only("a limit on the size of a file a process writes (RLIMIT_FSIZE): Windows has none, as its report says "
                "(there big_file fails validate-event by accepting an invalid event instead)")
    def test_the_file_size_limit_a_worker_ran_into_is_named_on_the_japanese_page(self):
        big = write_worker(self.path("class", "big_file.py"), BIG_FILE)
        reports = self.path("reports")
        status, out, err = grade("--lang", "ja", "--impl", big, "--file-size", "1", "-k", "validate-event",
                                 "--report", reports)
        self.assertEqual(status, 1, out + err)
        page = page_text(os.path.join(reports, "index.html"))
        self.assertIn(messages.text("ja", "limit.file-size", what=messages.text("ja", "who.check", name="validate-event"),
                                    mib=1), page)
        self.assertEqual(english_words(page), [])
        with open(os.path.join(reports, "junit.xml"), encoding="utf-8") as f:  # for programs: English
            self.assertIn("expected: the validate-event check runs to its verdict", f.read())

    def test_the_live_progress_line_on_a_terminal_is_japanese(self):
        environ = {k: v for k, v in python_env().items() if not k.startswith("LC_") and k != "LANG"}
        status, out, seen = run_on_a_terminal([sys.executable, GRADE, "--lang", "ja", "--impl", REFERENCE,
                                               "--impl", STUB_JA, "-k", "mark-sent"], env=environ, timeout=TIME_BOUND)
        self.assertEqual(status, 1)
        updates = [part.replace("\x1b[K", "") for part in seen.decode("utf-8").strip().split("\r") if part]
        self.assertTrue(updates)
        for update in updates:
            self.assertRegex(update, r"^採点中: ワーカー2件中[0-2]件が完了（[0-9]+秒）(、残りはおよそ[0-9]+秒)?$")
        self.assertEqual(updates[-1].split("件")[1], "中2")
        self.assertEqual(english_words(text_of(out)), [])

    def test_the_report_on_a_terminal_is_wrapped_by_japanese_rules(self):
        environ = {k: v for k, v in python_env().items() if not k.startswith("LC_") and k != "LANG"}
        environ["COLUMNS"] = "60"
        status, err, seen = run_on_a_terminal([sys.executable, GRADE, "--lang", "ja", "--impl", STUB_JA, "-k", "mark-sent",
                                               "-k", "validate-event"], env=environ, timeout=TIME_BOUND, stream="stdout")
        self.assertEqual((status, err), (1, b""))
        lines = seen.decode("utf-8").replace("\r\n", "\n").split("\n")
        body = [line for line in lines if line.strip()]
        self.assertTrue(any(line.startswith("FAIL mark-sent") for line in body), lines)
        # The expected and observed lines, and the lines they fold into (indented under their text); the report's
        # other lines (your code, the isolation, the seed) are not folded by the grader.
        hang = " " * display_width("FAIL mark-sent              期待: ")
        wrapped, inside = [], False
        for line in body:
            if line.startswith(("FAIL ", "PASS ")) or line.startswith(" " * 28 + "観測: "):
                inside = True
            elif not line.startswith(hang):
                inside = False
            if inside:
                wrapped.append(line)
        for before, line in zip(wrapped, wrapped[1:]):
            with self.subTest(line=line):
                if " " in line.strip() or not line.strip().isascii():  # a single ASCII token longer than a line overflows
                    self.assertLessEqual(display_width(line), 60)
                self.assertNotIn(line.lstrip()[:1], NO_BREAK_BEFORE, (before, line))
                self.assertFalse(before[-1:].isdigit() and not line.lstrip()[:1].isascii(), (before, line))
        # A line the terminal folded is indented under the text after 「期待: 」.
        self.assertTrue(any(line.startswith(" " * display_width("FAIL mark-sent              期待: ")) for line in body))

    def test_a_flood_and_its_printed_line_are_japanese(self):
        flood = self.path("flood.py")
        with open(STUB, encoding="utf-8") as f:
            stub = f.read()
        with open(flood, "w", encoding="utf-8") as f:  # the stub's functions, then a validate_event that floods
            f.write(stub + textwrap.dedent(FLOOD))
        status, out, err = grade("--lang", "ja", "--impl", flood, "-k", "validate-event")
        self.assertEqual((status, err), (1, ""))
        self.assertRegex(out, r"\n {28}出力: 計[0-9.]+ KiB、うち[0-9.]+ (KiB|バイト)を破棄（各ストリームの先頭と末尾の64\.0 KiB"
                              r"だけを残しています）\n")
        self.assertEqual(english_words(out), [])
        self.assertEqual(messages.text("ja", "size.bytes", count=512), "512バイト")


if __name__ == "__main__":
    unittest.main()
