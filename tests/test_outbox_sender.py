"""outbox.core.sender against real loopback servers.

Servers bind 127.0.0.1 (one test [::1]) port 0: LoopbackServer for well-formed HTTP, RawServer
below for framing no HTTP library would write. The only patched socket calls
are in `no_network`, which proves a refusal happens before any I/O; no test
ever sends a packet to a non-loopback address. The timeout on the clock (a
send that gets no answer ends at its timeout) is tests/test_outbox_sender_slow.py.
"""
import contextlib
import errno
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest
from unittest import mock

from outbox import dispatch, init_store, intake, pending
from outbox.core.errors import Conflict, DeliveryError, InvalidEvent, NoAnswer, UntrustedAck
from outbox.core.event import canonical, digest
from outbox.core import sender
from outbox.core.sender import MAX_ACK_BYTES, MAX_TIMEOUT, HeldConnection, check_url, send_http
from sink.core import inbox
from sink.server import make_server
from tests.support import DEADLINE, PYTHON, ROOT, LoopbackServer, python_env, reply, wait_until

EVENT = {"id": "snack-7", "sku": "crisps", "qty": 2}
GOOD_ACK = '{"ack":true,"id":"snack-7"}'
DRIP_LIMIT = 5.0  # a dripping server gives up after this long, so a broken sender fails instead of hanging
RULE = "url must be http://<loopback>[:port]/events; "


def ack_handler(handler, body):
    reply(handler, 200, GOOD_ACK)


def read_request(conn):
    """Read one HTTP request (headers, then Content-Length bytes of body) from a raw connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(4096)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def drip(conn, stop, data):
    """Send `data` one byte every 0.1 s until `stop`, DRIP_LIMIT seconds, or the client hangs up."""
    give_up = time.monotonic() + DRIP_LIMIT
    for i in range(len(data)):
        if stop.wait(0.1) or time.monotonic() > give_up:  # pacing the drip, not synchronisation
            return
        conn.sendall(data[i:i + 1])


class RawServer:
    """A TCP server on 127.0.0.1 port 0 that runs ``script(server, conn)`` for each connection.

    `requests` lists the raw bytes each script chose to record; `stop` is set
    on exit so a stalling script can end. Use as a context manager.
    """

    def __init__(self, script, host="127.0.0.1"):
        self.script = script
        self.requests = []
        self.stop = threading.Event()
        self.host = "[%s]" % host if ":" in host else host
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.sock.bind((host, 0))
        except OSError:
            self.sock.close()
            raise
        self.sock.listen(8)
        self.sock.settimeout(0.05)  # accept wakes up to notice `stop`
        self.port = self.sock.getsockname()[1]
        self.threads = [threading.Thread(target=self._serve, daemon=True)]

    def url(self, path="/events"):
        return "http://%s:%d%s" % (self.host, self.port, path)

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            thread = threading.Thread(target=self._run, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _run(self, conn):
        with conn:
            conn.settimeout(DEADLINE)
            try:
                self.script(self, conn)
            except OSError:
                pass  # the sender hung up, which several tests make it do

    def __enter__(self):
        self.threads[0].start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.threads[0].join(DEADLINE)  # no connection is accepted after this
        for thread in self.threads[1:]:
            thread.join(DEADLINE)
        self.sock.close()


class SenderTestCase(unittest.TestCase):
    def serve(self, handle):
        """A started LoopbackServer, shut down after the test."""
        server = LoopbackServer(handle)
        server.__enter__()
        self.addCleanup(server.__exit__, None, None, None)
        return server

    def raw(self, script, host="127.0.0.1"):
        """A started RawServer, stopped after the test."""
        server = RawServer(script, host)
        server.__enter__()
        self.addCleanup(server.__exit__, None, None, None)
        return server

    def refused(self, cls, url, timeout=5.0):
        """Assert send_http raises exactly `cls` with a message naming url and id; return it."""
        with self.assertRaises(cls) as caught:
            send_http(url, EVENT, timeout=timeout)
        self.assertIs(type(caught.exception), cls)
        message = str(caught.exception)
        self.assertTrue(message.startswith("POST %s for 'snack-7': " % url), message)
        self.assertTrue(message.endswith("; not marking it sent"), message)
        return caught.exception

    def off_loopback(self, call):
        """Return what `call()` returns while "localhost" resolves to 10.0.0.1; assert it connected nowhere."""
        connects = []

        def fake_connect(*args):
            connects.append(args)
            raise OSError("test: connect must not be called")

        answer = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.1", 8080))]
        with mock.patch("socket.getaddrinfo", return_value=answer), \
                mock.patch("socket.create_connection", fake_connect), \
                mock.patch.object(socket.socket, "connect", fake_connect):
            result = call()
        self.assertEqual(connects, [])
        return result

    @contextlib.contextmanager
    def no_network(self):
        """Yield a list that records any name lookup or connect; each one raises OSError."""
        calls = []

        def refuse(name):
            def fake(*args, **kwargs):
                calls.append((name, args))
                raise OSError("test: %s must not be called" % name)
            return fake

        with mock.patch("socket.getaddrinfo", refuse("getaddrinfo")), \
                mock.patch("socket.create_connection", refuse("create_connection")), \
                mock.patch.object(socket.socket, "connect", refuse("connect")):
            yield calls


class GoodAckTest(SenderTestCase):
    def test_good_ack_returns_true_after_one_canonical_post(self):
        server = self.serve(ack_handler)
        self.assertIs(send_http(server.url(), EVENT, timeout=5), True)
        self.assertEqual(len(server.requests), 1)
        method, path, headers, body = server.requests[0]
        headers = {name.lower(): value for name, value in headers.items()}
        self.assertEqual((method, path), ("POST", "/events"))
        self.assertEqual(headers["content-type"], "application/json")
        self.assertEqual(headers["connection"], "close")
        self.assertEqual(body, canonical(EVENT).encode("ascii"))

    def test_ack_of_exactly_max_bytes_is_accepted(self):
        ack = '{"ack":true,"id":"snack-7","pad":""}'
        ack = ack.replace('""', '"%s"' % ("x" * (MAX_ACK_BYTES - len(ack))))
        self.assertEqual(len(ack), MAX_ACK_BYTES)
        server = self.serve(lambda handler, body: reply(handler, 200, ack))
        self.assertIs(send_http(server.url(), EVENT, timeout=5), True)

    def test_ack_without_content_length_is_read_to_close(self):
        def script(server, conn):
            server.requests.append(read_request(conn))
            conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + GOOD_ACK.encode())
        server = self.raw(script)
        self.assertIs(send_http(server.url(), EVENT, timeout=5), True)

    def test_localhost_delivery(self):
        server = self.serve(ack_handler)
        addresses = {info[4][0] for info in socket.getaddrinfo("localhost", server.port, 0, socket.SOCK_STREAM)}
        if "127.0.0.1" not in addresses:
            self.skipTest("localhost does not resolve to 127.0.0.1 here")
        # Hold [::1]:port bound but not listening, so a localhost that resolves
        # to ::1 first is refused there at once, whatever else runs on this host.
        try:
            blocker = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        except OSError:
            blocker = None  # no IPv6 at all: nothing can answer on ::1
        if blocker is not None:
            self.addCleanup(blocker.close)
            try:
                blocker.bind(("::1", server.port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    self.skipTest("[::1]:%d is taken by another process" % server.port)
        self.assertIs(send_http("http://LOCALHOST:%d/events" % server.port, EVENT, timeout=5), True)
        self.assertEqual([r[1] for r in server.requests], ["/events"])

    def test_ipv6_loopback_delivery(self):
        def script(server, conn):
            server.requests.append(read_request(conn))
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(GOOD_ACK), GOOD_ACK.encode()))
        try:
            server = self.raw(script, host="::1")
        except OSError:
            self.skipTest("no IPv6 loopback here")
        self.assertTrue(server.url().startswith("http://[::1]:"))
        self.assertIs(send_http(server.url(), EVENT, timeout=5), True)
        self.assertEqual(len(server.requests), 1)


class NoProxyNoRedirectTest(SenderTestCase):
    PROXY_VARS = ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")

    def test_proxy_variables_are_ignored(self):
        trap = self.serve(ack_handler)
        server = self.serve(ack_handler)
        env = {name: trap.url("") for name in self.PROXY_VARS}
        with mock.patch.dict(os.environ, env):
            os.environ.pop("no_proxy", None)
            os.environ.pop("NO_PROXY", None)
            self.assertIs(send_http(server.url(), EVENT, timeout=5), True)
        self.assertEqual(trap.requests, [])
        self.assertEqual([r[1] for r in server.requests], ["/events"])

    def test_proxy_variables_set_before_import_are_ignored(self):
        trap = self.serve(ack_handler)
        server = self.serve(ack_handler)
        env = python_env(**{name: trap.url("") for name in self.PROXY_VARS})
        code = "import sys; from outbox.core.sender import send_http; print(send_http(sys.argv[1], %r, timeout=5))" % EVENT
        done = subprocess.run([PYTHON, "-c", code, server.url()], cwd=ROOT, env=env, timeout=DEADLINE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual((done.returncode, done.stdout), (0, "True\n"), done.stderr)
        self.assertEqual(trap.requests, [])
        self.assertEqual([r[1] for r in server.requests], ["/events"])

    def test_redirects_are_refused_and_never_followed(self):
        trap = self.serve(ack_handler)
        plan = {}

        def handle(handler, body):
            if handler.path != "/events":
                reply(handler, 200, GOOD_ACK)  # a followed redirect would even get a valid ACK
                return
            handler.send_response(plan["code"])
            handler.send_header("Location", plan["location"])
            handler.send_header("Content-Length", "0")
            handler.end_headers()

        server = self.serve(handle)
        for code in (301, 302, 303, 307, 308):
            for location in (trap.url("/trap"), server.url("/trap"), "/trap"):
                with self.subTest(code=code, location=location):
                    plan.update(code=code, location=location)
                    error = self.refused(UntrustedAck, server.url())
                    self.assertIsInstance(error, DeliveryError)
                    self.assertIn("status %d, redirect to %r refused" % (code, location), str(error))
                    self.assertEqual(trap.requests, [])
                    self.assertEqual([r[1] for r in server.requests], ["/events"])
                    del server.requests[:]


class UntrustedAckTest(SenderTestCase):
    def answer(self, status, body):
        """A server that answers every request with `status` and `body` (a correct Content-Length)."""
        return self.serve(lambda handler, _: reply(handler, status, body))

    def test_wrong_id_message_names_url_id_and_problem(self):
        server = self.answer(200, '{"ack":true,"id":"other"}')
        error = self.refused(UntrustedAck, server.url())
        self.assertEqual(str(error), "POST %s for 'snack-7': ACK names id 'other', not 'snack-7'; "
                                     "not marking it sent" % server.url())

    def test_bodies_that_are_not_proof(self):
        cases = [
            (b"ok", "not JSON"),
            (b"\xff\xfe", "not JSON"),
            (b"[true]", "JSON list, not an object"),
            (b'{"ack":"true","id":"snack-7"}', "\"ack\": 'true' (str)"),
            (b'{"ack":1,"id":"snack-7"}', '"ack": 1 (int)'),
            (b'{"id":"snack-7"}', 'no "ack"'),
            (b'{"ack":true}', 'no "id"'),
            (b'{"ack":true,"id":"SNACK-7"}', "ACK names id 'SNACK-7'"),
            (b'{"ack":true,"id":null}', "ACK names id None"),
            (b'{"ack":true,"id":"other","id":"snack-7"}', "repeated key"),
            (b"[" * 2000 + b"]" * 2000, "ACK is "),  # too deep for the parser before 3.13, a list after
        ]
        plan = {}
        server = self.serve(lambda handler, _: reply(handler, 200, plan["body"]))
        for body, what in cases:
            with self.subTest(body=body[:40]):
                plan["body"] = body
                self.assertIn(what, str(self.refused(UntrustedAck, server.url())))

    def test_statuses_other_than_200(self):
        for status in (500, 409, 201, 204):
            with self.subTest(status=status):
                server = self.answer(status, '{"error":"database is locked"}' if status != 204 else "")
                error = self.refused(UntrustedAck, server.url())
                self.assertIn("status %d" % status, str(error))
                if status != 204:
                    self.assertIn("database is locked", str(error))

    def test_oversized_ack_with_correct_content_length(self):
        ack = json.dumps({"ack": True, "id": "snack-7", "pad": "x" * 5000})
        server = self.answer(200, ack)
        self.assertIn("Content-Length %d exceeds" % len(ack), str(self.refused(UntrustedAck, server.url())))

    def test_oversized_ack_without_content_length(self):
        ack = json.dumps({"ack": True, "id": "snack-7", "pad": "x" * 5000}).encode()

        def script(server, conn):
            read_request(conn)
            conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + ack)
        server = self.raw(script)
        self.assertIn("body exceeds the 4096-byte limit", str(self.refused(UntrustedAck, server.url())))

    def test_huge_content_length_is_rejected_without_reading_the_body(self):
        release, stall_over = threading.Event(), threading.Event()
        self.addCleanup(release.set)

        def handle(handler, body):
            handler.send_response(200)
            handler.send_header("Content-Length", "10000000")
            handler.end_headers()
            handler.wfile.write(b'{"ack":true,"id":"snack-7"')
            handler.wfile.flush()
            release.wait(DEADLINE)  # stall: a sender reading the whole body would wait here
            stall_over.set()

        server = self.serve(handle)
        error = self.refused(UntrustedAck, server.url(), timeout=5)
        self.assertFalse(stall_over.is_set(), "the sender waited for the body")
        self.assertIn("Content-Length 10000000 exceeds the 4096-byte ACK limit", str(error))

    def test_malformed_content_length(self):
        for value in (b"+27", b"27, 27", b"0x1b"):
            with self.subTest(value=value):
                def script(server, conn, value=value):
                    read_request(conn)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: " + value + b"\r\n\r\n" + GOOD_ACK.encode())
                server = self.raw(script)
                self.assertIn("is not one decimal number", str(self.refused(UntrustedAck, server.url())))


class DigestTest(SenderTestCase):
    """The ACK's "digest" must be the digest of the event sent; with require_digest it must be there."""

    def answer(self, ack):
        return self.serve(lambda handler, _: reply(handler, 200, json.dumps(ack)))

    def test_matching_digest_is_accepted(self):
        server = self.answer({"ack": True, "id": "snack-7", "digest": digest(EVENT)})
        self.assertIs(send_http(server.url(), EVENT, timeout=5), True)
        self.assertIs(send_http(server.url(), EVENT, timeout=5, require_digest=True), True)

    def test_missing_digest_is_accepted_unless_required(self):
        server = self.answer({"ack": True, "id": "snack-7"})
        self.assertIs(send_http(server.url(), EVENT, timeout=5), True)
        with self.assertRaises(UntrustedAck) as caught:
            send_http(server.url(), EVENT, timeout=5, require_digest=True)
        self.assertIn('no "digest"', str(caught.exception))

    def test_wrong_digests_are_untrusted(self):
        other = digest(dict(EVENT, qty=3))
        for value in (other, digest(EVENT).upper(), "", None, 1, [digest(EVENT)]):
            with self.subTest(digest=value):
                server = self.answer({"ack": True, "id": "snack-7", "digest": value})
                for required in (False, True):
                    with self.assertRaises(UntrustedAck) as caught:
                        send_http(server.url(), EVENT, timeout=5, require_digest=required)
                    self.assertIn("digest", str(caught.exception))

    def test_a_sink_acking_another_payload_leaves_the_item_pending(self):
        tmp = tempfile.mkdtemp(prefix="outbox-kit-test-")
        self.addCleanup(shutil.rmtree, tmp, True)

        def lax_receive(con, event):
            # Says "duplicate" without caring that the payload differs.
            try:
                return inbox.receive(con, event)
            except Conflict:
                return inbox.DUPLICATE

        sink_db = os.path.join(tmp, "sink.db")
        con = inbox.init_sink(sink_db)
        try:
            inbox.receive(con, dict(EVENT, qty=99))  # the sink already holds another payload under this id
        finally:
            con.close()
        server = make_server(sink_db, timeout=5, receive=lax_receive).start()
        self.addCleanup(server.stop)
        source = init_store(os.path.join(tmp, "source.db"))
        self.addCleanup(source.close)
        intake(source, EVENT)
        url = server.url() + "/events"
        with self.assertRaises(UntrustedAck) as caught:
            dispatch(source, lambda event: send_http(url, event, timeout=5))
        self.assertIn("holds another payload", str(caught.exception))
        self.assertEqual(pending(source), [EVENT])


class NoAnswerTest(SenderTestCase):
    def test_truncated_ack(self):
        def script(server, conn):
            read_request(conn)
            # A complete, valid ACK, but 73 bytes short of what was announced.
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + GOOD_ACK.encode())
        server = self.raw(script)
        error = self.refused(NoAnswer, server.url())
        self.assertIn("body ended after %d of the 100 bytes" % len(GOOD_ACK), str(error))

    def test_a_200_cut_short_without_a_content_length_is_untrusted_not_no_answer(self):
        """Issue 22, G22 as it is: with no length announced, a short body is a body that proves nothing."""
        def script(server, conn):
            read_request(conn)
            conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n" + GOOD_ACK.encode()[:20])  # then the connection closes
        server = self.raw(script)
        error = self.refused(UntrustedAck, server.url())
        self.assertEqual(error.kind, "untrusted-ack")
        self.assertNotIsInstance(error, NoAnswer)

    def test_malformed_chunked_body(self):
        def script(server, conn):
            read_request(conn)
            conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + GOOD_ACK.encode())
        server = self.raw(script)
        self.refused(NoAnswer, server.url())

    def test_connection_closed_before_a_response(self):
        def script(server, conn):
            server.requests.append(read_request(conn))
        server = self.raw(script)
        error = self.refused(NoAnswer, server.url())
        self.assertIn("no complete response", str(error))
        wait_until(lambda: server.requests, what="the raw server to record the request")
        self.assertTrue(server.requests[0].startswith(b"POST /events HTTP/1.1\r\n"))

    def test_connection_refused(self):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        error = self.refused(NoAnswer, "http://127.0.0.1:%d/events" % port)
        self.assertIn("ConnectionRefusedError", str(error))


class RefusedBeforeIOTest(SenderTestCase):
    REFUSED = [
        "https://127.0.0.1/events",
        "ftp://127.0.0.1/events",
        "HTTP://127.0.0.1/events",
        "http://example.com/events",
        "http://10.0.0.1/events",
        "http://localhost./events",
        "http://127.1/events",
        "http://2130706433/events",
        "http://0x7f.0.0.1/events",
        "http://0127.0.0.1/events",
        "http://127.0.0.01/events",
        "http://127.000.000.001/events",
        "http://256.0.0.1/events",
        "http://127.0.0.256/events",
        "http://[::ffff:127.0.0.1]/events",
        "http://[0:0:0:0:0:0:0:1]/events",
        "http://[::1%25lo]/events",
        "http://::1/events",
        "http:///events",
        "http://127.0.0.1/events/",
        "http://127.0.0.1/Events",
        "http://127.0.0.1/%65vents",
        "http://127.0.0.1/x/../events",
        "http://127.0.0.1",
        "http://127.0.0.1/events?x=1",
        "http://127.0.0.1/events?",
        "http://127.0.0.1/events#f",
        "http://127.0.0.1/events#",
        "http://user@127.0.0.1/events",
        "http://user:pw@127.0.0.1/events",
        "http://127.0.0.1:0/events",
        "http://127.0.0.1:65536/events",
        "http://127.0.0.1:08080/events",
        "http://127.0.0.1:/events",
        "http://127.0.0.1:8080:80/events",
        "http://127.0.0.1 /events",
        "http://127.0.0.1/events\n",
        "http://127.0.0.1/\tevents",
        " http://127.0.0.1/events",
        "http://127.0.0.1/events\x00",
        "http://127.0.0.1/\u00e9vents",
        "",
    ]

    def test_unsafe_urls_are_refused_with_no_lookup_or_connection(self):
        for url in self.REFUSED:
            with self.subTest(url=url):
                with self.no_network() as calls:
                    with self.assertRaises(ValueError) as caught:
                        send_http(url, EVENT, timeout=5)
                    with self.assertRaises(ValueError):
                        check_url(url)
                self.assertNotIsInstance(caught.exception, InvalidEvent)
                self.assertTrue(str(caught.exception).startswith(RULE), str(caught.exception))
                self.assertEqual(calls, [])

    def test_refusal_names_what_is_wrong(self):
        cases = [
            ("http://example.com/events", "host 'example.com' is not loopback"),
            ("http://127.0.0.1:65536/events", "port '65536' is not 1-65535"),
            ("http://127.0.0.1/Events", "path '/Events' is not /events"),
            ("http://user@127.0.0.1/events", "user info 'user' is not allowed"),
            ("http://127.0.0.1/events?", "query '' is not allowed"),
            ("https://127.0.0.1/events", "scheme 'https' is not http"),
            ("http://127.0.0.1\t/events", "'\\t' at position 16 is whitespace"),
        ]
        for url, what in cases:
            with self.subTest(url=url):
                with self.assertRaises(ValueError) as caught:
                    check_url(url)
                self.assertTrue(str(caught.exception).startswith(RULE + what), str(caught.exception))

    def test_non_str_url(self):
        with self.no_network() as calls:
            for url in (None, b"http://127.0.0.1/events"):
                with self.subTest(url=url), self.assertRaises(ValueError):
                    send_http(url, EVENT, timeout=5)
        self.assertEqual(calls, [])

    def test_the_no_network_trap_does_catch_a_connection(self):
        with self.no_network() as calls:
            self.refused(NoAnswer, "http://127.0.0.1:9/events")
        self.assertEqual([name for name, _ in calls], ["getaddrinfo"])

    def test_a_name_resolving_off_loopback_is_never_connected(self):
        error = self.off_loopback(lambda: self.refused(NoAnswer, "http://localhost:8080/events"))
        self.assertIn("resolves to 10.0.0.1, which is not loopback", str(error))

    def test_invalid_event_is_refused_with_no_connection(self):
        bad_events = ({"id": "snack-7"}, {"id": "", "sku": "crisps", "qty": 2}, {"id": "a", "sku": "b", "qty": True}, None)
        for event in bad_events:
            with self.subTest(event=event):
                with self.no_network() as calls, self.assertRaises(InvalidEvent):
                    send_http("http://127.0.0.1:9/events", event, timeout=5)
                self.assertEqual(calls, [])

    def test_bad_timeouts_are_refused_with_no_connection(self):
        for timeout in (0, 0.0, -1, True, False, "5", None, float("nan"), float("inf"), MAX_TIMEOUT + 1):
            with self.subTest(timeout=timeout):
                with self.no_network() as calls, self.assertRaises(ValueError) as caught:
                    send_http("http://127.0.0.1:9/events", EVENT, timeout=timeout)
                self.assertTrue(str(caught.exception).startswith("timeout must be"), str(caught.exception))
                self.assertEqual(calls, [])


FIRST = {"id": "first", "sku": "crisps", "qty": 1}


def kept_ack(event_id):
    """A verified ACK for `event_id` in an HTTP/1.1 answer that keeps the connection."""
    body = json.dumps({"ack": True, "id": event_id}).encode("ascii")
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: keep-alive\r\n\r\n" % len(body) + body


def event_id_of(request):
    return json.loads(request.partition(b"\r\n\r\n")[2].decode("ascii"))["id"]


# What a misbehaving sink does with the request for EVENT; each is a NoAnswer or an
# UntrustedAck on a fresh connection (the tests above), and must be the same on a held one.
HOSTILE = {
    "short read": lambda conn: conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + GOOD_ACK.encode()),
    "close without an answer": lambda conn: None,
    "garbage status line": lambda conn: conn.sendall(b"HTTP/1.1 OK\r\n\r\n"),
    "wrong id": lambda conn: conn.sendall(kept_ack("other")),
    "status 500": lambda conn: conn.sendall(b"HTTP/1.1 500 Oops\r\nContent-Length: 2\r\n\r\n{}"),
    "status 201": lambda conn: conn.sendall(kept_ack(EVENT["id"]).replace(b"200 OK", b"201 Created")),
    "redirect": lambda conn: conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9/events\r\n"
                                          b"Content-Length: 0\r\n\r\n"),
    "oversized": lambda conn: conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (MAX_ACK_BYTES + 1)
                                           + b"x" * (MAX_ACK_BYTES + 1)),
}


class HeldConnectionTest(SenderTestCase):
    """HeldConnection: send_http's request, kept on one connection between ACKs, dropped at the first doubt."""

    def keep_alive_server(self, hostile=None, after_answer=None, extra=b""):
        """A RawServer answering every request on a connection with a kept ACK, `hostile(conn)` for EVENT's.

        `server.connections` counts the connections accepted; `extra` follows each
        kept ACK in the same write, `after_answer(conn)` runs after it. Every
        request is recorded.
        """
        def script(server, conn):
            with server_lock:
                server.connections += 1
            while True:
                request = read_request(conn)
                if not request:
                    return
                server.requests.append(request)
                if event_id_of(request) == EVENT["id"] and hostile is not None:
                    hostile(conn)
                    return
                conn.sendall(kept_ack(event_id_of(request)) + extra)
                if after_answer is not None:
                    after_answer(conn)
        server_lock = threading.Lock()
        server = self.raw(script)
        server.connections = 0
        return server

    def held(self, url, **options):
        held = HeldConnection(url, **options)
        self.addCleanup(held.close)
        return held

    def test_acks_ride_one_connection_with_send_https_request(self):
        server = self.keep_alive_server()
        held = self.held(server.url(), timeout=5)
        for n in range(3):
            self.assertIs(held.send(dict(EVENT, id="e%d" % n)), True)
        self.assertEqual((server.connections, held.opened), (1, 1))
        self.assertEqual(len(server.requests), 3)
        head, _, body = server.requests[0].partition(b"\r\n\r\n")
        lines = head.decode("ascii").split("\r\n")
        self.assertEqual(lines[0], "POST /events HTTP/1.1")
        self.assertIn("Connection: keep-alive", lines)
        self.assertIn("Content-Type: application/json", lines)
        self.assertEqual(body, canonical(dict(EVENT, id="e0")).encode("ascii"))

    def test_a_misbehaving_answer_on_a_held_connection_is_what_a_fresh_connection_gets(self):
        for name, hostile in HOSTILE.items():
            with self.subTest(name):
                server = self.keep_alive_server(hostile)
                with self.assertRaises(DeliveryError) as fresh:
                    send_http(server.url(), EVENT, timeout=5)
                held = self.held(server.url(), timeout=5)
                self.assertIs(held.send(FIRST), True)
                with self.assertRaises(DeliveryError) as reused:
                    held.send(EVENT)
                self.assertIs(type(reused.exception), type(fresh.exception))
                self.assertEqual((reused.exception.kind, str(reused.exception)),
                                 (fresh.exception.kind, str(fresh.exception)))
                # Written once: the failed request was not sent again on a new connection within the call.
                self.assertEqual([event_id_of(r) for r in server.requests], ["snack-7", "first", "snack-7"])
                # Dropped: the next send connects afresh and is acknowledged.
                self.assertIs(held.send(FIRST), True)
                self.assertEqual((server.connections, held.opened), (3, 2))

    def test_a_sink_that_closes_or_speaks_between_requests_costs_a_new_connection_not_a_failure(self):
        spoken = threading.Event()

        def speak(conn):
            conn.sendall(b"X")  # a byte nobody asked for, after the answer
            spoken.set()

        cases = (("close", lambda conn: conn.shutdown(socket.SHUT_RDWR)), ("unexpected byte", speak),
                 ("unexpected byte with the answer", None))
        for name, after_answer in cases:
            with self.subTest(name):
                spoken.clear()
                server = self.keep_alive_server(after_answer=after_answer, extra=b"X" if after_answer is None else b"")
                held = self.held(server.url(), timeout=5)
                self.assertIs(held.send(FIRST), True)
                if name == "unexpected byte":
                    spoken.wait(DEADLINE)
                elif name == "close":
                    wait_until(lambda: sender._stirred(held._sock), what="the close to reach the sender")
                self.assertIs(held.send(dict(EVENT, id="second")), True)
                self.assertEqual((server.connections, held.opened), (2, 2))
                self.assertEqual([event_id_of(r) for r in server.requests], ["first", "second"])

    def test_an_answer_that_does_not_keep_the_connection_is_verified_then_the_connection_dropped(self):
        answers = {
            "HTTP/1.0": b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n",
            "HTTP/1.0 keep-alive": b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\nConnection: keep-alive\r\n\r\n",
            "Connection: close": b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
        }
        for name, head in answers.items():
            with self.subTest(name):
                def script(server, conn, head=head):
                    server.connections += 1
                    request = read_request(conn)
                    server.requests.append(request)
                    body = json.dumps({"ack": True, "id": event_id_of(request)}).encode("ascii")
                    conn.sendall(head % len(body) + body)
                    read_request(conn)  # holds the connection open: only the sender may end it
                server = self.raw(script)
                server.connections = 0
                held = self.held(server.url(), timeout=5)
                self.assertIs(held.send(FIRST), True)
                self.assertIs(held.send(EVENT), True)
                self.assertEqual(held.opened, 2)
                self.assertEqual(len(server.requests), 2)

    def test_an_ack_without_length_is_read_to_close_and_not_kept(self):
        def script(server, conn):
            server.requests.append(read_request(conn))
            conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n" + GOOD_ACK.encode())
        server = self.raw(script)
        held = self.held(server.url(), timeout=5)
        self.assertIs(held.send(EVENT), True)
        self.assertIs(held.send(EVENT), True)
        self.assertEqual(held.opened, 2)

    def test_a_connection_idle_past_the_hold_limit_is_not_reused(self):
        server = self.keep_alive_server()
        held = self.held(server.url(), timeout=5)
        self.assertIs(held.send(FIRST), True)
        with mock.patch.object(sender, "HOLD_IDLE_S", -1.0):  # every connection is past it
            self.assertIs(held.send(EVENT), True)
        self.assertEqual((server.connections, held.opened), (2, 2))

    def test_refusals_before_io_are_send_https(self):
        with self.no_network() as calls:
            with self.assertRaises(ValueError) as caught:
                HeldConnection("http://10.0.0.1/events")
            self.assertTrue(str(caught.exception).startswith(RULE), str(caught.exception))
            with self.assertRaises(ValueError):
                HeldConnection("http://127.0.0.1:9/events", timeout=0)
            held = HeldConnection("http://127.0.0.1:9/events")
            with self.assertRaises(InvalidEvent):
                held.send({"id": "snack-7"})
        self.assertEqual(calls, [])
        self.assertEqual(held.opened, 0)

    def test_a_name_resolving_off_loopback_is_never_connected(self):
        held = self.held("http://localhost:8080/events")

        def send():
            with self.assertRaises(NoAnswer) as caught:
                held.send(EVENT)
            return caught.exception
        self.assertIn("resolves to 10.0.0.1, which is not loopback", str(self.off_loopback(send)))

    def test_proxy_variables_are_ignored(self):
        server = self.keep_alive_server()
        trap = self.keep_alive_server()
        proxy = "http://127.0.0.1:%d" % trap.port
        with mock.patch.dict(os.environ, {"http_proxy": proxy, "HTTP_PROXY": proxy, "all_proxy": proxy}):
            held = self.held(server.url(), timeout=5)
            self.assertIs(held.send(EVENT), True)
        self.assertEqual((len(server.requests), trap.connections), (1, 0))

    def test_dispatch_through_a_held_connection_into_the_kits_sink(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        server = make_server(os.path.join(tmp, "sink.db")).start()
        self.addCleanup(server.stop)
        source = init_store(os.path.join(tmp, "source.db"))
        self.addCleanup(source.close)
        for n in range(5):
            intake(source, dict(EVENT, id="e%d" % n))
        held = self.held(server.url() + "/events", timeout=5, require_digest=True)
        self.assertEqual(dispatch(source, held.send), 5)
        self.assertEqual((pending(source), held.opened), ([], 1))
        con = inbox.init_sink(os.path.join(tmp, "sink.db"))
        self.addCleanup(con.close)
        self.assertEqual(con.execute("SELECT count(*) FROM inbox").fetchone()[0], 5)


class AcceptedUrlTest(unittest.TestCase):
    def test_loopback_forms_pass_validation(self):
        cases = [
            ("http://127.0.0.1:8765/events", ("127.0.0.1", 8765)),
            ("http://LOCALHOST:8765/events", ("localhost", 8765)),
            ("http://localhost/events", ("localhost", 80)),
            ("http://127.255.255.254:8765/events", ("127.255.255.254", 8765)),
            ("http://127.0.0.1/events", ("127.0.0.1", 80)),
            ("http://[::1]:1/events", ("::1", 1)),
            ("http://127.0.0.1:65535/events", ("127.0.0.1", 65535)),
        ]
        for url, expected in cases:
            with self.subTest(url=url):
                self.assertEqual(check_url(url), expected)


if __name__ == "__main__":
    unittest.main()
