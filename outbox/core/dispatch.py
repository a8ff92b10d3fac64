"""One finite batch of delivery: the decision to mark an item sent.

The only place that decides when an outbox row becomes sent: after `send`
returned exactly True for it, never before. It opens no connection and no
socket: it reads the batch with store.pending and marks with store.mark_sent,
and the network is the caller's `send`. No transaction is open while `send`
runs, whatever a hook did, and every mark is committed with the synchronous
setting the connection had on entry. Bookkeeping is the caller's, through
the hooks (outbox.ops.attempts has them).
"""
from . import db
from .errors import NotAcknowledged
from .store import MAX_BATCH, mark_sent, pending


def dispatch(con, send, limit=MAX_BATCH, *, after_delivery=None, before_send=None, on_failure=None):
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
    a connection that is already inside one is refused with ValueError, and a
    hook that leaves one open gets the same refusal right before the next send
    (nothing more is sent). Each mark_sent commits with the ``PRAGMA
    synchronous`` the connection had on entry (what db.open_db set), even if a
    hook changed it.

    Hooks, for the caller's bookkeeping; dispatch itself writes nothing but
    mark_sent's row. ``before_send(event_id)`` runs before each send; if it
    raises, dispatch stops there and lets that exception out: the item is not
    sent, and on_failure is not called. ``on_failure(event_id, error)`` runs
    when `send` raised `error` or returned something other than True (`error`
    is then the NotAcknowledged), before dispatch raises `error` unchanged; a
    hook that raises replaces it, so it must not raise.
    """
    if not callable(send):
        raise TypeError("send must be callable, got %r" % (send,))
    for name, hook in (("after_delivery", after_delivery), ("before_send", before_send), ("on_failure", on_failure)):
        if hook is not None and not callable(hook):
            raise TypeError("%s must be callable or None, got %r" % (name, hook))
    if con.in_transaction:  # audit: G15
        # The caller's transaction would stay open, and may hold the write lock, while send runs.
        raise ValueError("con must have no open transaction when dispatch starts; commit or roll back first")
    synchronous = db.synchronous(con)  # G2's fsync at every mark, restored below whatever a hook set
    batch = pending(con, limit)  # fully read; no transaction open from here on  # audit: G15, G16
    marked = 0
    for selected in batch:
        if before_send is not None:
            before_send(selected["id"])  # audit: G17
        if con.in_transaction:  # audit: G15
            # A hook began one and did not end it: send would run with its locks held.
            raise ValueError("a hook left a transaction open on con: event %r was not sent, nor anything after it; "
                             "a hook must commit or roll back what it begins" % (selected["id"],))
        try:
            result = send(dict(selected))  # audit: G13
        except Exception as exc:
            if on_failure is not None:
                on_failure(selected["id"], exc)  # audit: G17
            raise  # audit: G14
        if result is not True:  # audit: G13, G14
            refusal = NotAcknowledged(
                "event %r was not acknowledged: send returned %r, and only True is an ACK; "
                "it stays pending" % (selected["id"], result)
            )
            if on_failure is not None:
                on_failure(selected["id"], refusal)
            raise refusal  # audit: G14
        if after_delivery is not None:
            after_delivery(dict(selected))
        db.set_synchronous(con, synchronous)  # audit: G15
        if mark_sent(con, selected["id"]):
            marked += 1
    return marked  # audit: G16
