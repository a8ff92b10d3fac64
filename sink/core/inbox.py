"""The sink DB: the inbox of applied event ids, the inventory, the deliveries log.

The sink DB's schema and its one writer, `receive`: one visible transaction
per event. It never speaks HTTP and never deletes a row. Every read of the
DB (the ACK's digest, show, status, /metrics) is sink.views, which writes nothing.
"""

import time

from outbox.core import db
from outbox.core.errors import Conflict
from outbox.core.event import payload_digest, validate_and_serialise

APPLICATION_ID = 0x53494E4B  # "SINK": tells a sink DB from a source DB or any other file
SCHEMA_VERSION = 1

APPLIED = "applied"
DUPLICATE = "duplicate"
CONFLICT = "conflict"

SCHEMA = (
    # One row per event id ever applied; its digest is what a later copy is compared with.  # audit: G23
    """CREATE TABLE inbox (
        event_id TEXT PRIMARY KEY,
        digest TEXT NOT NULL,
        payload TEXT NOT NULL,
        applied_at REAL NOT NULL
    )""",
    """CREATE TABLE inventory (
        sku TEXT PRIMARY KEY,
        qty INTEGER NOT NULL CHECK (qty >= 0)
    )""",
    # One row per valid event that reached `receive`, whatever the outcome.
    # AUTOINCREMENT: seq is never reused, so seq order is arrival order.
    """CREATE TABLE deliveries (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome IN ('applied', 'duplicate', 'conflict')),
        digest TEXT NOT NULL,
        received_at REAL NOT NULL
    )""",
)


def init_sink(path, durability="full"):
    """Open or create the sink DB at `path`; return a connection.

    Tables `inbox` (event_id, digest, payload, applied_at), `inventory` (sku,
    qty) and `deliveries` (seq, event_id, outcome, digest, received_at). The
    connection is in explicit-transaction mode, WAL, synchronous=FULL, with a
    busy timeout; `durability="process"` gives synchronous=NORMAL instead (a
    receipt survives a killed process, not a power cut; see
    outbox.core.db.DURABILITY), and any other value raises ValueError before the
    file is touched. A file that is not a sink DB of this kit (a source DB
    included) raises WrongDatabase and is left unchanged.
    """
    return db.open_db(
        path, application_id=APPLICATION_ID, version=SCHEMA_VERSION, schema=SCHEMA, kind="sink", durability=durability
    )


def receive(con, event):
    """Apply `event` at most once; return "applied" or "duplicate", or raise Conflict.

    An invalid event raises InvalidEvent before the DB is touched. Otherwise,
    in ONE transaction: a new id gets its inbox row, its qty added to the
    sku's inventory and an `applied` delivery; a known id with an identical
    event (same digest) gets only a `duplicate` delivery; a known id with a
    different event gets only a `conflict` delivery, which is committed
    before Conflict is raised. A failure inside leaves no trace at all.
    """
    event, payload = validate_and_serialise(event)  # the rules checked once, not three times  # audit: G23
    event_digest = payload_digest(payload)
    with db.transaction(con):
        row = con.execute("SELECT digest, payload FROM inbox WHERE event_id = ?", (event["id"],)).fetchone()
        now = time.time()
        if row is None:
            outcome = APPLIED  # audit: G23
            con.execute(
                "INSERT INTO inbox (event_id, digest, payload, applied_at) VALUES (?, ?, ?, ?)",
                (event["id"], event_digest, payload, now),
            )
            # UPDATE then INSERT instead of an upsert, so any SQLite 3 will do:
            # BEGIN IMMEDIATE holds the write lock, no one can add the sku in between.
            cur = con.execute("UPDATE inventory SET qty = qty + ? WHERE sku = ?", (event["qty"], event["sku"]))
            if cur.rowcount == 0:
                con.execute("INSERT INTO inventory (sku, qty) VALUES (?, ?)", (event["sku"], event["qty"]))
        elif row[0] == event_digest:
            outcome = DUPLICATE  # audit: G23
        else:
            outcome = CONFLICT
        con.execute(
            "INSERT INTO deliveries (event_id, outcome, digest, received_at) VALUES (?, ?, ?, ?)",
            (event["id"], outcome, event_digest, now),
        )
    # Raised only now, after COMMIT: the conflict is on record before anyone hears of it.
    if outcome == CONFLICT:  # audit: G24
        raise Conflict("event %r was applied before with payload %s; refusing %s" % (event["id"], row[1], payload))
    return outcome
