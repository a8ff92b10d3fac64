"""grader/text.py: the escaping every worker string goes through before it is shown."""
import unittest

from grader.text import csv_cell, shown


class ShownTest(unittest.TestCase):
    def test_control_bidi_and_zero_width_characters_are_escaped(self):
        self.assertEqual(shown("a\x1b[2Jb"), "a\\x1b[2Jb")
        self.assertEqual(shown("\x00\x07"), "\\x00\\x07")
        self.assertEqual(shown("bob\u202e"), "bob\\u202e")
        self.assertEqual(shown("bob\u200b"), "bob\\u200b")
        self.assertEqual(shown("\U000e0041"), "\\U000e0041")
        self.assertEqual(shown("\ud800"), "\\ud800")

    def test_names_that_differ_only_in_unseen_characters_are_told_apart(self):
        self.assertNotEqual(shown("bob"), shown("bob\u200b"))

    def test_letters_of_every_script_and_both_spaces_pass(self):
        for text in ("worker 1", "受信箱　二重配信", "Ünïcödé", "x = 1; y"):
            self.assertEqual(shown(text), text)

    def test_newlines_stay_only_when_asked_and_tabs_never(self):
        self.assertEqual(shown("a\nb\tc\r"), "a\\x0ab\\x09c\\x0d")
        self.assertEqual(shown("a\nb\tc", newlines=True), "a\nb\\x09c")

    def test_any_object_and_a_str_that_raises(self):
        class Hostile:
            def __str__(self):
                raise RuntimeError("no")
        self.assertEqual(shown(b"\x1b"), "b'\\x1b'")
        self.assertEqual(shown(Hostile()), "<unprintable Hostile: str() raised RuntimeError>")


class CsvCellTest(unittest.TestCase):
    def test_formula_starts_are_quoted(self):
        for text in ("=1+1", "+1", "-1", "@SUM(A1)"):
            self.assertEqual(csv_cell(text), "'" + text)
        self.assertEqual(csv_cell("a=1"), "a=1")
        self.assertEqual(csv_cell("=\x1b"), "'=\\x1b")


if __name__ == "__main__":
    unittest.main()
