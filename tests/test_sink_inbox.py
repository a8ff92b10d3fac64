"""sink.core.inbox: applied / duplicate / conflict, the rows each writes, atomicity, refusing foreign files, races.

RaceTest: several processes receive the same event ids at the same moment,
still one application each. Each racer is a separate interpreter with its
own SQLite connection (or its own HTTP connections, to two sink servers
sharing one DB). They meet at a barrier every round: each prints "ready"
and blocks on its stdin until the parent has heard from all of them and
writes one line to each. Then they all deliver the same ids in the same
order, one racer sending another payload for some ids. Checked against the
files afterwards: exactly one `applied` per id, every other answer
`duplicate` (same payload as the applied one) or `conflict` (another
payload), never a 5xx or an IntegrityError, and the inventory equal to the
sum of the applied events. A copy of the kit with the dedup lookup moved
before BEGIN IMMEDIATE (check-then-act) must fail it;
DuplicateBetweenLookupAndWriteTest catches the same mutant in process.
"""
import collections
import json
import os
import sqlite3
import subprocess
import threading
import time
import unittest

import outbox.core.errors
from outbox.core import store
from outbox.core.event import canonical, digest
from sink import Conflict, InvalidEvent, WrongDatabase, init_sink, receive, views
from sink.core import inbox
from tests.support import DEADLINE, PYTHON, ROOT, Child, TempDirTestCase, copy_packages, ev, python_env


def snapshot(con):
    """Every row of the three sink tables, for before/after comparisons."""
    return {
        "inbox": con.execute("SELECT * FROM inbox ORDER BY event_id").fetchall(),
        "inventory": con.execute("SELECT * FROM inventory ORDER BY sku").fetchall(),
        "deliveries": con.execute("SELECT * FROM deliveries ORDER BY seq").fetchall(),
    }


class StoreTestCase(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.db_path = self.path("sink.db")
        self.con = init_sink(self.db_path)
        self.addCleanup(self.con.close)

    def outcomes(self):
        return [row[0] for row in self.con.execute("SELECT outcome FROM deliveries ORDER BY seq")]

    def stock(self):
        return dict(self.con.execute("SELECT sku, qty FROM inventory"))


class ReceiveTest(StoreTestCase):
    def test_new_event_is_applied_with_its_inbox_row_inventory_and_delivery(self):
        event = {"id": "e1", "sku": "apple", "qty": 3}
        self.assertEqual(receive(self.con, event), "applied")
        self.assertEqual(
            self.con.execute("SELECT event_id, digest, payload FROM inbox").fetchall(),
            [("e1", digest(event), canonical(event))],
        )
        self.assertEqual(self.stock(), {"apple": 3})
        rows = self.con.execute("SELECT event_id, outcome, digest, received_at FROM deliveries").fetchall()
        self.assertEqual([r[:3] for r in rows], [("e1", "applied", digest(event))])
        self.assertIsInstance(rows[0][3], float)
        self.assertFalse(self.con.in_transaction)

    def test_identical_copy_is_a_duplicate_and_only_logged(self):
        receive(self.con, {"id": "e1", "sku": "apple", "qty": 3})
        inbox_before = self.con.execute("SELECT * FROM inbox").fetchall()
        # Key order does not matter: the digest is of the canonical form.
        self.assertEqual(receive(self.con, {"qty": 3, "sku": "apple", "id": "e1"}), "duplicate")
        self.assertEqual(self.con.execute("SELECT * FROM inbox").fetchall(), inbox_before)
        self.assertEqual(self.stock(), {"apple": 3})
        self.assertEqual(self.outcomes(), ["applied", "duplicate"])

    def test_different_payload_is_a_committed_conflict_and_changes_nothing_else(self):
        receive(self.con, {"id": "e1", "sku": "apple", "qty": 3})
        inbox_before = self.con.execute("SELECT * FROM inbox").fetchall()
        with self.assertRaises(Conflict) as caught:
            receive(self.con, {"id": "e1", "sku": "apple", "qty": 4})
        self.assertIs(Conflict, outbox.core.errors.Conflict)
        self.assertIn("e1", str(caught.exception))
        self.assertFalse(self.con.in_transaction)
        self.assertEqual(self.con.execute("SELECT * FROM inbox").fetchall(), inbox_before)
        self.assertEqual(self.stock(), {"apple": 3})
        self.assertEqual(self.outcomes(), ["applied", "conflict"])
        conflict_digest = self.con.execute("SELECT digest FROM deliveries WHERE outcome = 'conflict'").fetchone()[0]
        self.assertEqual(conflict_digest, digest({"id": "e1", "sku": "apple", "qty": 4}))
        # Committed: a second connection sees the conflict row.
        other = sqlite3.connect(self.db_path)
        self.addCleanup(other.close)
        self.assertEqual(other.execute("SELECT count(*) FROM deliveries WHERE outcome = 'conflict'").fetchone()[0], 1)

    def test_inventory_sums_per_sku_across_events(self):
        for event_id, sku, qty in (("e1", "apple", 2), ("e2", "pear", 3), ("e3", "apple", 5), ("e4", "pear", 1)):
            self.assertEqual(receive(self.con, {"id": event_id, "sku": sku, "qty": qty}), "applied")
        receive(self.con, {"id": "e3", "sku": "apple", "qty": 5})
        self.assertEqual(self.stock(), {"apple": 7, "pear": 4})
        self.assertEqual(self.con.execute("SELECT count(*) FROM inbox").fetchone()[0], 4)
        self.assertEqual(self.outcomes(), ["applied"] * 4 + ["duplicate"])

    def test_invalid_event_raises_naming_the_field_and_writes_nothing(self):
        receive(self.con, {"id": "e1", "sku": "apple", "qty": 3})
        before = snapshot(self.con)
        cases = [
            ({"id": "e2", "sku": "apple", "qty": 0}, "qty"),
            ({"id": "e2", "sku": "apple", "qty": True}, "qty"),
            ({"id": "e2", "sku": "apple", "qty": 1.0}, "qty"),
            ({"id": "", "sku": "apple", "qty": 1}, "id"),
            ({"id": "e2", "sku": "a b", "qty": 1}, "sku"),
            ({"id": "e2", "sku": "apple"}, "qty"),
            ({"id": "e2", "sku": "apple", "qty": 1, "note": "x"}, "note"),
            (["e2", "apple", 1], "dict"),
            # The same id as an applied event: refused as invalid, not logged as a conflict.
            ({"id": "e1", "sku": "apple", "qty": -3}, "qty"),
        ]
        for event, field in cases:
            with self.subTest(event=event):
                with self.assertRaises(InvalidEvent) as caught:
                    receive(self.con, event)
                self.assertIn(field, str(caught.exception))
                self.assertFalse(self.con.in_transaction)
        self.assertEqual(snapshot(self.con), before)

    def test_argument_is_not_modified(self):
        event = {"id": "e1", "sku": "apple", "qty": 3}
        receive(self.con, event)
        self.assertEqual(event, {"id": "e1", "sku": "apple", "qty": 3})


class AtomicityTest(StoreTestCase):
    """A failure at the last statement of receive's transaction leaves nothing behind."""

    def force_failure(self, table, operation):
        # TEMP: lives only on this connection, leaves the file's schema alone.
        self.con.execute(
            "CREATE TEMP TRIGGER forced_failure BEFORE %s ON %s BEGIN SELECT RAISE(ABORT, 'forced'); END"
            % (operation, table)
        )
        self.addCleanup(self.con.execute, "DROP TRIGGER IF EXISTS temp.forced_failure")

    def assert_fails_and_changes_nothing(self, event):
        before = snapshot(self.con)
        with self.assertRaises(sqlite3.DatabaseError) as caught:
            receive(self.con, event)
        self.assertIn("forced", str(caught.exception))
        self.assertFalse(self.con.in_transaction)
        self.assertEqual(snapshot(self.con), before)

    def test_failure_logging_a_new_event_rolls_back_inbox_and_inventory(self):
        receive(self.con, {"id": "e0", "sku": "apple", "qty": 1})
        self.force_failure("deliveries", "INSERT")
        self.assert_fails_and_changes_nothing({"id": "e1", "sku": "apple", "qty": 3})
        self.assert_fails_and_changes_nothing({"id": "e2", "sku": "pear", "qty": 3})

    def test_failure_updating_inventory_rolls_back_the_inbox_row(self):
        receive(self.con, {"id": "e0", "sku": "apple", "qty": 1})
        self.force_failure("inventory", "UPDATE")
        self.assert_fails_and_changes_nothing({"id": "e1", "sku": "apple", "qty": 3})

    def test_failure_logging_a_duplicate_or_conflict_writes_no_row(self):
        receive(self.con, {"id": "e1", "sku": "apple", "qty": 3})
        self.force_failure("deliveries", "INSERT")
        self.assert_fails_and_changes_nothing({"id": "e1", "sku": "apple", "qty": 3})
        self.assert_fails_and_changes_nothing({"id": "e1", "sku": "apple", "qty": 4})

    def test_connection_is_usable_after_a_failure(self):
        self.force_failure("deliveries", "INSERT")
        self.assert_fails_and_changes_nothing({"id": "e1", "sku": "apple", "qty": 3})
        self.con.execute("DROP TRIGGER temp.forced_failure")
        self.assertEqual(receive(self.con, {"id": "e1", "sku": "apple", "qty": 3}), "applied")
        self.assertEqual(self.stock(), {"apple": 3})


class InitSinkTest(TempDirTestCase):
    def test_connection_settings(self):
        con = init_sink(self.path("sink.db"))
        self.addCleanup(con.close)
        self.assertIsNone(con.isolation_level)
        self.assertEqual(con.execute("PRAGMA journal_mode").fetchone()[0], "wal")
        self.assertEqual(con.execute("PRAGMA synchronous").fetchone()[0], 2)  # FULL
        self.assertGreater(con.execute("PRAGMA busy_timeout").fetchone()[0], 0)
        self.assertEqual(con.execute("PRAGMA user_version").fetchone()[0], inbox.SCHEMA_VERSION)
        self.assertEqual(con.execute("PRAGMA application_id").fetchone()[0], inbox.APPLICATION_ID)
        tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        self.assertLessEqual({"inbox", "inventory", "deliveries"}, tables)

    def test_reopening_keeps_everything(self):
        path = self.path("sink.db")
        con = init_sink(path)
        receive(con, {"id": "e1", "sku": "apple", "qty": 3})
        before = snapshot(con)
        con.close()
        con = init_sink(path)
        self.addCleanup(con.close)
        self.assertEqual(snapshot(con), before)
        self.assertEqual(receive(con, {"id": "e1", "sku": "apple", "qty": 3}), "duplicate")

    def assert_refused_unchanged(self, path):
        with open(path, "rb") as f:
            before = f.read()
        with self.assertRaises(WrongDatabase):
            init_sink(path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_refuses_a_source_db_unchanged(self):
        path = self.path("source.db")
        con = store.init_store(path)
        store.intake(con, {"id": "o1", "sku": "apple", "qty": 3})
        con.close()
        self.assert_refused_unchanged(path)
        con = store.init_store(path)  # still a working source DB
        self.addCleanup(con.close)
        self.assertEqual(store.pending(con), [{"id": "o1", "sku": "apple", "qty": 3}])

    def test_refuses_a_garbage_file_unchanged(self):
        path = self.path("garbage.db")
        with open(path, "wb") as f:
            f.write(b"this is not a database, it is a shopping list\n" * 100)
        self.assert_refused_unchanged(path)

    def test_refuses_a_foreign_sqlite_db_unchanged(self):
        path = self.path("other.db")
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE inventory (sku TEXT, qty INTEGER)")
        con.commit()
        con.close()
        self.assert_refused_unchanged(path)


RACE_WAIT = 1.0  # seconds A's lookup lets B try; a correct receive keeps B waiting on A's write lock


class DuplicateBetweenLookupAndWriteTest(TempDirTestCase):
    """Mutant: receive looks the id up before its write transaction (check, then act)."""

    def test_a_second_connection_waits_for_the_first_and_gets_a_duplicate(self):
        path = self.path("sink.db")
        con_a = init_sink(path)
        self.addCleanup(con_a.close)
        event = ev("snack-7", qty=7)
        results = {}
        fired = []

        def receive_b():
            con_b = init_sink(path)  # a connection of B's own, in B's thread
            try:
                results["b"] = receive(con_b, event)
            except Exception as exc:  # reported by the assertions below
                results["b"] = exc
            finally:
                con_b.close()

        other = threading.Thread(target=receive_b, daemon=True)

        def at_lookup(statement):
            # A is at its dedup lookup: B delivers the same event now, from another connection.
            if not fired and statement.lstrip().upper().startswith("SELECT") and "FROM inbox" in statement:
                fired.append(statement)
                other.start()
                other.join(RACE_WAIT)  # a correct receive holds the write lock here: B cannot finish
                results["b finished during A's lookup"] = not other.is_alive()

        con_a.set_trace_callback(at_lookup)
        try:
            results["a"] = receive(con_a, event)
        except Exception as exc:
            results["a"] = exc
        finally:
            con_a.set_trace_callback(None)
        self.assertTrue(fired, "receive never looked the id up in inbox")
        other.join(DEADLINE)
        self.assertFalse(other.is_alive(), "B never finished")
        self.assertEqual(results, {"a": "applied", "b": "duplicate", "b finished during A's lookup": False})
        self.assertEqual(views.inventory(con_a), [("snack", 7)])
        self.assertEqual([row[2] for row in views.deliveries(con_a)], ["applied", "duplicate"])


RACERS = 4


ROUNDS = 12


IDS_PER_ROUND = 8


RACE_BOUND = 30.0  # seconds for a whole race; it takes ~2 s on the 2-core CI machine


# One racer. argv: mode ("direct" or "http"), sink DB or comma-separated URLs, racer index.
RACER = r"""
import http.client, json, sys
mode, where, me = sys.argv[1], sys.argv[2], int(sys.argv[3])
rounds, per_round = int(sys.argv[4]), int(sys.argv[5])

def event(r, k):
    qty = 1 + k
    if me == 0 and k % 4 == 0:
        qty += 1000  # racer 0 sends another payload for every fourth id
    return {"id": "r%d-k%d" % (r, k), "sku": "s%d" % (k % 3), "qty": qty}

if mode == "direct":
    from outbox.core.errors import Conflict
    from sink.core import inbox
    con = inbox.init_sink(where)

    def deliver(ev):
        try:
            return inbox.receive(con, ev)
        except Conflict:
            return "conflict"
else:
    host, port = where.split(",")[me % 2].rsplit(":", 1)

    def deliver(ev):
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            conn.request("POST", "/events", body=json.dumps(ev), headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            answer = json.loads(response.read().decode("ascii"))
        finally:
            conn.close()
        if response.status == 409:
            return "conflict"
        if response.status != 200:
            return "status %d: %s" % (response.status, answer)
        return answer["result"]

results = []
for r in range(rounds):
    print("ready", flush=True)
    if sys.stdin.readline() != "go\n":
        sys.exit(3)
    for k in range(per_round):
        ev = event(r, k)
        try:
            outcome = deliver(ev)
        except Exception as exc:
            outcome = "error %s: %s" % (type(exc).__name__, exc)
        results.append([ev["id"], ev["sku"], ev["qty"], outcome])
print(json.dumps(results), flush=True)
"""


# The mutant: the dedup lookup before BEGIN IMMEDIATE, so two racers can both see "new".
CHECK_THEN_ACT = (
    '    with db.transaction(con):\n'
    '        row = con.execute("SELECT digest, payload FROM inbox WHERE event_id = ?", (event["id"],)).fetchone()\n',
    '    row = con.execute("SELECT digest, payload FROM inbox WHERE event_id = ?", (event["id"],)).fetchone()\n'
    '    with db.transaction(con):\n',
)


def racer(root, args):
    """One racer process (tests.support.Child); it reads "go" on its stdin at each barrier."""
    # `python -c` puts the working directory first on sys.path: the racer imports root's kit.
    return Child([str(a) for a in args], root, program=RACER, env=python_env(PYTHONPATH=root), stdin=subprocess.PIPE)


def make_mutant(root, old, new):
    copy_packages(root, ("outbox", "sink"))
    path = os.path.join(root, "sink", "core", "inbox.py")
    with open(path) as f:
        text = f.read()
    if text.count(old) != 1:
        raise AssertionError("the mutant's anchor no longer occurs exactly once in sink/core/inbox.py")
    with open(path, "w") as f:
        f.write(text.replace(old, new))


def violations(db_path, results):
    """Every broken rule, as text; [] when the race kept the contract."""
    found = []
    by_id = collections.defaultdict(list)
    for event_id, sku, qty, outcome in results:
        by_id[event_id].append((sku, qty, outcome))
    expected_stock = collections.Counter()
    for event_id, answers in sorted(by_id.items()):
        applied = [(sku, qty) for sku, qty, outcome in answers if outcome == "applied"]
        if len(applied) != 1:
            found.append("%s: %d applied, not 1: %r" % (event_id, len(applied), answers))
            continue
        expected_stock[applied[0][0]] += applied[0][1]
        for sku, qty, outcome in answers:
            if outcome == "applied":
                continue
            want = "duplicate" if (sku, qty) == applied[0] else "conflict"
            if outcome != want:
                found.append("%s: %s for %r, not %s" % (event_id, outcome, (sku, qty), want))
    con = sqlite3.connect(db_path)
    try:
        stock = dict(con.execute("SELECT sku, qty FROM inventory").fetchall())
        inbox_rows = con.execute("SELECT count(*) FROM inbox").fetchone()[0]
    finally:
        con.close()
    if stock != dict(expected_stock):
        found.append("inventory %r, but the applied events sum to %r" % (stock, dict(expected_stock)))
    if inbox_rows != len(by_id):
        found.append("%d inbox rows for %d ids" % (inbox_rows, len(by_id)))
    return found


class RaceTest(TempDirTestCase):
    def race(self, root, mode, where):
        """Run RACERS racers for ROUNDS rounds; return every (id, sku, qty, outcome) they saw."""
        racers = [racer(root, [mode, where, i, ROUNDS, IDS_PER_ROUND]) for i in range(RACERS)]
        for child in racers:
            self.addCleanup(child.close)
        deadline = time.monotonic() + RACE_BOUND
        left = lambda: max(0.1, deadline - time.monotonic())
        for _ in range(ROUNDS):
            for child in racers:
                self.assertEqual(child.line(left()), "ready\n")
            for child in racers:  # the barrier opens: all of them are blocked on this line
                child.proc.stdin.write("go\n")
                child.proc.stdin.flush()
        results = []
        for child in racers:
            results.extend(json.loads(child.line(left())))
            self.assertEqual(child.proc.wait(left()), 0, child.stderr_so_far())
        self.assertEqual(len(results), RACERS * ROUNDS * IDS_PER_ROUND)
        return results

    def init_sink(self, root, db_path):
        subprocess.run(
            [PYTHON, "-c", "import sys; from sink import init_sink; init_sink(sys.argv[1]).close()", db_path],
            cwd=root,
            env=python_env(PYTHONPATH=root),
            check=True,
            timeout=DEADLINE,
        )

    def direct(self, root):
        db_path = self.path("direct-%s.db" % os.path.basename(root))
        self.init_sink(root, db_path)
        return db_path, self.race(root, "direct", db_path)

    def through_http(self, root):
        db_path = self.path("http-%s.db" % os.path.basename(root))
        self.init_sink(root, db_path)
        urls = []
        for _ in range(2):  # two sink processes on one DB: the store, not the server, must serialise
            child = Child(["serve", "--db", db_path, "--port", "0"], self.tmp)
            self.addCleanup(child.close)
            urls.append("127.0.0.1:%d" % child.port())
        return db_path, self.race(root, "http", ",".join(urls))

    def test_direct_receive_from_several_processes_applies_each_id_once(self):
        db_path, results = self.direct(ROOT)
        self.assertEqual(violations(db_path, results), [])

    def test_receive_through_two_sink_servers_applies_each_id_once(self):
        db_path, results = self.through_http(ROOT)
        self.assertEqual(violations(db_path, results), [])
        self.assertFalse([r for r in results if r[3].startswith(("status", "error"))])

    def test_check_then_act_mutant_is_caught(self):
        mutant = self.path("mutant")
        make_mutant(mutant, *CHECK_THEN_ACT)
        db_path, results = self.direct(mutant)
        found = violations(db_path, results) + [r[3] for r in results if r[3].startswith("error")]
        self.assertTrue(found, "the race did not catch a dedup lookup outside the transaction")
        self.assertTrue(any("IntegrityError" in line for line in found), found[:5])


if __name__ == "__main__":
    unittest.main()
