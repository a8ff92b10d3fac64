"""Failure kinds: what send_http says about each failure, and what the attempt record keeps of it.

Against real loopback servers: every answer that is no ACK keeps its
exception class (NoAnswer, UntrustedAck: the grader's contract) and gains a
`kind`; only no answer and 5xx are transient. The attempt record keeps the
kind and counts only the permanent ones toward the relay's alert.
"""
import json
import re
import unittest

from outbox.ops import attempts, failures, operations
from outbox import dispatch, init_store, intake, send_http
from outbox.core.errors import DeliveryError, NoAnswer, NotAcknowledged, OutboxError, UntrustedAck
from tests.support import LoopbackServer, TempDirTestCase, free_loopback_socket, parse_prometheus, read_doc, reply

EVENT = {"id": "snack-7", "sku": "crisps", "qty": 2}


def answering(status, body='{"ack": false}', headers=()):
    return lambda handler, request: reply(handler, status, body, headers)


class SenderKindTest(unittest.TestCase):
    def refused(self, handle):
        with LoopbackServer(handle) as server:
            with self.assertRaises(DeliveryError) as caught:
                send_http(server.url(), EVENT, timeout=5)
        return caught.exception

    def test_each_answer_keeps_its_class_and_gets_its_kind(self):
        for status, kind in ((500, "server-error"), (502, "server-error"), (503, "server-error"),
                             (599, "server-error"), (409, "conflict"), (400, "rejected"), (404, "rejected"),
                             (413, "rejected"), (499, "rejected"), (201, "rejected"), (302, "rejected"),
                             (600, "rejected")):
            with self.subTest(status=status):
                error = self.refused(answering(status, headers=[("Location", "http://127.0.0.1:9/x")]))
                self.assertIsInstance(error, UntrustedAck)
                self.assertEqual(error.kind, kind)
                self.assertIn("status %d" % status, str(error))
                self.assertEqual(failures.is_transient(error.kind), 500 <= status <= 599)

    def test_a_200_that_proves_nothing_is_untrusted_ack(self):
        for body in ("not json", '{"ack": true}', '{"ack": true, "id": "other"}', '{"ack": 1, "id": "snack-7"}'):
            with self.subTest(body=body):
                error = self.refused(answering(200, body))
                self.assertIsInstance(error, UntrustedAck)
                self.assertEqual(error.kind, "untrusted-ack")
                self.assertTrue(failures.is_permanent(error.kind))

    def test_no_answer_is_transient(self):
        listener = free_loopback_socket()  # listens, never accepts: a timeout
        url = "http://127.0.0.1:%d/events" % listener.getsockname()[1]
        try:
            with self.assertRaises(NoAnswer) as caught:
                send_http(url, EVENT, timeout=0.3)
        finally:
            listener.close()
        self.assertEqual(caught.exception.kind, "no-answer")
        with self.assertRaises(NoAnswer) as caught:
            send_http(url, EVENT, timeout=2)  # nobody listens there now: refused
        self.assertTrue(failures.is_transient(caught.exception.kind))

    def test_the_ack_rules_are_unchanged(self):
        def ack(handler, body):
            event = json.loads(body.decode())
            reply(handler, 200, json.dumps({"ack": True, "id": event["id"]}))

        with LoopbackServer(ack) as server:
            self.assertIs(send_http(server.url(), EVENT, timeout=5), True)


class KindOfTest(unittest.TestCase):
    def test_every_exception_has_a_known_kind(self):
        cases = (
            (NoAnswer("x"), "no-answer"), (UntrustedAck("x"), "untrusted-ack"),
            (UntrustedAck("x", kind="conflict"), "conflict"), (DeliveryError("x"), "delivery-error"),
            (DeliveryError("x", kind="made-up"), "delivery-error"), (NotAcknowledged("x"), "not-acknowledged"),
            (RuntimeError("x"), "error"), (OutboxError("x"), "error"),
        )
        for error, kind in cases:
            with self.subTest(error=repr(error)):
                self.assertEqual(failures.kind_of(error), kind)
                self.assertIn(kind, failures.KINDS)
        foreign = RuntimeError("x")
        foreign.kind = "conflict"  # a foreign exception's attribute means nothing here
        self.assertEqual(failures.kind_of(foreign), "error")

    def test_transient_and_permanent_are_apart_and_named(self):
        self.assertEqual(failures.TRANSIENT, {"no-answer", "server-error"})
        self.assertEqual(failures.TRANSIENT & failures.PERMANENT, set())
        self.assertLessEqual(failures.TRANSIENT | failures.PERMANENT, set(failures.KINDS))
        self.assertFalse(failures.is_transient("error") or failures.is_permanent("error"))
        self.assertNotIn("stopped", failures.KINDS)  # a relay's stop is not a failure: it is never recorded


class KindsDocumentedTest(unittest.TestCase):
    """Issue 29, item 10: the metrics file's kinds, the docs' tables and KINDS are one list (KINDS)."""

    def test_the_tables_the_metrics_file_and_kinds_agree(self):
        from outbox.cli.relay import render_relay
        from outbox.ops.relay import Tally
        samples = parse_prometheus(render_relay(Tally(), started=1.0, written=2.0))
        written = {dict(labels)["kind"] for name, labels in samples if name == "outbox_relay_failures_total"}
        self.assertEqual(written, set(failures.COUNTED))
        self.assertEqual(set(failures.KINDS) - written, {"error"})  # it ends the relay: never counted
        for path in ("docs/operating.md", "docs/operating.ja.md"):
            rows = re.findall(r"^\| `([a-z-]+)` \| [^|]+ \| ([^|]+) \|$", read_doc(path), re.MULTILINE)
            kinds = [kind for kind, _ in rows if kind in failures.KINDS or "-" in kind]
            self.assertEqual(kinds, list(failures.KINDS), path)  # every kind, once, in KINDS' order
            for kind, relay_does in rows:
                if kind in failures.TRANSIENT:
                    self.assertRegex(relay_does, "transient|一時的", (path, kind))
                elif kind in failures.PERMANENT:
                    self.assertRegex(relay_does, "permanent|永続的", (path, kind))


class AttemptRecordKindTest(TempDirTestCase):
    def test_the_record_keeps_the_kind_and_counts_only_permanent_failures(self):
        con = init_store(self.path("source.db"))
        self.addCleanup(con.close)
        intake(con, EVENT)
        for error, kind, refused in ((NoAnswer("down"), "no-answer", 0),
                                     (UntrustedAck("status 409", kind="conflict"), "conflict", 1),
                                     (UntrustedAck("status 503", kind="server-error"), "server-error", 1),
                                     (UntrustedAck("status 400", kind="rejected"), "rejected", 2),
                                     (RuntimeError("sender bug"), "error", 2)):
            with self.assertRaises(type(error)):
                dispatch(con, lambda event: (_ for _ in ()).throw(error), **attempts.hooks(con))
            head = operations.head(con)
            self.assertEqual((head["last_error_kind"], head["permanent_failures"]), (kind, refused))
        self.assertEqual(operations.head(con)["attempts"], 5)
        with self.assertRaises(NotAcknowledged):
            dispatch(con, lambda event: "ok", **attempts.hooks(con))
        self.assertEqual((operations.head(con)["last_error_kind"], operations.head(con)["permanent_failures"]),
                         ("not-acknowledged", 3))

    def test_a_409_is_recorded_as_a_conflict_not_an_untrusted_ack(self):
        con = init_store(self.path("source.db"))
        self.addCleanup(con.close)
        intake(con, EVENT)
        with LoopbackServer(answering(409, '{"error": "conflict"}')) as server:
            with self.assertRaises(UntrustedAck):
                dispatch(con, lambda event: send_http(server.url(), event, timeout=5), **attempts.hooks(con))
        head = operations.head(con)
        self.assertEqual(head["last_error_kind"], "conflict")
        self.assertIn("status 409", head["last_error"])


if __name__ == "__main__":
    unittest.main()
