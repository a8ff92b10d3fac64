"""relay.run in process: its count, backoff, outage lines, alerts, progress and stop.

A plain `send` and a clock of the test's own (sleep moves it; nothing
sleeps for real), so backoff waits are read off the clock. Every run is
bounded in a thread of its own (tests.support.run_relay): a loop that never
ends fails its test instead of hanging the suite.
"""
import sqlite3
import threading
import unittest

from outbox import init_store, intake_many
from outbox.ops import operations, relay
from outbox.core.errors import NoAnswer, UntrustedAck
from tests.support import DEADLINE, RELAY_DEADLINE, TempDirTestCase, run_relay, wait_until

EPS = 1e-9


class FakeClock:
    """relay.SystemClock's interface on a number the test moves: sleep() adds to it, nothing waits."""

    def __init__(self):
        self.t = 1000.0

    def monotonic(self):
        return self.t

    def now(self):
        return 1700000000.0 + self.t

    def sleep(self, seconds):
        self.t += seconds


def conflict(event):
    raise UntrustedAck("POST for %r: status 409; not marking it sent" % event["id"], kind="conflict")


class RelayTestCase(TempDirTestCase):
    items = 3

    def setUp(self):
        super().setUp()
        self.db = self.path("source.db")
        con = init_store(self.db)
        intake_many(con, [{"id": "item-%02d" % i, "sku": "s", "qty": 1} for i in range(self.items)])
        con.close()
        self.lines = []
        self.sent = []

    def relay(self, send, **options):
        options.setdefault("say", self.lines.append)
        return run_relay(self.db, send, **options)

    def read(self, call):
        con = operations.open_store_readonly(self.db)
        try:
            return call(con)
        finally:
            con.close()

    def sent_rows(self):
        return self.read(lambda con: con.execute("SELECT count(*) FROM outbox WHERE sent = 1").fetchone()[0])

    def head(self):
        return self.read(operations.head)

    def said(self, words):
        return [line for line in self.lines if words in line]


class CountTest(RelayTestCase):
    items = 20

    def test_the_count_is_the_rows_marked_when_a_batch_fails_midway(self):
        """The "marked 152 sent while 161 rows were marked" bug: a failed batch's marked items were not counted."""
        def send(event):
            self.sent.append(event["id"])
            if event["id"] == "item-10" and self.sent.count("item-10") == 1:
                raise NoAnswer("sink down for a moment")
            return True

        self.assertEqual(self.relay(send), 20)
        self.assertEqual(self.sent_rows(), 20)

    def test_the_tally_counts_every_send_and_failure_by_kind(self):
        tally = relay.Tally()
        rounds = []

        def send(event):
            self.sent.append(event["id"])
            if len(self.sent) in (3, 4):
                raise NoAnswer("down")
            if len(self.sent) == 6:
                return "ok"  # not an ACK: not-acknowledged, permanent
            return True

        self.assertEqual(self.relay(send, tally=tally, on_round=lambda t: rounds.append((t.sent, t.failed()))), 20)
        self.assertEqual((tally.sent, tally.attempts), (20, 23))
        self.assertEqual(tally.failures, {"no-answer": 2, "not-acknowledged": 1})
        self.assertIsNotNone(tally.last_success)
        self.assertEqual(rounds[-1], (20, 3))
        self.assertGreaterEqual(len(rounds), 4)  # after each failed round, each good one, and at the end


class PermanentFailureTest(RelayTestCase):
    def test_the_alert_after_max_attempts_refusals_and_at_once_when_started_again(self):
        def send(event):
            self.sent.append(event["id"])
            conflict(event)

        with self.assertRaises(relay.HeadStuck) as caught:
            self.relay(send)
        self.assertEqual(self.sent, ["item-00"] * 3)
        alert = str(caught.exception)
        for words in ("'item-00'", "refused by the sink 3 time(s)", "conflict", "409"):
            self.assertIn(words, alert)
        self.assertEqual(caught.exception.head["id"], "item-00")
        self.assertEqual(len(self.said("the sink refused head item 'item-00' (seq 1): conflict")), 3)
        self.assertIn("3 of 3 before the alert", self.lines[-1])
        head = self.head()
        self.assertEqual((head["attempts"], head["permanent_failures"], head["last_error_kind"]), (3, 3, "conflict"))
        self.assertEqual(self.read(operations.figures)["pending"], 3)  # nothing skipped
        with self.assertRaises(relay.HeadStuck):
            self.relay(send)  # started again: the alert at once, no fourth send
        self.assertEqual(self.sent, ["item-00"] * 3)

    def test_a_retry_lets_the_relay_send_it_again(self):
        with self.assertRaises(relay.HeadStuck):
            self.relay(conflict)
        con = init_store(self.db)
        try:
            with self.assertRaises(operations.OutboxError):  # a conflict: the sink's row must be fixed first
                operations.retry(con, "item-00")
            reset = operations.retry(con, "item-00", force=True)  # it was: the sink takes it now
        finally:
            con.close()
        self.assertEqual((reset["attempts"], reset["permanent_failures"], reset["last_error_kind"]), (3, 3, "conflict"))
        self.assertEqual(self.relay(lambda event: True), 3)

    def test_an_outage_between_refusals_adds_nothing_to_the_count(self):
        answers = iter([conflict, NoAnswer, NoAnswer, conflict, NoAnswer, conflict])

        def send(event):
            answer = next(answers)
            if answer is NoAnswer:
                raise NoAnswer("down")
            answer(event)

        with self.assertRaises(relay.HeadStuck):
            self.relay(send)
        self.assertEqual((self.head()["attempts"], self.head()["permanent_failures"]), (6, 3))
        self.assertEqual(len(self.said("sink unreachable since")), 2)
        self.assertEqual(len(self.said("sink back after")), 2)  # a refusal is an answer: the sink is back


class TransientFailureTest(RelayTestCase):
    def test_an_outage_is_ridden_out_with_one_line_when_it_starts_and_one_when_it_ends(self):
        def send(event):
            self.sent.append(event["id"])
            if len(self.sent) <= 50:
                raise NoAnswer("connection refused")
            return True

        clock = FakeClock()
        self.assertEqual(self.relay(send, clock=clock, rand=lambda: 0.5, base_delay=0.5, max_delay=4.0), 3)
        self.assertEqual(self.sent_rows(), 3)
        self.assertEqual(self.sent, ["item-00"] * 51 + ["item-01", "item-02"])
        unreachable = self.said("sink unreachable since")
        self.assertEqual(len(unreachable), 1, self.lines)
        self.assertIn("retrying every <= 4 s", unreachable[0])
        self.assertIn("since 2023-11-14T22:", unreachable[0])  # the fake clock's Unix time, 1700001000
        back = self.said("sink back after")
        self.assertEqual(len(back), 1, self.lines)
        waited = clock.t - 1000.0
        self.assertIn("after %.1f s" % waited, back[0])
        self.assertGreater(waited, 40 * 2.0)  # most waits at the cap: 4 s * 0.5
        self.assertLess(waited, 51 * 2.0 + EPS)
        self.assertEqual(self.head(), None)
        # The outage has its two lines and nothing between them: no progress line while nothing is delivered.
        self.assertEqual([line.split(" ")[1] for line in self.lines], ["sink", "sink", "delivered"], self.lines)

    def test_give_up_after_is_the_alert_for_an_outage_and_a_restart_tries_again(self):
        clock = FakeClock()
        starts = []

        def send(event):
            starts.append(clock.monotonic())
            raise NoAnswer("connection refused")

        with self.assertRaises(relay.GaveUp) as caught:
            self.relay(send, clock=clock, rand=lambda: 1.0 - EPS, base_delay=1.0, max_delay=8.0, give_up_after=30.0)
        self.assertIn("has not answered for 30.0 s", str(caught.exception))
        self.assertEqual(caught.exception.head["id"], "item-00")
        waits = [b - a for a, b in zip(starts, starts[1:])]
        self.assertAlmostEqual(sum(waits), 30.0, places=6)  # the last wait is cut to the time left
        self.assertAlmostEqual(waits[-1], 30.0 - 1 - 2 - 4 - 8 - 8, places=6)
        self.assertEqual(self.head()["permanent_failures"], 0)
        self.sent = []
        self.assertEqual(self.relay(lambda event: self.sent.append(event["id"]) or True), 3)
        self.assertEqual(self.sent, ["item-00", "item-01", "item-02"])  # tried at once, no alert

    def test_a_5xx_is_transient(self):
        answers = [UntrustedAck("status 503", kind="server-error")] * 7

        def send(event):
            if answers:
                raise answers.pop()
            return True

        self.assertEqual(self.relay(send), 3)
        self.assertEqual(len(self.said("sink unreachable since")), 1)


class BackoffTest(RelayTestCase):
    def waits(self, failures_of, limit=1):
        """The waits between sends, read off the fake clock (each send takes no time)."""
        clock = FakeClock()
        starts = []
        calls = {}

        def send(event):
            starts.append(clock.monotonic())
            calls[event["id"]] = calls.get(event["id"], 0) + 1
            if calls[event["id"]] <= failures_of.get(event["id"], 0):
                raise NoAnswer("down")
            return True

        self.relay(send, clock=clock, limit=limit, rand=lambda: 1.0 - EPS, base_delay=1.0, max_delay=100.0)
        return [round(b - a, 6) for a, b in zip(starts, starts[1:])]

    def test_the_backoff_grows_and_starts_again_after_an_ack(self):
        self.assertEqual(self.waits({"item-00": 3, "item-01": 2}), [1, 2, 4, 0, 1, 2, 0])

    def test_an_ack_in_a_failed_batch_starts_it_again_too(self):
        self.assertEqual(self.waits({"item-00": 2, "item-01": 2}, limit=16), [1, 2, 0, 1, 2, 0])


class ProgressTest(RelayTestCase):
    items = 40

    def test_at_most_one_line_a_second_with_the_rate_of_the_last_interval(self):
        clock = FakeClock()

        def send(event):
            # 0.1 s per send for the first 20 items, then 0.5 s: 10/s, then 2/s.
            clock.t += 0.1 if int(event["id"][5:]) < 20 else 0.5
            return True

        self.assertEqual(self.relay(send, clock=clock, limit=1), 40)
        progress = self.said("relay: delivered")
        self.assertEqual(len(progress), 12, progress)  # 12 s of sending, one line a second, not one a round
        self.assertTrue(progress[0].startswith("relay: delivered 10, failed 0, pending 30, 10.0 events/s over "
                                               "the last 1.0 s"), progress[0])
        self.assertIn(", 2.0 events/s over the last 1.0 s, at ", progress[-1])  # not the average since the start
        for line in progress:
            self.assertRegex(line, r", at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\Z")

    def test_idle_rounds_print_nothing(self):
        clock = FakeClock()
        rounds = []

        def stop():
            rounds.append(clock.t)
            return len(rounds) > 200

        self.assertEqual(self.relay(lambda event: True, clock=clock, once=False, poll=0.5, stop=stop), 40)
        # All delivered in no time: one line a second later says so, then 100 s of nothing to say.
        # The UTC time of the line last (issue 29, item 10): the fake clock's 1700001001 s.
        self.assertEqual(self.said("relay: delivered"), ["relay: delivered 40, failed 0, pending 0, 40.0 events/s "
                                                         "over the last 1.0 s, at 2023-11-14T22:30:01Z"])


class StopTest(RelayTestCase):
    def test_the_stop_flag_lets_the_item_in_flight_be_marked_and_sends_no_other(self):
        def send(event):
            self.sent.append(event["id"])
            return True

        self.assertEqual(self.relay(send, stop=lambda: bool(self.sent), once=False), 1)
        self.assertEqual(self.sent, ["item-00"])
        head = self.head()
        self.assertEqual(head["id"], "item-01")
        # Not sent, so not tried: a stop is no attempt and no failure.
        self.assertEqual((head["attempts"], head["last_error_kind"], head["permanent_failures"]), (0, None, 0))

    def test_a_stop_just_before_the_head_s_send_leaves_its_attempt_record_as_it_was(self):
        """Issue 18's report: such a stop counted an attempt and overwrote the head's last failure kind."""
        def refuse(event):
            self.sent.append(event["id"])
            conflict(event)

        with self.assertRaises(relay.HeadStuck):
            self.relay(refuse, max_attempts=2)
        before = self.head()
        self.assertEqual((before["attempts"], before["permanent_failures"], before["last_error_kind"]),
                         (2, 2, "conflict"))
        con = init_store(self.db)
        try:  # one refusal below the alert, so the next run reaches the send
            con.execute("UPDATE outbox SET attempts = 4, permanent_failures = 1, last_error = 'UntrustedAck: 409' "
                        "WHERE event_id = 'item-00'")
        finally:
            con.close()
        looks = []

        def stop():
            looks.append(True)
            return len(looks) > 1  # the loop's own look is before the round: the stop comes just after it

        tally = relay.Tally()
        self.assertEqual(self.relay(refuse, stop=stop, once=False, tally=tally), 0)
        self.assertEqual(self.sent, ["item-00"] * 2)  # no third send
        after = self.head()
        self.assertEqual((after["attempts"], after["permanent_failures"], after["last_error_kind"],
                          after["last_error"]), (4, 1, "conflict", "UntrustedAck: 409"))
        self.assertEqual((tally.attempts, tally.failures), (0, {}))

    def test_once_delivers_everything_then_returns(self):
        self.assertEqual(self.relay(lambda event: True, limit=2), 3)
        self.assertEqual(self.read(operations.figures)["pending"], 0)


class ExactAckTest(RelayTestCase):
    def test_a_truthy_result_that_is_not_true_is_no_ack_under_the_relay_either(self):
        """Issue 22: the relay hands dispatch the caller's `send` itself, so only dispatch judges its result."""
        for result in (1, "ok", [True]):
            with self.assertRaises(relay.HeadStuck):
                self.relay(lambda event: result, max_attempts=1)
            self.assertEqual(self.sent_rows(), 0, "marked sent after send returned %r" % (result,))
            con = init_store(self.db)
            con.execute("UPDATE outbox SET permanent_failures = 0")
            con.close()


class BusySourceTest(RelayTestCase):
    def test_a_lock_held_past_the_busy_timeout_after_an_ack_is_ridden_out(self):
        """Issue 22: mark_sent's "database is locked" after item-01's ACK fails that round, not the relay.

        Another connection takes the write lock while item-01 is in flight and
        holds it until the relay has said, once, that the DB is busy (so past
        the busy timeout, for the mark and for the attempt records after it).
        Released, the relay sends item-01 again (a duplicate) and marks all.
        """
        blocker = sqlite3.connect(self.db, isolation_level=None, check_same_thread=False)
        self.addCleanup(blocker.close)
        delivered = []

        def send(event):
            delivered.append(event["id"])
            if event["id"] == "item-01" and not blocker.in_transaction and delivered.count("item-01") == 1:
                blocker.execute("BEGIN IMMEDIATE")
            return True

        outcome = {}
        deadline = threading.Event()

        def body():
            con = init_store(self.db)
            con.execute("PRAGMA busy_timeout = 200")  # the busy timeout, short for the test
            try:
                outcome["result"] = relay.run(con, send, stop=deadline.is_set, limit=16, max_attempts=3,
                                              base_delay=0.05, max_delay=0.05, once=True, poll=0.0,
                                              say=self.lines.append, rand=lambda: 0.5)
            except BaseException as exc:
                outcome["error"] = exc
            finally:
                con.close()

        thread = threading.Thread(target=body, daemon=True)
        thread.start()
        try:
            wait_until(lambda: self.said("source DB busy") or not thread.is_alive(), what="the relay's busy line")
            self.assertTrue(thread.is_alive(), outcome)
            blocker.execute("ROLLBACK")
            thread.join(RELAY_DEADLINE)
        finally:
            deadline.set()
            thread.join(DEADLINE)
        self.assertNotIn("error", outcome)
        self.assertEqual(outcome["result"], 3)  # item-00 marked before the lock, item-01 and item-02 after
        self.assertEqual(self.sent_rows(), 3)
        self.assertEqual(delivered, ["item-00", "item-01", "item-01", "item-02"])
        self.assertEqual(len(self.said("source DB busy")), 1, self.lines)
        self.assertEqual(len(self.said("source DB free after")), 1, self.lines)
        self.assertIn("database is locked", self.said("source DB busy")[0])


if __name__ == "__main__":
    unittest.main()
