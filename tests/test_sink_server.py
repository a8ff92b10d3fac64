"""sink.server over real HTTP: answers, refusals that write nothing, concurrency, threads that die, a seeded fuzz.

Servers run in-process on 127.0.0.1 port 0. The faults around receive are
tests/test_sink_faults.py; the server under attack, at its caps and told to
stop, is tests/test_sink_server_limits_slow.py and _churn_slow.py.

FuzzTest sends thousands of requests mutated from a valid POST /events
(bytes flipped, inserted or dropped, header lines duplicated or dropped,
lengths lied, bodies cut) to one in-process sink. Each must get a status
line and a JSON body with a status from the README's table (never a 5xx;
silence only for a request cut to nothing), and a refused one must change
nothing in the sink DB. Afterwards the sink still answers /health and logged
no unhandled error. The seed is fixed, so `make test` runs the same requests
every time and a failure is reproducible as it stands; OUTBOX_FUZZ_SEED=N
runs another stream (the seed is printed either way).
"""

import contextlib
import http.client
import io
import json
import os
import random
import socket
import sqlite3
import sys
import threading
import time
from http import HTTPStatus
from unittest import mock

from outbox.core import store
from outbox.core.event import digest
from sink import WrongDatabase, init_sink, make_server, receive
from sink.server import MAX_BODY, ThreadDied
from tests.support import (
    DEADLINE, EVENT, SHORT, ServerTestCase, TempDirTestCase, body_of, exchange, fuzz_seed, outcomes, parse_prometheus,
    post, post_to, read_to_eof, request_bytes, snapshot, stock, trickle, wait_until,
)

EVENT_DIGEST = digest(EVENT)


def get_metrics(port, timeout):
    """GET /metrics on its own connection: (the response, its body as text)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        return response, response.read().decode("utf-8")
    finally:
        conn.close()


class AnswerTest(ServerTestCase):
    def test_binding_makes_no_name_lookup(self):
        # http.server's own server_bind asks socket.getfqdn: a reverse DNS query for 127.x.
        with mock.patch("socket.getfqdn", side_effect=AssertionError("reverse DNS lookup")):
            server = self.start(host="127.0.0.2")
        self.assertEqual(server.url(), "http://127.0.0.2:%d" % server.server_address[1])
        status, _, body = post_to("127.0.0.2", server.server_address[1], None, path="/health", method="GET")
        self.assertEqual((status, body), (200, {"ok": True}))

    def test_health(self):
        status, response, body = post(self.port(), None, path="/health", method="GET", content_type=None)
        self.assertEqual(status, 200)
        self.assertEqual(response.getheader("Content-Type"), "application/json")
        self.assertEqual(response.getheader("Connection"), "close")
        self.assertEqual(body, {"ok": True})

    def test_metrics_count_each_outcome_as_prometheus_text(self):
        port = self.port()
        post(port, body_of(EVENT))
        post(port, body_of(EVENT))
        post(port, body_of(dict(EVENT, qty=4)))
        response, text = get_metrics(port, DEADLINE)
        self.assertEqual(response.status, 200)
        self.assertTrue(response.getheader("Content-Type").startswith("text/plain; version=0.0.4"))
        samples = parse_prometheus(text)
        for outcome in ("applied", "duplicate", "conflict"):
            self.assertEqual(samples[("sink_deliveries_total", (("outcome", outcome),))], 1, text)
        self.assertEqual(samples[("sink_inventory_qty", (("sku", "apple"),))], 3, text)
        status, _, _ = post(port, None, path="/metrics", method="POST", content_type=None)
        self.assertEqual(status, 405)
        self.assertEqual(outcomes(self.db_path), ["applied", "duplicate", "conflict"])  # reading wrote nothing

    def test_applied_then_duplicate(self):
        port = self.port()
        status, response, body = post(port, body_of(EVENT))
        self.assertEqual((status, body), (200, {"ack": True, "id": "e1", "result": "applied", "digest": EVENT_DIGEST}))
        self.assertEqual(response.getheader("Connection"), "close")
        status, _, body = post(port, body_of(EVENT), content_type="application/json; charset=utf-8")
        self.assertEqual(
            (status, body), (200, {"ack": True, "id": "e1", "result": "duplicate", "digest": EVENT_DIGEST})
        )
        self.assertEqual(stock(self.db_path), {"apple": 3})
        self.assertEqual(outcomes(self.db_path), ["applied", "duplicate"])

    def test_conflict_is_409_logged_and_leaves_inventory(self):
        lines = []
        port = self.port(log=lines.append)
        post(port, body_of(EVENT))
        status, _, body = post(port, body_of(dict(EVENT, qty=4)))
        self.assertEqual(status, 409)
        self.assertEqual(body, {"ack": False, "id": "e1", "error": "conflict"})
        self.assertEqual(stock(self.db_path), {"apple": 3})
        self.assertEqual(outcomes(self.db_path), ["applied", "conflict"])
        # One line at the sink for the 409, naming both payloads (the client hears only "conflict").
        logged = wait_until(lambda: [line for line in lines if '" 409 ' in line], what="the 409 line")
        self.assertEqual(len(logged), 1, lines)
        self.assertNotIn("\n", logged[0])
        self.assertIn('"qty":3', logged[0])
        self.assertIn('"qty":4', logged[0])

    def test_one_log_line_per_request_with_the_status_and_why(self):
        lines = []
        port = self.port(log=lines.append)
        post(port, body_of(EVENT))
        post(port, b"{", content_type="application/json")
        post(port, None, path="/nowhere", method="GET", content_type=None)
        wait_until(lambda: len(lines) == 3, what="three lines")
        self.assertIn('127.0.0.1 - "POST /events HTTP/1.1" 200', lines)
        self.assertIn("127.0.0.1 - \"GET /nowhere HTTP/1.1\" 404 no such path '/nowhere': the sink serves only "
                      "POST /events, GET /health and GET /metrics", lines)
        refused = [line for line in lines if line.startswith('127.0.0.1 - "POST /events HTTP/1.1" 400 ')]
        self.assertEqual(len(refused), 1, lines)
        self.assertIn("body is not valid JSON", refused[0])  # the message the client got, in one line

    def test_the_wal_is_kept_between_requests(self):
        # One store connection for the life of the server: SQLite never sees its
        # last connection close, so it never checkpoints and deletes the WAL,
        # and the next request does not have to create it again.
        port = self.port()
        wal = self.db_path + "-wal"
        status, _, _ = post(port, body_of(EVENT))
        self.assertEqual(status, 200)
        first = os.stat(wal).st_ino
        for qty in range(1, 21):
            status, _, _ = post(port, body_of({"id": "w%d" % qty, "sku": "pear", "qty": qty}))
            self.assertEqual(status, 200)
            self.assertEqual(os.stat(wal).st_ino, first)

    def test_binds_loopback_with_a_real_port_and_a_deep_backlog(self):
        server = self.start()
        host, port = server.server_address[:2]
        self.assertEqual(host, "127.0.0.1")
        self.assertGreater(port, 0)
        self.assertGreaterEqual(server.request_queue_size, 64)

    def test_burst_of_connections_is_served(self):
        port = self.port()
        count = 64
        barrier = threading.Barrier(count, timeout=DEADLINE)
        statuses = []
        lock = threading.Lock()

        def client():
            barrier.wait()
            status, _, _ = post(port, None, path="/health", method="GET", content_type=None)
            with lock:
                statuses.append(status)

        threads = [threading.Thread(target=client) for _ in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(DEADLINE)
        self.assertEqual(statuses, [200] * count)

    def test_duplicate_storm_applies_once(self):
        port = self.port()
        clients = 8
        barrier = threading.Barrier(clients, timeout=DEADLINE)
        answers = []
        lock = threading.Lock()

        def client():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE)
            try:
                conn.connect()
                barrier.wait()
                conn.request("POST", "/events", body=body_of(EVENT), headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                answer = (response.status, json.loads(response.read().decode("ascii")))
            finally:
                conn.close()
            with lock:
                answers.append(answer)

        threads = [threading.Thread(target=client) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(DEADLINE)
        self.assertEqual(len(answers), clients)
        self.assertTrue(
            all(status == 200 and body["ack"] is True and body["id"] == "e1" for status, body in answers), answers
        )
        results = sorted(body["result"] for _, body in answers)
        self.assertEqual(results, ["applied"] + ["duplicate"] * 7)
        self.assertEqual(stock(self.db_path), {"apple": 3})
        self.assertEqual(sorted(outcomes(self.db_path)), ["applied"] + ["duplicate"] * 7)
        self.assertEqual(len(snapshot(self.db_path)["inbox"]), 1)

    def test_other_clients_are_served_while_one_stays_silent(self):
        port = self.port(timeout=2.0)
        idle = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        self.addCleanup(idle.close)
        trickling = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        self.addCleanup(trickling.close)
        trickling.sendall(b"POST /events HTTP/1.1\r\nContent-Type: application/json\r\n")
        status, _, body = post(port, body_of(EVENT))
        self.assertEqual((status, body["result"]), (200, "applied"))
        # The silent ones were still held while that request was answered ...
        for sock in (idle, trickling):
            sock.setblocking(False)
            with self.assertRaises(BlockingIOError):
                sock.recv(1)
            sock.settimeout(DEADLINE)
        # ... and the server lets go of them after its timeout.
        self.assertEqual(read_to_eof(idle), b"")
        self.assertEqual(read_to_eof(trickling), b"")

    def test_a_trickling_client_is_cut_off_at_the_request_deadline(self):
        lines = []
        port = self.port(timeout=SHORT, log=lines.append)
        self.assertTrue(trickle(port))
        # Closed by its request deadline (the server's timeout; never an idle timeout: it was never idle for long).
        # How soon after that deadline, on the clock: tests/test_sink_server_limits_slow.py, RequestDeadlineTest.
        wait_until(lambda: [line for line in lines if "closed: no complete request within %gs" % SHORT in line],
                   what="the server's line for the closed trickler")

    def test_make_server_refuses_a_source_db_unchanged(self):
        path = self.path("source.db")
        store.init_store(path).close()
        with open(path, "rb") as f:
            before = f.read()
        with self.assertRaises(WrongDatabase):
            make_server(path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_make_server_refuses_bad_options(self):
        for options in (
            {"timeout": 0},
            {"timeout": -1},
            {"timeout": True},
            {"fault": "nope"},
            {"fault": "drop-after-commit", "fault_count": 0},
        ):
            with self.subTest(options=options):
                with self.assertRaises(ValueError):
                    make_server(self.db_path, **options)

    def test_nothing_printed_by_default(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            port = self.port(receive=_raises(RuntimeError("boom")))
            post(port, body_of(EVENT))
            post(port, b"{", content_type="application/json")
            post(port, None, path="/nowhere", method="GET", content_type=None)
        self.assertEqual(err.getvalue(), "")


class RefusalTest(ServerTestCase):
    """Every 4xx: the right status, a JSON error naming the rule, and the DB untouched."""

    def setUp(self):
        super().setUp()
        self.port_ = self.port()
        post(self.port_, body_of(EVENT))  # so "unchanged" is about a DB that has rows
        self.before = snapshot(self.db_path)

    def assert_refused(self, status, answer, expected_status, *, mentions=()):
        self.assertEqual(status, expected_status)
        self.assertEqual(set(answer), {"ack", "error"})
        self.assertIs(answer["ack"], False)
        for word in mentions:
            self.assertIn(word, answer["error"])
        self.assertEqual(snapshot(self.db_path), self.before)

    def test_bad_json_and_invalid_events_are_400_naming_the_problem(self):
        valid = {"id": "e2", "sku": "pear", "qty": 5}
        cases = [
            (b"{not json", "JSON"),
            (b"", "JSON"),
            (b'{"id": "e2", "sku": "pear", "qty": 5, "qty": 1}', "repeated key"),
            (b"\xff\xfe{}", "UTF-8"),
            (b"[" * 3000, "JSON"),
            (body_of(dict(valid, qty=0)), "qty"),
            (body_of(dict(valid, qty="5")), "qty"),
            (body_of(dict(valid, qty=5.0)), "qty"),
            (body_of(dict(valid, sku="")), "sku"),
            (body_of(dict(valid, id="has space")), "id"),
            (body_of({"id": "e2", "qty": 5}), "sku"),
            (body_of(dict(valid, colour="red")), "colour"),
            (body_of([valid]), "dict"),
            (body_of(dict(EVENT, qty=0)), "qty"),  # a known id, but invalid: never reaches the store
        ]
        for body, word in cases:
            with self.subTest(body=body[:40]):
                status, _, answer = post(self.port_, body)
                self.assert_refused(status, answer, 400, mentions=[word])

    def test_untrusted_framing_is_refused(self):
        event = body_of({"id": "e2", "sku": "pear", "qty": 5})
        ct = "Content-Type: application/json"
        cases = [
            ("no Content-Length", [ct], event, 411, "Content-Length"),
            ("negative", [ct, "Content-Length: -5"], event, 400, "Content-Length"),
            ("non-numeric", [ct, "Content-Length: abc"], event, 400, "Content-Length"),
            ("exponent", [ct, "Content-Length: 3e1"], event, 400, "Content-Length"),
            ("plus sign", [ct, "Content-Length: +%d" % len(event)], event, 400, "Content-Length"),
            ("repeated", [ct, "Content-Length: %d" % len(event)] * 2, event, 400, "Content-Length"),
            ("list", [ct, "Content-Length: %d, %d" % (len(event), len(event))], event, 400, "Content-Length"),
            (
                "chunked",
                [ct, "Transfer-Encoding: chunked"],
                b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event),
                400,
                "Transfer-Encoding",
            ),
            (
                "chunked with a length",
                [ct, "Transfer-Encoding: chunked", "Content-Length: %d" % len(event)],
                event,
                400,
                "Transfer-Encoding",
            ),
            (
                "identity",
                [ct, "Transfer-Encoding: identity", "Content-Length: %d" % len(event)],
                event,
                400,
                "Transfer-Encoding",
            ),
            ("too large", [ct, "Content-Length: %d" % (MAX_BODY + 1)], b" " * (MAX_BODY + 1), 413, str(MAX_BODY)),
            ("far too large", [ct, "Content-Length: 99999999999999999999999"], event, 413, str(MAX_BODY)),
            ("no Content-Type", ["Content-Length: %d" % len(event)], event, 415, "Content-Type"),
            ("text/plain", ["Content-Type: text/plain", "Content-Length: %d" % len(event)], event, 415, "Content-Type"),
            (
                "jsonp",
                ["Content-Type: application/jsonp", "Content-Length: %d" % len(event)],
                event,
                415,
                "Content-Type",
            ),
            (
                "latin-1",
                ["Content-Type: application/json; charset=latin-1", "Content-Length: %d" % len(event)],
                event,
                415,
                "charset",
            ),
        ]
        for name, head, body, expected, word in cases:
            with self.subTest(name):
                status, headers, answer, _ = exchange(self.port_, request_bytes(head, body))
                self.assert_refused(status, answer, expected, mentions=[word])
                self.assertEqual(headers.get("connection"), ["close"])

    def test_smuggling_shapes_are_400_and_write_nothing(self):
        event = body_of({"id": "e2", "sku": "pear", "qty": 5})
        ct, cl = "Content-Type: application/json", "Content-Length: %d" % len(event)
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event)

        def raw(*lines, body=event):
            return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

        line, host = "POST /events HTTP/1.1", "Host: 127.0.0.1"
        cases = [
            ("space before the colon", raw(line, host, ct, cl, "Transfer-Encoding : chunked", body=chunked), "colon"),
            ("tab before the colon", raw(line, host, ct, "Content-Length\t: %d" % len(event)), "colon"),
            ("obs-fold", raw(line, host, ct, cl, "X-Note: a", " folded"), "obs-fold"),
            ("obs-fold with a tab", raw(line, host, ct, "Content-Length:", "\t%d" % len(event)), "obs-fold"),
            ("no colon", raw(line, host, ct, cl, "Transfer-Encoding chunked"), "no colon"),
            ("NUL in a value", raw(line, host, ct, cl, "X-Note: a\x00b"), "control"),
            ("NUL in a name", raw(line, host, ct, cl, "X-\x00Note: a"), "control"),
            ("CR in a value", raw(line, host, ct, cl, "X-Note: a\rb"), "control"),
            ("ESC in a value", raw(line, host, ct, cl, "X-Note: \x1b[2J"), "control"),
            ("DEL in a value", raw(line, host, ct, cl, "X-Note: \x7f"), "control"),
            ("bare LF ending a header", raw(line, host, ct + "\n" + cl), "bare LF"),
            ("bare LF ending the request line", raw(line + "\n" + host, ct, cl), "CRLF"),
            ("empty name", raw(line, host, ct, cl, ": x"), "token"),
            ("no Host in 1.1", raw(line, ct, cl), "Host"),
            ("two Hosts", raw(line, host, host, ct, cl), "Host"),
            ("two Hosts in 1.0", raw("POST /events HTTP/1.0", host, host, ct, cl), "Host"),
            ("two spaces", raw("POST  /events HTTP/1.1", host, ct, cl), "METHOD SP target"),
            ("tab separator", raw("POST\t/events HTTP/1.1", host, ct, cl), "METHOD SP target"),
            ("trailing space", raw("POST /events HTTP/1.1 ", host, ct, cl), "METHOD SP target"),
            ("leading space", raw(" POST /events HTTP/1.1", host, ct, cl), "METHOD SP target"),
            ("lower-case version", raw("POST /events http/1.1", host, ct, cl), "METHOD SP target"),
            ("extra word", raw("POST /events HTTP/1.1 x", host, ct, cl), "METHOD SP target"),
            ("blank line first", b"\r\n" + raw(line, host, ct, cl), "METHOD SP target"),
            ("space in the target", raw("POST /ev ents HTTP/1.1", host, ct, cl), "METHOD SP target"),
            ("Content-Length with a space inside", raw(line, host, ct, "Content-Length: 4 1"), "Content-Length"),
        ]
        for name, data, word in cases:
            with self.subTest(name):
                status, headers, answer, raw_answer = exchange(self.port_, data)
                self.assert_refused(status, answer, 400, mentions=[word])
                self.assertTrue(raw_answer.startswith(b"HTTP/1.0 400 Bad Request\r\n"), raw_answer[:60])
                self.assertEqual(headers.get("connection"), ["close"])

    def test_every_refusal_has_a_status_line_and_a_json_body(self):
        cases = [
            ("HTTP/0.9", b"GET /health\r\n", 400, "HTTP/0.9"),
            ("HTTP/0.9 left open", b"GET /health\r\n", 400, "HTTP/0.9"),
            ("HTTP/2.0", b"GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505, "HTTP/2.0"),
            ("HTTP/1.2", b"GET /health HTTP/1.2\r\nHost: x\r\n\r\n", 505, "HTTP/1.2"),
            ("request line too long", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n", 414, "request line"),
            ("request line too long, no CRLF yet", b"GET /" + b"a" * 9000, 414, "request line"),
            ("head too long", b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 3000, 431, "head"),
            ("too many headers", b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X: y\r\n" * 70 + b"\r\n", 431, "header"),
            ("head cut short", b"GET /health HTTP/1.1\r\nHost: x\r\n", 400, "incomplete"),
            ("not HTTP at all", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n", 400, "request line"),
        ]
        for name, data, expected, word in cases:
            with self.subTest(name):
                half_close = name != "HTTP/0.9 left open" and "too long" not in name
                status, headers, answer, raw = exchange(self.port_, data, half_close=half_close)
                self.assertTrue(raw.startswith(b"HTTP/1.0 %d " % expected), raw[:80])
                self.assert_refused(status, answer, expected, mentions=[word])
                self.assertEqual(headers["content-type"], ["application/json"])
                self.assertTrue(raw.endswith(b"}\n"), raw[-20:])

    def test_body_of_exactly_max_bytes_is_accepted_one_more_is_413(self):
        event = body_of({"id": "e2", "sku": "pear", "qty": 5})
        ct = "Content-Type: application/json"
        exact = event + b" " * (MAX_BODY - len(event))  # JSON allows trailing whitespace
        self.assertEqual(len(exact), 4096)
        status, _, answer, _ = exchange(self.port_, request_bytes([ct, "Content-Length: %d" % len(exact)], exact))
        self.assertEqual((status, answer["result"]), (200, "applied"))
        self.before = snapshot(self.db_path)
        more = exact + b" "
        status, _, answer, _ = exchange(self.port_, request_bytes([ct, "Content-Length: %d" % len(more)], more))
        self.assert_refused(status, answer, 413, mentions=["4096"])

    def test_body_shorter_than_declared_is_400_and_not_applied(self):
        event = body_of({"id": "e2", "sku": "pear", "qty": 5})
        data = request_bytes(["Content-Type: application/json", "Content-Length: %d" % (len(event) + 10)], event)
        for half_close in (True, False):
            with self.subTest(half_close=half_close):
                status, _, answer, _ = exchange(self.port_, data, half_close=half_close)
                # Still open, the request is answered by the server's own short deadline (exchange's socket would
                # time out at DEADLINE otherwise; how soon, on the clock: RequestDeadlineTest, in
                # tests/test_sink_server_limits_slow.py); half-closed, at once.
                waited = ["within the %gs request deadline" % SHORT] if not half_close else []
                self.assert_refused(status, answer, 400, mentions=["body incomplete"] + waited)

    def test_other_paths_are_404(self):
        event = body_of({"id": "e2", "sku": "pear", "qty": 5})
        for target in (
            "/events/",
            "/x/../events",
            "/events?x=1",
            "/events#x",
            "/EVENTS",
            "/",
            "/health/",
            "//events",
            "http://127.0.0.1/events",
        ):
            with self.subTest(target=target):
                status, _, answer, _ = exchange(
                    self.port_,
                    request_bytes(
                        ["Content-Type: application/json", "Content-Length: %d" % len(event)], event, target=target
                    ),
                )
                self.assert_refused(status, answer, 404,
                                    mentions=["path", "POST /events, GET /health and GET /metrics"])

    def test_other_methods_are_405_with_allow(self):
        cases = [
            ("GET", "/events", "POST"),
            ("PUT", "/events", "POST"),
            ("DELETE", "/events", "POST"),
            ("PATCH", "/events", "POST"),
            ("OPTIONS", "/events", "POST"),
            ("PROPFIND", "/events", "POST"),
            ("FOO", "/health", "GET"),
            ("POST", "/health", "GET"),
            ("PUT", "/health", "GET"),
        ]
        event = body_of({"id": "e2", "sku": "pear", "qty": 5})
        for method, path, allow in cases:
            with self.subTest(method=method, path=path):
                status, response, answer = post(self.port_, event, method=method, path=path)
                self.assertEqual(response.getheader("Allow"), allow)
                self.assert_refused(status, answer, 405, mentions=[method])

    def test_an_unknown_method_on_another_path_is_404(self):
        status, _, answer = post(self.port_, None, method="FOO", path="/nowhere", content_type=None)
        self.assert_refused(status, answer, 404, mentions=["path"])

    def test_head_is_405_without_a_body(self):
        status, headers, answer, raw = exchange(self.port_, request_bytes([], method="HEAD", target="/health"))
        self.assertEqual(status, 405)
        self.assertEqual(headers["allow"], ["GET"])
        self.assertIsNone(answer)
        self.assertTrue(raw.endswith(b"\r\n\r\n"))


def kept_request(event, *, version="HTTP/1.1", connection=("keep-alive",)):
    body = body_of(event)
    head = ["POST /events %s" % version, "Host: 127.0.0.1", "Content-Type: application/json",
            "Content-Length: %d" % len(body)] + ["Connection: %s" % value for value in connection]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def read_answer(sock):
    """One answer with a Content-Length from `sock`, read to its last byte and no further: (status, headers, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(1)  # byte by byte, so nothing of a later answer is read here
        if not chunk:
            raise AssertionError("the sink closed before a complete answer: %r" % data)
        data += chunk
    lines = data.decode("latin-1").split("\r\n")[:-2]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    body = b""
    while len(body) < int(headers["content-length"][0]):
        chunk = sock.recv(4096)
        if not chunk:
            break
        body += chunk
    return lines[0], headers, json.loads(body.decode("ascii"))


class KeepAliveTest(ServerTestCase):
    """An HTTP/1.1 client that asks for keep-alive keeps its connection across 200s (the kit's relay does)."""

    def test_a_connection_asking_keep_alive_carries_one_request_after_another(self):
        lines = []
        port = self.port(log=lines.append)
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
            for n in range(3):
                sock.sendall(kept_request(dict(EVENT, id="k%d" % n)))
                status, headers, body = read_answer(sock)
                self.assertEqual((status, headers["connection"]), ("HTTP/1.1 200 OK", ["keep-alive"]))
                self.assertEqual((body["id"], body["result"]), ("k%d" % n, "applied"))
            sock.sendall(kept_request(dict(EVENT, id="last"), connection=()))
            status, headers, body = read_answer(sock)
            self.assertEqual((status, headers["connection"]), ("HTTP/1.0 200 OK", ["close"]))
            self.assertEqual(read_to_eof(sock), b"")  # and the sink closed it
        self.assertEqual(stock(self.db_path), {"apple": 12})
        wait_until(lambda: len(lines) == 4, what="one log line per request")
        self.assertEqual(lines, ['127.0.0.1 - "POST /events HTTP/1.1" 200'] * 4)

    def test_only_an_exact_ask_answered_200_keeps_the_connection(self):
        port = self.port()
        cases = {
            "asked": (kept_request(EVENT), ["keep-alive"]),
            "HTTP/1.0": (kept_request(dict(EVENT, id="a"), version="HTTP/1.0"), ["close"]),
            "not asked": (kept_request(dict(EVENT, id="b"), connection=()), ["close"]),
            "asked twice": (kept_request(dict(EVENT, id="c"), connection=("keep-alive", "keep-alive")), ["close"]),
            "keep-alive, close": (kept_request(dict(EVENT, id="d"), connection=("keep-alive, close",)), ["close"]),
            "a conflict": (kept_request(dict(EVENT, qty=9)), ["close"]),
            "an invalid event": (kept_request({"id": "x", "sku": "apple", "qty": 0}), ["close"]),
        }
        for name, (request, connection) in cases.items():
            with self.subTest(name):
                status, headers, _, raw = exchange(port, request)  # reads until the sink closes
                self.assertEqual(headers["connection"], connection, raw[:200])
                self.assertEqual(raw.count(b"HTTP/1."), 1)

    def test_a_pipelined_request_is_never_read_from_the_last_ones_bytes(self):
        port = self.port()
        status, headers, body, raw = exchange(port, kept_request(EVENT) + kept_request(dict(EVENT, id="e2")))
        self.assertEqual((status, headers["connection"], body["id"]), (200, ["close"], "e1"))
        self.assertEqual(raw.count(b"HTTP/1."), 1)  # the second is not answered: its client sends it again
        self.assertEqual(outcomes(self.db_path), ["applied"])

    def test_a_kept_connection_carries_at_most_kept_requests_then_closes(self):
        server = self.start()
        server.kept_requests = 3  # read at every request; the default (KEPT_REQUESTS) is 1000
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=DEADLINE) as sock:
            for n in range(3):
                sock.sendall(kept_request(dict(EVENT, id="k%d" % n)))
                status, headers, body = read_answer(sock)
                self.assertEqual((headers["connection"], body["result"]), (["keep-alive"] if n < 2 else ["close"],
                                                                           "applied"))
            self.assertEqual(read_to_eof(sock), b"")  # the third answer was the last on this connection
        self.assertEqual(outcomes(self.db_path), ["applied"] * 3)

    def test_a_get_with_a_body_is_refused_so_its_body_is_never_read_as_a_request(self):
        port = self.port()
        smuggled = kept_request(dict(EVENT, id="smuggled"))
        for header in ("Content-Length: %d" % len(smuggled), "Transfer-Encoding: chunked"):
            with self.subTest(header), socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
                sock.sendall(request_bytes(["Connection: keep-alive", header], method="GET", target="/health"))
                status, headers, body = read_answer(sock)
                self.assertEqual((status, headers["connection"]), ("HTTP/1.0 400 Bad Request", ["close"]))
                self.assertIn("a GET request has no body", body["error"] + body.get("detail", ""))
                try:
                    sock.sendall(smuggled)
                except OSError:
                    pass  # closed already: what matters is that it is never applied
                read_to_eof(sock)
        self.assertEqual(outcomes(self.db_path), [])
        status, headers, _, _ = exchange(port, request_bytes(["Content-Length: 0"], method="GET", target="/health"))
        self.assertEqual(status, 200)  # an empty body declared is no body

    def test_an_idle_kept_connection_ends_at_the_timeout_without_a_log_line(self):
        lines = []
        port = self.port(log=lines.append)
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
            sock.sendall(kept_request(EVENT))
            self.assertEqual(read_answer(sock)[0], "HTTP/1.1 200 OK")
            self.assertEqual(read_to_eof(sock), b"")  # after SHORT: nothing more came
        self.assertEqual(lines, ['127.0.0.1 - "POST /events HTTP/1.1" 200'])

    def test_an_idle_kept_connection_is_the_first_closed_to_make_room_at_the_cap(self):
        lines = []
        port = self.port(log=lines.append, max_connections=1, timeout=DEADLINE)
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as kept:
            kept.sendall(kept_request(EVENT))
            self.assertEqual(read_answer(kept)[0], "HTTP/1.1 200 OK")
            status, _, body = post(port, body_of(dict(EVENT, id="e2")))
            self.assertEqual((status, body["result"]), (200, "applied"))
            self.assertEqual(read_to_eof(kept), b"")
        self.assertTrue([line for line in lines if "closed without an answer to make room" in line], lines)

    def test_stop_closes_a_kept_connection(self):
        server = self.start()
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=DEADLINE) as sock:
            sock.sendall(kept_request(EVENT))
            self.assertEqual(read_answer(sock)[0], "HTTP/1.1 200 OK")
            server.stop()
            self.assertEqual(read_to_eof(sock), b"")


class ContinueTest(ServerTestCase):
    def test_expect_100_continue_is_answered_before_the_body_is_sent(self):
        port = self.port()
        event = body_of(EVENT)
        head = request_bytes(
            ["Content-Type: application/json", "Content-Length: %d" % len(event), "Expect: 100-continue"])
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
            sock.sendall(head)
            interim = b""
            while not interim.endswith(b"\r\n\r\n"):
                chunk = sock.recv(1)  # byte by byte, so nothing of a later answer is read here
                self.assertTrue(chunk, interim)
                interim += chunk
            self.assertEqual(interim, b"HTTP/1.1 100 Continue\r\n\r\n")
            sock.sendall(event)
            answer = read_to_eof(sock)
        self.assertTrue(answer.startswith(b"HTTP/1.0 200 OK\r\n"), answer)
        self.assertEqual(stock(self.db_path), {"apple": 3})

    def test_a_head_that_breaks_a_rule_gets_its_final_answer_instead(self):
        port = self.port()
        head = request_bytes(["Content-Type: text/plain", "Content-Length: 10", "Expect: 100-continue"])
        status, _, answer, raw = exchange(port, head, half_close=False)
        self.assertEqual(status, 415)
        self.assertTrue(raw.startswith(b"HTTP/1.0 415 "), raw[:40])


class Fatal(BaseException):
    """A failure that no `except Exception` catches, as SystemExit or KeyboardInterrupt."""


class FailLoudTest(ServerTestCase):
    """A thread of the server that dies: .failure, 503 for every request still answered, stop() raises."""

    def serve(self, **options):
        options.setdefault("timeout", SHORT)
        server = make_server(self.db_path, **options).start()
        self.addCleanup(self.stop_expecting_failure, server)
        return server, server.server_address[1]

    def stop_expecting_failure(self, server):
        with self.assertRaises(ThreadDied) as caught:
            server.stop()
        self.assertIs(caught.exception, server.failure)

    def assert_unavailable(self, port, why):
        requests = (("GET", "/health", None), ("GET", "/metrics", None), ("POST", "/events", body_of(EVENT)))
        for method, path, body in requests:
            with self.subTest(path=path):
                status, _, answer = post(port, body, path=path, method=method,
                                         content_type="application/json" if body else None)
                self.assertEqual(status, 503)
                self.assertEqual(answer, {"ack": False, "error": "the sink cannot serve: " + why})

    def test_a_receive_that_ends_the_store_thread(self):
        for failure in (Fatal("gave up"), SystemExit(3), KeyboardInterrupt()):
            with self.subTest(failure=repr(failure)):
                def ending_receive(con, event):
                    raise failure

                lines = []
                server, port = self.serve(receive=ending_receive, log=lines.append)
                before = snapshot(self.db_path)
                status, _, answer = post(port, body_of(EVENT))
                why = "the store thread died: %s" % ("%s: %s" % (type(failure).__name__, failure)
                                                     if str(failure) else type(failure).__name__)
                self.assertEqual((status, answer["error"]), (503, "the sink cannot serve: " + why))
                self.assertEqual(str(server.failure), why)
                self.assertEqual(server.failure.thread, "store")
                self.assertIs(server.failure.__cause__, failure)
                self.assert_unavailable(port, why)
                self.assertEqual(snapshot(self.db_path), before)
                self.assertTrue([line for line in lines if why in line and "Traceback" in line], lines)

    def test_a_reader_that_dies_closes_the_listener_and_is_reported(self):
        lines = []

        def log(line):
            lines.append(line)
            if threading.current_thread().name == "sink-reader" and " - closed: " in line:
                raise Fatal("the log gave up")  # on the reader thread: nothing there catches it

        server, port = self.serve(log=log)
        idle = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        self.addCleanup(idle.close)
        wait_until(lambda: server.failure is not None, what="the reader to die at the idle client's deadline")
        self.assertEqual(server.failure.thread, "reader")
        self.assertEqual(str(server.failure), "the reader thread died: Fatal: the log gave up")
        self.assertEqual(read_to_eof(idle), b"")  # the client it held is closed, not left hanging
        with self.assertRaises(ConnectionRefusedError):  # new clients are refused, not queued for no one
            socket.create_connection(("127.0.0.1", port), timeout=DEADLINE).close()
        self.assertTrue([line for line in lines if "Traceback" in line and "Fatal: the log gave up" in line])

    def test_a_worker_that_dies(self):
        def log(line):
            if threading.current_thread().name.startswith("sink-worker") and "/health" in line:
                raise Fatal("the log gave up")

        server, port = self.serve(log=log)
        status, _, _ = post(port, None, path="/health", method="GET", content_type=None)
        self.assertEqual(status, 200)  # answered, then its worker died logging it
        wait_until(lambda: server.failure is not None, what="the worker to die")
        self.assertEqual(server.failure.thread, "worker")
        self.assert_unavailable(port, "the worker thread died: Fatal: the log gave up")  # the other workers answer

    def test_an_error_in_one_client_closes_that_client_and_the_reader_goes_on(self):
        from sink import framing

        feed = framing.Reader.feed

        def feed_with_a_bug(reader, data):
            if data.startswith(b"BUG"):
                raise RuntimeError("a bug in the reader, hit by one client")
            return feed(reader, data)

        lines = []
        server = self.start(log=lines.append)
        port = server.server_address[1]
        with mock.patch.object(framing.Reader, "feed", feed_with_a_bug):
            with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
                sock.sendall(b"BUG")
                self.assertEqual(read_to_eof(sock), b"")  # that client is closed, unanswered
            status, _, answer = post(port, body_of(EVENT))  # and the next one is served
        self.assertEqual((status, answer["result"]), (200, "applied"))
        self.assertIsNone(server.failure)
        self.assertTrue([line for line in lines if "closed after an internal error" in line
                         and "RuntimeError: a bug in the reader" in line], lines)

    def test_a_log_that_raises_an_exception_loses_its_line_only(self):
        def log(line):
            raise OSError("disk full")

        server = self.start(log=log)
        port = server.server_address[1]
        status, _, answer = post(port, body_of(EVENT))
        self.assertEqual((status, answer["result"]), (200, "applied"))
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as idle:
            self.assertEqual(read_to_eof(idle), b"")  # closed at its deadline: a line the log refused
        status, _, _ = post(port, None, path="/health", method="GET", content_type=None)
        self.assertEqual(status, 200)
        self.assertIsNone(server.failure)


class StatusTableTest(ServerTestCase):
    def test_the_readme_lists_every_status_the_sink_can_send(self):
        from sink.framing import STATUS
        from tests.support import read_doc

        readme = read_doc("docs/api.md")
        for status in {HTTPStatus.OK} | set(STATUS.values()):
            with self.subTest(status=status):
                self.assertIn("\n| %d | " % status, readme)


class ForeignStoreTest(ServerTestCase):
    """make_server around another implementation's store functions."""

    def test_exceptions_and_results_are_mapped_generically(self):
        class Conflict(Exception):  # a foreign class, related to ours only by name
            pass

        cases = [
            (_raises(Conflict("other payload")), 409, {"ack": False, "id": "e1", "error": "conflict"}),
            (_raises(ValueError("qty is odd")), 400, {"ack": False, "error": "qty is odd"}),
            (
                _raises(RuntimeError("disk on fire")),
                500,
                {"ack": False, "error": "internal error: RuntimeError: disk on fire"},
            ),
            (_returns("ok"), 500, None),
            (_returns(None), 500, None),
            (_returns(True), 500, None),
        ]
        for foreign_receive, expected_status, expected_body in cases:
            with self.subTest(receive=foreign_receive.__name__):
                lines = []
                port = self.port(receive=foreign_receive, log=lines.append)
                status, _, answer = post(port, body_of(EVENT))
                self.assertEqual(status, expected_status)
                if expected_body is not None:
                    self.assertEqual(answer, expected_body)
                else:
                    self.assertIs(answer["ack"], False)
                    self.assertIn("receive returned", answer["error"])
                    self.assertIn(repr(foreign_receive.result), answer["error"])
                self.assertNotIn("Traceback", json.dumps(answer))
                if expected_status == 500 and expected_body is not None:
                    wait_until(lambda: any("Traceback" in line for line in lines), what="the traceback in the log")

    def test_store_failing_to_open_raises_in_make_server(self):
        calls = []

        def failing_init_sink(path):
            calls.append(path)
            raise OSError("no disk")

        with self.assertRaisesRegex(OSError, "no disk"):
            make_server(self.db_path, init_sink=failing_init_sink)
        self.assertEqual(calls, [self.db_path])

    def test_one_store_connection_for_the_life_of_the_server_closed_on_stop(self):
        lock = threading.Lock()
        opened, closed, seen = [], [], []

        class TrackingConnection(sqlite3.Connection):
            def close(self):
                with lock:
                    closed.append((threading.get_ident(), self))
                super().close()

        init_sink(self.db_path).close()  # the schema; the tracked connection below only uses it

        def tracking_init_sink(path):
            # sqlite3's default check_same_thread stays on: the server must use it on this thread only.
            con = sqlite3.connect(path, isolation_level=None, factory=TrackingConnection)
            with lock:
                opened.append((threading.get_ident(), con))
            return con

        def tracking_receive(con, event):
            with lock:
                seen.append((threading.get_ident(), con))
            return receive(con, event)

        server = make_server(self.db_path, timeout=SHORT, init_sink=tracking_init_sink, receive=tracking_receive)
        try:
            server.start()
            port = server.server_address[1]
            for qty in (1, 2, 3):
                status, answer = post(port, body_of({"id": "e%d" % qty, "sku": "apple", "qty": qty}))[::2]
                self.assertEqual(status, 200)
                self.assertNotIn("digest", answer)  # a foreign store gives no digest
            self.assertEqual(len(opened), 1)  # init_sink once, in make_server
            self.assertEqual(seen, [opened[0]] * 3)  # same thread, same connection, every time
            self.assertEqual(closed, [])
        finally:
            server.stop()
        self.assertEqual(closed, opened)  # closed by stop(), on the thread that opened it
        self.assertEqual(stock(self.db_path), {"apple": 6})

    def test_a_foreign_receive_is_never_called_from_two_threads_at_once(self):
        lock = threading.Lock()
        inside, most = [0], [0]

        def slow_receive(con, event):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.01)  # widens the window in which a second call would overlap; not synchronisation
            with lock:
                inside[0] -= 1
            return "applied"

        port = self.port(receive=slow_receive)
        threads = [
            threading.Thread(target=post, args=(port, body_of({"id": "c%d" % i, "sku": "apple", "qty": 1})))
            for i in range(16)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(DEADLINE)
        self.assertEqual(most, [1])

    def test_the_store_thread_runs_only_receive_metrics_answer_while_it_is_held(self):
        # The kit's own store with a receive that holds the store thread: /metrics and /health answer all the
        # same, from the workers' own read-only connections, and the held POST then gets its digest.
        entered, release = threading.Event(), threading.Event()

        def held_receive(con, event):
            entered.set()
            release.wait(DEADLINE)
            return receive(con, event)

        port = self.port(receive=held_receive)
        posted = []
        poster = threading.Thread(target=lambda: posted.append(post(port, body_of(EVENT))))
        poster.start()
        try:
            self.assertTrue(entered.wait(DEADLINE))
            for _ in range(3):
                response, text = get_metrics(port, SHORT)
                self.assertEqual(response.status, 200, text)
                self.assertIn("sink_deliveries_total", text)
        finally:
            release.set()
            poster.join(DEADLINE)
        self.assertEqual(posted[0][0], 200, posted)
        self.assertEqual(posted[0][2]["digest"], EVENT_DIGEST)

    def test_invalid_events_never_reach_receive(self):
        calls = []

        def recording_receive(con, event):
            calls.append(event)
            return "applied"

        port = self.port(receive=recording_receive)
        for body in (body_of(dict(EVENT, qty=0)), b"{", body_of({"id": "e1"})):
            status, _, _ = post(port, body)
            self.assertEqual(status, 400)
        status, _, _ = post(port, body_of(EVENT))
        self.assertEqual(status, 200)
        self.assertEqual(calls, [EVENT])


REQUESTS = 2500


DEFAULT_SEED = 20261201


# Every status the sink may send (the README's table); 5xx is never expected here.
STATUSES = {200, 400, 404, 405, 409, 411, 413, 414, 415, 431, 505}


def valid_request(rng, n):
    event = {"id": "f%d" % n, "sku": rng.choice(["apple", "pear", "fig"]), "qty": rng.randint(1, 99)}
    body = json.dumps(event).encode("ascii")
    lines = [
        b"POST /events HTTP/1.1",
        b"Host: 127.0.0.1",
        b"Content-Type: application/json",
        b"Content-Length: %d" % len(body),
    ]
    return lines, body


def mutate(rng, lines, body):
    """One to three mutations of a request given as head lines and body; returns the bytes to send."""
    lines = list(lines)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(9)
        if kind == 0:  # a header line twice
            lines.append(rng.choice(lines[1:]))
        elif kind == 1 and len(lines) > 1:  # a header line gone
            del lines[rng.randrange(1, len(lines))]
        elif kind == 2:  # Content-Length lies
            lines = [x for x in lines if not x.startswith(b"Content-Length")]
            lines.append(b"Content-Length: %d" % max(0, len(body) + rng.randint(-10, 10)))
        elif kind == 3:  # body cut short
            body = body[: rng.randrange(len(body) + 1)]
        elif kind == 4:  # a header odd in form
            lines.append(rng.choice([
                b"Transfer-Encoding: chunked", b"Transfer-Encoding : chunked", b" folded", b"X-No-Colon",
                b"X-Nul: a\x00b", b"Content-Length: 1, 1", b"Content-Length: +5", b"Host: other",
                b"Content-Type: text/plain", b"X-Long: " + b"a" * 9000, b"X-Huge: " + b"a" * 17000,
                b"Content-Length: 4097", b"Content-Length: 00000000000000000000000000000000000000000000001",
            ]))
        elif kind == 5:  # the request line reshaped
            lines[0] = rng.choice([
                b"GET /events HTTP/1.1", b"POST /events HTTP/1.0", b"POST /events HTTP/2.0", b"POST /events",
                b"POST  /events HTTP/1.1", b"POST /Events HTTP/1.1", b"PUT /health HTTP/1.1", b"POST /events HTTP/1.1 ",
                b"POST /" + b"e" * 9000 + b" HTTP/1.1",
            ])
        data = b"\r\n".join(lines) + b"\r\n\r\n" + body
        if kind == 6:  # bytes flipped
            data = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(data))
                data[i] ^= 1 << rng.randrange(8)
            return bytes(data)
        if kind == 7:  # a random byte inserted
            i = rng.randrange(len(data) + 1)
            return data[:i] + bytes([rng.randrange(256)]) + data[i:]
        if kind == 8:  # the whole request cut anywhere
            return data[: rng.randrange(len(data) + 1)]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def state(con):
    """What a write would change: deliveries (seq, outcome), inbox size, inventory."""
    return (
        con.execute("SELECT max(seq), count(*) FROM deliveries").fetchone(),
        con.execute("SELECT count(*) FROM inbox").fetchone()[0],
        con.execute("SELECT sku, qty FROM inventory ORDER BY sku").fetchall(),
    )


def exchange_mutated(port, data):
    """Send one fuzzed request and half-close; return whatever came back (b\"\" for nothing or a reset)."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except ConnectionError:
            pass  # refused mid-send (an oversized head): the answer may still be there to read
        try:
            return read_to_eof(sock)
        except ConnectionResetError:
            return b""


class FuzzTest(TempDirTestCase):
    def test_mutated_requests_never_crash_never_5xx_never_write_when_refused(self):
        seed = fuzz_seed("OUTBOX_FUZZ_SEED", DEFAULT_SEED)
        rng = random.Random(seed)
        db_path = self.path("sink.db")
        log = []
        server = make_server(db_path, timeout=2.0, log=log.append).start()
        self.addCleanup(server.stop)
        port = server.server_address[1]
        reader = sqlite3.connect(db_path)
        self.addCleanup(reader.close)
        seen = {}
        for n in range(REQUESTS):
            lines, body = valid_request(rng, n)
            data = mutate(rng, lines, body)
            before = state(reader)
            raw = exchange_mutated(port, data)
            after = state(reader)
            where = "seed %d, request %d: %r" % (seed, n, data[:200])
            if not raw:
                self.assertFalse(data.strip(), "silence for a request that was not empty; " + where)
                self.assertEqual(after, before, where)
                continue
            head, _, answer_body = raw.partition(b"\r\n\r\n")
            status_line = head.split(b"\r\n", 1)[0]
            self.assertRegex(status_line, rb"^HTTP/1\.0 \d{3} ", where)
            status = int(status_line.split()[1])
            self.assertIn(status, STATUSES, where)
            answer = json.loads(answer_body.decode("ascii"))
            seen[status] = seen.get(status, 0) + 1
            if status == 200:
                self.assertIs(answer["ack"], True, where)
                self.assertEqual(after[0][0], (before[0][0] or 0) + 1, where)  # one delivery row
            elif status == 409:
                self.assertEqual((after[1], after[2]), (before[1], before[2]), where)  # only the conflict logged
                self.assertEqual(after[0][0], (before[0][0] or 0) + 1, where)
            else:
                self.assertIs(answer["ack"], False, where)
                self.assertEqual(after, before, "a refused request wrote; " + where)
        sys.stderr.write("  statuses: %s\n" % ", ".join("%d x%d" % item for item in sorted(seen.items())))
        status, _, body = post(port, None, path="/health", method="GET", content_type=None)
        self.assertEqual((status, body), (200, {"ok": True}))
        self.assertFalse([line for line in log if "unhandled" in line or "Traceback" in line])
        self.assertGreater(seen.get(200, 0), 0)  # the fuzz also reaches receive, not only the framing
        self.assertGreater(len(seen), 5)


def _raises(exc):
    def failing_receive(con, event):
        raise exc

    failing_receive.__name__ = "raises_%s" % type(exc).__name__
    return failing_receive


def _returns(result):
    def odd_receive(con, event):
        return result

    odd_receive.__name__ = "returns_%r" % (result,)
    odd_receive.result = result
    return odd_receive
