"""outbox.cli.main, `python -m outbox`: intake, pending, dispatch, status against a real sink; every command's --help.

The exit statuses of bad arguments, command by command, are
tests/test_outbox_cli_args.py; the operator's commands
tests/test_outbox_cli_ops.py; the relay's tests/test_outbox_cli_relay.py.
"""
import json
import os
import sqlite3
import subprocess
import sys
import unittest

from outbox import init_store, intake, pending
from outbox.ops import operations
from tests.support import (
    DEADLINE, ROOT, LoopbackServer, read_docs, TempDirTestCase, build_v1, echo_ack, ev, file_bytes, python_env, reply,
    run_cli, tree_listing,
)


def outbox(*args):
    return run_cli("outbox", *args)


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
        with LoopbackServer(echo_ack) as sink:
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
            (["intake", "--db", db, "--id", "a", "--sku", "s", "--qty", "x"], "--qty: qty must be an int from 1 to 1000000, got 'x'"),
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

    def test_arguments_are_checked_before_the_db_is_opened_or_upgraded(self):
        """Issue 19: a bad --limit on a file of an earlier release exits 2 and leaves it as it was."""
        db = self.path("old.db")
        build_v1(db, ["a-1"])
        listing, before = tree_listing(self.tmp), file_bytes(db)
        url = "http://127.0.0.1:9/events"
        for args in (["dispatch", "--db", db, "--url", url, "--limit", "17"],
                     ["dispatch", "--db", db, "--url", url, "--limit", "0"],
                     ["dispatch", "--db", db, "--url", url, "--timeout", "0"],
                     ["dispatch", "--db", db, "--url", "http://127.1/events"],
                     ["relay", "--db", db, "--url", url, "--limit", "17", "--once"],
                     ["pending", "--db", db, "--limit", "17"]):
            with self.subTest(args=args):
                result = outbox(*args)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertEqual((tree_listing(self.tmp), file_bytes(db)), (listing, before))
        # Arguments that pass get that far: the same dispatch upgrades the file, then fails to deliver.
        result = outbox("dispatch", "--db", db, "--url", url, "--limit", "16", "--timeout", "1")
        self.assertEqual(result.returncode, 1, result.stderr)
        con = sqlite3.connect(db)
        try:
            self.assertEqual(con.execute("PRAGMA user_version").fetchone()[0], 3)
        finally:
            con.close()


class CliTest(TempDirTestCase):
    """Mutants: the CLI ignoring --limit; `status` opening its DB for writing."""

    def test_dispatch_limit_is_honoured(self):
        db = self.path("source.db")
        con = init_store(db)
        for event_id in ("a", "b", "c"):
            intake(con, ev(event_id))
        con.close()
        with LoopbackServer(echo_ack) as sink:
            result = run_cli("outbox", "dispatch", "--db", db, "--url", sink.url(), "--limit", "2")
            delivered = [json.loads(body.decode())["id"] for _, _, _, body in sink.requests]
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(delivered, ["a", "b"])
        self.assertIn("marked 2 sent", result.stdout)
        con = operations.open_store_readonly(db)
        try:
            self.assertEqual([event["id"] for event in pending(con)], ["c"])
        finally:
            con.close()

    def test_status_on_a_missing_file_creates_nothing(self):
        missing = self.path("missing.db")
        result = run_cli("outbox", "status", "--db", missing, cwd=self.tmp)
        self.assertNotEqual(result.returncode, 0)
        self.assertNotIn("Traceback", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertEqual(os.listdir(self.tmp), [])


COMMANDS = {"outbox": ("intake", "pending", "dispatch", "status", "evidence", "quarantined", "quarantine", "requeue",
                       "retry", "relay", "purge", "upgrade"),
            "sink": ("serve", "show", "status")}


class HelpTest(TempDirTestCase):
    def test_every_command_has_help_with_its_exit_statuses(self):
        for package, commands in COMMANDS.items():
            for command in commands:
                result = run_cli(package, command, "--help")
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn("--db", result.stdout)
                # sink serve and show predate this issue: their exit statuses are in `python -m sink --help`.
                if (package, command) not in (("sink", "serve"), ("sink", "show")):
                    self.assertIn("exit status", result.stdout, (package, command))
        self.assertIn("exit status", run_cli("sink", "--help").stdout)
        readme = read_docs()
        for package, commands in COMMANDS.items():
            for command in commands:
                self.assertIn("python3 -m %s %s" % (package, command), readme)
        relay_help = " ".join(outbox("relay", "--help").stdout.split())  # argparse wraps where it likes
        for default in ("(default: 5)", "(default: 0.5)", "(default: 10.0)", "(default: 16)"):
            self.assertIn(default, relay_help)


if __name__ == "__main__":
    unittest.main()


class IntakeFileTest(TempDirTestCase):
    """`intake --file`: JSON lines through intake_many, all of a batch or none, every invalid line named."""

    def setUp(self):
        super().setUp()
        self.db = self.path("source.db")

    def write(self, events, *, broken=()):
        path = self.path("events.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for n, event in enumerate(events, 1):
                f.write(broken[n] if n in dict(broken) else json.dumps(event))
                f.write("\n")
        return path

    def taken(self):
        con = sqlite3.connect(self.db)
        try:
            return [row[0] for row in con.execute("SELECT event_id FROM outbox ORDER BY seq")]
        finally:
            con.close()

    def events(self, count):
        return [{"id": "e%04d" % n, "sku": "s%d" % (n % 7), "qty": 1 + n % 3} for n in range(count)]

    def test_a_file_is_taken_in_whole_in_file_order_and_again_changes_nothing(self):
        events = self.events(1201)  # three transactions of 500 at most
        path = self.write(events)
        for _ in range(2):
            result = outbox("intake", "--db", self.db, "--file", path)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(result.stdout, "took in 1201 event(s) from %s in 3 transaction(s)\n" % path)
        self.assertEqual(self.taken(), [event["id"] for event in events])

    def test_an_invalid_line_takes_in_nothing_of_its_batch_names_each_and_stops(self):
        events = self.events(1200)
        broken = {700: '{"id": "e0699", "sku": "s", "qty": 0}', 702: "not json", 1100: '{"id": 1}'}
        path = self.write(events, broken=broken)
        result = outbox("intake", "--db", self.db, "--file", path)
        self.assertEqual(result.returncode, 1)
        self.assertIn("line 700: qty must be an int from 1 to 1000000, got 0 (int)", result.stderr)
        self.assertIn("line 702: not valid JSON", result.stderr)
        self.assertNotIn("line 1100", result.stderr)  # a later batch is not read: the intake stopped
        self.assertIn("took in 500 event(s) in 1 transaction(s); nothing of the batch with the invalid line(s) "
                      "(lines 501-1000) or after it", result.stderr)
        self.assertEqual(self.taken(), [event["id"] for event in events[:500]])
        fixed = self.write(events)  # the file fixed, and run again: each event once, in the file's order
        self.assertEqual(outbox("intake", "--db", self.db, "--file", fixed).returncode, 0)
        self.assertEqual(self.taken(), [event["id"] for event in events])

    def test_a_5000_digit_qty_is_named_by_the_event_rule_in_a_file_and_as_a_flag(self):
        # Issue 29, item 10: the same words on every Python (3.8 included), never int()'s advice.
        path = self.write([], broken=())
        with open(path, "w", encoding="utf-8") as f:
            f.write('{"id": "a", "sku": "b", "qty": %s}\n' % ("9" * 5000))
        result = outbox("intake", "--db", self.db, "--file", path)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("line 1: qty must be an int from 1 to 1000000, got a number of 5000 digits", result.stderr)
        self.assertNotIn("set_int_max_str_digits", result.stderr)
        flag = outbox("intake", "--db", self.db, "--id", "a", "--sku", "b", "--qty", "9" * 5000)
        self.assertEqual((flag.returncode, flag.stdout), (2, ""))
        self.assertEqual(flag.stderr, "outbox: error: argument --qty: qty must be an int from 1 to 1000000, got a "
                                      "number of 5000 digits\n")
        self.assertIn("got '1e3'", outbox("intake", "--db", self.db, "--id", "a", "--sku", "b", "--qty", "1e3").stderr)
        self.assertFalse(os.path.exists(self.db))

    def test_a_conflict_stops_at_its_batch_and_stdin_works(self):
        self.assertEqual(outbox("intake", "--db", self.db, "--id", "e0001", "--sku", "other", "--qty", "9")
                         .returncode, 0)
        lines = "".join(json.dumps(event) + "\n" for event in self.events(3))
        result = subprocess.run([sys.executable, "-m", "outbox", "intake", "--db", self.db, "--file", "-"],
                                input=lines, cwd=ROOT, env=python_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True, timeout=DEADLINE * 3)
        self.assertEqual(result.returncode, 1)
        self.assertIn("stdin lines 1-3:", result.stderr)
        self.assertEqual(self.taken(), ["e0001"])

    def test_file_and_one_event_flags_do_not_mix_and_nothing_is_created(self):
        for args in (("--file", "x.jsonl", "--id", "a"), ("--id", "a", "--sku", "s")):
            with self.subTest(args=args):
                result = outbox("intake", "--db", self.db, *args)
                self.assertEqual(result.returncode, 2)
                self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        self.assertFalse(os.path.exists(self.db))
