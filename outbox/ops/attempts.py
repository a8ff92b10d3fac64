"""Attempt records: how often each outbox item was tried, when last, and why its last try failed.

Owns the outbox row's attempt columns and the hooks that keep them through
dispatch (`hooks`: before_send, on_failure), which the relay and `python -m
outbox dispatch` pass. Each record is a short commit of its own, never open
while a request is in flight, and decides nothing: no row becomes sent,
skipped or reordered here.
"""
import contextlib
import functools
import sqlite3
import time

from ..core import db
from . import failures

MAX_ERROR_CHARS = 500


def hooks(con):
    """The keyword arguments that make `dispatch(con, ...)` keep attempt records: before_send and on_failure.

    before_send counts the attempt (record_attempt) just before each send;
    on_failure keeps the failure (record_failure) before dispatch raises it, and
    drops a record it cannot write rather than hide that failure.
    """
    return {"before_send": functools.partial(record_attempt, con),  # audit: G38
            "on_failure": functools.partial(_note, con)}


def record_attempt(con, event_id):
    """Count one delivery attempt of `event_id` (attempts + 1, last_attempt_at), committed at once.

    A bookkeeping transaction (see `bookkeeping`): it decides nothing, so it is
    committed without an fsync of its own. Called before `send`, never during.
    """
    with bookkeeping(con):
        con.execute(
            "UPDATE outbox SET attempts = attempts + 1, last_attempt_at = ? WHERE event_id = ?",  # audit: G38
            (time.time(), event_id),
        )


def record_failure(con, event_id, error):
    """Keep why the last attempt of `event_id` failed: its kind, and one line of at most MAX_ERROR_CHARS characters.

    The kind is outbox.ops.failures.kind_of(error); a permanent one (the sink
    refused this item) also adds one to `permanent_failures`, the count the
    relay's alert reads. A bookkeeping transaction, like record_attempt.
    """
    text = " ".join(("%s: %s" % (type(error).__name__, error)).split())
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 3] + "..."
    kind = failures.kind_of(error)
    with bookkeeping(con):
        con.execute(
            "UPDATE outbox SET last_error = ?, last_error_kind = ?, permanent_failures = permanent_failures + ? "
            "WHERE event_id = ?",
            (text, kind, 1 if failures.is_permanent(kind) else 0, event_id),  # audit: G38
        )


def _note(con, event_id, error):
    try:
        record_failure(con, event_id, error)
    except sqlite3.Error:
        # A record we could not write must not replace the failure the caller needs to see.
        pass


@contextlib.contextmanager
def bookkeeping(con):
    """db.transaction, committed without an fsync of its own (``synchronous = NORMAL`` at most).

    For records that help an operator but decide nothing, such as a delivery
    attempt: losing the last few to a power cut is harmless, and an fsync per
    attempt would double the cost of every delivery. The connection's own
    setting is read first and restored afterwards, whatever it was.
    """
    previous = db.synchronous(con)
    db.set_synchronous(con, min(previous, 1))  # 1 = NORMAL; never raise OFF to NORMAL
    try:
        with db.transaction(con):
            yield con
    finally:
        db.set_synchronous(con, previous)  # audit: G38
