"""The relay: `dispatch` batches, repeated, riding out outages, with an alert for an item the sink refuses.

Owns the loop around dispatch and nothing inside it: it never marks, skips
or quarantines an item itself, and keeps the attempt records through
dispatch's hooks (outbox.ops.attempts). A transient failure (outbox.ops.failures: no
answer, a 5xx) is retried for ever with capped, jittered backoff, or until
`give_up_after`; a permanent one (the sink refused the head item) counts
toward `max_attempts`, then the alert. It stops on a flag that only a signal
handler sets, every wait is cut into short slices so the flag is seen, and
it prints nothing: its lines go to the caller's `say`. A source DB whose
write lock another connection holds past the busy timeout fails only that
round: the relay waits with the same backoff and tries again.
"""
import sqlite3
import time

from . import attempts, backoff, failures, operations
from ..export import timestamps
from ..core.dispatch import dispatch
from ..core.errors import DeliveryError, NotAcknowledged, OutboxError

SLICE = 0.05  # seconds: the longest a wait goes without looking at the stop flag
PROGRESS_EVERY = 1.0  # seconds between progress lines, at most
DEFAULT_MAX_ATTEMPTS = 5  # refusals of the head item before the alert (the command line's default)


class Stopping(OutboxError):
    """Raised by the relay's before_send hook when the stop flag is up: before the item is sent or counted."""


class Alert(OutboxError):
    """The relay stops and someone must look: HeadStuck or GaveUp (exit status 3 at the command line)."""


class HeadStuck(Alert):
    """The sink refused the head item max_attempts times. Carries `head` (operations.head's dict)."""

    def __init__(self, message, head):
        super().__init__(message)
        self.head = head


class GaveUp(Alert):
    """The sink has not answered for give_up_after seconds. Carries `head` (operations.head's dict, or None)."""

    def __init__(self, message, head):
        super().__init__(message)
        self.head = head


class Tally:
    """What one relay did since it started: its progress lines and its metrics file read these.

    sent: items it marked sent; attempts: sends it started; failures: {kind:
    count} of failed sends (outbox.ops.failures.KINDS); last_success: Unix time of
    its last round that ended without a failure (None before the first).
    """

    def __init__(self):
        self.sent = 0
        self.attempts = 0
        self.failures = {}
        self.last_success = None

    def failed(self):
        """Failed sends of every kind, in all."""
        return sum(self.failures.values())


class SystemClock:
    """The clocks the relay reads and the sleep it waits with; tests pass their own."""

    monotonic = staticmethod(time.monotonic)  # for intervals and deadlines
    now = staticmethod(time.time)  # Unix time, for what the relay reports
    sleep = staticmethod(time.sleep)


def run(con, send, *, stop, limit, max_attempts, base_delay, max_delay, once, poll, say=lambda line: None,
        give_up_after=None, on_round=lambda tally: None, tally=None, rand=None, clock=SystemClock):
    """Deliver until told to stop; return the number of items this run marked sent.

    `stop()` is true once a stop was asked for; the item in flight finishes
    (its ACK is marked), and the next one is not sent, nor counted as an
    attempt: its attempt record stays as it was. `once`: return as soon
    as nothing is pending. Otherwise wait `poll` seconds between looks at an
    empty line. After a failed round wait backoff.delay(failed rounds in a
    row, base_delay, max_delay); an ACK or a round without a failure starts
    that count again. A transient failure is retried for ever; with `give_up_after`
    (seconds), GaveUp once the sink has not answered for that long. Every
    send is recorded through dispatch's hooks (outbox.ops.attempts); a permanent
    failure adds to the head's permanent_failures there, and when they reach
    `max_attempts`, HeadStuck (also at once, without a send, for a head that
    reached it before this run). `say(line)` gets one
    line per change of state (the sink unreachable, back), one per permanent
    failure, and progress at most once per PROGRESS_EVERY seconds while items
    are delivered. `on_round(tally)` is called after every round with
    the Tally (pass `tally` to keep one across runs). The count returned, and
    tally.sent, are right however a round ended: the items a failed batch
    marked before its failure are counted.
    """
    kwargs = {} if rand is None else {"rand": rand}
    tally = Tally() if tally is None else tally
    # The current batch, counted through dispatch's hooks so that `send` reaches dispatch unchanged
    # (its result is dispatch's to judge): "acked", ACKs seen; "marked", the ACKs before this
    # before_send, each of them marked by dispatch before it moved on.
    batch = {"acked": 0, "marked": 0}
    recording = attempts.hooks(con)

    def before_send(event_id):
        batch["marked"] = batch["acked"]
        # The stop is looked at first: a stop is not an attempt, and leaves the record as it was.
        if stop():  # audit: G40
            raise Stopping("relay stopping: %r not sent" % (event_id,))
        recording["before_send"](event_id)
        tally.attempts += 1

    def after_delivery(event):
        batch["acked"] += 1

    progress = _Progress(con, say, clock, tally)
    outage = _Outage(con, say, clock, max_delay, give_up_after)
    busy = _Busy(say, clock)
    sent_before = tally.sent
    failed_rounds = 0  # in a row: the backoff's attempt number
    try:
        while not stop():
            _check_head(con, max_attempts)
            batch["acked"] = batch["marked"] = 0
            try:
                marked = dispatch(con, send, limit, before_send=before_send, after_delivery=after_delivery,
                                  on_failure=recording["on_failure"])
            except Stopping:
                tally.sent += batch["marked"]  # the batch's items before the stop: acked, then marked
                break
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
                # Another connection held the write lock past the busy timeout, in mark_sent after an ACK
                # (that item stays pending: sent again, a duplicate the inbox absorbs) or in an attempt record.
                tally.sent += batch["marked"]
                failed_rounds = 1 if batch["acked"] else failed_rounds + 1
                if batch["acked"]:
                    outage.answered()  # the sink ACKed: whatever the DB did, it answers
                busy.locked(exc)
                progress.maybe(tally)
                on_round(tally)
                _wait(backoff.delay(failed_rounds, base_delay, max_delay, **kwargs), stop, clock)
                continue
            except (DeliveryError, NotAcknowledged) as exc:
                tally.sent += batch["marked"]  # every ACK before the failure was marked before the next send  # audit: G42
                kind = failures.kind_of(exc)
                tally.failures[kind] = tally.failures.get(kind, 0) + 1
                failed_rounds = 1 if batch["acked"] else failed_rounds + 1  # an ACK breaks the run of failures  # audit: G41
                wait = backoff.delay(failed_rounds, base_delay, max_delay, **kwargs)
                busy.free()
                if failures.is_transient(kind):  # audit: G39
                    if batch["acked"]:
                        outage.answered()  # the sink took part of the batch before it went quiet
                    wait = outage.silent(exc, wait)
                else:
                    outage.answered()
                    _refused(con, say, kind, max_attempts)
                progress.maybe(tally)
                on_round(tally)
                _wait(wait, stop, clock)
                continue
            tally.sent += marked
            tally.last_success = clock.now()
            failed_rounds = 0
            busy.free()
            outage.answered()
            progress.maybe(tally)
            on_round(tally)
            if marked == 0:
                if once:
                    break
                _wait(poll, stop, clock)
    finally:
        on_round(tally)  # the last round's figures, however the run ends
    return tally.sent - sent_before


def _check_head(con, max_attempts):
    head = operations.head(con)
    if head is not None and head["permanent_failures"] >= max_attempts:  # audit: G39
        raise HeadStuck(
            "ALERT: head item %r (seq %d) was refused by the sink %d time(s), --max-attempts %d; last failure: %s "
            "(%s); last error: %s; the line behind it waits" % (
                head["id"], head["seq"], head["permanent_failures"], max_attempts, head["last_error_kind"],
                failures.KINDS.get(head["last_error_kind"], "unknown"), head["last_error"] or "none"),
            head,
        )


def _refused(con, say, kind, max_attempts):
    head = operations.head(con)
    if head is not None:
        say("relay: the sink refused head item %r (seq %d): %s, %d of %d before the alert" % (
            head["id"], head["seq"], kind, head["permanent_failures"], max_attempts))
    _check_head(con, max_attempts)


def _is_busy(error):
    """True for SQLite's lock time-out ("database is locked"), which the relay rides out; no other error."""
    return str(error).startswith("database is locked")


class _Busy:
    """The source DB's write lock held elsewhere: one line when a spell of time-outs starts, one when it ends."""

    def __init__(self, say, clock):
        self.say, self.clock = say, clock
        self.since = None  # clock.monotonic() at the first time-out of the spell, while it lasts

    def locked(self, error):
        if self.since is None:
            self.since = self.clock.monotonic()
            self.say("relay: source DB busy (%s): another connection holds its write lock past the busy "
                     "timeout; nothing is lost, retrying with backoff" % (error,))

    def free(self):
        if self.since is not None:
            self.say("relay: source DB free after %.1f s" % (self.clock.monotonic() - self.since))
            self.since = None


class _Outage:
    """Whether the sink answers: one line when it stops, one when it is back, GaveUp after give_up_after."""

    def __init__(self, con, say, clock, max_delay, give_up_after):
        self.con, self.say, self.clock = con, say, clock
        self.max_delay, self.give_up_after = max_delay, give_up_after
        self.since = None  # clock.monotonic() when the sink stopped answering, while it does not

    def silent(self, error, wait):
        """A transient failure: return how long to wait before the next round (at most `wait`), or raise GaveUp."""
        now = self.clock.monotonic()
        if self.since is None:
            self.since = now
            self.say("relay: sink unreachable since %s, retrying every <= %g s (%s)" % (
                timestamps.utc(self.clock.now()), self.max_delay, error))
        if self.give_up_after is None:
            return wait
        left = self.since + self.give_up_after - now
        if left <= 0:  # audit: G41
            raise GaveUp(
                "ALERT: the sink has not answered for %.1f s (--give-up-after %g s); last error: %s; nothing was "
                "skipped or lost: run the relay again once the sink is back" % (
                    now - self.since, self.give_up_after, error),
                operations.head(self.con),
            )
        return min(wait, left)

    def answered(self):
        """The sink answered (an ACK or a refusal): the outage, if any, is over."""
        if self.since is not None:
            self.say("relay: sink back after %.1f s" % (self.clock.monotonic() - self.since))
            self.since = None


class _Progress:
    """One progress line at most every PROGRESS_EVERY seconds, and only while items are delivered.

    Its rate is over the interval since the last line, not an average since
    the start; a round that delivered nothing (idle, or failing: those have
    lines of their own) starts the interval again.
    """

    def __init__(self, con, say, clock, tally):
        self.con, self.say, self.clock = con, say, clock
        self.at = clock.monotonic()
        self.sent = tally.sent  # the count at the last line, or at the start

    def maybe(self, tally):
        now = self.clock.monotonic()
        if tally.sent == self.sent:
            self.at = now  # nothing delivered since the last line: nothing to say yet  # audit: G42
            return
        if now - self.at < PROGRESS_EVERY:
            return
        pending = operations.figures(self.con)["pending"]
        # The time last, so the line still starts as it always did ("relay: delivered N, ..."), for what parses it.
        self.say("relay: delivered %d, failed %d, pending %d, %.1f events/s over the last %.1f s, at %s" % (
            tally.sent, tally.failed(), pending, (tally.sent - self.sent) / (now - self.at), now - self.at,
            timestamps.utc(self.clock.now())))
        self.at, self.sent = now, tally.sent


def _wait(seconds, stop, clock):
    deadline = clock.monotonic() + seconds
    while not stop():
        left = deadline - clock.monotonic()
        if left <= 0:
            return
        clock.sleep(min(SLICE, left))
