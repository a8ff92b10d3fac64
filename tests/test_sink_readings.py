"""sink.readings on real sink DBs: the digest and the /metrics snapshot, read without the store connection.

A clock is passed in, so the snapshot's age is stepped, never slept through.
"""
import threading
import unittest

from outbox.core.event import digest
from sink import init_sink, receive
from sink.readings import NotReady, Readings
from tests.support import EVENT, TempDirTestCase, parse_prometheus


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class ReadingsTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.db_path = self.path("sink.db")
        self.store = init_sink(self.db_path)
        self.addCleanup(self.store.close)
        self.clock = Clock()
        self.reads = Readings(self.db_path, max_age=1.0, clock=self.clock)
        self.addCleanup(self.reads.close_mine)

    def applied(self):
        text = self.reads.metrics_text()
        return parse_prometheus(text)[("sink_deliveries_total", (("outcome", "applied"),))]

    def test_the_digest_is_what_the_store_committed_read_on_another_connection(self):
        self.assertIsNone(self.reads.held_digest(EVENT["id"]))
        receive(self.store, EVENT)
        self.assertEqual(self.reads.held_digest(EVENT["id"]), digest(EVENT))

    def test_the_snapshot_is_kept_for_max_age_then_read_again(self):
        self.assertEqual(self.applied(), 0)
        receive(self.store, EVENT)
        self.clock.now += 0.9
        self.assertEqual(self.applied(), 0, "a snapshot younger than max_age is served as it is")
        self.clock.now += 0.1
        self.assertEqual(self.applied(), 1, "at max_age it is read again")

    def test_a_reader_finding_a_render_under_way_gets_the_previous_snapshot(self):
        first = self.reads.metrics_text()
        receive(self.store, EVENT)
        self.clock.now += 5
        self.reads._render.acquire()  # another thread renders now
        try:
            self.assertEqual(self.reads.metrics_text(), first)
        finally:
            self.reads._render.release()
        self.assertNotEqual(self.reads.metrics_text(), first)

    def test_before_the_first_snapshot_a_reader_never_waits_for_another_render(self):
        self.reads._render.acquire()  # another thread renders the first one now
        try:
            with self.assertRaises(NotReady):
                self.reads.metrics_text()
        finally:
            self.reads._render.release()
        self.assertIn("sink_deliveries_total", self.reads.metrics_text())

    def test_each_thread_reads_on_its_own_connection_and_closes_it(self):
        seen = []

        def other():
            seen.append(self.reads._connection())
            self.reads.close_mine()

        mine = self.reads._connection()
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(10)
        self.assertEqual(len(seen), 1)
        self.assertIsNot(seen[0], mine)
        self.assertIs(self.reads._connection(), mine)
        with self.assertRaises(Exception):
            seen[0].execute("SELECT 1")  # closed by its own thread

    def test_nothing_is_written_the_connection_is_read_only(self):
        con = self.reads._connection()
        with self.assertRaises(Exception):
            con.execute("DELETE FROM inbox")


if __name__ == "__main__":
    unittest.main()
