"""The grader's one table of messages and the one way to render one.

Every message exists in every language with the same placeholders; every id
the code uses exists; the language comes from --lang or the environment.
(The Japanese texts, read as a participant reads them, are
tests/test_grader_messages_ja.py.)
"""
import glob
import os
import re
import string
import unittest

from grader import checks, common, messages, scenarios
from grader.registry import CHECKS, NAMES
from tests import grade_mutants
from tests.grade_mutants import grade
from tests.support import ROOT


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
        used |= {rule for _, rule, _ in checks.BAD_EVENTS}
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
        self.assertEqual((status, [line.split()[0] for line in out.splitlines()]), (0, list(NAMES)), err)
        self.assertTrue(out.splitlines()[0].endswith("点"), out)
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
        self.assertEqual(rendered, "衝突するペイロードにはConflictかそのサブクラス（採点ツールはクラス名で判定します）を送出する必要が"
                                   "ありますが、実際はClashで、その基底クラスはException, objectです（「Clash: x」）")


if __name__ == "__main__":
    unittest.main()
