"""grader/stopping.py: a stop signal inside a Completions block is raised by its wait, or as it ends, never before."""
import concurrent.futures
import os
import signal
import threading
import time
import unittest

from grader.stopping import Completions, Deferred, Stopped, stop_on_signals
from tests.support import posix_only

# The process raises a stop signal in itself (signal.raise_signal: C's raise()), which runs Python's handler on
# Windows too, for SIGINT and SIGTERM (os.kill there is TerminateProcess); SIGHUP is POSIX's only.
STOP_SIGNALS = [getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)]


class CompletionsTest(unittest.TestCase):
    def setUp(self):
        saved = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
        self.addCleanup(lambda: [signal.signal(signum, handler) for signum, handler in saved.items()])
        stop_on_signals()
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
        self.addCleanup(self.pool.shutdown, wait=True)

    def test_a_signal_in_the_block_is_raised_by_the_next_wait_not_where_it_lands(self):
        lock, reached = threading.Lock(), []
        with self.assertRaises(Stopped) as raised:
            with Completions() as done:
                with lock:
                    signal.raise_signal(signal.SIGTERM)
                    for _ in range(10000):  # bytecodes enough for the handler to have run, in here
                        pass
                    self.assertEqual(done.signum, signal.SIGTERM)
                reached.append("after the lock")
                done.wait(60)
                reached.append("after the wait")
        self.assertEqual(raised.exception.signum, signal.SIGTERM)
        self.assertEqual(reached, ["after the lock"])

    def test_a_signal_with_no_wait_after_it_is_raised_as_the_block_ends_after_its_finally(self):
        cleaned = []
        with self.assertRaises(KeyboardInterrupt):
            with Completions() as done:
                try:
                    signal.raise_signal(signal.SIGINT)
                    for _ in range(10000):
                        pass
                    cleaned.append("the body")
                finally:
                    cleaned.append(done.signum)
        self.assertEqual(cleaned, ["the body", signal.SIGINT])

    def test_a_deferred_block_inside_another_hands_its_stop_to_the_outer_one(self):
        # A grader's close (Deferred) inside grade_all's cleanup (Completions): raising at the inner block's end
        # would skip the rest of the outer cleanup.
        after_inner = []
        with self.assertRaises(Stopped):
            with Completions() as done:
                try:
                    with Deferred():
                        signal.raise_signal(signal.SIGTERM)
                        for _ in range(10000):
                            pass
                    after_inner.append(True)
                finally:
                    after_inner.append(done.signum)
        self.assertEqual(after_inner, [True, signal.SIGTERM])

    def test_a_deferred_block_alone_raises_its_stop_as_it_ends(self):
        reached = []
        with self.assertRaises(Stopped):
            with Deferred() as block:
                signal.raise_signal(signal.SIGTERM)
                for _ in range(10000):
                    pass
                reached.append(block.signum)
        self.assertEqual(reached, [signal.SIGTERM])

    def test_later_signals_are_ignored_and_the_first_one_decides(self):
        sent = []
        with self.assertRaises(Stopped) as raised:
            with Completions() as done:
                for signum in STOP_SIGNALS:
                    signal.raise_signal(signum)
                    for _ in range(10000):
                        pass
                    sent.append(signum)
                done.wait(60)
        self.assertEqual(raised.exception.signum, signal.SIGTERM)
        self.assertEqual(sent, STOP_SIGNALS)

    def test_a_part_where_unwinding_is_allowed_is_unwound_at_once(self):
        reached = []
        with self.assertRaises(Stopped):
            with Completions() as done:
                with done.unwinding_allowed():  # output that may block on a reader
                    signal.raise_signal(signal.SIGTERM)
                    for _ in range(10000):
                        pass
                    reached.append("after the signal")
        self.assertEqual(reached, [])

    def test_a_stop_over_another_exception_is_raised_not_lost(self):
        with self.assertRaises(Stopped) as raised:
            with Completions():
                signal.raise_signal(signal.SIGTERM)
                for _ in range(10000):
                    pass
                raise BrokenPipeError()
        self.assertIsInstance(raised.exception.__context__, BrokenPipeError)

    def test_a_block_inside_a_part_that_may_unwind_raises_its_stop_as_it_ends(self):
        # The quiz: its reference run (Completions) inside the grader's life (Deferred), in a part that may unwind.
        reached = []
        with self.assertRaises(Stopped):
            with Deferred() as outer:
                with outer.unwinding_allowed():
                    with Completions():
                        signal.raise_signal(signal.SIGTERM)
                        for _ in range(10000):
                            pass
                        reached.append("inside")
                    reached.append("after the inner block")
        self.assertEqual(reached, ["inside"])

    @posix_only("a signal sent to the process (os.kill) that another thread receives (pthread_sigmask)")
    def test_a_signal_that_another_thread_receives_wakes_a_wait_at_once(self):
        # The main thread blocks SIGTERM, so the kernel hands it to the sender thread: only the wake-up fd can
        # end the main thread's select() then (Python runs the handler in the main thread all the same). Should
        # the wait sleep on, the sender ends it after 30 s by completing a future, and says so.
        waiting, woken, nudge, late = threading.Event(), threading.Event(), concurrent.futures.Future(), []

        def send():
            if waiting.wait(30):
                os.kill(os.getpid(), signal.SIGTERM)
                if not woken.wait(30):
                    late.append(True)
                    nudge.set_result(None)

        sender = threading.Thread(target=send)
        sender.start()  # before the mask: a thread starts with its creator's
        self.addCleanup(sender.join, 60)
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
        self.addCleanup(signal.pthread_sigmask, signal.SIG_UNBLOCK, [signal.SIGTERM])
        with self.assertRaises(Stopped):
            with Completions() as done:
                done.watch(nudge)
                waiting.set()
                try:
                    done.wait(90)
                finally:
                    woken.set()
        self.assertEqual(late, [], "the wait was not woken by the signal")

    def test_wait_gives_each_completed_future_once(self):
        release = threading.Event()
        self.addCleanup(release.set)
        with Completions() as done:
            futures = [done.watch(self.pool.submit(release.wait, 30)) for _ in range(3)]
            self.assertEqual(done.wait(0), [])
            release.set()
            seen = []
            deadline = time.monotonic() + 30
            while len(seen) < 3 and time.monotonic() < deadline:
                seen += done.wait(1)
            self.assertEqual(sorted(map(id, seen)), sorted(map(id, futures)))
            self.assertEqual(done.wait(0), [])
        self.assertTrue(all(future.result() for future in futures))


if __name__ == "__main__":
    unittest.main()
