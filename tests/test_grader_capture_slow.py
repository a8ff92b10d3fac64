"""grader.capture.follow: both ways to read a child's streams end at its end or at its deadline, within bounds."""
import os
import subprocess
import sys
import time
import unittest

from grader import capture


class FollowTest(unittest.TestCase):
    """capture.follow with each of its two ways to read: select (POSIX) and a thread per stream (Windows).

    The threaded way is the one Windows uses; here it reads the same real
    pipes, so it is tested on every system.
    """

    def follow(self, threads, code, timeout=20.0):
        """Run `code` in a child writing to its stdout and stderr; (timed out, stdout Capture, stderr Capture)."""
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        out, err = capture.Capture(), capture.Capture()
        saved, capture.THREADS = capture.THREADS, threads
        self.addCleanup(setattr, capture, "THREADS", saved)
        readers = []
        deadline = time.monotonic() + timeout
        try:
            timed_out = capture.follow({proc.stdout.fileno(): out, proc.stderr.fileno(): err},
                                       lambda: proc.poll() is not None, lambda: deadline, proc.kill,
                                       lambda: None, readers=readers)
        finally:
            proc.kill()
            proc.wait()
            for thread in readers:
                thread.join(10)
            self.assertFalse(any(thread.is_alive() for thread in readers), "a reader outlived its stream")
            proc.stdout.close()
            proc.stderr.close()
        return timed_out, out, err

    def each_way(self):
        for threads in (None, True) if os.name != "nt" else (True,):  # Windows: select takes no pipes
            with self.subTest(threads=threads):
                yield threads

    def test_both_streams_are_read_to_their_end(self):
        code = "import sys; sys.stdout.write('a' * 300000); sys.stderr.write('b' * 70000)"
        for threads in self.each_way():
            timed_out, out, err = self.follow(threads, code)
            self.assertFalse(timed_out)
            self.assertEqual((out.total, err.total), (300000, 70000))
            self.assertEqual(len(out.text()), 2 * capture.KEEP + len("[... %d bytes dropped ...]" % (300000 - 2 * capture.KEEP)) + 2)

    def test_a_child_that_never_ends_is_ended_at_its_deadline(self):
        code = "import sys, time; print('started', flush=True); time.sleep(120)"
        for threads in self.each_way():
            timed_out, out, _ = self.follow(threads, code, timeout=1.0)
            self.assertTrue(timed_out)
            self.assertIn("started", out.text())

    def test_a_flood_is_counted_and_what_is_kept_stays_bounded(self):
        code = "import os\nfor _ in range(800): os.write(1, b'x' * 65536)"  # 50 MiB
        for threads in self.each_way():
            timed_out, out, _ = self.follow(threads, code, timeout=60.0)
            self.assertFalse(timed_out)
            self.assertEqual(out.total, 800 * 65536)
            self.assertLessEqual(len(out.head) + out.tail_bytes, 2 * capture.KEEP)
