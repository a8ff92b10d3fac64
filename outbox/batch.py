"""Many orders taken in at once: `intake_many`, one transaction for the batch, `intake`'s rules for each event.

Built on the kernel (outbox.core): the event rules, db.transaction and
store.seq_of_repeat, the rule for an id taken in before. Outside the kernel
folder because the batching (one validation pass, executemany, a second try
with lookups) is a faster door to the same rows, not a guarantee of its
own beyond "all or nothing" (G7). It never sends or marks anything.
"""
import sqlite3
import time

from .core import db, store
from .core.errors import Conflict, InvalidEvent
from .core.event import validate_and_serialise


def intake_many(con, events):
    """Take in a batch of orders in ONE transaction: all of them or none.

    Returns the outbox seqs in input order. Every event is validated before the
    DB is touched; the first invalid one raises InvalidEvent naming its index
    and field, and nothing is written. Each event follows `intake`'s rules: an
    id already taken in with an identical event gets its existing seq and
    writes nothing; with a different event it raises Conflict, and nothing of
    the batch is written. A repeat within the batch is the same: identical,
    the same seq; different, Conflict.
    """
    ids = []
    batch = {}  # id -> (event, payload) of its first appearance; dicts keep input order
    for index, event in enumerate(events):
        try:
            event, payload = validate_and_serialise(event)  # audit: G7
        except InvalidEvent as exc:
            raise InvalidEvent("event %d: %s" % (index, exc)) from None
        first = batch.setdefault(event["id"], (event, payload))
        if first[1] != payload:
            raise Conflict(
                "order %r appears twice in the batch, as %s and as %s (event %d)"
                % (event["id"], first[1], payload, index)
            )
        ids.append(event["id"])
    try:
        with db.transaction(con):
            seqs = _insert_new(con, list(batch.values()))  # audit: G7
    except sqlite3.IntegrityError:
        # An id of the batch was taken in before (orders.id is the primary key),
        # so that transaction rolled back and wrote nothing. This one looks each
        # id up, with `intake`'s rules; a new batch never pays for the lookups.
        with db.transaction(con):
            seqs = {}
            for event_id, (event, payload) in batch.items():
                if con.execute("SELECT 1 FROM orders WHERE id = ?", (event_id,)).fetchone() is not None:
                    seqs[event_id] = store.seq_of_repeat(con, event_id, payload)
            seqs.update(_insert_new(con, [batch[event_id] for event_id in batch if event_id not in seqs]))
    return [seqs[event_id] for event_id in ids]


def _insert_new(con, new):
    """Write the order and outbox rows of `new`, a list of (event, payload); return {id: seq}.

    Runs inside the caller's transaction. An id that is already taken in raises
    sqlite3.IntegrityError (orders.id is the primary key).
    """
    if not new:
        return {}
    # AUTOINCREMENT gives every new row a seq above any the table ever had, and
    # the caller's BEGIN IMMEDIATE keeps other writers out: the rows above the
    # current top are exactly these.
    top = con.execute("SELECT coalesce(max(seq), 0) FROM outbox").fetchone()[0]  # audit: G7
    now = time.time()
    con.executemany(
        "INSERT INTO orders (id, sku, qty, created_at) VALUES (?, ?, ?, ?)",
        [(event["id"], event["sku"], event["qty"], now) for event, _ in new],
    )
    con.executemany(
        "INSERT INTO outbox (event_id, payload, sent, created_at) VALUES (?, ?, 0, ?)",
        [(event["id"], payload, now) for event, payload in new],
    )
    return dict(con.execute("SELECT event_id, seq FROM outbox WHERE seq > ?", (top,)))
