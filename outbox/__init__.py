"""outbox: the publishing half of outbox-kit.

Take an order in with its outbox row in one transaction (`intake`; a batch
of them, all or nothing, with `intake_many`), read what is unsent in intake
order (`pending`), deliver one finite batch (`dispatch`) through a sender such
as `send_http`, and mark an item sent (`mark_sent`) only after a verified ACK.
Standard library only.
"""
from .dispatch import dispatch
from .errors import (
    Conflict,
    DeliveryError,
    InvalidEvent,
    NoAnswer,
    NotAcknowledged,
    OutboxError,
    UntrustedAck,
    WrongDatabase,
)
from .event import validate_event
from .sender import send_http
from .store import init_store, intake, intake_many, mark_sent, pending

__all__ = [
    "Conflict",
    "DeliveryError",
    "InvalidEvent",
    "NoAnswer",
    "NotAcknowledged",
    "OutboxError",
    "UntrustedAck",
    "WrongDatabase",
    "dispatch",
    "init_store",
    "intake",
    "intake_many",
    "mark_sent",
    "pending",
    "send_http",
    "validate_event",
]
