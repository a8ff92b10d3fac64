"""The source DB: orders, their outbox rows, and the operator's records about them.

The only module with the source DB's SQL. It writes in a few named places,
each one visible transaction: `intake`, `intake_many`, `mark_sent`, the
attempt records, `quarantine`, `requeue`, `retry` and `purge_sent_batch`. It
never sends anything, and the only rows it ever deletes are sent outbox rows
an operator purges; the operator's history (quarantines, retries) is kept
in tables of its own that nothing deletes.
"""
import json
import sqlite3
import time

from . import db, failures
from .errors import Conflict, InvalidEvent, OutboxError
from .event import canonical, validate_and_serialise, validate_event

APPLICATION_ID = 0x4F424F58  # "OBOX": tells a source DB from a sink DB or any other file
SCHEMA_VERSION = 3
MAX_BATCH = 16
MAX_ERROR_CHARS = 500
UPGRADE_COMMAND = "python -m outbox upgrade --db %s"

# The record of schema 1, as release 1 created it: the upgrade starts from it,
# and the tests build old files with it.
SCHEMA_V1 = (
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

# Schema 1 -> 2, run by db.upgrade_in_place in ONE transaction. Nothing is
# dropped but the index, which is rebuilt at once with the quarantine excluded.
UPGRADE_1_TO_2 = (
    # Attempt records (written by dispatch) and the quarantine state. `sent`
    # keeps its meaning, 0 or 1: a quarantined row is not sent.
    "ALTER TABLE outbox ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE outbox ADD COLUMN last_attempt_at REAL",
    "ALTER TABLE outbox ADD COLUMN last_error TEXT",
    "ALTER TABLE outbox ADD COLUMN quarantined_at REAL",
    "ALTER TABLE outbox ADD COLUMN quarantine_reason TEXT",
    # One row per quarantine, never deleted: why, when, where the item stood,
    # and, once requeued, the seq it got at the tail (the reordering).
    """CREATE TABLE quarantines (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        reason TEXT NOT NULL,
        quarantined_at REAL NOT NULL,
        attempts INTEGER NOT NULL,
        last_error TEXT,
        requeued_at REAL,
        new_seq INTEGER,
        corrected_payload TEXT
    )""",
    # The seqs marked sent while a quarantined item was out of line ahead of
    # them: the reordering the quarantine caused. Never deleted.
    """CREATE TABLE quarantine_overtaken (
        quarantine_id INTEGER NOT NULL REFERENCES quarantines(id),
        seq INTEGER NOT NULL,
        event_id TEXT NOT NULL,
        PRIMARY KEY (quarantine_id, seq)
    )""",
    "DROP INDEX outbox_pending",
    # Holds only the pending line (unsent, not quarantined), so `pending` costs
    # the same with a million sent rows as with ten. Queries must repeat this
    # WHERE literally (`sent = 0 AND quarantined_at IS NULL`) to use it.
    "CREATE INDEX outbox_pending ON outbox(seq) WHERE sent = 0 AND quarantined_at IS NULL",
)

# Schema 2 -> 3, run by db.upgrade_in_place in ONE transaction (after 1 -> 2
# for a schema-1 file). Only additions: every row and column is kept as it was.
UPGRADE_2_TO_3 = (
    # The kind of the last failure (outbox.failures.KINDS), and how many
    # failures since intake, requeue or retry were permanent: the relay's
    # alert counts these, never an outage. An upgraded row starts from 0, so
    # the relay tries it again before it can alert.
    "ALTER TABLE outbox ADD COLUMN last_error_kind TEXT",
    "ALTER TABLE outbox ADD COLUMN permanent_failures INTEGER NOT NULL DEFAULT 0",
    # What a corrected requeue replaced (corrected_payload is what replaced it).
    "ALTER TABLE quarantines ADD COLUMN original_payload TEXT",
    # One row per `retry`: the attempt record it reset. Never deleted.
    """CREATE TABLE retries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        retried_at REAL NOT NULL,
        attempts INTEGER NOT NULL,
        permanent_failures INTEGER NOT NULL,
        last_error TEXT,
        last_error_kind TEXT
    )""",
    # `evidence` reads an id's whole history; requeue updates its open record.
    "CREATE INDEX quarantines_event ON quarantines(event_id)",
    "CREATE INDEX retries_event ON retries(event_id)",
)

UPGRADES = {1: UPGRADE_1_TO_2, 2: UPGRADE_2_TO_3}
SCHEMA = SCHEMA_V1 + UPGRADE_1_TO_2 + UPGRADE_2_TO_3

# The pending line: ordered by seq and nothing else (seq is intake order, or
# the tail for a requeued item). The WHERE repeats the partial index's own,
# term for term, so SQLite reads only that index, never the sent rows.
PENDING_SQL = "SELECT payload FROM outbox WHERE sent = 0 AND quarantined_at IS NULL ORDER BY seq LIMIT ?"


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
    db.check_durability(durability)  # before the upgrade below can touch the file
    db.upgrade_in_place(path, application_id=APPLICATION_ID, version=SCHEMA_VERSION, upgrades=UPGRADES, kind="source")
    return db.open_db(
        path, application_id=APPLICATION_ID, version=SCHEMA_VERSION, schema=SCHEMA, kind="source", durability=durability
    )


def open_store_readonly(path):
    """Open an existing source DB only to read it (see db.open_readonly); never creates a file.

    A source DB of an earlier schema is refused with the command that upgrades it.
    """
    db.refuse_other_version_readonly(path, application_id=APPLICATION_ID, version=SCHEMA_VERSION, kind="source",
                             command=UPGRADE_COMMAND)
    return db.open_readonly(path, application_id=APPLICATION_ID, version=SCHEMA_VERSION, kind="source")


def schema_version(con):
    """The schema version stamped in the source DB (its user_version). Read-only."""
    return con.execute("PRAGMA user_version").fetchone()[0]


def intake(con, event):
    """Take in an order: the order row and its unsent outbox row, in ONE transaction.

    Returns the outbox seq. Either both rows are written or neither is. The same
    id with an identical event returns the existing seq and writes nothing; the
    same id with a different event raises Conflict. Invalid events raise
    InvalidEvent before the DB is touched.
    """
    event, payload = validate_and_serialise(event)
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
            return _seq_of_repeat(con, event["id"], payload)
        cur = con.execute(
            "INSERT INTO outbox (event_id, payload, sent, created_at) VALUES (?, ?, 0, ?)",
            (event["id"], payload, now),
        )
        return cur.lastrowid


def _seq_of_repeat(con, event_id, payload):
    """The seq of an order taken in before, if it is the same event; else Conflict. Inside the caller's transaction.

    `payload` is the canonical JSON of the event taken in again: equal to the
    stored one means a repeat (nothing is written), anything else a Conflict.
    An order whose outbox row was purged after it was sent is a Conflict too:
    its id is spent, and a new order needs a new id.
    """
    row = con.execute("SELECT seq, payload FROM outbox WHERE event_id = ?", (event_id,)).fetchone()
    if row is None:
        raise Conflict("order %r was taken in and sent before, and its outbox row purged; a new order needs a new id"
                       % (event_id,))
    if row[1] != payload:
        raise Conflict("order %r was taken in before with payload %s; refusing %s" % (event_id, row[1], payload))
    return row[0]


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
    An unknown id raises KeyError. Call it only after a verified ACK. In the
    same transaction, the row is recorded as having overtaken every open
    quarantine with a lower seq (the reordering a quarantine causes).
    """
    with db.transaction(con):
        cur = con.execute(
            "UPDATE outbox SET sent = 1, sent_at = ? WHERE event_id = ? AND sent = 0",
            (time.time(), event_id),
        )
        if cur.rowcount == 1:
            # Cheap: open quarantines are few, and each is looked up by its own row.
            con.execute(
                "INSERT INTO quarantine_overtaken (quarantine_id, seq, event_id) "
                "SELECT q.id, o.seq, o.event_id FROM quarantines AS q JOIN outbox AS o ON o.event_id = ? "
                "WHERE q.requeued_at IS NULL AND q.seq < o.seq",
                (event_id,),
            )
            return True
        if con.execute("SELECT 1 FROM outbox WHERE event_id = ?", (event_id,)).fetchone() is None:
            raise KeyError("no outbox row for event id %r" % (event_id,))
        return False


def record_attempt(con, event_id):
    """Count one delivery attempt of `event_id` (attempts + 1, last_attempt_at), committed at once.

    A bookkeeping transaction (db.bookkeeping): it decides nothing, so it is
    committed without an fsync of its own. Called before `send`, never during.
    """
    with db.bookkeeping(con):
        con.execute(
            "UPDATE outbox SET attempts = attempts + 1, last_attempt_at = ? WHERE event_id = ?",
            (time.time(), event_id),
        )


def record_failure(con, event_id, error):
    """Keep why the last attempt of `event_id` failed: its kind, and one line of at most MAX_ERROR_CHARS characters.

    The kind is outbox.failures.kind_of(error); a permanent one (the sink
    refused this item) also adds one to `permanent_failures`, the count the
    relay's alert reads. A bookkeeping transaction, like record_attempt.
    """
    text = " ".join(("%s: %s" % (type(error).__name__, error)).split())
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 3] + "..."
    kind = failures.kind_of(error)
    with db.bookkeeping(con):
        con.execute(
            "UPDATE outbox SET last_error = ?, last_error_kind = ?, permanent_failures = permanent_failures + ? "
            "WHERE event_id = ?",
            (text, kind, 1 if failures.is_permanent(kind) else 0, event_id),
        )


def quarantine(con, event_id, reason):
    """Take a pending item out of the pending line, in one transaction; return its quarantine record id.

    The row keeps its seq, payload and attempts and stays unsent. A quarantine
    record keeps the reason, the time, the seq, the attempts and the last error.
    `reason` is one line of 1 to MAX_ERROR_CHARS characters, else ValueError. A
    sent, unknown or already quarantined id raises OutboxError; nothing changes.
    """
    reason = check_reason(reason)
    with db.transaction(con):
        row = _row_to_change(con, event_id, "quarantine")
        if row["quarantined_at"] is not None:
            raise OutboxError("%r is already quarantined (since %s): %s" % (event_id, _utc(row["quarantined_at"]),
                                                                             row["quarantine_reason"]))
        now = time.time()
        con.execute("UPDATE outbox SET quarantined_at = ?, quarantine_reason = ? WHERE event_id = ?",
                    (now, reason, event_id))
        cur = con.execute(
            "INSERT INTO quarantines (event_id, seq, reason, quarantined_at, attempts, last_error) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (event_id, row["seq"], reason, now, row["attempts"], row["last_error"]),
        )
        return cur.lastrowid


def requeue(con, event_id, event=None):
    """Put a quarantined item back in the pending line, at the tail, in one transaction; return its new seq.

    The new seq is greater than any seq ever used (taken from sqlite_sequence,
    which is bumped with it), because `pending` is ordered by seq only; the old
    and new seq go into the quarantine record. Its attempt record starts again
    from nothing (the quarantine record keeps the old one). With `event`, the
    item is corrected first: it must be valid (else InvalidEvent) and carry the
    same id, and the order row and the payload are corrected in the same
    transaction; the quarantine record keeps the original and the corrected
    payload. A sent, unknown or not quarantined id raises OutboxError; nothing changes.
    """
    payload = None
    if event is not None:
        event = validate_event(event)
        if event["id"] != event_id:
            raise OutboxError("the corrected event must keep the id %r, got %r" % (event_id, event["id"]))
        payload = canonical(event)
    with db.transaction(con):
        row = _row_to_change(con, event_id, "requeue")
        if row["quarantined_at"] is None:
            raise OutboxError("%r is pending and not quarantined; requeue takes back only a quarantined item"
                              % (event_id,))
        last = con.execute("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'").fetchone()[0]
        new_seq = last + 1
        con.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'outbox'", (new_seq,))
        con.execute(
            "UPDATE outbox SET seq = ?, quarantined_at = NULL, quarantine_reason = NULL, attempts = 0, "
            "last_attempt_at = NULL, last_error = NULL, last_error_kind = NULL, permanent_failures = 0 "
            "WHERE event_id = ?",
            (new_seq, event_id),
        )
        if payload is not None:
            con.execute("UPDATE outbox SET payload = ? WHERE event_id = ?", (payload, event_id))
            con.execute("UPDATE orders SET sku = ?, qty = ? WHERE id = ?", (event["sku"], event["qty"], event_id))
        con.execute(
            "UPDATE quarantines SET requeued_at = ?, new_seq = ?, corrected_payload = ?, original_payload = ? "
            "WHERE event_id = ? AND requeued_at IS NULL",
            (time.time(), new_seq, payload, None if payload is None else row["payload"], event_id),
        )
        return new_seq


def retry(con, event_id):
    """Reset the attempt record of a pending item, in one transaction; return the record it reset.

    For an item the sink refused until the relay alerted, once the cause is
    fixed: its attempts, permanent failures and last error start again from
    nothing, so the relay tries it again, in its place (the seq is kept; no
    reordering). A retry record keeps the reset attempt record; the return is
    that record as a dict (attempts, permanent_failures, last_error,
    last_error_kind). A sent, unknown or quarantined id (requeue takes that
    back) raises OutboxError; nothing changes.
    """
    with db.transaction(con):
        row = _row_to_change(con, event_id, "retry")
        if row["quarantined_at"] is not None:
            raise OutboxError("%r is quarantined (since %s); requeue puts it back in the pending line"
                              % (event_id, _utc(row["quarantined_at"])))
        con.execute(
            "INSERT INTO retries (event_id, seq, retried_at, attempts, permanent_failures, last_error, "
            "last_error_kind) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (event_id, row["seq"], time.time(), row["attempts"], row["permanent_failures"], row["last_error"],
             row["last_error_kind"]),
        )
        con.execute(
            "UPDATE outbox SET attempts = 0, permanent_failures = 0, last_attempt_at = NULL, last_error = NULL, "
            "last_error_kind = NULL WHERE event_id = ?",
            (event_id,),
        )
    return {key: row[key] for key in ("attempts", "permanent_failures", "last_error", "last_error_kind")}


def purge_sent_batch(con, sent_before, batch):
    """Delete at most `batch` outbox rows sent before the time `sent_before`, in one short transaction.

    Only rows with ``sent = 1`` and a `sent_at` at or before `sent_before`,
    never a pending or quarantined row, never an order row. Returns how many it deleted.
    """
    with db.transaction(con):
        cur = con.execute(
            "DELETE FROM outbox WHERE seq IN (SELECT seq FROM outbox WHERE sent = 1 AND quarantined_at IS NULL "
            "AND sent_at <= ? ORDER BY seq LIMIT ?)",
            (sent_before, batch),
        )
        return cur.rowcount


def figures(con):
    """What an operator watches, as a dict (see the README, "Operating it"). Read-only.

    pending, sent, quarantined (counts); oldest_pending_age_s (seconds since
    the intake of the oldest pending item, or None); head (None, or the first
    pending item: see `head`); max_attempts_pending (0 when nothing is pending).
    """
    count, oldest, most = con.execute(
        "SELECT count(*), min(created_at), coalesce(max(attempts), 0) FROM outbox "
        "WHERE sent = 0 AND quarantined_at IS NULL"
    ).fetchone()
    sent = con.execute("SELECT count(*) FROM outbox WHERE sent = 1").fetchone()[0]
    quarantined = con.execute(
        "SELECT count(*) FROM outbox WHERE sent = 0 AND quarantined_at IS NOT NULL").fetchone()[0]
    return {
        "pending": count,
        "sent": sent,
        "quarantined": quarantined,
        "oldest_pending_age_s": None if oldest is None else round(max(0.0, time.time() - oldest), 3),
        "head": head(con),
        "max_attempts_pending": most,
    }


def head(con):
    """The first item of the pending line, or None. Read-only.

    A dict: id, seq, attempts, permanent_failures (the count the relay's alert
    reads), last_error, last_error_kind (outbox.failures.KINDS, or None).
    """
    row = con.execute(
        "SELECT event_id, seq, attempts, permanent_failures, last_error, last_error_kind FROM outbox "
        "WHERE sent = 0 AND quarantined_at IS NULL ORDER BY seq LIMIT 1"
    ).fetchone()
    if row is None:
        return None
    return dict(zip(("id", "seq", "attempts", "permanent_failures", "last_error", "last_error_kind"), row))


def quarantined(con):
    """Every item out of the pending line, in seq order, as dicts. Read-only.

    id, seq, reason, quarantined_at (Unix seconds), attempts,
    permanent_failures, last_error, last_error_kind: the row as it stands.
    """
    keys = ("id", "seq", "reason", "quarantined_at", "attempts", "permanent_failures", "last_error",
            "last_error_kind")
    return [dict(zip(keys, row)) for row in con.execute(
        "SELECT event_id, seq, quarantine_reason, quarantined_at, attempts, permanent_failures, last_error, "
        "last_error_kind FROM outbox WHERE sent = 0 AND quarantined_at IS NOT NULL ORDER BY seq")]


def observe(con, event_id):
    """The source's observations of `event_id`: (order row dict or None, outbox row dict or None, history).

    The outbox dict has seq, payload, state ("pending", "sent" or
    "quarantined"), the attempt record (attempts, permanent_failures,
    last_attempt_at, last_error, last_error_kind) and quarantine (the latest
    quarantine record or None). `history` does not depend on the outbox row,
    so a purge leaves it whole: {"quarantines": every quarantine record, oldest
    first, each with the seqs that overtook it; "retries": every retry record}.
    Read-only.
    """
    order = con.execute("SELECT id, sku, qty, created_at FROM orders WHERE id = ?", (event_id,)).fetchone()
    if order is not None:
        order = dict(zip(("id", "sku", "qty", "created_at"), order))
    keys = ("id", "seq", "reason", "quarantined_at", "attempts", "last_error", "requeued_at", "new_seq",
            "original_payload", "corrected_payload")
    records = [dict(zip(keys, record)) for record in con.execute(
        "SELECT id, seq, reason, quarantined_at, attempts, last_error, requeued_at, new_seq, original_payload, "
        "corrected_payload FROM quarantines WHERE event_id = ? ORDER BY id",
        (event_id,),
    )]
    for record in records:
        record["overtaken_by"] = [seq for (seq,) in con.execute(
            "SELECT seq FROM quarantine_overtaken WHERE quarantine_id = ? ORDER BY seq", (record["id"],))]
    keys = ("id", "seq", "retried_at", "attempts", "permanent_failures", "last_error", "last_error_kind")
    retries = [dict(zip(keys, record)) for record in con.execute(
        "SELECT id, seq, retried_at, attempts, permanent_failures, last_error, last_error_kind FROM retries "
        "WHERE event_id = ? ORDER BY id",
        (event_id,),
    )]
    row = _outbox_row(con, event_id)
    if row is not None:
        row["state"] = "sent" if row["sent"] else "pending" if row["quarantined_at"] is None else "quarantined"
        row["quarantine"] = records[-1] if records else None
    return order, row, {"quarantines": records, "retries": retries}


_ROW_KEYS = ("seq", "event_id", "payload", "sent", "attempts", "permanent_failures", "last_attempt_at", "last_error",
             "last_error_kind", "quarantined_at", "quarantine_reason")


def _outbox_row(con, event_id):
    row = con.execute(
        "SELECT seq, event_id, payload, sent, attempts, permanent_failures, last_attempt_at, last_error, "
        "last_error_kind, quarantined_at, quarantine_reason FROM outbox WHERE event_id = ?",
        (event_id,),
    ).fetchone()
    return None if row is None else dict(zip(_ROW_KEYS, row))


def _row_to_change(con, event_id, verb):
    row = _outbox_row(con, event_id)
    if row is None:
        raise OutboxError("cannot %s %r: no outbox row with that id" % (verb, event_id))
    if row["sent"]:
        raise OutboxError("cannot %s %r: it is sent (a verified ACK was recorded)" % (verb, event_id))
    return row


def check_reason(reason):
    """`reason` stripped, if it is one line of 1 to MAX_ERROR_CHARS characters; else ValueError naming the rule."""
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_ERROR_CHARS or "\n" in reason \
            or "\r" in reason:
        raise ValueError("reason must be one line of 1 to %d characters, got %r" % (MAX_ERROR_CHARS, reason))
    return reason.strip()


def _utc(timestamp):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


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
        # id up, with `intake`'s rules; a new batch never pays for the lookups.
        with db.transaction(con):
            seqs = {}
            for event_id, (event, payload) in batch.items():
                if con.execute("SELECT 1 FROM orders WHERE id = ?", (event_id,)).fetchone() is not None:
                    seqs[event_id] = _seq_of_repeat(con, event_id, payload)
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
