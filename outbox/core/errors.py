"""The exceptions of the kit's public API, in one place.

The errors the API of both packages (docs/api.md, "The API") raises on purpose
are these, plus ValueError, TypeError and KeyError where it says so, and
the sink server's ThreadDied (stop() raises it), which stays beside the code
that raises it, as the operator modules' errors do (relay.Alert,
evidence.UnknownId). Signals private to the sink's HTTP front and its fault
wrapper (Refused, WithholdAnswer, StoreGone) never leave them. Each class
says when it is raised.
"""


class OutboxError(Exception):
    """Base class of every error this kit raises on purpose."""


class InvalidEvent(OutboxError, ValueError):
    """An event broke a rule; the message names the field and the rule."""


class Conflict(OutboxError):
    """The same event id arrived with a different payload. Nothing was applied."""


class NotAcknowledged(OutboxError):
    """`send` returned something other than exactly True; the item stays pending."""


class DeliveryError(OutboxError):
    """`send_http` has no verified ACK. The item must stay pending.

    The sink may or may not have applied the event: only a verified ACK is
    evidence, and the lack of one is not evidence of the opposite. `kind`
    names the failure for the relay and the attempt record (one of
    outbox.ops.failures.KINDS); a subclass sets its own, and `kind=` overrides it.
    """

    kind = "delivery-error"  # audit: G22

    def __init__(self, message, *, kind=None):
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class NoAnswer(DeliveryError):
    """No complete HTTP response: refused, closed, timed out, or a body shorter than its Content-Length."""

    kind = "no-answer"  # audit: G22


class UntrustedAck(DeliveryError):
    """A response arrived but does not prove delivery (status, redirect, size, body or id).

    Its `kind` says which: "server-error" (a 5xx), "conflict" (409),
    "rejected" (any other status) or "untrusted-ack" (a 200 whose body is no proof).
    """

    kind = "untrusted-ack"  # audit: G22


class WrongDatabase(OutboxError):
    """A file is not this kit's database of the expected kind; it was left unchanged."""
