"""The grader's one table of messages, its one registry of checks, and what is made from them.

Every message exists in every language with the same placeholders; every id
the code uses exists; the README's table of checks is the registry's; the
parent never imports the worker, the kit or the child side; and an old Python
gets one line naming the minimum version.
"""
import glob
import os
import re
import shutil
import stat
import string
import subprocess
import sys
import tempfile
import unittest

from tests import grade_mutants
from tests.all_pythons import below_floor_env
from tests.grade_mutants import GRADE, grade
from tests.support import ROOT, TempDirTestCase, python_env

sys.path.insert(0, ROOT)
from grader import child, common, messages, scenarios  # noqa: E402
from grader.registry import CHECKS, NAMES  # noqa: E402


def placeholders(template):
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def grader_sources():
    sources = {}
    for path in glob.glob(os.path.join(ROOT, "grader", "*.py")):
        with open(path, encoding="utf-8") as f:
            sources[os.path.basename(path)] = f.read()
    return sources


class MessageTableTest(unittest.TestCase):
    def test_every_language_has_every_message_with_the_same_placeholders(self):
        self.assertEqual(tuple(messages.MESSAGES), messages.LANGS)
        english = messages.MESSAGES["en"]
        for lang, table in messages.MESSAGES.items():
            with self.subTest(lang=lang):
                self.assertEqual(sorted(set(english) - set(table)), [], "missing in %s" % lang)
                self.assertEqual(sorted(set(table) - set(english)), [], "only in %s" % lang)
                for message_id, template in table.items():
                    self.assertEqual(placeholders(template), placeholders(english[message_id]), (lang, message_id))

    def test_every_message_id_the_code_uses_exists(self):
        used = set()
        for name, source in grader_sources().items():
            used |= set(re.findall(r"\bmsg\(\s*\"([a-z0-9.-]+)\"", source))
            used |= set(re.findall(r"\btext\(\s*(?:lang|args\.lang),\s*\"([a-z0-9.-]+)\"", source))
            used |= set(re.findall(r"\bt\(\"([a-z0-9.-]+)\"", source))
            used |= {"who." + role for role in re.findall(r"\bwho\(\"([a-z-]+)\"", source)}
        used |= {rule for _, rule, _ in child.BAD_EVENTS}
        used |= set(common.EXCEPTION_RULES.values())
        used |= {check.proves for check in CHECKS}
        used |= {"verdict." + status for status in ("pass", "fail", "error")}
        used |= {"case." + name for name, _ in scenarios.UNTRUSTED} | {"case.redirect"}
        used |= {"case." + name for name, _, _ in scenarios.ACK_CASES}
        used |= {mutant.message for mutant in grade_mutants.MUTANTS}
        used |= {message for mutant in grade_mutants.MUTANTS for _, message in mutant.also}
        used = {message_id for message_id in used if not message_id.endswith(".")}  # prefixes, completed above
        self.assertGreater(len(used), 150)
        self.assertEqual(sorted(used - set(messages.MESSAGES["en"])), [])

    def test_the_language_comes_from_the_option_or_the_environment(self):
        self.assertEqual(messages.choose_lang({"LANG": "C.UTF-8"}), "en")
        self.assertEqual(messages.choose_lang({}), "en")
        self.assertEqual(messages.LANGS, ("en", "ja"))
        self.assertEqual(messages.choose_lang({"LANG": "ja_JP.UTF-8"}), "ja")
        self.assertEqual(messages.choose_lang({"LANG": "ja"}), "ja")
        self.assertEqual(messages.choose_lang({"LC_ALL": "ja_JP.UTF-8", "LANG": "en_US.UTF-8"}), "ja")
        self.assertEqual(messages.choose_lang({"LC_ALL": "C.UTF-8", "LANG": "ja_JP.UTF-8"}), "en")
        status, out, err = grade("--lang", "ja", "--list")
        self.assertEqual((status, out.split()), (0, list(NAMES)), err)
        status, out, err = grade("--lang", "en", "--list")
        self.assertEqual(status, 0, err)
        status, out, err = grade("--lang", "xx", "--list")
        self.assertEqual(status, 2)
        self.assertIn("--lang", err)

    def test_nested_messages_render(self):
        rendered = messages.render(common.wrong_class("Conflict", "Clash", ["Clash", "Exception", "object"], "Clash: x"), "en")
        self.assertEqual(rendered, "a conflicting payload must raise Conflict or a subclass (the grader goes by class name); "
                                   "got Clash, whose bases are Exception, object (Clash: x)")
        rendered = messages.render(common.wrong_class("Conflict", "Clash", ["Clash", "Exception", "object"], "Clash: x"), "ja")
        self.assertEqual(rendered, "衝突するペイロードには Conflict かそのサブクラスを送出してください（採点ツールはクラス名で判定します）。"
                                   "実際は Clash で、その基底クラスは Exception, object です（「Clash: x」）")


class RegistryTest(unittest.TestCase):
    def test_one_definition_per_check(self):
        self.assertEqual(len(NAMES), len(set(NAMES)))
        for check in CHECKS:
            self.assertIn(check.proves, messages.MESSAGES["en"])
            self.assertTrue(check.needs, check.name)
            self.assertTrue(callable(check.run), check.name)

    def test_list_prints_the_registry_in_order(self):
        status, out, err = grade("--list")
        self.assertEqual((status, out.split()), (0, list(NAMES)))

    def test_the_readme_table_is_the_registry(self):
        # Each README's table of checks, in the registry's order, says what its language's `proves` text says.
        for name, heading, lang in (("README.md", "### The checks", "en"), ("README.ja.md", "### チェック一覧", "ja")):
            with self.subTest(readme=name):
                with open(os.path.join(ROOT, name), encoding="utf-8") as f:
                    readme = f.read()
                section = readme.split(heading, 1)[1].split("\n\n", 2)[1]
                rows = re.findall(r"(?m)^\| `([a-z-]+)` \| (.*) \|$", section)
                self.assertEqual(rows, [(check.name, messages.text(lang, check.proves)) for check in CHECKS])

    def test_every_new_rule_has_a_mutant(self):
        aimed = {mutant.check for mutant in grade_mutants.MUTANTS}
        for name in ("url-rule", "send-timeout", "pending-cost", "conflict-committed", "wrong-database", "durability",
                     "validate-event", "intake-idempotent"):
            self.assertIn(name, aimed)
        self.assertLessEqual(aimed, set(NAMES))

    def test_a_patch_that_no_longer_applies_names_its_mutant(self):
        tmp = tempfile.mkdtemp(prefix="outbox-kit-test-")
        self.addCleanup(shutil.rmtree, tmp, True)
        with self.assertRaisesRegex(grade_mutants.StalePatch, "mutant 'gone': its patch text occurs 0 times in outbox/store.py"):
            grade_mutants.make_mutant(tmp, "gone", [("no such text in the kit", "")], "outbox/store.py")

    def test_the_parent_imports_neither_the_worker_nor_the_kit(self):
        code = ("import sys; sys.path.insert(0, %r); import grader.cli; "
                "print(sorted(m for m in sys.modules if m.split('.')[0] in ('outbox', 'sink', 'worker_under_test')))" % ROOT)
        result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=python_env(), timeout=60,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(result.stdout.strip(), "[]", result.stderr)
        with open(os.path.join(ROOT, "grader", "child.py"), encoding="utf-8") as f:
            child_source = f.read()
        self.assertNotRegex(child_source, r"from \.(parent|scenarios|registry|cli)\b|import (parent|scenarios|registry|cli)\b")


class GraderErrorTest(unittest.TestCase):
    def test_an_exception_in_the_graders_own_code_is_an_error_not_a_fail(self):
        from grader import cli
        from grader.registry import Check

        class Grader:
            def for_check(self, check):
                return None

        def broken(context):
            raise ZeroDivisionError("a bug in the grader")

        result = cli.run_check(Grader(), Check("broken", "proves.exact-ack", ("dispatch",), broken), "en")
        self.assertEqual((result["status"], result["ok"]), ("error", False))
        self.assertEqual(result["observed"], "grader error (not your worker's fault): ZeroDivisionError: a bug in the grader")
        self.assertIn("Traceback", result["traceback"])  # printed only with --debug


class ReadOnlyCheckoutTest(TempDirTestCase):
    def test_mutants_are_made_from_a_read_only_checkout(self):
        checkout = self.path("checkout")
        for folder in ("outbox", "sink", "examples"):
            shutil.copytree(os.path.join(ROOT, folder), os.path.join(checkout, folder),
                            ignore=shutil.ignore_patterns("__pycache__"))
        for folder, dirs, files in os.walk(checkout):
            for name in files:
                os.chmod(os.path.join(folder, name), 0o444)
        original = grade_mutants.ROOT
        grade_mutants.ROOT = checkout
        try:
            worker = grade_mutants.make_mutant(self.path("mutant"), "order by id", grade_mutants.BY_MISTAKE["order by id"].edits,
                                               "outbox/store.py")
        finally:
            grade_mutants.ROOT = original
        with open(os.path.join(self.path("mutant"), "outbox", "store.py"), encoding="utf-8") as f:
            self.assertIn("ORDER BY event_id", f.read())
        self.assertTrue(os.path.isfile(worker))
        # Checked by mode, not by a failed write: root may write to a read-only file anyway.
        for name in ("store.py", "event.py"):
            self.assertTrue(os.stat(os.path.join(self.path("mutant"), "outbox", name)).st_mode & stat.S_IWUSR, name)


def pyenv_python(version):
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    if shutil.which("pyenv"):
        result = subprocess.run(["pyenv", "root"], stdout=subprocess.PIPE, universal_newlines=True, timeout=30)
        root = result.stdout.strip() or root
    path = os.path.join(root, "versions", version, "bin", "python")
    return path if os.access(path, os.X_OK) else None


class PythonFloorTest(unittest.TestCase):
    def test_an_old_python_gets_one_line_and_exit_2(self):
        tried = 0
        for version in ("2.7.18", "3.6.15", "3.7.16"):
            python = pyenv_python(version)
            if python is None:
                continue
            tried += 1
            with self.subTest(version=version):
                env = below_floor_env(python_env())
                result = subprocess.run([python, GRADE], cwd=ROOT, env=env, timeout=60,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertEqual(result.stdout, "")
                self.assertRegex(result.stderr, r"\Agrade\.py: needs Python 3\.8 or newer; this is Python %s\n\Z"
                                 % re.escape(version))
        if not tried:
            self.skipTest("no Python older than 3.8 under pyenv here")


if __name__ == "__main__":
    unittest.main()
