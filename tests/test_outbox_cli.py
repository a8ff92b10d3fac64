"""python -m outbox: intake, pending, dispatch, status against a real sink subprocess."""
import json
import os
import subprocess
import sys
import unittest

from tests.support import LoopbackServer, ROOT, TempDirTestCase, python_env, reply


def outbox(*args):
    return subprocess.run([sys.executable, "-m", "outbox"] + list(args), cwd=ROOT, env=python_env(), timeout=60,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)


def ack(handler, body):
    event = json.loads(body.decode())
    reply(handler, 200, json.dumps({"ack": True, "id": event["id"], "result": "applied"}))


class OutboxCliTest(TempDirTestCase):
    def test_intake_pending_dispatch_status(self):
        db = self.path("source.db")
        for event_id, qty in (("z-1", "2"), ("a-1", "3")):
            result = outbox("intake", "--db", db, "--id", event_id, "--sku", "snack", "--qty", qty)
            self.assertEqual(result.returncode, 0, result.stderr)
        result = outbox("pending", "--db", db)
        self.assertEqual(result.stdout.splitlines(), ['{"id": "z-1", "sku": "snack", "qty": 2}',
                                                      '{"id": "a-1", "sku": "snack", "qty": 3}'])
        self.assertIn("pending 2, sent 0", outbox("status", "--db", db).stdout)
        with LoopbackServer(ack) as sink:
            result = outbox("dispatch", "--db", db, "--url", sink.url())
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.splitlines(), ["ACK z-1", "ACK a-1", "marked 2 sent"])
        self.assertIn("pending 0, sent 2", outbox("status", "--db", db).stdout)

    def test_failed_delivery_is_one_line_and_leaves_the_item_pending(self):
        db = self.path("source.db")
        outbox("intake", "--db", db, "--id", "x", "--sku", "s", "--qty", "1")
        with LoopbackServer(lambda h, b: reply(h, 500, "{}")) as sink:
            result = outbox("dispatch", "--db", db, "--url", sink.url())
        self.assertEqual(result.returncode, 1)
        self.assertIn("status 500", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1)
        self.assertIn("pending 1, sent 0", outbox("status", "--db", db).stdout)

    def test_user_mistakes_are_short_messages_without_traceback(self):
        db = self.path("source.db")
        cases = (
            (["intake", "--db", db, "--id", "bad id", "--sku", "s", "--qty", "1"], "id must be"),
            (["intake", "--db", db, "--id", "a", "--sku", "s", "--qty", "0"], "qty must be"),
            (["intake", "--db", db, "--id", "a", "--sku", "s", "--qty", "x"], "invalid int value"),
            (["intake", "--db", self.path("new.db"), "--id", "bad id", "--sku", "s", "--qty", "1"], "id must be"),
            (["intake", "--db", self.path("no-dir", "x.db"), "--id", "a", "--sku", "s", "--qty", "1"], "no-dir"),
            (["dispatch", "--db", self.path("missing.db"), "--url", "http://127.0.0.1:1/events"], "no source DB"),
            (["dispatch", "--db", db, "--url", "http://127.0.0.1:1/events", "--timeout", "-5"], "timeout must be"),
            (["frobnicate"], "invalid choice"),
            (["pending", "--db", self.path("missing.db")], "no source DB"),
            (["pending", "--db", db, "--limit", "17"], "limit must be"),
            # 127.1 is refused by the URL rules; were it not, it would still be loopback.
            (["dispatch", "--db", db, "--url", "http://127.1/events"], "not loopback"),
        )
        outbox("intake", "--db", db, "--id", "ok", "--sku", "s", "--qty", "1")
        for args, words in cases:
            result = outbox(*args)
            self.assertNotEqual(result.returncode, 0, args)
            self.assertIn(words, result.stderr, args)
            self.assertNotIn("Traceback", result.stderr, args)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        for never_created in ("missing.db", "new.db"):
            self.assertFalse(os.path.exists(self.path(never_created)), never_created)
        self.assertIn("pending 1, sent 0", outbox("status", "--db", db).stdout)


if __name__ == "__main__":
    unittest.main()
