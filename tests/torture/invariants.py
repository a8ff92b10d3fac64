"""The invariants of a torture run, checked against the two DB files alone.

Owns what "never gone, applied exactly once" means, after a crash and after
recovery. It only reads, through read-only connections, one snapshot per
DB (the source first: a row can become sent only after it was applied). It
never starts a process and never repairs anything.
"""
import collections
import json
import os
import sqlite3
import urllib.parse

Observed = collections.namedtuple("Observed", "violations deliveries")


def _open_readonly(path):
    uri = "file:%s?mode=ro" % urllib.parse.quote(os.path.abspath(path))
    con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=10.0)
    con.execute("PRAGMA query_only = ON")
    return con


def read_source(path):
    """{event_id: (event, sent)} from outbox, the set of order ids, and integrity_check."""
    con = _open_readonly(path)
    try:
        con.execute("BEGIN")  # one snapshot for every read below
        outbox = {
            event_id: (json.loads(payload), sent)
            for event_id, payload, sent in con.execute("SELECT event_id, payload, sent FROM outbox")
        }
        orders = {row[0] for row in con.execute("SELECT id FROM orders")}
        integrity = [row[0] for row in con.execute("PRAGMA integrity_check")]
        con.execute("COMMIT")
    finally:
        con.close()
    return outbox, orders, integrity


def read_sink(path):
    """{event_id: event} from inbox, {sku: qty}, {(event_id, outcome): count}, integrity_check."""
    con = _open_readonly(path)
    try:
        con.execute("BEGIN")
        inbox = {event_id: json.loads(payload) for event_id, payload in con.execute("SELECT event_id, payload FROM inbox")}
        inventory = dict(con.execute("SELECT sku, qty FROM inventory"))
        deliveries = {
            (event_id, outcome): count
            for event_id, outcome, count in con.execute(
                "SELECT event_id, outcome, count(*) FROM deliveries GROUP BY event_id, outcome"
            )
        }
        integrity = [row[0] for row in con.execute("PRAGMA integrity_check")]
        con.execute("COMMIT")
    finally:
        con.close()
    return inbox, inventory, deliveries, integrity


def check(source_path, sink_path, taken_in, *, hits, recovered):
    """Observed(violations, deliveries per event id) for the files as they are now.

    `taken_in`: the events whose intake returned; `hits`: {event_id: crashes
    that hit it}; `recovered`: True once a fresh publisher ran until nothing
    was pending, so every event must be sent and applied. An empty list of
    violations means every invariant held.
    """
    violations = []
    taken = {event["id"]: event for event in taken_in}
    outbox, orders, source_integrity = read_source(source_path)
    if os.path.exists(sink_path):
        inbox, inventory, deliveries, sink_integrity = read_sink(sink_path)
    else:
        inbox, inventory, deliveries, sink_integrity = {}, {}, {}, ["ok"]
        if recovered:
            violations.append("no sink DB after recovery")

    for event_id, event in sorted(taken.items()):
        if event_id not in outbox:
            violations.append("%s was taken in but its outbox row is gone" % event_id)
        elif outbox[event_id][0] != event:
            violations.append("%s outbox payload is %s, taken in as %s" % (event_id, outbox[event_id][0], event))
        if event_id not in orders:
            violations.append("%s was taken in but its order row is gone" % event_id)
    for event_id in sorted((set(outbox) | orders) - set(taken)):
        violations.append("%s has an order or outbox row but its intake never returned" % event_id)
    for event_id, (_, sent) in sorted(outbox.items()):
        if sent and event_id not in inbox:
            violations.append("%s is marked sent but the sink never applied it" % event_id)
        if recovered and not sent:
            violations.append("%s is still pending after recovery" % event_id)

    for event_id, event in sorted(inbox.items()):
        if event_id not in taken:
            violations.append("%s was applied but never taken in" % event_id)
        elif event != taken[event_id]:
            violations.append("%s was applied as %s, taken in as %s" % (event_id, event, taken[event_id]))
    per_event = collections.Counter()
    for (event_id, outcome), count in deliveries.items():
        per_event[event_id] += count
        if outcome == "conflict":
            violations.append("%s has %d conflict deliveries" % (event_id, count))
    for event_id in sorted(set(per_event) | set(taken)):
        applied = deliveries.get((event_id, "applied"), 0)
        expected = 1 if (event_id in inbox or recovered) else 0
        if applied != expected:
            violations.append("%s was applied %d times, expected %d" % (event_id, applied, expected))
        allowed = 1 + hits.get(event_id, 0)
        if per_event[event_id] > allowed:
            violations.append("%s has %d deliveries, at most %d allowed (1 + crashes that hit it)"
                              % (event_id, per_event[event_id], allowed))

    expected_inventory = collections.Counter()
    for event in inbox.values():
        expected_inventory[event["sku"]] += event["qty"]
    if inventory != dict(expected_inventory):
        violations.append("inventory %s is not the sum of distinct applied events %s"
                          % (sorted(inventory.items()), sorted(expected_inventory.items())))
    for name, integrity in (("source", source_integrity), ("sink", sink_integrity)):
        if integrity != ["ok"]:
            violations.append("integrity_check of the %s DB: %s" % (name, "; ".join(integrity)[:200]))
    return Observed(violations, per_event)


def state(source_path, sink_path, event_id):
    """(applied, sent) of one event, or "absent" when it has neither an order nor an outbox row."""
    outbox, orders, _ = read_source(source_path)
    if event_id not in outbox and event_id not in orders:
        return "absent"
    inbox = read_sink(sink_path)[0] if os.path.exists(sink_path) else {}
    return (event_id in inbox, bool(event_id in outbox and outbox[event_id][1]))


def attempts(source_path, event_id):
    """The `attempts` column of one outbox row (on a checkout that has it)."""
    con = _open_readonly(source_path)
    try:
        return con.execute("SELECT attempts FROM outbox WHERE event_id = ?", (event_id,)).fetchone()[0]
    finally:
        con.close()
