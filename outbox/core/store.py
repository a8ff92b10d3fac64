"""The source DB's guarantee: orders taken in with their outbox rows, the pending line, and marking sent.

The kernel's SQL, and nothing else: `intake` writes the order and outbox
rows (outbox.batch takes many in one transaction, by the same rules), `pending` reads the line in seq order, `mark_sent`
sets one row's sent flag; each write is one visible transaction. It never
sends, deletes or reorders anything. The operator's records (attempts,
quarantines, retries, purges) are written by outbox.ops.attempts and
outbox.ops.operations, in the columns marked so below and in outbox.core.history.
"""
import json
import sqlite3
import time

from . import db, history, upgrade
from .errors import Conflict
from .event import validate_and_serialise, validate_event

APPLICATION_ID = 0x4F424F58  # "OBOX": tells a source DB from a sink DB or any other file
SCHEMA_VERSION = 3  # outbox.core.upgrade brings files of versions 1 and 2 up to it
MAX_BATCH = 16

# The orders and outbox tables; a new file gets them and the operator's
# history tables (outbox.core.history), and outbox.core.upgrade brings an older file to
# the same tables, columns and indexes.
TABLES = (
    """CREATE TABLE orders (
        id TEXT PRIMARY KEY,
        sku TEXT NOT NULL,
        qty INTEGER NOT NULL,
        created_at REAL NOT NULL
    )""",
    # AUTOINCREMENT: a seq is never reused, even after the row with the highest  # audit: G11
    # one is gone. Each intake gets a seq above every seq the file ever held,
    # so seq order is intake order, but for `requeue` (outbox.ops.operations): it
    # moves a quarantined item to the tail, with a new seq above all of them.
    # The columns from `attempts` on are the operator's (outbox.ops.attempts and
    # outbox.ops.operations); the kernel reads only quarantined_at, which leaves an
    # item out of the line. `sent` is 0 or 1: a quarantined row is not sent.
    """CREATE TABLE outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL UNIQUE REFERENCES orders(id),
        payload TEXT NOT NULL,
        sent INTEGER NOT NULL DEFAULT 0 CHECK (sent IN (0, 1)),
        created_at REAL NOT NULL,
        sent_at REAL,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_attempt_at REAL,
        last_error TEXT,
        quarantined_at REAL,
        quarantine_reason TEXT,
        last_error_kind TEXT,
        permanent_failures INTEGER NOT NULL DEFAULT 0
    )""",
    # Holds only the pending line (unsent, not quarantined), so `pending` costs
    # the same with a million sent rows as with ten. Queries must repeat this
    # WHERE literally (`sent = 0 AND quarantined_at IS NULL`) to use it.
    "CREATE INDEX outbox_pending ON outbox(seq) WHERE sent = 0 AND quarantined_at IS NULL",  # audit: G10
)
SCHEMA = TABLES + history.TABLES

# The pending line: ordered by seq and nothing else, never an id or a clock.  # audit: G8, G10
# The WHERE repeats the partial index's own, term for term, so SQLite reads
# only that index, never the sent rows.
PENDING_SQL = "SELECT payload FROM outbox WHERE sent = 0 AND quarantined_at IS NULL ORDER BY seq LIMIT ?"


def init_store(path, durability="full"):
    """Open or create the source DB at `path`; return a connection.

    Tables `orders` and `outbox` (seq, event_id, payload, sent, ...). The
    connection is in explicit-transaction mode, WAL, synchronous=FULL, with a
    busy timeout; `durability="process"` gives synchronous=NORMAL instead (a
    commit survives a killed process, not a power cut; see db.DURABILITY), and
    any other value raises ValueError before the file is touched. A source DB
    of an earlier schema is upgraded in place first, in one transaction (see
    outbox.core.upgrade); one of a newer schema, or a file that is not a source DB
    of this kit (a sink DB included), raises WrongDatabase and is left unchanged.
    """
    db.check_durability(durability)  # before the upgrade below can touch the file
    upgrade.upgrade_in_place(path, application_id=APPLICATION_ID, version=SCHEMA_VERSION,
                             upgrades=upgrade.SOURCE_STEPS, kind="source")
    return db.open_db(  # audit: G2
        path, application_id=APPLICATION_ID, version=SCHEMA_VERSION, schema=SCHEMA, kind="source", durability=durability
    )


def intake(con, event):
    """Take in an order: the order row and its unsent outbox row, in ONE transaction.

    Returns the outbox seq. Either both rows are written or neither is. The same
    id with an identical event returns the existing seq and writes nothing; the
    same id with a different event raises Conflict. Invalid events raise
    InvalidEvent before the DB is touched.
    """
    event, payload = validate_and_serialise(event)  # audit: G5
    with db.transaction(con):
        now = time.time()
        try:
            con.execute(
                "INSERT INTO orders (id, sku, qty, created_at) VALUES (?, ?, ?, ?)",
                (event["id"], event["sku"], event["qty"], now),
            )
        except sqlite3.IntegrityError:
            # orders.id is the primary key: this id was taken in before. The
            # failed INSERT wrote nothing and the transaction goes on; looking
            # it up only now spares every new order (the common case) a SELECT.
            return seq_of_repeat(con, event["id"], payload)  # audit: G6
        cur = con.execute(
            "INSERT INTO outbox (event_id, payload, sent, created_at) VALUES (?, ?, 0, ?)",
            (event["id"], payload, now),
        )
        return cur.lastrowid  # audit: G5


def seq_of_repeat(con, event_id, payload):
    """The seq of an order taken in before, if it is the same event; else Conflict. Inside the caller's transaction.

    `intake`'s rule for a repeat, which outbox.batch.intake_many applies to each event too.

    `payload` is the canonical JSON of the event taken in again: equal to the
    stored one means a repeat (nothing is written), anything else a Conflict.
    An order whose outbox row was purged after it was sent is a Conflict too:
    its id is spent, and a new order needs a new id.
    """
    row = con.execute("SELECT seq, payload FROM outbox WHERE event_id = ?", (event_id,)).fetchone()
    if row is None:  # audit: G6
        raise Conflict("order %r was taken in and sent before, and its outbox row purged; a new order needs a new id"
                       % (event_id,))
    if row[1] != payload:  # audit: G6
        raise Conflict("order %r was taken in before with payload %s; refusing %s" % (event_id, row[1], payload))
    return row[0]


def pending(con, limit=MAX_BATCH):
    """The first `limit` unsent events, lowest seq first, as new dicts (id, sku, qty).

    Ordered by seq and nothing else: not by id, not by any clock. Quarantined
    items are out of the line. `limit` is an int from 1 to 16 (not a bool),
    else ValueError. Read-only: it writes no row and leaves no transaction open
    (all rows are fetched before it returns).
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BATCH:  # audit: G8
        raise ValueError("limit must be an int from 1 to %d, got %r (%s)" % (MAX_BATCH, limit, type(limit).__name__))
    rows = con.execute(PENDING_SQL, (limit,)).fetchall()  # audit: G9
    # validate_event gives each dict the key order id, sku, qty and refuses a damaged row loudly.  # audit: G8
    return [validate_event(json.loads(payload)) for (payload,) in rows]


def mark_sent(con, event_id):
    """Mark exactly that outbox row sent (sent = 1, sent_at = now), in its own committed transaction.

    Returns True if this call changed the row, False if it was already sent.
    An unknown id raises KeyError. It writes nothing else. Call it only after
    a verified ACK (dispatch does).
    """
    with db.transaction(con):
        cur = con.execute(
            "UPDATE outbox SET sent = 1, sent_at = ? WHERE event_id = ? AND sent = 0",  # audit: G12
            (time.time(), event_id),
        )
        if cur.rowcount == 1:
            return True
        if con.execute("SELECT 1 FROM outbox WHERE event_id = ?", (event_id,)).fetchone() is None:
            raise KeyError("no outbox row for event id %r" % (event_id,))  # audit: G12
        return False
