"""What the publisher may see of a sink DB: the public contract's tables, read-only.

The only module of the outbox package with SQL for a sink DB. It reads only
what the grader's contract names, `inbox(event_id, ...)` and
`deliveries(event_id, outcome, ...)`, so it also reads a foreign sink. It
never writes (``mode=ro`` and ``query_only``), creates no file (see
outbox.core.readonly), and never imports `sink`.
"""
import os
import sqlite3

from ..core import readonly
from ..core.errors import WrongDatabase


def open_sink_readonly(path):
    """A read-only connection to the sink DB at `path`; WrongDatabase if it is missing or lacks the tables."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise WrongDatabase("no sink DB at %r: no such file" % (path,))
    con = readonly.connect_readonly(path, "sink")  # creates no file, not even -wal or -shm
    try:
        con.execute("PRAGMA query_only = ON")
        try:
            tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise WrongDatabase("%r is not a SQLite sink DB: %s" % (path, exc)) from None
        missing = {"inbox", "deliveries"} - tables
        if missing:
            raise WrongDatabase("%r has no %s table: not a sink DB" % (path, " or ".join(sorted(missing))))
    except BaseException:
        con.close()
        raise
    return con


def inbox_payload(con, event_id):
    """(present, payload or None) for `event_id` in the inbox; payload None when this sink keeps none."""
    columns = {row[1] for row in con.execute("PRAGMA table_info(inbox)")}
    if "payload" in columns:
        row = con.execute("SELECT payload FROM inbox WHERE event_id = ?", (event_id,)).fetchone()
        return (row is not None), (row[0] if row is not None else None)
    row = con.execute("SELECT 1 FROM inbox WHERE event_id = ?", (event_id,)).fetchone()
    return (row is not None), None


def delivery_outcomes(con, event_id):
    """The outcomes the sink logged for `event_id`, in arrival (rowid) order."""
    return [outcome for (outcome,) in con.execute(
        "SELECT outcome FROM deliveries WHERE event_id = ? ORDER BY rowid", (event_id,))]
