"""Issue 7: the relay through real subprocesses against a real sink server: the poison head story, SIGTERM."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import unittest

from outbox import init_store, intake
from sink.core import inbox
from sink.server import make_server
from tests.support import (
    DEADLINE, ROOT, STOP_STDIN, TempDirTestCase, ask_to_stop, python_env, read_rows, stoppable, wait_until,
)

FAST = ["--base-delay", "0.01", "--max-delay", "0.05", "--timeout", "5"]


def outbox(*args):
    return subprocess.run([sys.executable, "-m", "outbox"] + list(args), cwd=ROOT, env=python_env(), timeout=60,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)


class RelayTestCase(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.source, self.sink_db = self.path("source.db"), self.path("sink.db")

    def start_sink(self, receive=None):
        server = make_server(self.sink_db, "127.0.0.1", 0, receive=receive)
        server.start()
        self.addCleanup(server.stop)
        return server.url() + "/events"


class PoisonHeadTest(RelayTestCase):
    def test_alert_quarantine_others_flow_requeue_corrected_delivered_nothing_lost(self):
        # The story: crate-9 was applied at the sink as qty 5; the source row was later edited to qty 7
        # by hand. The sink's row is what was applied (and shipped), so it is the truth; the fix makes the
        # source say the same, and the redelivery is then a harmless duplicate.
        con = inbox.init_sink(self.sink_db)
        inbox.receive(con, {"id": "crate-9", "sku": "crate", "qty": 5})
        con.close()
        con = init_store(self.source)
        intake(con, {"id": "crate-9", "sku": "crate", "qty": 7})
        for i in range(3):
            intake(con, {"id": "box-%d" % i, "sku": "box", "qty": 2})
        con.close()
        url = self.start_sink()

        stuck = outbox("relay", "--db", self.source, "--url", url, "--max-attempts", "3", "--once", *FAST)
        self.assertEqual(stuck.returncode, 3, stuck.stderr)
        self.assertNotIn("Traceback", stuck.stderr)
        alert = [line for line in stuck.stderr.splitlines() if "ALERT" in line]
        self.assertEqual(len(alert), 1, stuck.stderr)
        for words in ("crate-9", "refused by the sink 3 time(s)", "conflict", "409"):
            self.assertIn(words, alert[0])
        self.assertNotIn("untrusted-ack", alert[0])  # a 409 is a conflict
        for command in ("python -m outbox evidence crate-9 --db %s" % self.source,
                        "python -m outbox requeue crate-9 --db %s --event JSON" % self.source,
                        "or retry --force once the sink's row is corrected",
                        "python -m outbox quarantine crate-9 --db %s" % self.source):
            self.assertIn(command, stuck.stderr)
        self.assertNotIn("python -m outbox retry", stuck.stderr)  # a retry of a conflict is another 409
        refused = outbox("retry", "crate-9", "--db", self.source)
        self.assertEqual((refused.returncode, refused.stdout), (1, ""))
        self.assertIn("last refused as a conflict", refused.stderr)
        self.assertIn("--force", refused.stderr)
        self.assertNotIn("Traceback", refused.stderr)
        self.assertEqual(len([line for line in stuck.stderr.splitlines() if "refused head item 'crate-9'" in line]), 3)
        self.assertEqual(stuck.stdout, "relay: marked 0 sent\n")
        figures = json.loads(outbox("status", "--db", self.source, "--json").stdout)
        self.assertEqual((figures["pending"], figures["sent"]), (4, 0))  # nothing skipped
        self.assertEqual((figures["head"]["attempts"], figures["head"]["last_error_kind"]), (3, "conflict"))
        again = outbox("relay", "--db", self.source, "--url", url, "--max-attempts", "3", "--once", *FAST)
        self.assertEqual(again.returncode, 3)  # no endless retry: still stuck, not one more attempt
        self.assertEqual(json.loads(outbox("status", "--db", self.source, "--json").stdout)["head"]["attempts"], 3)
        ladder = json.loads(outbox("evidence", "crate-9", "--db", self.source, "--sink", self.sink_db, "--json").stdout)
        self.assertIs(ladder["sink"]["payload_matches"], False)
        self.assertEqual(ladder["sink"]["deliveries"]["outcomes"], {"applied": 1, "conflict": 3})
        text = outbox("evidence", "crate-9", "--db", self.source, "--sink", self.sink_db).stdout
        self.assertIn('payload (sink):       {"id":"crate-9","qty":5,"sku":"crate"}', text)
        self.assertIn('payload (source):     {"id":"crate-9","qty":7,"sku":"crate"}', text)

        held = outbox("quarantine", "crate-9", "--db", self.source, "--reason", "sink applied qty 5; source says 7")
        self.assertEqual(held.returncode, 0, held.stderr)
        listed = json.loads(outbox("quarantined", "--db", self.source, "--json").stdout)["quarantined"]
        self.assertEqual([(item["id"], item["attempts"], item["last_error_kind"]) for item in listed],
                         [("crate-9", 3, "conflict")])
        flowed = outbox("relay", "--db", self.source, "--url", url, "--max-attempts", "3", "--once", *FAST)
        self.assertEqual(flowed.returncode, 0, flowed.stderr)
        figures = json.loads(outbox("status", "--db", self.source, "--json").stdout)
        self.assertEqual((figures["pending"], figures["sent"], figures["quarantined"]), (0, 3, 1))
        ladder = json.loads(outbox("evidence", "crate-9", "--db", self.source, "--json").stdout)
        self.assertEqual(ladder["outbox"]["quarantine"]["seq"], 1)
        self.assertEqual(ladder["outbox"]["quarantine"]["overtaken_by"], [2, 3, 4])  # the reordering, recorded

        corrected = json.dumps({"id": "crate-9", "sku": "crate", "qty": 5})
        back = outbox("requeue", "crate-9", "--db", self.source, "--event", corrected)
        self.assertEqual(back.returncode, 0, back.stderr)
        self.assertIn("as seq 5", back.stdout)
        done = outbox("relay", "--db", self.source, "--url", url, "--max-attempts", "3", "--once", *FAST)
        self.assertEqual(done.returncode, 0, done.stderr)

        figures = json.loads(outbox("status", "--db", self.source, "--json").stdout)
        self.assertEqual((figures["pending"], figures["sent"], figures["quarantined"]), (0, 4, 0))
        sent = dict(read_rows(self.source, "SELECT event_id, payload FROM outbox WHERE sent = 1"))
        applied = dict(read_rows(self.sink_db, "SELECT event_id, payload FROM inbox"))
        self.assertEqual(sent, applied)  # every item at the sink once, with the payload the source now holds
        self.assertEqual(read_rows(self.source, "SELECT qty FROM orders WHERE id = 'crate-9'"), [(5,)])
        self.assertEqual(dict(read_rows(self.sink_db, "SELECT sku, qty FROM inventory")), {"crate": 5, "box": 6})
        outcomes = [o for (o,) in read_rows(self.sink_db, "SELECT outcome FROM deliveries WHERE event_id = 'crate-9' "
                                                          "ORDER BY rowid")]
        self.assertEqual(outcomes, ["applied", "conflict", "conflict", "conflict", "duplicate"])
        ladder = json.loads(outbox("evidence", "crate-9", "--db", self.source, "--sink", self.sink_db, "--json").stdout)
        self.assertEqual(ladder["outbox"]["quarantine"]["new_seq"], 5)
        self.assertIn("delivered and applied once", ladder["reading"])

        # A purge removes the sent outbox rows; the operator's history of crate-9 stays, both payloads included.
        self.assertEqual(outbox("purge", "--db", self.source, "--sent-before", "0s").stdout, "purged 4 sent row(s)\n")
        after = outbox("evidence", "crate-9", "--db", self.source, "--sink", self.sink_db)
        self.assertEqual(after.returncode, 0, after.stderr)
        history = [line for line in after.stdout.splitlines() if line.startswith("history (source):")]
        self.assertEqual(len(history), 1, after.stdout)
        for words in ("quarantined at seq 1", "sink applied qty 5; source says 7", "requeued on", "as seq 5",
                      'corrected from {"id":"crate-9","qty":7,"sku":"crate"} to {"id":"crate-9","qty":5,'
                      '"sku":"crate"}', "overtaken by 3 sent item(s): box-0 (seq 2), box-1 (seq 3), box-2 (seq 4)"):
            self.assertIn(words, history[0])
        self.assertIn("outbox row (source):  absent", after.stdout)


class StopTest(RelayTestCase):
    def test_sigterm_mid_run_leaves_at_most_the_item_in_flight_applied_and_unmarked(self):
        total = 400
        con = init_store(self.source)
        con.execute("PRAGMA synchronous = OFF")  # this test's intake only: no fsync per row
        for i in range(total):
            intake(con, {"id": "item-%04d" % i, "sku": "s", "qty": 1})
        con.close()
        # The sink holds one item halfway until the signal is sent: however the relay and this test are scheduled
        # on a loaded machine, the relay cannot finish the run before SIGTERM (and stops anywhere before that item).
        signalled = threading.Event()
        self.addCleanup(signalled.set)

        def held_receive(con, event):
            if event["id"] == "item-%04d" % (total // 2):
                signalled.wait(DEADLINE)
            return inbox.receive(con, event)

        url = self.start_sink(receive=held_receive)
        proc = subprocess.Popen(stoppable(["-m", "outbox", "relay", "--db", self.source, "--url", url] + FAST),
                                cwd=ROOT, env=python_env(), stdin=STOP_STDIN, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True)
        try:
            wait_until(lambda: read_rows(self.sink_db, "SELECT count(*) FROM inbox")[0][0] >= 10,
                       what="the relay delivering its first items")
            ask_to_stop(proc, signal.SIGTERM)
            signalled.set()
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        self.assertEqual(proc.returncode, 0, err)
        self.assertNotIn("Traceback", err)
        self.assertIn("stopped by signal", out)
        sent = {i for (i,) in read_rows(self.source, "SELECT event_id FROM outbox WHERE sent = 1")}
        applied = {i for (i,) in read_rows(self.sink_db, "SELECT event_id FROM inbox")}
        self.assertLess(len(sent), total, "the relay finished before SIGTERM: this run proves nothing")
        self.assertLessEqual(sent, applied)
        self.assertLessEqual(len(applied - sent), 1, sorted(applied - sent))


class BeforeTheFirstIntakeTest(RelayTestCase):
    """Issue 29, item 10: a relay started before the service's first intake: refused, or --create, said aloud."""

    def test_a_missing_db_is_refused_unless_create_which_says_so_and_delivers_the_first_intake(self):
        url = self.start_sink()
        refused = outbox("relay", "--db", self.source, "--url", url, "--once")
        self.assertEqual(refused.returncode, 1, refused.stderr)
        self.assertEqual(refused.stderr, "outbox: error: no source DB at %r (intake creates one): start the relay "
                                         "after the first intake, or with --create to create it now\n" % self.source)
        self.assertFalse(os.path.exists(self.source))  # a mistyped path stays a missing file
        proc = subprocess.Popen(stoppable(["-m", "outbox", "relay", "--db", self.source, "--url", url, "--create"]
                                          + FAST), cwd=ROOT, env=python_env(), stdin=STOP_STDIN,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        try:
            self.assertEqual(proc.stderr.readline(), "relay: no source DB at %r: creating it (--create); nothing to "
                             "deliver until the first intake\n" % self.source)
            wait_until(lambda: os.path.exists(self.source), what="the relay creating the source DB")
            taken = outbox("intake", "--db", self.source, "--id", "first-1", "--sku", "s", "--qty", "1")
            self.assertEqual(taken.returncode, 0, taken.stderr)
            wait_until(lambda: read_rows(self.source, "SELECT sent FROM outbox WHERE event_id = 'first-1'") == [(1,)],
                       what="the relay delivering the first intake")
            ask_to_stop(proc, signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        self.assertEqual((proc.returncode, out), (0, "relay: marked 1 sent; stopped by signal\n"), err)
        self.assertEqual(read_rows(self.sink_db, "SELECT event_id FROM inbox"), [("first-1",)])


class GiveUpTest(RelayTestCase):
    def test_give_up_after_exits_3_and_a_restart_tries_again_at_once(self):
        con = init_store(self.source)
        for i in range(3):
            intake(con, {"id": "box-%d" % i, "sku": "box", "qty": 1})
        con.close()
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        closed.close()  # nothing listens there now: every connection is refused
        gave_up = outbox("relay", "--db", self.source, "--url", "http://127.0.0.1:%d/events" % port, "--once",
                         "--give-up-after", "1s", *FAST)
        self.assertEqual(gave_up.returncode, 3, gave_up.stderr)
        lines = gave_up.stderr.splitlines()
        self.assertEqual(len([line for line in lines if "sink unreachable since" in line]), 1, gave_up.stderr)
        alert = [line for line in lines if "ALERT" in line]
        self.assertEqual(len(alert), 1, gave_up.stderr)
        self.assertIn("has not answered for", alert[0])
        self.assertIn("--give-up-after 1 s", alert[0])
        self.assertIn("python -m outbox evidence box-0 --db %s" % self.source, gave_up.stderr)
        figures = json.loads(outbox("status", "--db", self.source, "--json").stdout)
        self.assertEqual((figures["head"]["permanent_failures"], figures["head"]["last_error_kind"]), (0, "no-answer"))
        ladder = json.loads(outbox("evidence", "box-0", "--db", self.source, "--json").stdout)
        self.assertIn("the relay keeps retrying it", ladder["reading"])

        url = self.start_sink()
        back = outbox("relay", "--db", self.source, "--url", url, "--once", "--give-up-after", "1s", *FAST)
        self.assertEqual(back.returncode, 0, back.stderr)  # no alert without a try
        self.assertEqual(back.stdout, "relay: marked 3 sent\n")


if __name__ == "__main__":
    unittest.main()
