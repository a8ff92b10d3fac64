"""The source DB: orders and their outbox rows.

The only module with the source DB's SQL. It writes in exactly three places,
`intake`, `intake_many` and `mark_sent`, each one visible transaction. It
never sends anything and never deletes a row.
"""
import json
import sqlite3
import time

from . import db
from .errors import Conflict, InvalidEvent
from .event import validate_and_serialise, validate_event

APPLICATION_ID = 0x4F424F58  # "OBOX": tells a source DB from a sink DB or any other file
SCHEMA_VERSION = 1
MAX_BATCH = 16

SCHEMA = (
    """CREATE TABLE orders (
        id TEXT PRIMARY KEY,
        sku TEXT NOT NULL,
        qty INTEGER NOT NULL,
        created_at REAL NOT NULL
    )""",
    # AUTOINCREMENT: seq is never reused, even after the highest row is gone,
    # so seq order is intake order for the life of the file.
    """CREATE TABLE outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL UNIQUE REFERENCES orders(id),
        payload TEXT NOT NULL,
        sent INTEGER NOT NULL DEFAULT 0 CHECK (sent IN (0, 1)),
        created_at REAL NOT NULL,
        sent_at REAL
    )""",
    # Holds only unsent rows, so `pending` costs the same with a million sent
    # rows as with ten. Queries must say `sent = 0` literally to use it.
    "CREATE INDEX outbox_pending ON outbox(seq) WHERE sent = 0",
)

PENDING_SQL = "SELECT payload FROM outbox WHERE sent = 0 ORDER BY seq LIMIT ?"


def init_store(path, durability="full"):
    """Open or create the source DB at `path`; return a connection.

    Tables `orders` and `outbox` (seq, event_id, payload, sent, ...). The
    connection is in explicit-transaction mode, WAL, synchronous=FULL, with a
    busy timeout; `durability="process"` gives synchronous=NORMAL instead (a
    commit survives a killed process, not a power cut; see db.DURABILITY), and
    any other value raises ValueError before the file is touched. A file that
    is not a source DB of this kit (a sink DB included) raises WrongDatabase
    and is left unchanged.
    """
    return db.open_db(
        path, application_id=APPLICATION_ID, version=SCHEMA_VERSION, schema=SCHEMA, kind="source", durability=durability
    )


def open_store_readonly(path):
    """Open an existing source DB only to read it (see db.open_readonly); never creates a file."""
    return db.open_readonly(path, application_id=APPLICATION_ID, version=SCHEMA_VERSION, kind="source")


def intake(con, event):
    """Take in an order: the order row and its unsent outbox row, in ONE transaction.

    Returns the outbox seq. Either both rows are written or neither is. The same
    id with an identical event returns the existing seq and writes nothing; the
    same id with a different event raises Conflict. Invalid events raise
    InvalidEvent before the DB is touched.
    """
    event, payload = validate_and_serialise(event)
    with db.transaction(con):
        row = con.execute("SELECT seq, payload FROM outbox WHERE event_id = ?", (event["id"],)).fetchone()
        if row is not None:
            if row[1] != payload:
                raise Conflict("order %r was taken in before with payload %s; refusing %s" % (event["id"], row[1], payload))
            return row[0]
        now = time.time()
        con.execute(
            "INSERT INTO orders (id, sku, qty, created_at) VALUES (?, ?, ?, ?)",
            (event["id"], event["sku"], event["qty"], now),
        )
        cur = con.execute(
            "INSERT INTO outbox (event_id, payload, sent, created_at) VALUES (?, ?, 0, ?)",
            (event["id"], payload, now),
        )
        return cur.lastrowid


def pending(con, limit=MAX_BATCH):
    """The first `limit` unsent events, oldest intake first, as new dicts (id, sku, qty).

    Ordered by seq and nothing else: not by id, not by any clock. `limit` is an
    int from 1 to 16 (not a bool), else ValueError. Read-only: it writes no
    row and leaves no transaction open (all rows are fetched before it returns).
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BATCH:
        raise ValueError("limit must be an int from 1 to %d, got %r (%s)" % (MAX_BATCH, limit, type(limit).__name__))
    rows = con.execute(PENDING_SQL, (limit,)).fetchall()
    # validate_event gives each dict the key order id, sku, qty and refuses a damaged row loudly.
    return [validate_event(json.loads(payload)) for (payload,) in rows]


def mark_sent(con, event_id):
    """Mark exactly that outbox row sent, in its own committed transaction.

    Returns True if this call changed the row, False if it was already sent.
    An unknown id raises KeyError. Call it only after a verified ACK.
    """
    with db.transaction(con):
        cur = con.execute(
            "UPDATE outbox SET sent = 1, sent_at = ? WHERE event_id = ? AND sent = 0",
            (time.time(), event_id),
        )
        if cur.rowcount == 1:
            return True
        if con.execute("SELECT 1 FROM outbox WHERE event_id = ?", (event_id,)).fetchone() is None:
            raise KeyError("no outbox row for event id %r" % (event_id,))
        return False


def status(con):
    """(pending count, sent count, oldest pending as (event_id, created_at) or None). Read-only."""
    counts = dict(con.execute("SELECT sent, count(*) FROM outbox GROUP BY sent").fetchall())
    oldest = con.execute("SELECT event_id, created_at FROM outbox WHERE sent = 0 ORDER BY seq LIMIT 1").fetchone()
    return counts.get(0, 0), counts.get(1, 0), oldest


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
            event, payload = validate_and_serialise(event)
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
            seqs = _insert_new(con, list(batch.values()))
    except sqlite3.IntegrityError:
        # An id of the batch was taken in before (orders.id is the primary key),
        # so that transaction rolled back and wrote nothing. This one looks each
        # id up first, as `intake` does; a new batch never pays for the lookups.
        with db.transaction(con):
            seqs = {}
            for event_id, (event, payload) in batch.items():
                row = con.execute("SELECT seq, payload FROM outbox WHERE event_id = ?", (event_id,)).fetchone()
                if row is not None:
                    if payload != row[1]:
                        raise Conflict(
                            "order %r was taken in before with payload %s; refusing %s" % (event_id, row[1], payload)
                        )
                    seqs[event_id] = row[0]
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
    top = con.execute("SELECT coalesce(max(seq), 0) FROM outbox").fetchone()[0]
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
