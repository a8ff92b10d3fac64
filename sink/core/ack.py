"""The sink's one decision: the ACK for an event, made only after `receive` has committed it.

Owns what POST /events answers when `receive` returned: "applied" or
"duplicate" become the ACK {"ack": true, "id", "result", "digest"}; any
other result is BadResult, never an ACK. It is called with the event after
`receive` is called, on the thread that holds the store, so no ACK exists
before the receipt is committed (sink.core.inbox.receive returns only after
COMMIT). It never speaks HTTP: sink/server.py turns its answer into bytes and
every exception into a status.
"""

from .inbox import APPLIED, DUPLICATE

RESULTS = (APPLIED, DUPLICATE)


class BadResult(Exception):
    """`receive` returned something other than one of RESULTS: the sink answers 500, never an ACK."""


def acknowledge(con, receive, event, *, digest_of=None):
    """Call ``receive(con, event)``; return the ACK dict for its result, or raise.

    The result must be exactly "applied" or "duplicate" (a str, not a lookalike)
    and committed (an open transaction is rolled back), else BadResult; an exception of `receive`
    propagates unchanged, and there is no ACK. With `digest_of` (held_digest
    for the kit's own store), the ACK carries the digest of the event the
    inbox holds for that id, read after the receipt.
    """
    result = receive(con, event)
    if con.in_transaction:  # a foreign receive that did not commit: no ACK before a COMMIT, and no lock held
        con.rollback()
        raise BadResult("receive returned with its transaction open; it was rolled back and nothing is ACKed")
    if not isinstance(result, str) or result not in RESULTS:  # audit: G26
        raise BadResult("receive returned %r, not one of %s" % (result, ", ".join(RESULTS)))
    ack = {"ack": True, "id": event["id"], "result": result}  # audit: G26
    held = digest_of(con, event["id"]) if digest_of is not None else None
    if held is not None:
        ack["digest"] = held
    return ack


def held_digest(con, event_id):
    """The digest of the event the inbox holds for `event_id` (SHA-256 hex of its canonical JSON), or None. Read-only.

    This is what the sink ACKs with: the digest of what it keeps, not of what
    it was just sent, so a publisher can tell an ACK for another payload.
    """
    row = con.execute("SELECT digest FROM inbox WHERE event_id = ?", (event_id,)).fetchone()  # audit: G26
    return None if row is None else row[0]
