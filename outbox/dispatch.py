"""One finite batch of delivery: the decision to mark an item sent.

The only place that decides when an outbox row becomes sent: after `send`
returned exactly True for it, never before. It does no I/O of its own (the
caller's `send` does) and holds no transaction while `send` runs. Around
each `send` it keeps the attempt record (store.record_attempt, record_failure).
"""
import sqlite3

from .errors import NotAcknowledged
from .store import MAX_BATCH, mark_sent, pending, record_attempt, record_failure


def dispatch(con, send, limit=MAX_BATCH, *, after_delivery=None):
    """Deliver up to `limit` pending events in seq order; return how many it marked sent.

    For each selected event: ``send(copy)`` with a fresh copy; only if it
    returns exactly ``True`` (not 1, not "ok", not a dict), ``after_delivery(copy)``
    if given, then ``mark_sent`` with the id from dispatch's own selection (the
    copies may be rewritten by the callbacks; the selection cannot be).

    Stops at the first failure: an exception from `send` or `after_delivery`
    propagates unchanged; any other result from `send` raises NotAcknowledged.
    Items marked before it stay sent; the failed item and those after it stay
    pending, so the next call resumes there. No retry, no claim or lease: one
    sending loop, one batch per call. No transaction is open while `send` runs:
    a connection that is already inside one is refused with ValueError.

    Attempt record: before each `send`, a short committed transaction of its
    own counts the attempt (attempts + 1, last_attempt_at); after a failure of
    `send` (an exception, or a result that is not True), a second one keeps
    the error text; then the original exception is raised, unchanged.
    """
    if not callable(send):
        raise TypeError("send must be callable, got %r" % (send,))
    if after_delivery is not None and not callable(after_delivery):
        raise TypeError("after_delivery must be callable or None, got %r" % (after_delivery,))
    if con.in_transaction:
        # The caller's transaction would stay open, and may hold the write lock, while send runs.
        raise ValueError("con must have no open transaction when dispatch starts; commit or roll back first")
    batch = pending(con, limit)  # fully read; no transaction open from here on
    send = _noting_failures(con, send)
    marked = 0
    for selected in batch:
        record_attempt(con, selected["id"])  # committed: no transaction is open while send runs
        result = send(dict(selected))
        if result is not True:
            refusal = NotAcknowledged(
                "event %r was not acknowledged: send returned %r, and only True is an ACK; "
                "it stays pending" % (selected["id"], result)
            )
            _note_failure(con, selected["id"], refusal)
            raise refusal
        if after_delivery is not None:
            after_delivery(dict(selected))
        if mark_sent(con, selected["id"]):
            marked += 1
    return marked


def _noting_failures(con, send):
    """`send`, with its failures kept in the attempt record before they propagate unchanged."""

    def send_noting_failure(event):
        event_id = event["id"]  # dispatch's fresh copy, read before `send` can touch it
        try:
            return send(event)
        except Exception as exc:
            _note_failure(con, event_id, exc)
            raise

    return send_noting_failure


def _note_failure(con, event_id, error):
    try:
        record_failure(con, event_id, error)
    except sqlite3.Error:
        # A record we could not write must not replace the failure the caller needs to see.
        pass
