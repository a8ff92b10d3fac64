"""Several processes receive the same event ids at the same moment: still one application each.

Each racer is a separate interpreter with its own SQLite connection (or its
own HTTP connections, to two sink servers sharing one DB). They meet at a
barrier every round: each prints "ready" and blocks on its stdin until the
parent has heard from all of them and writes one line to each. Then they all
deliver the same ids in the same order, one racer sending another payload
for some ids. Checked against the files afterwards: exactly one `applied` per
id, every other answer `duplicate` (same payload as the applied one) or
`conflict` (another payload), never a 5xx or an IntegrityError, and the
inventory equal to the sum of the applied events. A copy of the kit with the
dedup lookup moved before BEGIN IMMEDIATE (check-then-act) must fail it.
"""

import collections
import json
import os
import sqlite3
import subprocess
import time

from tests.support import DEADLINE, PYTHON, ROOT, Child, TempDirTestCase, copy_packages, python_env

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
    from outbox.errors import Conflict
    from sink import inbox
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
    path = os.path.join(root, "sink", "inbox.py")
    with open(path) as f:
        text = f.read()
    if text.count(old) != 1:
        raise AssertionError("the mutant's anchor no longer occurs exactly once in sink/inbox.py")
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
