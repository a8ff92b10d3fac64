"""sink.core.ack: an ACK only for "applied" or "duplicate", made after the receipt is committed, with the held digest."""
import sqlite3
import unittest

from outbox.core.event import digest
from sink import Conflict, init_sink, receive
from sink.core import ack
from tests.support import TempDirTestCase, ev


class AcknowledgeTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.db_path = self.path("sink.db")
        self.con = init_sink(self.db_path)
        self.addCleanup(self.con.close)

    def held_elsewhere(self, event_id):
        """The digest a second connection reads: what is committed, not what con alone sees."""
        other = sqlite3.connect(self.db_path)
        try:
            return ack.held_digest(other, event_id)
        finally:
            other.close()

    def test_applied_then_duplicate_each_acked_with_the_digest_already_committed(self):
        event = ev("e1", qty=2)
        for result in ("applied", "duplicate"):
            answer = ack.acknowledge(self.con, receive, event, digest_of=ack.held_digest)
            self.assertEqual(answer, {"ack": True, "id": "e1", "result": result, "digest": digest(event)})
            self.assertEqual(self.held_elsewhere("e1"), answer["digest"])

    def test_without_digest_of_the_ack_has_no_digest(self):
        self.assertEqual(ack.acknowledge(self.con, receive, ev("e1")), {"ack": True, "id": "e1", "result": "applied"})

    def test_any_other_result_is_no_ack(self):
        class Lookalike(str):
            pass

        for result in ("applied ", "APPLIED", None, True, 1, Lookalike("x")):
            with self.assertRaises(ack.BadResult) as caught:
                ack.acknowledge(self.con, lambda con, event: result, ev("e1"))
            self.assertIn(repr(result), str(caught.exception))

    def test_a_receive_that_leaves_its_transaction_open_is_no_ack_and_is_rolled_back(self):
        def uncommitted(con, event):
            con.execute("BEGIN IMMEDIATE")
            con.execute("INSERT INTO inbox (event_id, payload, digest, applied_at) VALUES (?, '{}', 'x', 0)",
                        (event["id"],))
            return "applied"

        with self.assertRaises(ack.BadResult) as caught:
            ack.acknowledge(self.con, uncommitted, ev("e1"), digest_of=ack.held_digest)
        self.assertIn("transaction open", str(caught.exception))
        self.assertFalse(self.con.in_transaction)  # no write lock held while the sink answers
        self.assertIsNone(self.held_elsewhere("e1"))
        self.assertEqual(ack.acknowledge(self.con, receive, ev("e1"))["result"], "applied")

    def test_an_exception_of_receive_propagates_unchanged_and_there_is_no_ack(self):
        receive(self.con, ev("e1", qty=1))
        with self.assertRaises(Conflict):
            ack.acknowledge(self.con, receive, ev("e1", qty=2), digest_of=ack.held_digest)
        boom = RuntimeError("the store broke")

        def broken(con, event):
            raise boom

        with self.assertRaises(RuntimeError) as caught:
            ack.acknowledge(self.con, broken, ev("e2"))
        self.assertIs(caught.exception, boom)
        self.assertIsNone(self.held_elsewhere("e2"))


if __name__ == "__main__":
    unittest.main()
