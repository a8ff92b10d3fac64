"""The relay: `dispatch` batches, repeated, with capped backoff, an alert, and a clean stop.

Owns the loop around dispatch and nothing inside it: it never marks, skips
or quarantines an item itself. It stops on a flag that only a signal
handler sets, and every wait is cut into short slices so the flag is seen.
"""
import time

from . import backoff, store
from .dispatch import dispatch
from .errors import DeliveryError, NotAcknowledged, OutboxError

SLICE = 0.05  # seconds: the longest a wait goes without looking at the stop flag
PROGRESS_EVERY = 1.0  # seconds between progress lines, at most


class Stopping(OutboxError):
    """Raised by the relay's own send when the stop flag is up, before any byte is sent."""


class HeadStuck(OutboxError):
    """The head item reached max_attempts: the alert. Carries `head` (store.head's dict)."""

    def __init__(self, message, head):
        super().__init__(message)
        self.head = head


def run(con, send, *, stop, limit, max_attempts, base_delay, max_delay, once, poll, progress, rand=None):
    """Deliver until told to stop; return the number of items marked sent.

    `stop()` is true once a stop was asked for; the item in flight finishes
    (its ACK is marked), and the next one is not sent. `once`: return as soon
    as nothing is pending. Otherwise wait `poll` seconds between looks at an
    empty line. After a failed round (DeliveryError or NotAcknowledged) wait
    backoff.delay(failures in a row, base_delay, max_delay). When the head's
    attempts reach `max_attempts`, raise HeadStuck (the alert). `progress(marked,
    pending, rate)` is called at most once per PROGRESS_EVERY seconds.
    """
    kwargs = {} if rand is None else {"rand": rand}

    acked = []  # ids acknowledged in the current batch; dispatch marks each before its next send

    def send_unless_stopping(event):
        if stop():
            raise Stopping("relay stopping: %r not sent" % (event["id"],))
        result = send(event)
        if result is True:
            acked.append(event["id"])
        return result

    delivered = failures = 0
    started = last_report = time.monotonic()
    while not stop():
        _check_head(con, max_attempts)
        del acked[:]
        try:
            marked = dispatch(con, send_unless_stopping, limit)
        except Stopping:
            delivered += len(acked)  # the batch's items before the stop: acked, then marked
            break
        except (DeliveryError, NotAcknowledged):
            failures += 1
            _check_head(con, max_attempts)
            _wait(backoff.delay(failures, base_delay, max_delay, **kwargs), stop)
            continue
        failures = 0
        delivered += marked
        now = time.monotonic()
        if now - last_report >= PROGRESS_EVERY:
            last_report = now
            progress(delivered, store.figures(con)["pending"], delivered / max(now - started, 1e-9))
        if marked == 0:
            if once:
                break
            _wait(poll, stop)
    return delivered


def _check_head(con, max_attempts):
    head = store.head(con)
    if head is not None and head["attempts"] >= max_attempts:
        raise HeadStuck(
            "ALERT: head item %r (seq %d) failed %d of %d attempts; last error: %s; the line behind it waits: "
            "quarantine it (python -m outbox quarantine) or fix the sink" % (
                head["id"], head["seq"], head["attempts"], max_attempts, head["last_error"] or "none"),
            head,
        )


def _wait(seconds, stop):
    deadline = time.monotonic() + seconds
    while not stop():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(SLICE, left))
