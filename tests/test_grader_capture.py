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
        self.assertLessEqual(len(kept.head) + len(kept.tail), 30)  # flat: never more than head + twice the tail
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


if __name__ == "__main__":
    unittest.main()
