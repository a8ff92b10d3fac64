"""outbox.core.sender's timeout on the clock: a send that gets no answer ends at its timeout, whatever the server does.

The server never answers, never accepts, or drips its answer one byte every
0.1 s (so no single read ever waits long): the send must raise NoAnswer
within its timeout plus SLACK, far below the DRIP_LIMIT after which a server
of tests/test_outbox_sender.py gives up, which is where a sender that times
each read instead of the whole request would end. Wall-clock bounds live in
*_slow modules, which tests/run.py starts first, beside the rest.
"""
import threading
import time
import unittest

from outbox.core.errors import NoAnswer
from outbox.core.sender import HeldConnection
from tests.support import free_loopback_socket
from tests.test_outbox_sender import (
    DRIP_LIMIT, EVENT, FIRST, SenderTestCase, drip, event_id_of, kept_ack, read_request,
)

SLACK = 3.0  # seconds a timed-out send may overrun its timeout on a loaded 2-core machine; below DRIP_LIMIT - 0.5


class NoAnswerTest(SenderTestCase):
    def assertTimesOut(self, url, timeout=0.5):
        started = time.monotonic()
        error = self.refused(NoAnswer, url, timeout=timeout)
        self.assertLess(time.monotonic() - started, timeout + SLACK)
        self.assertIn("timed out after %gs" % timeout, str(error))

    def test_server_that_accepts_and_never_answers(self):
        def script(server, conn):
            read_request(conn)
            server.stop.wait(DRIP_LIMIT)
        self.assertTimesOut(self.raw(script).url())

    def test_listener_that_never_accepts(self):
        listener = free_loopback_socket()
        self.addCleanup(listener.close)
        # Closing the listener resets the queued connection, so a sender that
        # ignores its timeout fails after DRIP_LIMIT instead of hanging.
        bound = threading.Timer(DRIP_LIMIT, listener.close)
        bound.start()
        self.addCleanup(bound.cancel)
        self.assertTimesOut("http://127.0.0.1:%d/events" % listener.getsockname()[1])

    def test_server_dripping_status_and_headers(self):
        def script(server, conn):
            read_request(conn)
            drip(conn, server.stop, b"HTTP/1.1 200 OK\r\nX-Drip: " + b"a" * 1000)
        self.assertTimesOut(self.raw(script).url())

    def test_server_dripping_the_body(self):
        def script(server, conn):
            read_request(conn)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
            drip(conn, server.stop, b" " * 1000)
        self.assertTimesOut(self.raw(script).url())


class HeldDeadlineTest(SenderTestCase):
    """A held connection's deadline is each request's own: neither carried over nor reset by a dripping sink."""

    def test_each_request_on_a_held_connection_gets_its_own_whole_timeout(self):
        def script(server, conn):
            while True:
                request = read_request(conn)
                if not request:
                    return
                if event_id_of(request) == EVENT["id"]:
                    drip(conn, server.stop, kept_ack(EVENT["id"]))  # one byte every 0.1 s: over 6 s in all
                    return
                server.stop.wait(0.6)  # most of the 1 s timeout, each time
                conn.sendall(kept_ack(event_id_of(request)))
        server = self.raw(script)
        held = HeldConnection(server.url(), timeout=1.0)
        self.addCleanup(held.close)
        for _ in range(3):  # 1.8 s on one connection: no deadline of the connection's
            self.assertIs(held.send(FIRST), True)
        self.assertEqual(held.opened, 1)
        started = time.monotonic()
        with self.assertRaises(NoAnswer) as caught:
            held.send(EVENT)
        self.assertLess(time.monotonic() - started, 1.0 + SLACK)
        self.assertIn("timed out after 1s", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
