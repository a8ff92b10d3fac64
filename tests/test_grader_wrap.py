"""grader/wrap.py: display width, the stream's width, and lines broken by each script's rules.

Japanese has no spaces: a line may break between any two characters, except
that none starts with closing punctuation or a small kana, none ends with an
opening bracket, a number stays with its counter, and a paragraph does not
end on a line holding a lone 「す。」.
"""
import io
import os
import sys
import unittest

from tests.support import ROOT, WINDOWS, posix_only

if not WINDOWS:
    import pty  # a real terminal's width: POSIX only, and so is the case that uses it

sys.path.insert(0, ROOT)
from grader import wrap as wrapping  # noqa: E402
from grader.wrap import NO_BREAK_AFTER, NO_BREAK_BEFORE, display_width, wrap  # noqa: E402

JAPANESE = ("この実行では、パブリッシャー1号が終了コード73で終わりました。パブリッシャー2号が受付DBのファイルを"
            "開き直して、20,000件を処理しました（第3問）。倉庫のdeliveriesは「applied、duplicate」です。"
            "キットは、失わないために重複を受け入れます。")
COUNTERS = ("1号", "2号", "73で", "20,000件", "第3問")


class WrapTest(unittest.TestCase):
    def test_japanese_keeps_its_line_breaking_rules_at_every_width(self):
        for width in range(16, 101):
            lines = wrap(JAPANESE, width)
            with self.subTest(width=width):
                self.assertEqual("".join(lines), JAPANESE)  # nothing lost, nothing added
                for line in lines:
                    self.assertLessEqual(display_width(line), width, line)
                for before, after in zip(lines, lines[1:]):
                    self.assertNotIn(after[0], NO_BREAK_BEFORE, (before, after))
                    self.assertNotIn(before[-1], NO_BREAK_AFTER, (before, after))
                    self.assertFalse(before[-1].isdigit() and not after[0].isascii(), (before, after))
                    self.assertFalse(after[0].isdigit() and not before[-1].isascii(), (before, after))
                flat = "\n".join(lines)
                for counted in COUNTERS:
                    self.assertIn(counted, flat)
                self.assertGreaterEqual(display_width(lines[-1]), wrapping.MIN_TAIL, lines)

    def test_no_lone_syllable_at_a_paragraphs_end(self):
        text = "パブリッシャーは、送信と完了印のあいだで終了することがありま" + "す。"
        width = display_width(text) - 2  # the greedy break would leave 「す。」 alone
        lines = wrap(text, width)
        self.assertEqual("".join(lines), text)
        self.assertGreaterEqual(display_width(lines[-1]), wrapping.MIN_TAIL)

    def test_english_breaks_at_spaces_and_never_inside_a_word(self):
        text = "grade.py --quiz runs crash-after-ack and stop-on-first-failure, then asks (a-d): one answer a line."
        for width in range(len("stop-on-first-failure,"), 60):  # from the longest word up
            lines = wrap(text, width)
            with self.subTest(width=width):
                self.assertEqual(" ".join(lines), text)
                self.assertTrue(all(len(line) <= width for line in lines))
                self.assertFalse(any(line.startswith((":", ",", ")")) for line in lines))

    def test_ascii_closing_punctuation_never_starts_a_line(self):
        text = "メモリの上限（既定: 1024）をMiBで指定します"
        for width in range(8, 40):
            for line in wrap(text, width)[1:]:
                self.assertNotIn(line[0], ":）)", (width, line))

    def test_a_piece_wider_than_the_line_overflows_rather_than_breaks(self):
        self.assertEqual(wrap("see http://127.0.0.1:8080/events/very/long", 10),
                         ["see", "http://127.0.0.1:8080/events/very/long"])


class ColumnsTest(unittest.TestCase):
    def setUp(self):
        saved = os.environ.pop("COLUMNS", None)
        if saved is not None:
            self.addCleanup(os.environ.__setitem__, "COLUMNS", saved)

    @posix_only("a pseudo-terminal (pty) whose size TIOCSWINSZ sets")
    def test_the_width_is_read_from_the_stream_the_text_goes_to(self):
        controller, terminal = pty.openpty()
        self.addCleanup(os.close, controller)
        self.addCleanup(os.close, terminal)
        os.set_blocking(terminal, True)
        import fcntl
        import struct
        import termios
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
        with open(terminal, "w", closefd=False) as stream:
            self.assertEqual(wrapping.columns(stream), 100)

    def test_columns_wins_and_a_pipe_gets_the_default(self):
        self.assertEqual(wrapping.columns(io.StringIO()), wrapping.DEFAULT_COLUMNS)
        read, write = os.pipe()
        self.addCleanup(os.close, read)
        self.addCleanup(os.close, write)
        with open(write, "w", closefd=False) as stream:
            self.assertEqual(wrapping.columns(stream), wrapping.DEFAULT_COLUMNS)
        os.environ["COLUMNS"] = "132"
        self.addCleanup(os.environ.pop, "COLUMNS", None)
        self.assertEqual(wrapping.columns(io.StringIO()), 132)


if __name__ == "__main__":
    unittest.main()
