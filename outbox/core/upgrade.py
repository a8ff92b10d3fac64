"""Bringing a kit DB written by an earlier release up to this release's schema, in place; or refusing it.

Owns the history of the source DB's schema: the tables release 1 created
(SCHEMA_V1, which the tests also build old files with) and each step up
since. They are frozen copies of what each release wrote, so some tables
stand here as well as in outbox.core.store and outbox.core.history, which hold the
schema a new file gets: never edit a step, add one (a test checks that a new
file and an upgraded one end with the same tables, columns and indexes).
An upgrade is one transaction: a file ends fully upgraded or untouched.
"""
import os
import sqlite3

from . import db, readonly
from .errors import OutboxError, WrongDatabase

# The source schema as release 1 created it.
SCHEMA_V1 = (
    """CREATE TABLE orders (
        id TEXT PRIMARY KEY,
        sku TEXT NOT NULL,
        qty INTEGER NOT NULL,
        created_at REAL NOT NULL
    )""",
    """CREATE TABLE outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL UNIQUE REFERENCES orders(id),
        payload TEXT NOT NULL,
        sent INTEGER NOT NULL DEFAULT 0 CHECK (sent IN (0, 1)),
        created_at REAL NOT NULL,
        sent_at REAL
    )""",
    "CREATE INDEX outbox_pending ON outbox(seq) WHERE sent = 0",
)

# Source schema 1 -> 2 (release 2.0.0): the attempt record and the quarantine.
# Nothing is dropped but the index, rebuilt at once with the quarantine excluded.
SOURCE_1_TO_2 = (
    "ALTER TABLE outbox ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE outbox ADD COLUMN last_attempt_at REAL",
    "ALTER TABLE outbox ADD COLUMN last_error TEXT",
    "ALTER TABLE outbox ADD COLUMN quarantined_at REAL",
    "ALTER TABLE outbox ADD COLUMN quarantine_reason TEXT",
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
    """CREATE TABLE quarantine_overtaken (
        quarantine_id INTEGER NOT NULL REFERENCES quarantines(id),
        seq INTEGER NOT NULL,
        event_id TEXT NOT NULL,
        PRIMARY KEY (quarantine_id, seq)
    )""",
    "DROP INDEX outbox_pending",
    "CREATE INDEX outbox_pending ON outbox(seq) WHERE sent = 0 AND quarantined_at IS NULL",
)

# Source schema 2 -> 3: only additions, every row and column kept as it was. An
# upgraded row starts with no refusal counted (2.0.0 did not record the kind of
# a failure), so the relay tries it again before it can alert.
SOURCE_2_TO_3 = (
    "ALTER TABLE outbox ADD COLUMN last_error_kind TEXT",
    "ALTER TABLE outbox ADD COLUMN permanent_failures INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE quarantines ADD COLUMN original_payload TEXT",
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
    "CREATE INDEX quarantines_event ON quarantines(event_id)",
    "CREATE INDEX retries_event ON retries(event_id)",
)

SOURCE_STEPS = {1: SOURCE_1_TO_2, 2: SOURCE_2_TO_3}


def upgrade_in_place(path, *, application_id, version, upgrades, kind):
    """Bring an existing kit DB `kind` at `path` up to schema `version`, or refuse it.

    `upgrades` maps each older version to the statements that take it one step
    up. A missing or empty file, or a file already at `version`, is left to
    db.open_db. An older version is upgraded in ONE transaction (every step, then
    the new user_version), so it ends either fully upgraded or untouched. A
    file stamped with a newer version, or with a version `upgrades` does not
    know, raises WrongDatabase and is left byte-for-byte unchanged; so does a
    file that is not ours (open_db's own check says so).
    """
    path = os.fspath(path)
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        return
    found = _stamped_version(path, application_id=application_id)
    if found is None or found == version:
        return
    if found > version:  # audit: G4
        raise _written_by_newer(path, kind, found, version)
    if any(step not in upgrades for step in range(found, version)):
        raise WrongDatabase("%r: no upgrade from %s DB schema %d; it was left unchanged" % (path, kind, found))
    con = db.connect(path)
    try:
        with db.transaction(con):  # audit: G4
            # Look again under the write lock: another process may have upgraded it meanwhile.
            current = con.execute("PRAGMA user_version").fetchone()[0]
            for step in range(current, version):
                for statement in upgrades[step]:
                    con.execute(statement)
            con.execute("PRAGMA user_version = %d" % version)
    finally:
        con.close()


def refuse_other_version_readonly(path, *, application_id, version, kind, command):
    """Raise WrongDatabase if `path` is our DB at a schema other than `version`; only reads.

    Read-only openers cannot upgrade a file: for an older one the message
    names `command` (with %s for the path), for a newer one it says so.
    """
    path = os.fspath(path)
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        return
    found = _stamped_version(path, application_id=application_id)
    if found is not None and found > version:
        raise _written_by_newer(path, kind, found, version)
    if found is not None and found < version:  # audit: G4
        raise WrongDatabase(
            "%r is a %s DB of an earlier release (schema %d, this code reads %d); upgrade it in place "
            "first with: %s (nothing was changed)" % (path, kind, found, version, command % path)
        )


def schema_version(con):
    """The schema version stamped in the DB (its user_version). Read-only."""
    return con.execute("PRAGMA user_version").fetchone()[0]


def _written_by_newer(path, kind, found, version):
    return WrongDatabase(
        "%r is a %s DB written by a newer release (schema %d; this code knows up to %d); "
        "it was left unchanged" % (path, kind, found, version)
    )


def _stamped_version(path, *, application_id):
    """user_version of `path` if it carries `application_id`, else None. Only reads, and creates no file."""
    try:
        con = readonly.connect_readonly(path, "kit")
    except OutboxError:
        return None  # open_db / open_readonly give the precise refusal
    try:
        if con.execute("PRAGMA application_id").fetchone()[0] != application_id:
            return None
        return schema_version(con)
    except sqlite3.DatabaseError:
        return None
    finally:
        con.close()
