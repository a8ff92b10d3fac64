"""outbox.core.dispatch: one finite batch, marked only on an exact True, stopping at the first failure.

The classes after DispatchTest each hold a behaviour a mutation run of the
suite showed no test held; each names, in its docstring, the single-point
change it catches.
"""
import sqlite3
import unittest

from outbox import NotAcknowledged, dispatch, init_store, intake, mark_sent, pending
from tests.support import TempDirTestCase, ev


class DispatchTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.db_path = self.path("source.db")
        self.con = init_store(self.db_path)
        self.addCleanup(self.con.close)

    def sent_flags(self):
        return dict(self.con.execute("SELECT event_id, sent FROM outbox"))

    def take(self, *ids):
        for event_id in ids:
            intake(self.con, ev(event_id))

    def test_sends_in_seq_order_and_marks_each(self):
        self.take("z", "a", "m")
        seen = []

        def send(event):
            seen.append(event["id"])
            return True

        self.assertEqual(dispatch(self.con, send), 3)
        self.assertEqual(seen, ["z", "a", "m"])
        self.assertEqual(self.sent_flags(), {"z": 1, "a": 1, "m": 1})
        self.assertEqual(dispatch(self.con, send), 0)

    def test_one_batch_per_call(self):
        self.take(*["e%02d" % i for i in range(5)])
        self.assertEqual(dispatch(self.con, lambda e: True, limit=2), 2)
        self.assertEqual([e["id"] for e in pending(self.con)], ["e02", "e03", "e04"])
        with self.assertRaises(ValueError):
            dispatch(self.con, lambda e: True, limit=17)

    def test_only_exact_true_is_an_ack(self):
        self.take("a")
        for result in (1, "ok", {"ack": True}, [True], None, False, 1.0):
            calls = []

            def send(event):
                calls.append(event)
                return result

            with self.assertRaises(NotAcknowledged) as ctx:
                dispatch(self.con, send)
            self.assertIn("'a'", str(ctx.exception))
            self.assertEqual(len(calls), 1)
            self.assertEqual(self.sent_flags(), {"a": 0}, "marked sent after send returned %r" % (result,))

    def test_stops_at_first_failure_and_resumes_there(self):
        self.take("A", "B", "C")
        calls = []
        boom = ConnectionResetError("B's response was lost")

        def send(event):
            calls.append(event["id"])
            if event["id"] == "B":
                raise boom
            return True

        with self.assertRaises(ConnectionResetError) as ctx:
            dispatch(self.con, send)
        self.assertIs(ctx.exception, boom)
        self.assertEqual(calls, ["A", "B"])  # C never called
        self.assertEqual(self.sent_flags(), {"A": 1, "B": 0, "C": 0})

        calls.clear()
        self.assertEqual(dispatch(self.con, lambda e: calls.append(e["id"]) or True), 2)
        self.assertEqual(calls, ["B", "C"])
        self.assertEqual(self.sent_flags(), {"A": 1, "B": 1, "C": 1})

    def test_not_acknowledged_stops_the_batch_too(self):
        self.take("A", "B", "C")
        calls = []

        def send(event):
            calls.append(event["id"])
            return event["id"] != "B" or "ok"

        with self.assertRaises(NotAcknowledged):
            dispatch(self.con, send)
        self.assertEqual(calls, ["A", "B"])
        self.assertEqual(self.sent_flags(), {"A": 1, "B": 0, "C": 0})

    def test_no_transaction_is_open_while_send_runs(self):
        self.take("a", "b")
        observed = []

        def send(event):
            other = sqlite3.connect(self.db_path, isolation_level=None, timeout=0)
            try:
                other.execute("PRAGMA busy_timeout = 0").fetchall()
                other.execute("BEGIN IMMEDIATE")  # fails with 'database is locked' if dispatch holds the lock
                other.execute("ROLLBACK")
                second = init_store(self.db_path)
                second.execute("PRAGMA busy_timeout = 0").fetchall()
                intake(second, ev("new-during-" + event["id"]))
                second.close()
            finally:
                other.close()
            observed.append(self.con.in_transaction)
            return True

        self.assertEqual(dispatch(self.con, send), 2)
        self.assertEqual(observed, [False, False])
        self.assertEqual([e["id"] for e in pending(self.con)], ["new-during-a", "new-during-b"])

    def test_callback_rewriting_the_id_cannot_redirect_the_mark(self):
        self.take("B", "C")

        def send(event):
            event["id"] = "C"  # the callback rewrites its argument to the next pending id
            event["qty"] = 99
            return True

        self.assertEqual(dispatch(self.con, send, limit=1), 1)
        self.assertEqual(self.sent_flags(), {"B": 1, "C": 0})

    def test_each_callback_gets_a_fresh_copy(self):
        self.take("a")
        seen = {}

        def send(event):
            seen["send"] = event
            event["sku"] = "tampered"
            return True

        def after(event):
            seen["after"] = event

        dispatch(self.con, send, after_delivery=after)
        self.assertIsNot(seen["send"], seen["after"])
        self.assertEqual(seen["after"], ev("a"))

    def test_after_delivery_runs_after_the_ack_and_before_the_mark(self):
        self.take("a", "b")
        order = []

        def send(event):
            order.append(("send", event["id"]))
            return True

        def after(event):
            flags = self.sent_flags()
            order.append(("after", event["id"], flags[event["id"]]))

        dispatch(self.con, send, after_delivery=after)
        self.assertEqual(order, [("send", "a"), ("after", "a", 0), ("send", "b"), ("after", "b", 0)])
        self.assertEqual(self.sent_flags(), {"a": 1, "b": 1})

    def test_after_delivery_raising_leaves_the_item_unmarked(self):
        self.take("a", "b")
        boom = RuntimeError("hook failed")

        def after(event):
            raise boom

        with self.assertRaises(RuntimeError) as ctx:
            dispatch(self.con, lambda e: True, after_delivery=after)
        self.assertIs(ctx.exception, boom)
        self.assertEqual(self.sent_flags(), {"a": 0, "b": 0})

    def test_after_delivery_not_called_without_ack(self):
        self.take("a")
        called = []
        with self.assertRaises(NotAcknowledged):
            dispatch(self.con, lambda e: False, after_delivery=called.append)
        self.assertEqual(called, [])

    def test_refuses_a_connection_inside_a_transaction(self):
        self.take("a")
        calls = []
        self.con.execute("BEGIN IMMEDIATE")
        with self.assertRaises(ValueError) as ctx:
            dispatch(self.con, lambda e: calls.append(e) or True)
        self.assertIn("no open transaction", str(ctx.exception))
        self.assertEqual(calls, [])
        self.con.execute("ROLLBACK")
        self.assertEqual(self.sent_flags(), {"a": 0})

    def test_rejects_non_callables(self):
        self.take("a")
        with self.assertRaises(TypeError):
            dispatch(self.con, None)
        for hook in ("after_delivery", "before_send", "on_failure"):
            with self.assertRaises(TypeError) as caught:
                dispatch(self.con, lambda e: True, **{hook: "hook"})
            self.assertIn(hook, str(caught.exception))
        self.assertEqual(self.sent_flags(), {"a": 0})

    def test_without_hooks_it_writes_the_marks_and_nothing_else(self):
        """Issue 19: no attempt record and no PRAGMA switching of its own: bookkeeping comes through the hooks.

        Issue 22: its only PRAGMAs read the synchronous setting on entry and set that same value again
        before each mark (a hook may have changed it); they never switch it to another value.
        """
        self.take("a", "b", "c")
        entry = self.con.execute("PRAGMA synchronous").fetchone()[0]
        statements = []
        self.con.set_trace_callback(statements.append)
        try:
            with self.assertRaises(ConnectionResetError):
                dispatch(self.con, lambda e: e["id"] == "a" or (_ for _ in ()).throw(ConnectionResetError("lost")))
        finally:
            self.con.set_trace_callback(None)
        pragmas = [statement for statement in statements if statement.split()[0].upper() == "PRAGMA"]
        self.assertEqual(pragmas, ["PRAGMA synchronous", "PRAGMA synchronous = %d" % entry], statements)
        words = [statement.split()[0].upper() for statement in statements if statement not in pragmas]
        self.assertEqual(sorted(set(words)), ["BEGIN", "COMMIT", "SELECT", "UPDATE"], statements)
        updates = [statement for statement in statements if statement.split()[0].upper() == "UPDATE"]
        self.assertEqual(len(updates), 1, statements)
        self.assertIn("SET sent = 1", updates[0])
        self.assertEqual(self.con.execute("SELECT sum(attempts), count(last_error) FROM outbox").fetchone(), (0, 0))

    def test_the_hooks_see_each_send_and_each_failure_in_order(self):
        self.take("A", "B", "C")
        calls = []
        boom = ConnectionResetError("B's response was lost")

        def send(event):
            calls.append(("send", event["id"]))
            if event["id"] == "B":
                raise boom
            return True

        hooks = {"before_send": lambda event_id: calls.append(("before", event_id)),
                 "on_failure": lambda event_id, error: calls.append(("failure", event_id, error))}
        with self.assertRaises(ConnectionResetError) as caught:
            dispatch(self.con, send, **hooks)
        self.assertIs(caught.exception, boom)
        self.assertEqual(calls, [("before", "A"), ("send", "A"), ("before", "B"), ("send", "B"),
                                 ("failure", "B", boom)])
        self.assertEqual(self.sent_flags(), {"A": 1, "B": 0, "C": 0})
        del calls[:]
        with self.assertRaises(NotAcknowledged) as caught:
            dispatch(self.con, lambda event: "ok", **hooks)
        self.assertEqual(calls, [("before", "B"), ("failure", "B", caught.exception)])  # the one raised

    def test_a_before_send_that_raises_stops_the_batch_before_that_send(self):
        self.take("A", "B", "C")
        sent, failures = [], []

        class Stop(Exception):
            pass

        def before_send(event_id):
            if event_id == "B":
                raise Stop(event_id)

        with self.assertRaises(Stop):
            dispatch(self.con, lambda event: sent.append(event["id"]) or True, before_send=before_send,
                     on_failure=lambda event_id, error: failures.append(event_id))
        self.assertEqual((sent, failures), (["A"], []))
        self.assertEqual(self.sent_flags(), {"A": 1, "B": 0, "C": 0})


class AfterDeliveryCannotRedirectTheMarkTest(TempDirTestCase):
    """Mutants: `after_delivery(selected)` (the selection itself), or marking with the callback's copy's id."""

    def setUp(self):
        super().setUp()
        self.con = init_store(self.path("source.db"))
        self.addCleanup(self.con.close)
        for event_id in ("a", "b"):
            intake(self.con, ev(event_id))

    def sent_flags(self):
        return dict(self.con.execute("SELECT event_id, sent FROM outbox"))

    def test_rewriting_the_id_in_after_delivery_marks_the_delivered_row_only(self):
        delivered = []

        def send(event):
            delivered.append(event["id"])
            return True

        def after(event):
            event["id"] = "b"  # the next pending id, which was never sent

        self.assertEqual(dispatch(self.con, send, limit=1, after_delivery=after), 1)
        self.assertEqual(delivered, ["a"])
        self.assertEqual(self.sent_flags(), {"a": 1, "b": 0})

    def test_after_delivery_gets_a_copy_not_the_selection(self):
        seen = []

        def after(event):
            seen.append(event)
            event.clear()  # would leave dispatch with no id at all if this were its own dict

        self.assertEqual(dispatch(self.con, lambda event: True, after_delivery=after), 2)
        self.assertEqual(self.sent_flags(), {"a": 1, "b": 1})
        self.assertEqual(len(seen), 2)


class DispatchCountTest(TempDirTestCase):
    """Mutant: dispatch counting every ACK, not only the rows its own mark_sent changed."""

    def test_a_row_marked_by_another_connection_during_send_is_not_counted(self):
        path = self.path("source.db")
        con = init_store(path)
        self.addCleanup(con.close)
        other = init_store(path)
        self.addCleanup(other.close)
        for event_id in ("a", "b"):
            intake(con, ev(event_id))

        def send(event):
            if event["id"] == "a":
                self.assertTrue(mark_sent(other, "a"))  # someone else finished it meanwhile
            return True

        self.assertEqual(dispatch(con, send), 1)
        self.assertEqual(dict(con.execute("SELECT event_id, sent FROM outbox")), {"a": 1, "b": 1})


class HostileHookTest(TempDirTestCase):
    """Issue 22: dispatch trusts no hook with the lock or the fsync its guarantee rests on.

    Mutants caught: the check right before each send removed (a hook's open
    transaction holds the write lock while `send` runs: the second
    connection in `send` gets "database is locked"); the restore of ``PRAGMA
    synchronous`` before mark_sent removed (a mark committed with
    synchronous=OFF, no fsync).
    """

    def setUp(self):
        super().setUp()
        self.db_path = self.path("source.db")
        self.con = init_store(self.db_path)
        self.addCleanup(self.con.close)
        for event_id in ("a", "b", "c"):
            intake(self.con, ev(event_id))

    def send_proving_no_lock(self, sent):
        def send(event):
            other = sqlite3.connect(self.db_path, isolation_level=None, timeout=0)
            try:
                other.execute("BEGIN IMMEDIATE")  # 'database is locked' if con holds the write lock
                other.execute("ROLLBACK")
            finally:
                other.close()
            sent.append(event["id"])
            return True
        return send

    def test_a_before_send_that_leaves_a_transaction_open_stops_dispatch_before_the_send(self):
        sent = []

        def before_send(event_id):
            if event_id == "b":
                self.con.execute("BEGIN IMMEDIATE")  # and never commits

        with self.assertRaises(ValueError) as caught:
            dispatch(self.con, self.send_proving_no_lock(sent), before_send=before_send)
        self.assertIn("'b' was not sent", str(caught.exception))
        self.assertEqual(sent, ["a"])
        self.con.execute("ROLLBACK")
        self.assertEqual(dict(self.con.execute("SELECT event_id, sent FROM outbox")), {"a": 1, "b": 0, "c": 0})

    def test_an_after_delivery_that_leaves_a_transaction_open_gets_nothing_more_sent(self):
        sent = []
        opened = []

        def after_delivery(event):
            if not opened:
                opened.append(event["id"])
                self.con.execute("BEGIN")  # a read transaction left open, then mark_sent cannot begin its own

        with self.assertRaises(sqlite3.OperationalError):
            dispatch(self.con, self.send_proving_no_lock(sent), after_delivery=after_delivery)
        self.assertEqual(sent, ["a"])
        self.con.execute("ROLLBACK")
        self.assertEqual(pending(self.con)[0]["id"], "a")  # acknowledged, not marked: sent again, a duplicate

    def test_every_mark_commits_with_the_synchronous_setting_of_entry_whatever_a_hook_set(self):
        entry = self.con.execute("PRAGMA synchronous").fetchone()[0]
        self.assertEqual(entry, 2)  # FULL: what init_store's db.open_db set
        settings = []  # the synchronous setting as each mark_sent's UPDATE runs

        def lower(*_):
            self.con.execute("PRAGMA synchronous = OFF")

        def trace(statement):
            if statement.startswith("PRAGMA synchronous = "):
                settings.append(statement)
            elif statement.startswith("UPDATE outbox SET sent = 1"):
                settings.append("mark")

        self.con.set_trace_callback(trace)
        try:
            self.assertEqual(dispatch(self.con, lambda e: lower() or True, before_send=lower, after_delivery=lower), 3)
        finally:
            self.con.set_trace_callback(None)
        marks = [i for i, item in enumerate(settings) if item == "mark"]
        self.assertEqual(len(marks), 3, settings)
        for i in marks:
            self.assertEqual(settings[i - 1], "PRAGMA synchronous = %d" % entry, settings)
        self.assertEqual(self.con.execute("PRAGMA synchronous").fetchone()[0], entry)


if __name__ == "__main__":
    unittest.main()
