"""outbox.ops.attempts: the attempt record is committed before send, holds no lock across it, and keeps the last failure."""
import sqlite3
import unittest

from outbox.ops import attempts, operations
from outbox import dispatch, init_store, intake
from outbox.core.errors import OutboxError
from tests.support import TempDirTestCase, ev


class AttemptRecordTest(TempDirTestCase):
    def test_the_attempt_is_committed_before_send_and_holds_no_lock_across_it(self):
        path = self.path("s.db")
        con = init_store(path)
        self.addCleanup(con.close)
        intake(con, ev("a"))
        seen = []

        def send(event):
            other = sqlite3.connect(path, isolation_level=None, timeout=0)
            try:
                other.execute("PRAGMA busy_timeout = 0").fetchall()
                other.execute("BEGIN IMMEDIATE")  # fails at once if anyone holds the write lock
                seen.append(other.execute("SELECT attempts FROM outbox WHERE event_id = 'a'").fetchone()[0])
                other.execute("COMMIT")
            finally:
                other.close()
            return True

        self.assertEqual(dispatch(con, send, **attempts.hooks(con)), 1)
        self.assertEqual(seen, [1])
        self.assertEqual(con.execute("PRAGMA synchronous").fetchone()[0], 2)  # restored to FULL

    def test_a_failure_is_recorded_and_the_original_exception_re_raised(self):
        con = init_store(self.path("s.db"))
        self.addCleanup(con.close)
        intake(con, ev("a"))
        boom = RuntimeError("refused\nsecond line " + "x" * 600)
        for attempt in (1, 2):
            with self.assertRaises(RuntimeError) as caught:
                dispatch(con, lambda e: (_ for _ in ()).throw(boom), **attempts.hooks(con))
            self.assertIs(caught.exception, boom)
        head = operations.head(con)
        self.assertEqual(head["attempts"], 2)
        self.assertTrue(head["last_error"].startswith("RuntimeError: refused second line x"))
        self.assertLessEqual(len(head["last_error"]), 500)
        self.assertNotIn("\n", head["last_error"])
        with self.assertRaises(OutboxError):
            dispatch(con, lambda e: "ok", **attempts.hooks(con))
        self.assertIn("NotAcknowledged", operations.head(con)["last_error"])

    def test_bookkeeping_keeps_a_lower_synchronous_setting(self):
        con = init_store(self.path("s.db"))
        self.addCleanup(con.close)
        con.execute("PRAGMA synchronous = OFF")
        intake(con, ev("a"))
        attempts.record_attempt(con, "a")
        self.assertEqual(con.execute("PRAGMA synchronous").fetchone()[0], 0)


if __name__ == "__main__":
    unittest.main()
