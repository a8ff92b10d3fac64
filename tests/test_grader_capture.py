"""grader.capture: what the grader keeps of a child's output is bounded, whatever the worker prints."""
import json
import unittest

from grader import capture
from grader.common import MARK


class CaptureTest(unittest.TestCase):
    def test_keeps_the_first_and_last_bytes_and_counts_the_rest(self):
        kept = capture.Capture(keep=10)
        for chunk in (b"0123456", b"789abcdefghij", b"klmnopqrstuvwxyz" * 50, b"THE-END!!!"):
            kept.add(chunk)
        self.assertEqual(kept.total, 7 + 13 + 800 + 10)
        self.assertEqual(bytes(kept.head), b"0123456789")
        self.assertEqual(kept.text(), "0123456789\n[... %d bytes dropped ...]\nTHE-END!!!" % (kept.total - 20))
        self.assertEqual(kept.dropped, kept.total - 20)
        self.assertLessEqual(len(kept.head) + kept.tail_bytes, 30)  # flat: never more than head + twice the tail
        self.assertEqual(kept.last_line(), "THE-END!!!")

    def test_a_short_stream_is_kept_whole(self):
        kept = capture.Capture(keep=10)
        kept.add(b"line one\nline")
        kept.add(b" two\n")
        self.assertEqual((kept.text(), kept.dropped, kept.last_line()), ("line one\nline two\n", 0, "line two"))

    def test_protocol_lines_across_chunks_others_ignored_and_bounded(self):
        seen = []
        lines = capture.Lines(on_line=seen.append)
        line = (MARK + json.dumps({"kind": "verdict", "ok": True})).encode()
        lines.add(b"\n" + line[:5])
        lines.add(line[5:] + b"\nnot a protocol line\n" + MARK.encode() + b"{not json\n")
        self.assertEqual(lines.lines, [{"kind": "verdict", "ok": True}])
        self.assertEqual(seen, lines.lines)
        lines.add(b"x" * (capture.LINES_KEEP + 1))  # a line with no end, longer than any of the grader's
        self.assertEqual(lines.dropped, capture.LINES_KEEP + 1)
        self.assertEqual(bytes(lines.partial), b"")


class LinesBoundTest(unittest.TestCase):
    """The grader is bounded by what it reads of a step's protocol, whether it keeps the lines or not."""

    def line(self, **fields):
        return (MARK + json.dumps(fields)).encode() + b"\n"

    def test_past_its_budget_a_stream_that_keeps_nothing_is_over_once_and_read_no_more(self):
        seen = []
        lines = capture.Lines(on_line=seen.append)
        lines.keep = False  # a step's answers: each goes to on_line only
        big = self.line(kind="error", message="x" * (capture.LINE_MAX - 100))
        for _ in range(capture.LINES_BUDGET // len(big) + 5):
            lines.add(big)
        self.assertEqual(seen.count(capture.OVER), 1)
        self.assertLessEqual(len(seen), capture.LINES_BUDGET // len(big) + 1)
        self.assertTrue(lines.over)
        self.assertEqual(lines.lines, [])
        lines.add(self.line(kind="reply", id=1))
        self.assertNotIn({"kind": "reply", "id": 1}, seen)

    def test_a_line_longer_than_any_of_the_grader_s_is_a_flood_even_in_one_piece(self):
        seen = []
        lines = capture.Lines(on_line=seen.append)
        lines.add(self.line(kind="error", message="x" * capture.LINE_MAX))
        self.assertEqual(seen, [capture.OVER])
        self.assertEqual(lines.lines, [capture.OVER])  # kept: the Run of that child names the limit

    def test_a_line_nested_past_the_recursion_limit_or_with_a_huge_int_is_dropped_and_reading_goes_on(self):
        seen = []
        lines = capture.Lines(on_line=seen.append)
        lines.add(MARK.encode() + b"[" * 100000 + b"\n")
        lines.add(MARK.encode() + b'{"kind": "reply", "id": ' + b"9" * 5000 + b"}\n")
        lines.add(self.line(kind="reply", id=2))
        self.assertEqual(seen, [{"kind": "reply", "id": 2}])
        self.assertFalse(lines.over)


if __name__ == "__main__":
    unittest.main()
