"""Issue 7 through real `python -m outbox|sink` subprocesses on real files: status, purge, quarantine, requeue, upgrade."""
import json
import os
import sqlite3
import subprocess
import sys
import threading
import unittest

from outbox import init_store, intake
from sink import inbox
from tests.support import LoopbackServer, ROOT, TempDirTestCase, python_env, reply
from tests.support import build_v1, file_bytes, parse_prometheus

COMMANDS = {"outbox": ("intake", "pending", "dispatch", "status", "evidence", "quarantined", "quarantine", "requeue",
                       "retry", "relay", "purge", "upgrade"),
            "sink": ("serve", "show", "status")}


def run(package, *args):
    return subprocess.run([sys.executable, "-m", package] + list(args), cwd=ROOT, env=python_env(), timeout=60,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)


def outbox(*args):
    return run("outbox", *args)


def status_json(db):
    result = outbox("status", "--db", db, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def ack_all_but(refused):
    def handle(handler, body):
        event = json.loads(body.decode())
        if event["id"] == refused:
            reply(handler, 500, '{"ack": false}')
        else:
            reply(handler, 200, json.dumps({"ack": True, "id": event["id"], "result": "applied"}))
    return handle


class StatusFiguresTest(TempDirTestCase):
    def test_the_figures_after_a_known_history(self):
        db = self.path("source.db")
        for event_id in ("a-1", "b-2", "c-3"):
            self.assertEqual(outbox("intake", "--db", db, "--id", event_id, "--sku", "snack", "--qty", "1").returncode, 0)
        empty = status_json(db)
        self.assertEqual(empty["head"], {"id": "a-1", "seq": 1, "attempts": 0, "permanent_failures": 0,
                                         "last_error": None, "last_error_kind": None})
        with LoopbackServer(ack_all_but("b-2")) as sink:
            for _ in range(2):
                self.assertEqual(outbox("dispatch", "--db", db, "--url", sink.url()).returncode, 1)
            figures = status_json(db)
            self.assertEqual((figures["pending"], figures["sent"], figures["quarantined"]), (2, 1, 0))
            self.assertEqual(figures["max_attempts_pending"], 2)
            self.assertEqual(figures["head"]["id"], "b-2")
            self.assertEqual(figures["head"]["seq"], 2)
            self.assertEqual(figures["head"]["attempts"], 2)
            self.assertIn("status 500", figures["head"]["last_error"])
            self.assertGreaterEqual(figures["oldest_pending_age_s"], 0)
            samples = parse_prometheus(outbox("status", "--db", db, "--prometheus").stdout)
            self.assertEqual(samples[("outbox_pending", ())], 2)
            self.assertEqual(samples[("outbox_head_attempts", ())], 2)

            result = outbox("quarantine", "b-2", "--db", db, "--reason", "sink answers 500 for it")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(outbox("dispatch", "--db", db, "--url", sink.url()).returncode, 0)
        figures = status_json(db)
        self.assertEqual((figures["pending"], figures["sent"], figures["quarantined"]), (0, 2, 1))
        self.assertIsNone(figures["head"])
        self.assertIsNone(figures["oldest_pending_age_s"])
        self.assertEqual(figures["max_attempts_pending"], 0)
        samples = parse_prometheus(outbox("status", "--db", db, "--prometheus").stdout)
        self.assertEqual(samples[("outbox_quarantined", ())], 1)
        self.assertEqual(samples[("outbox_oldest_pending_age_seconds", ())], 0)
        ladder = json.loads(outbox("evidence", "b-2", "--db", db, "--json").stdout)
        self.assertEqual(ladder["outbox"]["state"], "quarantined")
        self.assertEqual(ladder["outbox"]["quarantine"]["overtaken_by"], [3])
        self.assertEqual(ladder["outbox"]["quarantine"]["attempts"], 2)

    def test_sink_status(self):
        db = self.path("sink.db")
        con = inbox.init_sink(db)
        for qty in (7, 7):
            inbox.receive(con, {"id": "snack-7", "sku": "snack", "qty": qty})
        con.close()
        result = run("sink", "status", "--db", db, "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        figures = json.loads(result.stdout)
        self.assertEqual((figures["applied"], figures["duplicates"], figures["conflicts"]), (1, 1, 0))
        self.assertEqual(figures["inventory"], {"snack": 7})
        self.assertRegex(figures["last_delivery_at"], r"Z\Z")
        samples = parse_prometheus(run("sink", "status", "--db", db, "--prometheus").stdout)
        self.assertEqual(samples[("sink_deliveries_total", (("outcome", "duplicate"),))], 1)
        missing = run("sink", "status", "--db", self.path("nope.db"))
        self.assertEqual(missing.returncode, 1)
        self.assertFalse(os.path.exists(self.path("nope.db")))


class RetentionAndStateTest(TempDirTestCase):
    def test_purge_never_removes_a_pending_or_quarantined_row(self):
        db = self.path("source.db")
        con = init_store(db)
        for event_id in ("a", "b", "c", "d"):
            intake(con, {"id": event_id, "sku": "s", "qty": 1})
        con.close()
        with LoopbackServer(ack_all_but("c")) as sink:
            outbox("dispatch", "--db", db, "--url", sink.url())
        self.assertEqual(outbox("quarantine", "c", "--db", db, "--reason", "held").returncode, 0)
        kept = outbox("purge", "--db", db, "--sent-before", "1d")
        self.assertEqual((kept.returncode, kept.stdout.strip()), (0, "purged 0 sent row(s)"))
        result = outbox("purge", "--db", db, "--sent-before", "0s")
        self.assertEqual((result.returncode, result.stdout.strip()), (0, "purged 2 sent row(s)"), result.stderr)
        figures = status_json(db)
        self.assertEqual((figures["pending"], figures["sent"], figures["quarantined"]), (1, 0, 1))
        con = sqlite3.connect(db)
        self.addCleanup(con.close)
        self.assertEqual(con.execute("SELECT event_id FROM outbox ORDER BY seq").fetchall(), [("c",), ("d",)])
        self.assertEqual(con.execute("SELECT count(*) FROM orders").fetchone()[0], 4)
        ladder = json.loads(outbox("evidence", "a", "--db", db, "--json").stdout)
        self.assertIsNone(ladder["outbox"])
        self.assertIn("purged", ladder["reading"])

    def test_refusals_are_one_line_and_change_nothing(self):
        db = self.path("source.db")
        con = init_store(db)
        intake(con, {"id": "a", "sku": "s", "qty": 1})
        intake(con, {"id": "sent-1", "sku": "s", "qty": 1})
        con.execute("UPDATE outbox SET sent = 1, sent_at = 1.0 WHERE event_id = 'sent-1'")
        con.close()
        before = file_bytes(db)
        cases = (
            (["quarantine", "sent-1", "--db", db, "--reason", "x"], 1, "it is sent"),
            (["quarantine", "ghost", "--db", db, "--reason", "x"], 1, "no outbox row"),
            (["quarantine", "a", "--db", db], 2, "--reason"),
            (["requeue", "sent-1", "--db", db], 1, "it is sent"),
            (["requeue", "ghost", "--db", db], 1, "no outbox row"),
            (["requeue", "a", "--db", db], 1, "not quarantined"),
            (["requeue", "a", "--db", db, "--event", '{"id": "b", "sku": "s", "qty": 1}'], 1, "keep the id"),
            (["requeue", "a", "--db", db, "--event", '{"id": "a", "sku": "s", "qty": 0}'], 1, "qty must be"),
            (["requeue", "a", "--db", db, "--event", "[1"], 1, "--event must be"),
            (["purge", "--db", db, "--sent-before", "7w"], 2, "30s, 15m, 12h, 7d"),
            (["purge", "--db", self.path("missing.db"), "--sent-before", "0s"], 1, "no source DB"),
            (["evidence", "ghost", "--db", db], 1, "no order row"),
            (["evidence", "a", "--db", db, "--sink", self.path("missing.db")], 1, "no sink DB"),
            (["relay", "--db", db, "--url", "http://example.com/events", "--once"], 2, "loopback"),
            (["relay", "--db", db, "--url", "http://127.0.0.1:1/events", "--max-attempts", "0"], 2, "--max-attempts"),
            (["status", "--db", db, "--json", "--prometheus"], 2, "not allowed"),
        )
        for args, status, words in cases:
            result = outbox(*args)
            self.assertEqual(result.returncode, status, (args, result.stderr))
            self.assertIn(words, result.stderr, args)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            self.assertNotIn("Traceback", result.stderr)
        self.assertEqual(file_bytes(db), before)
        self.assertFalse(os.path.exists(self.path("missing.db")))

    def test_a_v1_file_read_only_commands_refuse_and_upgrade_upgrades(self):
        db = self.path("v1.db")
        build_v1(db, ["z-1", "a-1"], sent=["z-1"])
        before = file_bytes(db)
        for args in (["status", "--db", db], ["pending", "--db", db], ["evidence", "a-1", "--db", db]):
            result = outbox(*args)
            self.assertEqual(result.returncode, 1, args)
            self.assertIn("python -m outbox upgrade --db %s" % db, result.stderr)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertEqual(file_bytes(db), before)
        result = outbox("upgrade", "--db", db)
        self.assertEqual((result.returncode, result.stdout.strip()), (0, "source DB %s is at schema 3" % db))
        figures = status_json(db)
        self.assertEqual((figures["pending"], figures["sent"]), (1, 1))
        self.assertEqual(figures["head"]["id"], "a-1")


class CheckTest(TempDirTestCase):
    """status --check, the Nagios/Icinga plugin convention: one line, perfdata after |, exit 0/1/2/3."""

    def setUp(self):
        super().setUp()
        self.db = self.path("source.db")
        con = init_store(self.db)
        for event_id in ("a", "b", "c"):
            intake(con, {"id": event_id, "sku": "s", "qty": 1})
        con.close()

    def check(self, *extra):
        result = outbox("status", "--db", self.db, "--check", *extra)
        self.assertEqual(result.stderr, "")
        self.assertEqual(len(result.stdout.splitlines()), 1, result.stdout)
        summary, _, perfdata = result.stdout.strip().partition(" | ")
        return result.returncode, summary, dict(item.split("=", 1) for item in perfdata.split(" "))

    def age(self, event_id, seconds):
        con = sqlite3.connect(self.db)
        try:
            con.execute("UPDATE outbox SET created_at = created_at - ? WHERE event_id = ?", (seconds, event_id))
            con.commit()
        finally:
            con.close()

    def test_ok_critical_warning_unknown(self):
        status, summary, perf = self.check()
        self.assertEqual((status, summary.split(" - ")[0]), (0, "OUTBOX OK"))
        self.assertEqual(perf["pending"], "3;;;0")
        self.assertEqual(perf["quarantined"], "0;0;;0")
        self.assertRegex(perf["oldest_pending_age"], r"\A[0-9]+\.[0-9]{3}s;;300;0\Z")

        self.age("a", 600)
        status, summary, perf = self.check()
        self.assertEqual(status, 2, summary)
        self.assertTrue(summary.startswith("OUTBOX CRITICAL - oldest pending item waits 6"), summary)
        self.assertIn("head a", summary)
        status, summary, perf = self.check("--max-age", "15m")
        self.assertEqual(status, 0, summary)
        self.assertTrue(perf["oldest_pending_age"].endswith(";;900;0"), perf)

        self.assertEqual(outbox("quarantine", "a", "--db", self.db, "--reason", "held").returncode, 0)
        status, summary, perf = self.check()
        self.assertEqual(status, 1, summary)
        self.assertIn("1 quarantined (more than 0)", summary)
        self.assertEqual(self.check("--max-quarantined", "1")[0], 0)
        self.age("b", 600)
        self.assertEqual(self.check()[0], 2)  # CRITICAL outranks WARNING

        missing = outbox("status", "--db", self.path("missing.db"), "--check")
        self.assertEqual(missing.returncode, 3)
        self.assertTrue(missing.stdout.startswith("OUTBOX UNKNOWN - "), missing.stdout)
        self.assertFalse(os.path.exists(self.path("missing.db")))

    def test_a_head_the_sink_refuses_is_a_warning(self):
        with LoopbackServer(lambda handler, body: reply(handler, 409, '{"error": "conflict"}')) as sink:
            self.assertEqual(outbox("dispatch", "--db", self.db, "--url", sink.url()).returncode, 1)
        status, summary, perf = self.check()
        self.assertEqual(status, 1, summary)
        self.assertIn("the sink refused head a 1 time(s) (conflict)", summary)
        self.assertEqual(perf["head_refused"], "1;;;0")


class QuarantinedRetryTest(TempDirTestCase):
    def test_the_list_and_a_retry(self):
        db = self.path("source.db")
        con = init_store(db)
        for event_id in ("a", "b", "c"):
            intake(con, {"id": event_id, "sku": "s", "qty": 1})
        con.close()
        empty = outbox("quarantined", "--db", db)
        self.assertEqual((empty.returncode, empty.stdout), (0, "quarantined 0\n"))
        for event_id in ("c", "a"):
            self.assertEqual(outbox("quarantine", event_id, "--db", db, "--reason", "held %s" % event_id).returncode, 0)
        text = outbox("quarantined", "--db", db).stdout.splitlines()
        self.assertEqual(text[0], "quarantined 2")
        self.assertRegex(text[1], r"\A  seq 1  a  since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(\d+ s\)  attempts 0 \(0 "
                                  r"refused\)  last error: none  reason: held a\Z")
        self.assertIn("seq 3  c", text[2])
        listed = json.loads(outbox("quarantined", "--db", db, "--json").stdout)["quarantined"]
        self.assertEqual([(item["id"], item["reason"]) for item in listed], [("a", "held a"), ("c", "held c")])
        self.assertGreaterEqual(listed[0]["age_s"], 0)

        with LoopbackServer(lambda handler, body: reply(handler, 400, "{}")) as sink:
            self.assertEqual(outbox("dispatch", "--db", db, "--url", sink.url()).returncode, 1)
        result = outbox("retry", "b", "--db", db)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("retry b: its attempt record (1 attempt(s), 1 refused, last failure: rejected) is reset",
                      result.stdout)
        self.assertEqual(status_json(db)["head"]["attempts"], 0)
        refused = outbox("retry", "a", "--db", db)
        self.assertEqual(refused.returncode, 1)
        self.assertIn("is quarantined", refused.stderr)


class MetricsFileTest(TempDirTestCase):
    def test_rewritten_whole_each_round_and_parsed_at_any_moment(self):
        db, metrics = self.path("source.db"), self.path("relay.prom")
        con = init_store(db)
        con.execute("PRAGMA synchronous = OFF")  # this test's intake only
        for i in range(60):
            intake(con, {"id": "e-%02d" % i, "sku": "s", "qty": 1})
        con.close()
        seen, stop = [], threading.Event()

        def watch():
            while not stop.is_set():
                try:
                    with open(metrics, encoding="utf-8") as f:
                        seen.append(f.read())
                except OSError:
                    pass  # not written yet

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        refuse = {"e-05": 1, "e-20": 2}

        def handle(handler, body):
            event = json.loads(body.decode())
            if refuse.get(event["id"], 0):
                refuse[event["id"]] -= 1
                reply(handler, 503, "{}")
            else:
                reply(handler, 200, json.dumps({"ack": True, "id": event["id"]}))

        try:
            with LoopbackServer(handle) as sink:
                result = outbox("relay", "--db", db, "--url", sink.url(), "--once", "--limit", "1", "--base-delay",
                                "0", "--metrics-file", metrics)
        finally:
            stop.set()
            watcher.join(10)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("relay: marked 60 sent", result.stdout)
        samples = parse_prometheus(open_text(metrics))
        self.assertEqual(samples[("outbox_relay_sent_total", ())], 60)
        self.assertEqual(samples[("outbox_relay_attempts_total", ())], 63)
        self.assertEqual(samples[("outbox_relay_failures_total", (("kind", "server-error"),))], 3)
        self.assertEqual(samples[("outbox_relay_failures_total", (("kind", "conflict"),))], 0)
        self.assertGreater(samples[("outbox_relay_last_success_timestamp_seconds", ())], 1e9)
        text = open_text(metrics)
        for name, kind in (("outbox_relay_sent_total", "counter"), ("outbox_relay_attempts_total", "counter"),
                           ("outbox_relay_failures_total", "counter"),
                           ("outbox_relay_last_success_timestamp_seconds", "gauge")):
            self.assertIn("# TYPE %s %s\n" % (name, kind), text)
        self.assertGreater(len(seen), 1)
        for text in seen:
            parse_prometheus(text)  # never a half-written file
        self.assertEqual(sorted(os.listdir(self.tmp)), ["relay.prom", "source.db"])  # no temporary file left
        self.assertEqual(os.stat(metrics).st_mode & 0o777, 0o644)


def open_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class HelpTest(TempDirTestCase):
    def test_every_command_has_help_with_its_exit_statuses(self):
        for package, commands in COMMANDS.items():
            for command in commands:
                result = run(package, command, "--help")
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn("--db", result.stdout)
                # sink serve and show predate this issue: their exit statuses are in `python -m sink --help`.
                if (package, command) not in (("sink", "serve"), ("sink", "show")):
                    self.assertIn("exit status", result.stdout, (package, command))
        self.assertIn("exit status", run("sink", "--help").stdout)
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        for package, commands in COMMANDS.items():
            for command in commands:
                self.assertIn("python -m %s %s" % (package, command), readme)
        relay_help = " ".join(outbox("relay", "--help").stdout.split())  # argparse wraps where it likes
        for default in ("(default: 5)", "(default: 0.5)", "(default: 10.0)", "(default: 16)"):
            self.assertIn(default, relay_help)


if __name__ == "__main__":
    unittest.main()
