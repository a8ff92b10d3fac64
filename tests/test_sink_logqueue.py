"""sink.logqueue: a log that never waits on a pipe nobody reads, and repeated lines summed per interval.

The pipe is a real os.pipe(); the Repeats clock is passed in.
"""
import os
import re
import threading
import time
import unittest

from sink.logqueue import QueuedLog, Repeats
from tests.support import DEADLINE


class QueuedLogTest(unittest.TestCase):
    def pipe(self):
        read_end, write_end = os.pipe()
        # Cleanups run last first: the read end closes first, so a writer still stuck on a full pipe gets EPIPE
        # and lets go (Windows' close of the write end would wait for that write).
        self.addCleanup(os.close, write_end)
        self.addCleanup(os.close, read_end)
        return read_end, write_end

    def read_all(self, fd, until):
        os.set_blocking(fd, False)
        data = b""
        deadline = time.monotonic() + DEADLINE
        while until not in data and time.monotonic() < deadline:
            try:
                data += os.read(fd, 1 << 16)
            except BlockingIOError:
                time.sleep(0.01)  # polling a pipe against a deadline
        return data.decode("utf-8")

    def test_lines_are_written_in_order_with_the_prefix_and_plain_ones_without(self):
        read_end, write_end = self.pipe()
        log = QueuedLog(write_end, prefix=lambda: "T")
        log("one")
        log.plain("sink: two")
        self.assertTrue(log.close(DEADLINE))
        self.assertEqual(self.read_all(read_end, b"two\n"), "T one\nsink: two\n")

    def test_a_pipe_nobody_reads_never_blocks_the_caller_lines_are_dropped_and_counted(self):
        read_end, write_end = self.pipe()
        log = QueuedLog(write_end, capacity=10)
        line = "x" * 10000  # the pipe (64 KiB) takes about 6: then the writer waits, the queue fills
        done = threading.Event()

        def flood():
            for _ in range(40):
                log(line)
            done.set()

        threading.Thread(target=flood, daemon=True).start()
        self.assertTrue(done.wait(DEADLINE), "a log call waited on the pipe")
        # Taken at most: what the pipe holds (6), the one the writer is stuck on, and the queue's 10.
        self.assertGreaterEqual(log.dropped, 40 - 6 - 1 - 10)
        self.assertFalse(log.drain(0.2), "drain() must give up at its timeout while the pipe is full")
        text = self.read_all(read_end, b"dropped")  # reading at last lets the writer tell what it lost
        found = re.search(r"(^|\n)(\d+) log line\(s\) dropped: the log was not read fast enough\n", text)
        self.assertIsNotNone(found, text[:200])
        self.assertGreater(int(found.group(2)), 0)
        # What is still queued may be more than the pipe holds (Windows' pipe buffer is a few KiB): read on while
        # the writer finishes.
        closed = []
        closing = threading.Thread(target=lambda: closed.append(log.close(DEADLINE)), daemon=True)
        closing.start()
        while closing.is_alive():
            try:
                os.read(read_end, 1 << 16)
            except BlockingIOError:
                closing.join(0.01)  # polling a pipe against close()'s own deadline
        self.assertEqual(closed, [True])

    def test_drain_returns_once_every_queued_line_is_written(self):
        read_end, write_end = self.pipe()
        log = QueuedLog(write_end)
        log("before a crash fault")
        self.assertTrue(log.drain(DEADLINE))
        self.assertEqual(self.read_all(read_end, b"fault\n"), "before a crash fault\n")
        self.assertTrue(log.close(DEADLINE))

    def test_a_closed_log_loses_the_line_and_the_writer_goes_on(self):
        read_end, write_end = os.pipe()
        os.close(read_end)
        log = QueuedLog(write_end)
        try:
            log("into a closed pipe")  # EPIPE in the writer thread: that line is lost, nothing raises
            self.assertTrue(log.drain(DEADLINE))
        finally:
            self.assertTrue(log.close(DEADLINE))
            os.close(write_end)


class RepeatsTest(unittest.TestCase):
    WHAT = {"room": ("closed", "connection(s) without an answer to make room")}

    def test_the_first_is_logged_the_rest_counted_and_told_once_the_interval_ends(self):
        repeats = Repeats(self.WHAT, interval=10.0)
        self.assertEqual(repeats.note("room", "a closed", 100.0), ["a closed"])
        for n in range(842):
            self.assertEqual(repeats.note("room", "b%d closed" % n, 100.0 + n / 100.0), [])
        self.assertEqual(repeats.next_due(), 110.0)
        self.assertEqual(repeats.due(109.0), [])
        self.assertEqual(repeats.due(110.0),
                         ["closed 842 more connection(s) without an answer to make room in the last 10 s"])
        self.assertIsNone(repeats.next_due())
        self.assertEqual(repeats.note("room", "c closed", 111.0), ["c closed"], "a new interval logs its first")

    def test_a_line_after_the_interval_brings_the_summary_first_and_stop_tells_everything(self):
        repeats = Repeats(self.WHAT, interval=10.0)
        repeats.note("room", "a", 0.0)
        repeats.note("room", "b", 1.0)
        self.assertEqual(repeats.note("room", "c", 12.0),
                         ["closed 1 more connection(s) without an answer to make room in the last 10 s", "c"])
        repeats.note("room", "d", 13.0)
        self.assertEqual(repeats.due(14.0, every=True),
                         ["closed 1 more connection(s) without an answer to make room in the last 2 s"])

    def test_a_single_line_has_no_summary(self):
        repeats = Repeats(self.WHAT, interval=10.0)
        repeats.note("room", "a", 0.0)
        self.assertIsNone(repeats.next_due())
        self.assertEqual(repeats.due(20.0), [])


if __name__ == "__main__":
    unittest.main()
