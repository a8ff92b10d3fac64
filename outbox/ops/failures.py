"""The kinds of a failed delivery, and which of them the relay rides out.

Owns the names the attempt record, the relay's alert and its metrics use
for a failure, and the one rule that splits them: transient (the sink did
not answer, or answered 5xx) or permanent (it answered, and refused this
item). It decides nothing else and touches no DB or socket.
"""
from ..core.errors import DeliveryError, NotAcknowledged

# kind -> what it means, in the words of the alert and `evidence`.
KINDS = {
    "no-answer": "no answer from the sink (refused, closed, timed out, or a body shorter than its Content-Length)",
    "server-error": "the sink answered 5xx",
    "conflict": "the sink answered 409: it holds another payload for this id",
    "rejected": "the sink refused the request (a 4xx, a redirect or another status)",
    "untrusted-ack": "the sink's answer does not prove delivery (its body, size, id or digest)",
    "not-acknowledged": "send returned something other than True",
    "delivery-error": "a DeliveryError of no known kind",
    "error": "another exception",
}
# The sink may be back in a moment: retried for ever, never counted toward the alert.
TRANSIENT = frozenset(("no-answer", "server-error"))  # audit: G39
# The sink answered and refused this item: sending it again the same way will not help.
PERMANENT = frozenset(("conflict", "rejected", "untrusted-ack", "not-acknowledged", "delivery-error"))  # audit: G39
# The kinds a relay rides out (retries or counts toward its alert), and counts in its metrics file: every
# kind but "error", another exception, which ends the relay (docs/operating.md's table says so; a test compares).
COUNTED = TRANSIENT | PERMANENT


def kind_of(error):
    """The kind (a key of KINDS) of the exception `error` raised by a send.

    A DeliveryError carries its own (one not in KINDS reads "delivery-error");
    NotAcknowledged is "not-acknowledged"; anything else is "error".
    """
    if isinstance(error, NotAcknowledged):
        return "not-acknowledged"
    if isinstance(error, DeliveryError):
        return error.kind if isinstance(error.kind, str) and error.kind in KINDS else "delivery-error"
    return "error"


def is_transient(kind):
    """True for a kind the relay retries for ever (no answer, a 5xx)."""
    return kind in TRANSIENT


def is_permanent(kind):
    """True for a kind that counts toward the relay's --max-attempts (the sink refused this item)."""
    return kind in PERMANENT
