"""grader/corpus/marks.py: the mark_sent corpus on a real DB, and the kit's mark_sent against it."""
import os
import sqlite3
import unittest

from grader.corpus import DEFAULT_SEED, differs, marks, observed
from outbox.core.store import init_store, intake, mark_sent
from tests.support import TempDirTestCase


class MarkCorpusTest(TempDirTestCase):
    def test_the_kits_mark_sent_marks_exactly_what_the_rule_says_on_every_case(self):
        db = self.path("source.db")
        con = init_store(db)
        self.addCleanup(con.close)
        for event_id in marks.STORED:
            intake(con, {"id": event_id, "sku": "mark", "qty": 1})
        watcher = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
        self.addCleanup(watcher.close)
        cases = marks.cases(DEFAULT_SEED)
        for case, expected in zip(cases, marks.reference_outcomes(cases)):
            before = dict(watcher.execute("SELECT event_id, sent FROM outbox"))
            got = observed(lambda: mark_sent(con, case.args[0]))
            after = dict(watcher.execute("SELECT event_id, sent FROM outbox"))
            self.assertIsNone(differs(expected, got), case)
            self.assertEqual(sorted(k for k in after if after[k] != before[k]), expected["marks"], case)
        self.assertTrue(os.path.exists(db))

    def test_patterns_come_while_the_rows_they_would_catch_are_still_unmarked(self):
        cases = marks.cases(DEFAULT_SEED)
        first_exact = next(c.n for c in cases if c.cls == "exact")
        self.assertTrue(all(c.n < first_exact for c in cases if c.cls == "pattern" and c.args[0] != "a_b"))
        self.assertIn("%", [c.args[0] for c in cases])
        self.assertIn("AXB", [c.args[0] for c in cases])


if __name__ == "__main__":
    unittest.main()
