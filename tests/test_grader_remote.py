"""grader.remote: what the deciding side makes of a step's fields is of known type and size, whatever the step sent."""
import math
import os
import socket
import threading
import unittest

from grader import remote
from grader.common import Fail
from tests.support import WINDOWS, posix_only


class AnsweringSession:
    """A Session's `call`, answering every call with `answer`: what a step that lies would send."""

    def __init__(self, answer):
        self.answer = answer

    def call(self, op, args, kwargs, **fields):
        return self.answer

    def request(self, op, **fields):
        return self.answer


class FieldsTest(unittest.TestCase):
    def test_fields_of_the_wrong_type_are_no_names_and_lists_are_cut(self):
        error = remote.RemoteError({"function": [], "mro": ["E"] * 10000, "type": ["x"], "token": True})
        self.assertIsNone(error.function)
        self.assertEqual(len(error.mro), remote.LISTED["mro"])
        self.assertIsInstance(error.type, str)
        session = remote.Session()
        session.tokens[1] = ValueError("the grader's own")
        for token in (True, 1.0, "1"):  # only the int 1 is token 1
            self.assertIsInstance(session.error({"token": token}, None), remote.RemoteError)
        self.assertIs(session.error({"token": 1}, None), session.tokens[1])
        self.assertIsInstance(session.error({"signature": True}, []), remote.RemoteError)
        self.assertEqual(len(remote.Remote(AnsweringSession(["m"] * 1000)).kit_modules()), remote.LISTED["kit"])

    def test_best_time_takes_only_a_finite_time_above_zero(self):
        for forged in (None, "0.1", 0.0, -1.0, math.inf, math.nan, True, 10 ** 400):
            with self.subTest(forged=forged), self.assertRaises(remote.RemoteError):
                remote.Remote(AnsweringSession(forged)).best_time("pending", 3)
        self.assertEqual(remote.Remote(AnsweringSession(2e-5)).best_time("pending", 3), 2e-5)


class CallbackTest(unittest.TestCase):
    """run_callback against forged callback lines, on what the grader writes a step's requests to, whose far end reads
    nothing: a socket pair on POSIX, a pipe on Windows (grader/windows.py: a socket is no file descriptor there)."""

    def setUp(self):
        self.session = remote.Session()
        self.reader = threading.Thread(target=lambda: None)
        self.reader.start()
        self.reader.join()  # a reader that is gone: the step's reading thread has ended
        if WINDOWS:
            theirs, ours = os.pipe()
            self.addCleanup(os.close, theirs)
            self.receive = lambda size: os.read(theirs, size)
        else:
            mine, theirs = socket.socketpair()
            self.addCleanup(theirs.close)
            self.receive, ours = theirs.recv, mine.detach()
        self.session.attach(ours, self.reader)
        self.addCleanup(self.close_ours)
        self.killed = []
        self.session.kill = lambda: self.killed.append(True)

    def close_ours(self):
        if self.session.fd is not None:
            os.close(self.session.fd)
            self.session.fd = None

    def test_a_callback_of_no_such_number_is_refused_and_an_argument_too_large_comes_back_as_none(self):
        self.session.callbacks[1] = lambda *args: None
        for of in ([], {}, True, 1.0, "1", None, 99):
            self.session.run_callback({"kind": "callback", "id": 5, "of": of, "args": ["z" * 20000]})
        data = self.receive(1 << 20)
        self.assertEqual(data.count(b'"raise"'), 7)
        self.assertIn(b'"args_after":[null]', data)

    @posix_only("a non-blocking socket to the step: on Windows the grader writes to a pipe, where a write no one reads "
                "waits until the step's job is ended (its reading thread ends it at its deadline), and here none is")
    def test_a_reply_larger_than_the_socket_holds_ends_the_step_once_its_reader_is_gone(self):
        self.session.callbacks[1] = lambda *args: None
        line = {"kind": "callback", "id": 7, "of": 1, "args": [["y" * 16000] * 200]}
        with self.assertRaises(remote.StepEnded):
            self.session.run_callback(line)  # 3 MB of args_after, and nobody reads them: no hang

    def test_a_crash_or_a_fail_in_a_callback_ends_the_step_by_the_grader_s_hand(self):
        def crash(*args):
            raise remote.Crash(73)

        def fail(*args):
            raise Fail({"id": "plain", "fields": {"text": "e"}}, {"id": "plain", "fields": {"text": "o"}})

        for callback, status in ((crash, 73), (fail, 1)):
            self.session.callbacks[1], self.session.crashed = callback, None
            with self.assertRaises(remote.StepEnded):
                self.session.run_callback({"kind": "callback", "id": 1, "of": 1, "args": []})
            self.assertEqual(self.session.crashed, status)
        self.assertEqual(self.killed, [True, True])
        self.close_ours()
        self.assertEqual(self.receive(100), b"")  # no reply was sent: nothing asks the worker's process to exit

    def test_unread_answers_past_feed_max_are_a_flood_that_ends_the_step(self):
        for number in range(remote.FEED_MAX + 3):
            self.session.on_line({"kind": "reply", "id": number})
        self.assertEqual(self.session.feed.qsize(), remote.FEED_MAX)
        self.assertIn(remote.OVER, self.session.said)
        self.assertTrue(self.killed)
        for _ in range(100):
            self.session.on_line({"kind": "error", "message": "m"})
        self.assertLessEqual(len(self.session.said), remote.SAID_MAX + 1)


if __name__ == "__main__":
    unittest.main()
