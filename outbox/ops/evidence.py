"""The evidence ladder for one event id: each observation read on its own, then one reading.

Owns how the observations are gathered (operations.observe for the source,
sinklook for the sink) and the wording of the reading, which says what the
relay will do with the item. It never writes, and no observation is
inferred from another: a missing one is said to be missing.
"""
import json

from . import failures, operations, relay, sinklook
from ..export import timestamps
from ..core.event import canonical, validate_event


class UnknownId(LookupError):
    """Neither an order row nor an outbox row carries the id."""


def gather(source_con, event_id, sink_con=None, *, max_attempts=relay.DEFAULT_MAX_ATTEMPTS):
    """The ladder for `event_id` as a dict: order, outbox, history, sink (None without a sink), reading.

    `max_attempts` is the relay's, so the reading says what that relay will do.
    Raises UnknownId when the source has neither an order row nor an outbox row for it.
    """
    order, row, history = operations.observe(source_con, event_id)
    if order is None and row is None:
        raise UnknownId("no order row and no outbox row for id %r in the source DB" % (event_id,))
    outbox = None
    if row is not None:
        outbox = {key: row[key] for key in ("seq", "state", "attempts", "permanent_failures", "last_attempt_at",
                                             "last_error", "last_error_kind", "payload", "quarantine")}
    sink = None
    if sink_con is not None:
        present, payload = sinklook.inbox_payload(sink_con, event_id)
        outcomes = sinklook.delivery_outcomes(sink_con, event_id)
        matches = None
        if present and payload is not None and row is not None:
            matches = _same_event(payload, row["payload"])
        counts = {}
        for outcome in outcomes:
            counts[outcome] = counts.get(outcome, 0) + 1
        sink = {"inbox": "present" if present else "absent", "payload": payload, "payload_matches": matches,
                "deliveries": {"count": len(outcomes), "outcomes": counts}}
    ladder = {"id": event_id, "order": order, "outbox": outbox, "history": history, "sink": sink,
              "max_attempts": max_attempts}
    ladder["reading"] = reading(ladder)
    return ladder


def lines(ladder):
    """The ladder as text, one observation a line (one per history record), then the reading."""
    order, outbox, sink = ladder["order"], ladder["outbox"], ladder["sink"]
    out = []
    if order is None:
        out.append("order row (source):   absent")
    else:
        out.append("order row (source):   present: sku %s, qty %d" % (order["sku"], order["qty"]))
    if outbox is None:
        out.append("outbox row (source):  absent (purged after it was sent, or never written)")
    else:
        text = "seq %d, %s, attempts %d, last error: %s" % (
            outbox["seq"], outbox["state"], outbox["attempts"], outbox["last_error"] or "none")
        if outbox["last_error_kind"] is not None:
            text += " (%s; refused %d time(s))" % (outbox["last_error_kind"], outbox["permanent_failures"])
        out.append("outbox row (source):  " + text)
    out.extend("history (source):     " + entry for entry in _history(ladder["history"]))
    if sink is None:
        out.append("inbox row (sink):     not observed (no --sink given)")
        out.append("deliveries (sink):    not observed (no --sink given)")
    else:
        match = {True: ", payload matches the outbox row", False: ", payload DIFFERS from the outbox row",
                 None: ", payload not compared"}[sink["payload_matches"]] if sink["inbox"] == "present" else ""
        out.append("inbox row (sink):     %s%s" % (sink["inbox"], match))
        if sink["payload_matches"] is False:
            out.append("payload (sink):       %s" % sink["payload"])  # audit: G49
            out.append("payload (source):     %s" % outbox["payload"])
        outcomes = sink["deliveries"]["outcomes"]
        detail = ", ".join("%s %d" % (k, outcomes[k]) for k in sorted(outcomes)) or "none"
        out.append("deliveries (sink):    %d (%s)" % (sink["deliveries"]["count"], detail))
    out.append("reading: " + ladder["reading"])
    return out


def _history(history):
    """One line per quarantine and per retry record, in time order, then one per quarantine this id overtook."""
    entries = []
    for record in history["quarantines"]:
        text = "quarantined at seq %d on %s after %d attempt(s) (%s)" % (
            record["seq"], timestamps.utc(record["quarantined_at"]), record["attempts"], record["reason"])
        if record["requeued_at"] is not None:
            text += "; requeued on %s as seq %d" % (timestamps.utc(record["requeued_at"]), record["new_seq"])
            if record["corrected_payload"] is not None:
                text += ", corrected from %s to %s" % (
                    record["original_payload"] or "(not recorded before schema 3)", record["corrected_payload"])
        entries.append((record["quarantined_at"], text + "; " + overtaken_text(record["overtakers"])))
    for record in history["retries"]:
        entries.append((record["retried_at"], "retried on %s: reset %d attempt(s), %d refused (last failure: %s)" % (
            timestamps.utc(record["retried_at"]), record["attempts"], record["permanent_failures"],
            record["last_error_kind"] or "none")))
    # sorted() is stable: records of one time keep their order, quarantines first.
    for _, text in sorted(entries, key=lambda entry: entry[0]):
        yield text
    for record in history["overtook"]:
        yield "overtook %s (quarantined at seq %d on %s): marked sent while it was out of line%s" % (
            record["id"], record["seq"], timestamps.utc(record["quarantined_at"]),
            "" if record["requeued_at"] is None else ", before its requeue on %s" % timestamps.utc(
                record["requeued_at"]))


def overtaken_text(overtakers):
    """`overtakers` (operations.shown_overtakers) as text: "overtaken by 12 sent item(s): b (seq 2), ... and 2 more"."""
    text = "overtaken by %d sent item(s)" % overtakers["count"]
    if overtakers["first"]:
        text += ": " + ", ".join("%s (seq %d)" % (item["id"], item["seq"]) for item in overtakers["first"])
    more = overtakers["count"] - len(overtakers["first"])
    if more:
        text += " and %d more" % more
    return text


def reading(ladder):
    """One sentence: what the observations together allow, what the relay will do, and what not to do."""
    outbox, sink = ladder["outbox"], ladder["sink"]
    at_sink = None if sink is None else sink["inbox"] == "present"
    differs = sink is not None and sink["payload_matches"] is False
    if outbox is None:
        text = "the order row is kept and its outbox row was purged after it was sent; nothing to deliver"
        if at_sink is False:
            text += ", but this sink has no row for it: check it is the sink it went to"
        return text
    state = outbox["state"]
    if state == "sent":
        if at_sink is None:
            return "marked sent after a verified ACK; give --sink to see the sink's side"
        if differs:
            return ("marked sent, but the sink holds another payload for this id: the sink's row is what was "
                    "applied; investigate, do not re-send")
        if at_sink:
            return "delivered and applied once; nothing to do (any duplicate deliveries had no effect)"
        return ("marked sent, but this sink has no inbox row for it: the wrong sink DB, or the sink lost data; "
                "investigate, do not delete")
    if state == "quarantined":
        text = "quarantined, out of the pending line (not sent); fix the cause, then requeue; do not delete"
        if differs:
            text += ("; the sink holds another payload for this id: if the sink's row is the truth, "
                     "requeue with --event set to it")
        return text
    if differs:
        return ("the sink holds this id with another payload: every delivery will be a 409 conflict; "  # audit: G49
                "alert, quarantine, decide which is true, requeue; do not delete")
    relay_will = _relay_will(outbox, ladder["max_attempts"])
    if at_sink is None:
        return ("pending, not marked sent; without --sink it cannot tell whether the sink applied it, and a "
                "re-dispatch is safe either way (the sink's inbox turns a copy into a duplicate); " + relay_will)
    if at_sink:
        text = "applied at the sink, not marked sent: a re-dispatch is safe and will be a duplicate; do not delete"
        return text + "; " + relay_will if outbox["permanent_failures"] else text
    return "pending, not applied at the sink; " + relay_will


def _relay_will(outbox, max_attempts):
    """What a relay with `max_attempts` does with this pending item next, from its attempt record."""
    refused, kind = outbox["permanent_failures"], outbox["last_error_kind"]
    if refused >= max_attempts:
        return ("the sink refused it %d time(s) (last: %s), so the relay (--max-attempts %d) alerts at once "
                "without sending it: fix the cause, then retry it, or quarantine it" % (refused, kind, max_attempts))
    if refused:
        return ("the sink refused it %d time(s) (last: %s): the relay sends it again, and alerts at %d" % (
            refused, kind, max_attempts))
    if failures.is_transient(kind):
        return ("the sink did not answer its last attempt (%s; %d attempt(s) so far): the relay keeps retrying "
                "it, for ever unless --give-up-after" % (kind, outbox["attempts"]))
    if outbox["attempts"]:
        return "%d attempt(s) so far, none refused: the relay sends it again" % outbox["attempts"]
    return "not tried yet: waiting for delivery"


def _same_event(sink_payload, outbox_payload):
    try:
        return canonical(validate_event(json.loads(sink_payload))) == outbox_payload
    except (ValueError, TypeError, RecursionError):
        return None  # a sink payload this kit cannot read: not compared, not called a match
