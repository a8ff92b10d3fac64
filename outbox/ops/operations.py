"""The operator's side of the source DB: quarantine, requeue, retry, purge, and what an operator reads.

Owns the SQL of the operator's commands. It writes in four named places,
each one visible transaction: `quarantine`, `requeue`, `retry` and
`purge_sent_batch`. It never marks a row sent and never sends. The only rows
it deletes are sent outbox rows an operator purges; the operator's history
(quarantines, their overtakers, retries) lives in tables that nothing deletes.
"""
import time

from ..core import db, readonly, store, upgrade
from ..export import timestamps
from ..core.errors import OutboxError
from ..core.event import canonical, validate_event

MAX_REASON_CHARS = 500
OVERTAKERS_SHOWN = 10  # ids a listing shows of what overtook one quarantine; the count is always whole
UPGRADE_COMMAND = "python -m outbox upgrade --db %s"


def open_store_readonly(path):
    """Open an existing source DB only to read it (see readonly.open_readonly); never creates a file.

    A source DB of another schema is refused unchanged: an older one with the
    command that upgrades it.
    """
    upgrade.refuse_other_version_readonly(path, application_id=store.APPLICATION_ID, version=store.SCHEMA_VERSION,
                                          kind="source", command=UPGRADE_COMMAND)
    return readonly.open_readonly(path, application_id=store.APPLICATION_ID, version=store.SCHEMA_VERSION,
                                  kind="source")


def check_reason(reason):
    """`reason` stripped, if it is one line of 1 to MAX_REASON_CHARS characters; else ValueError naming the rule."""
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON_CHARS or "\n" in reason \
            or "\r" in reason:
        raise ValueError("reason must be one line of 1 to %d characters, got %r" % (MAX_REASON_CHARS, reason))
    return reason.strip()


def quarantine(con, event_id, reason):
    """Take a pending item out of the pending line, in one transaction; return its quarantine record id.

    The row keeps its seq, payload and attempts and stays unsent. A quarantine
    record keeps the reason, the time, the seq, the attempts and the last error.
    `reason` is one line of 1 to MAX_REASON_CHARS characters, else ValueError. A
    sent, unknown or already quarantined id raises OutboxError; nothing changes.
    """
    reason = check_reason(reason)
    with db.transaction(con):
        row = _row_to_change(con, event_id, "quarantine")
        if row["quarantined_at"] is not None:
            raise OutboxError("%r is already quarantined (since %s): %s" % (
                event_id, timestamps.utc(row["quarantined_at"]), row["quarantine_reason"]))
        now = time.time()
        con.execute("UPDATE outbox SET quarantined_at = ?, quarantine_reason = ? WHERE event_id = ?",  # audit: G43
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
    and new seq go into the quarantine record, and so do the seqs that
    overtook it (see `overtaken_by`), now that it is back in line. Its attempt
    record starts again from nothing (the quarantine record keeps the old one).
    With `event`, the item is corrected first: it must be valid (else
    InvalidEvent) and carry the same id, and the order row and the payload are
    corrected in the same transaction; the quarantine record keeps the
    original and the corrected payload. A sent, unknown or not quarantined id
    raises OutboxError; nothing changes.
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
        # Before the seq moves: the overtakers are the sent rows above the old one.
        con.execute(
            "INSERT OR IGNORE INTO quarantine_overtaken (quarantine_id, seq, event_id) "
            "SELECT q.id, o.seq, o.event_id FROM quarantines AS q JOIN outbox AS o ON o.sent = 1 AND o.seq > q.seq "
            "WHERE q.event_id = ? AND q.requeued_at IS NULL",
            (event_id,),
        )
        last = con.execute("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'").fetchone()[0]
        new_seq = last + 1  # audit: G11, G44
        con.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'outbox'", (new_seq,))
        con.execute(
            "UPDATE outbox SET seq = ?, quarantined_at = NULL, quarantine_reason = NULL, attempts = 0, "
            "last_attempt_at = NULL, last_error = NULL, last_error_kind = NULL, permanent_failures = 0 "
            "WHERE event_id = ?",
            (new_seq, event_id),
        )
        if payload is not None:  # audit: G44
            con.execute("UPDATE outbox SET payload = ? WHERE event_id = ?", (payload, event_id))
            con.execute("UPDATE orders SET sku = ?, qty = ? WHERE id = ?", (event["sku"], event["qty"], event_id))
        con.execute(
            "UPDATE quarantines SET requeued_at = ?, new_seq = ?, corrected_payload = ?, original_payload = ? "
            "WHERE event_id = ? AND requeued_at IS NULL",
            (time.time(), new_seq, payload, None if payload is None else row["payload"], event_id),
        )
        return new_seq


def retry(con, event_id, force=False):
    """Reset the attempt record of a pending item, in one transaction; return the record it reset.

    For an item the sink refused until the relay alerted, once the cause is
    fixed: its attempts, permanent failures and last error start again from
    nothing, so the relay tries it again, in its place (the seq is kept; no
    reordering). A retry record keeps the reset attempt record; the return is
    that record as a dict (attempts, permanent_failures, last_error,
    last_error_kind). A sent, unknown or quarantined id (requeue takes that
    back) raises OutboxError; nothing changes. So does an item the sink last
    refused as a conflict, unless `force`: the sink holds another payload
    for that id, and the same payload sent again gets the same 409 (the
    alert would clear until the relay met it again, nothing fixed).
    """
    with db.transaction(con):
        row = _row_to_change(con, event_id, "retry")
        if row["quarantined_at"] is not None:
            raise OutboxError("%r is quarantined (since %s); requeue puts it back in the pending line"
                              % (event_id, timestamps.utc(row["quarantined_at"])))
        if row["last_error_kind"] == "conflict" and not force:
            raise OutboxError(
                "%r was last refused as a conflict: the sink holds another payload for this id, and a retry sends "
                "the same one again (another 409); decide which payload is true (evidence --sink), then requeue "
                "it with --event set to the sink's, or retry --force once the sink's row is corrected" % event_id)
        con.execute(
            "INSERT INTO retries (event_id, seq, retried_at, attempts, permanent_failures, last_error, "  # audit: G45
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
    lowest seq first; never a pending or quarantined row, never an order row.
    A deleted row that overtook an open quarantine is written into that
    quarantine's record first (see `overtaken_by`), so the history outlives
    the row. Returns how many it deleted.
    """
    with db.transaction(con):
        # The same subquery in both statements: inside one transaction, the same rows.
        con.execute(
            "INSERT OR IGNORE INTO quarantine_overtaken (quarantine_id, seq, event_id) "  # audit: G43
            "SELECT q.id, o.seq, o.event_id FROM quarantines AS q JOIN outbox AS o ON o.seq > q.seq "
            "WHERE q.requeued_at IS NULL AND o.seq IN (SELECT seq FROM outbox WHERE sent = 1 "
            "AND quarantined_at IS NULL AND sent_at <= ? ORDER BY seq LIMIT ?)",
            (sent_before, batch),
        )
        cur = con.execute(  # audit: G46
            "DELETE FROM outbox WHERE seq IN (SELECT seq FROM outbox WHERE sent = 1 AND quarantined_at IS NULL "
            "AND sent_at <= ? ORDER BY seq LIMIT ?)",
            (sent_before, batch),
        )
        return cur.rowcount


def overtakers(con, record):
    """What overtook the quarantine `record` (a dict: id, seq, requeued_at): (seq, id) pairs, lowest first. Read-only.

    They are the rows with a seq above the quarantined one that were marked
    sent while it was out of line: the reordering the quarantine caused.
    Nothing is written when a row is marked. While the item waits in the
    line, no row with a higher seq is marked (pending goes in seq order and
    dispatch stops at its first failure), so for an open quarantine they are
    the sent rows with a higher seq, read here; `requeue` writes them into the
    record when the item goes back (only those rows, not the ones marked after
    it), and `purge_sent_batch` writes any it deletes while the quarantine is
    open. mark_sent called by hand, out of seq order, would show up here too.
    """
    kept = [(seq, event_id) for seq, event_id in con.execute(
        "SELECT seq, event_id FROM quarantine_overtaken WHERE quarantine_id = ? ORDER BY seq", (record["id"],))]
    if record["requeued_at"] is not None:  # audit: G43
        return kept
    sent = [(seq, event_id) for seq, event_id in con.execute(
        "SELECT seq, event_id FROM outbox WHERE sent = 1 AND seq > ? ORDER BY seq", (record["seq"],))]
    return sorted(set(kept) | set(sent))


def overtaken_by(con, record):
    """The seqs of `overtakers(con, record)`, lowest first. Read-only."""
    return [seq for seq, _ in overtakers(con, record)]


def shown_overtakers(pairs, shown=OVERTAKERS_SHOWN):
    """`pairs` (overtakers' (seq, id)) bounded for a listing: {"count": all of them, "first": the first `shown`
    as {"id", "seq"} dicts}."""
    return {"count": len(pairs), "first": [{"id": event_id, "seq": seq} for seq, event_id in pairs[:shown]]}


def overtook(con, event_id):
    """The quarantines `event_id` overtook (it was marked sent while they were out of line ahead of it). Read-only.

    The reverse of `overtakers`, from the same two sources: the overtakers a
    requeue or a purge wrote into a quarantine record, and, for an open
    quarantine, the sent row of `event_id` if its seq is above the
    quarantined one. So it outlives the purge of either row. Dicts id (the
    quarantined item's), seq (where it stood), quarantined_at,
    requeued_at (None while it is out of line), oldest quarantine first.
    """
    keys = ("id", "seq", "quarantined_at", "requeued_at")
    return [dict(zip(keys, row)) for row in con.execute(
        "SELECT q.event_id, q.seq, q.quarantined_at, q.requeued_at, q.id FROM quarantine_overtaken AS t "
        "JOIN quarantines AS q ON q.id = t.quarantine_id WHERE t.event_id = ? "
        "UNION SELECT q.event_id, q.seq, q.quarantined_at, q.requeued_at, q.id FROM quarantines AS q "
        "JOIN outbox AS o ON o.event_id = ? AND o.sent = 1 AND o.seq > q.seq WHERE q.requeued_at IS NULL "
        "ORDER BY 3, 5",
        (event_id, event_id),
    )]


def figures(con):
    """What an operator watches, as a dict (see docs/operating.md, "Operating it"). Read-only.

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
    reads), last_error, last_error_kind (outbox.ops.failures.KINDS, or None),
    retried: how many times `retry` reset it in its present place in line (a
    requeue gives it a new one). A retry clears the attempt record, not the
    incident: the alerts read `retried` until the item is delivered.
    """
    row = con.execute(
        "SELECT event_id, seq, attempts, permanent_failures, last_error, last_error_kind FROM outbox "
        "WHERE sent = 0 AND quarantined_at IS NULL ORDER BY seq LIMIT 1"
    ).fetchone()
    if row is None:
        return None
    item = dict(zip(("id", "seq", "attempts", "permanent_failures", "last_error", "last_error_kind"), row))
    item["retried"] = con.execute(
        "SELECT count(*) FROM retries WHERE event_id = ? AND seq = ?", (item["id"], item["seq"])).fetchone()[0]
    return item


def quarantined(con):
    """Every item out of the pending line, in seq order, as dicts. Read-only.

    id, seq, reason, quarantined_at (Unix seconds), attempts,
    permanent_failures, last_error, last_error_kind: the row as it stands;
    overtakers: what overtook it while it is out (shown_overtakers: the
    count, and the first OVERTAKERS_SHOWN ids and seqs).
    """
    keys = ("id", "seq", "reason", "quarantined_at", "attempts", "permanent_failures", "last_error",
            "last_error_kind")
    items = []
    # The open record (requeued_at NULL): one at most per id, as quarantine refuses a quarantined id.
    for row in con.execute(
            "SELECT o.event_id, o.seq, o.quarantine_reason, o.quarantined_at, o.attempts, o.permanent_failures, "
            "o.last_error, o.last_error_kind, q.id FROM outbox AS o LEFT JOIN quarantines AS q "
            "ON q.event_id = o.event_id AND q.requeued_at IS NULL "
            "WHERE o.sent = 0 AND o.quarantined_at IS NOT NULL ORDER BY o.seq").fetchall():
        item = dict(zip(keys, row))
        record = {"id": row[-1], "seq": item["seq"], "requeued_at": None}
        item["overtakers"] = shown_overtakers(overtakers(con, record))
        items.append(item)
    return items


def observe(con, event_id):
    """The source's observations of `event_id`: (order row dict or None, outbox row dict or None, history).

    The outbox dict has seq, payload, state ("pending", "sent" or
    "quarantined"), the attempt record (attempts, permanent_failures,
    last_attempt_at, last_error, last_error_kind) and quarantine (the latest
    quarantine record or None). `history` does not depend on the outbox row,
    so a purge leaves it whole: {"quarantines": every quarantine record, oldest
    first, each with the seqs that overtook it (`overtaken_by`) and those
    bounded with their ids (`overtakers`: shown_overtakers); "retries":
    every retry record; "overtook": the quarantines this id overtook
    (`overtook`)}. Read-only.
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
        pairs = overtakers(con, record)
        record["overtaken_by"] = [seq for seq, _ in pairs]
        record["overtakers"] = shown_overtakers(pairs)
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
    return order, row, {"quarantines": records, "retries": retries, "overtook": overtook(con, event_id)}


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
