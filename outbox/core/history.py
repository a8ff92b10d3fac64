"""The operator's history tables of the source DB: their schema, and nothing else.

One row per quarantine, per row that overtook a quarantined item, per retry;
never deleted, not even by a purge. outbox.core.store gives a new file these
tables, outbox.core.upgrade an older one; outbox.ops.operations alone writes and
reads them. No guarantee of delivery depends on them.
"""

TABLES = (
    # One row per quarantine: why, when, where the item stood and its attempt
    # record then; once requeued, its new seq and, if corrected, both payloads.
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
        corrected_payload TEXT,
        original_payload TEXT
    )""",
    # The seqs marked sent while a quarantined item was out of line ahead of
    # them (the reordering it caused), kept once it is requeued or they are purged.
    """CREATE TABLE quarantine_overtaken (
        quarantine_id INTEGER NOT NULL REFERENCES quarantines(id),
        seq INTEGER NOT NULL,
        event_id TEXT NOT NULL,
        PRIMARY KEY (quarantine_id, seq)
    )""",
    # One row per `retry`: the attempt record it reset.
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
