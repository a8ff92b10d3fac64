"""outbox.cli.ops: the operator's commands of `python -m outbox` through real processes on real files.

status, evidence, quarantined, quarantine, requeue, retry, purge, upgrade
(and `python -m sink status`).
"""
import json
import os
import re
import sqlite3
import unittest

from outbox import dispatch, init_store, intake
from outbox.ops import operations
from sink.core import inbox
from tests.support import LoopbackServer, TempDirTestCase, build_v1, file_bytes, parse_prometheus, reply, run_cli


def outbox(*args):
    return run_cli("outbox", *args)


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
                                         "last_error": None, "last_error_kind": None, "retried": 0})
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
            self.assertEqual(samples[("outbox_head_retried", ())], 0)
            self.assertEqual(outbox("retry", "b-2", "--db", db).returncode, 0)
            samples = parse_prometheus(outbox("status", "--db", db, "--prometheus").stdout)
            self.assertEqual((samples[("outbox_head_attempts", ())], samples[("outbox_head_retried", ())]), (0, 1))
            self.assertIn("retried 1 by hand, not delivered yet", outbox("status", "--db", db).stdout)
            self.assertEqual(outbox("dispatch", "--db", db, "--url", sink.url()).returncode, 1)

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
        self.assertEqual(ladder["outbox"]["quarantine"]["attempts"], 1)  # the one after the retry

    def test_sink_status(self):
        db = self.path("sink.db")
        con = inbox.init_sink(db)
        for qty in (7, 7):
            inbox.receive(con, {"id": "snack-7", "sku": "snack", "qty": qty})
        con.close()
        result = run_cli("sink", "status", "--db", db, "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        figures = json.loads(result.stdout)
        self.assertEqual((figures["applied"], figures["duplicates"], figures["conflicts"]), (1, 1, 0))
        self.assertEqual(figures["inventory"], {"snack": 7})
        self.assertRegex(figures["last_delivery_at"], r"Z\Z")
        samples = parse_prometheus(run_cli("sink", "status", "--db", db, "--prometheus").stdout)
        self.assertEqual(samples[("sink_deliveries_total", (("outcome", "duplicate"),))], 1)
        missing = run_cli("sink", "status", "--db", self.path("nope.db"))
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
        self.assertEqual(text[2], "    overtaken by 0 sent item(s)")
        self.assertIn("seq 3  c", text[3])
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


class OvertakersShownTest(TempDirTestCase):
    """Issue 29, item 5: the reordering a quarantine causes, where on-call looks, bounded, and after a purge."""

    def setUp(self):
        super().setUp()
        self.db = self.path("source.db")
        con = init_store(self.db)
        self.addCleanup(con.close)
        self.ids = ["e-%02d" % n for n in range(1, 15)]  # seq 1 to 14
        for event_id in self.ids:
            intake(con, {"id": event_id, "sku": "s", "qty": 1})
        operations.quarantine(con, "e-01", "held for the test")
        self.assertEqual(dispatch(con, lambda event: True), 13)  # e-02 .. e-14 overtake e-01
        self.con = con

    def read_only(self, *args):
        before = file_bytes(self.db), sorted(os.listdir(self.tmp))
        result = outbox(*args)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual((file_bytes(self.db), sorted(os.listdir(self.tmp))), before, args)  # nothing written
        return result.stdout

    def assert_shown(self):
        first = "overtaken by 13 sent item(s): " + ", ".join(
            "e-%02d (seq %d)" % (n, n) for n in range(2, 12)) + " and 3 more"
        listing = self.read_only("quarantined", "--db", self.db).splitlines()
        self.assertEqual(listing[0], "quarantined 1")
        self.assertEqual(listing[2], "    " + first)
        self.assertEqual(len(listing), 3)
        status = self.read_only("status", "--db", self.db).splitlines()
        self.assertRegex(status[-1], r"\Aquarantined e-01 \(seq 1\) since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, "
                         + re.escape(first) + r"\Z")
        shown = {"count": 13, "first": [{"id": "e-%02d" % n, "seq": n} for n in range(2, 12)]}
        item, = json.loads(self.read_only("quarantined", "--db", self.db, "--json"))["quarantined"]
        self.assertEqual((item["id"], item["overtakers"]), ("e-01", shown))
        item, = json.loads(self.read_only("status", "--db", self.db, "--json"))["quarantines"]
        self.assertEqual((item["id"], item["seq"], item["overtakers"]), ("e-01", 1, shown))
        ladder = json.loads(self.read_only("evidence", "e-01", "--db", self.db, "--json"))
        self.assertEqual(ladder["history"]["quarantines"][0]["overtaken_by"], list(range(2, 15)))
        self.assertEqual(ladder["history"]["quarantines"][0]["overtakers"], shown)
        text = self.read_only("evidence", "e-14", "--db", self.db)
        self.assertRegex(text, r"history \(source\): +overtook e-01 \(quarantined at seq 1 on \S+Z\): marked sent "
                         r"while it was out of line\n")
        overtook = json.loads(self.read_only("evidence", "e-02", "--db", self.db, "--json"))["history"]["overtook"]
        self.assertEqual([(q["id"], q["seq"], q["requeued_at"]) for q in overtook], [("e-01", 1, None)])

    def test_quarantined_status_and_evidence_show_the_overtakers_and_a_purge_keeps_them(self):
        self.assert_shown()
        self.assertEqual(outbox("purge", "--db", self.db, "--sent-before", "0s").stdout, "purged 13 sent row(s)\n")
        self.assert_shown()  # the same, read from the quarantine record now

    def test_after_the_requeue_the_overtaker_still_says_whom_it_overtook(self):
        self.assertEqual(outbox("requeue", "e-01", "--db", self.db).returncode, 0)
        self.assertEqual(dispatch(self.con, lambda event: True), 1)
        self.assertEqual(outbox("purge", "--db", self.db, "--sent-before", "0s").returncode, 0)
        self.assertEqual(self.read_only("quarantined", "--db", self.db), "quarantined 0\n")
        self.assertNotIn("quarantined e-01", self.read_only("status", "--db", self.db))
        self.assertEqual(json.loads(self.read_only("status", "--db", self.db, "--json"))["quarantines"], [])
        text = self.read_only("evidence", "e-14", "--db", self.db)
        self.assertRegex(text, r"overtook e-01 \(quarantined at seq 1 on \S+Z\): marked sent while it was out of "
                               r"line, before its requeue on \S+Z\n")
        self.assertIn("overtaken by 13 sent item(s): e-02 (seq 2)", self.read_only("evidence", "e-01", "--db", self.db))
        # Marked after the requeue: e-01 itself (seq 15) overtook nothing.
        self.assertNotIn("overtook", self.read_only("evidence", "e-01", "--db", self.db))

    def test_the_history_is_in_time_order(self):
        self.assertEqual(outbox("requeue", "e-01", "--db", self.db).returncode, 0)
        self.assertEqual(outbox("retry", "e-01", "--db", self.db).returncode, 0)
        self.assertEqual(outbox("quarantine", "e-01", "--db", self.db, "--reason", "again").returncode, 0)
        history = [line.split(":", 1)[1].strip() for line in self.read_only("evidence", "e-01", "--db", self.db)
                   .splitlines() if line.startswith("history")]
        self.assertEqual([line.split(" ")[0] for line in history], ["quarantined", "retried", "quarantined"], history)
        self.assertIn("(again)", history[2])


class DurationFlagsTest(TempDirTestCase):
    """Issue 29, item 10: a duration error names the flag and only the rule true of it; too long is refused."""

    def test_each_flag_says_its_own_rule(self):
        db = self.path("source.db")
        init_store(db).close()
        for args, flag in ((("relay", "--db", db, "--url", "http://127.0.0.1:9/events", "--give-up-after"),
                            "--give-up-after"),
                           (("status", "--db", db, "--max-age"), "-c/--max-age"),
                           (("purge", "--db", db, "--sent-before"), "--sent-before")):
            for value in ("3651d", "9" * 5000 + "s"):  # a bad spelling ("1w") is test_outbox_operations' case
                result = outbox(*(args + (value,)))
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
                self.assertIn("argument %s: duration must be a whole number followed by s, m, h or d" % flag,
                              result.stderr)
                self.assertIn("at most 3650d", result.stderr)
                self.assertLess(len(result.stderr), 400)  # the 5000 digits are quoted cut short
                self.assertEqual("0s means every sent row" in result.stderr, flag == "--sent-before", result.stderr)


if __name__ == "__main__":
    unittest.main()
