"""The evidence ladder for one event id: each observation read on its own, then one reading.

Owns how the observations are gathered (store.observe for the source,
sinkview for the sink) and the wording of the reading. It never writes, and
no observation is inferred from another: a missing one is said to be missing.
"""
import json
import time

from . import sinkview, store
from .event import canonical, validate_event


class UnknownId(LookupError):
    """Neither an order row nor an outbox row carries the id."""


def gather(source_con, event_id, sink_con=None):
    """The ladder for `event_id` as a dict: order, outbox, sink (None without a sink), reading.

    Raises UnknownId when the source has neither an order row nor an outbox row for it.
    """
    order, row = store.observe(source_con, event_id)
    if order is None and row is None:
        raise UnknownId("no order row and no outbox row for id %r in the source DB" % (event_id,))
    outbox = None
    if row is not None:
        outbox = {key: row[key] for key in ("seq", "state", "attempts", "last_attempt_at", "last_error", "payload")}
        quarantine = row["quarantine"]
        outbox["quarantine"] = quarantine
    sink = None
    if sink_con is not None:
        present, payload = sinkview.inbox_payload(sink_con, event_id)
        outcomes = sinkview.delivery_outcomes(sink_con, event_id)
        matches = None
        if present and payload is not None and row is not None:
            matches = _same_event(payload, row["payload"])
        counts = {}
        for outcome in outcomes:
            counts[outcome] = counts.get(outcome, 0) + 1
        sink = {"inbox": "present" if present else "absent", "payload_matches": matches,
                "deliveries": {"count": len(outcomes), "outcomes": counts}}
    ladder = {"id": event_id, "order": order, "outbox": outbox, "sink": sink}
    ladder["reading"] = reading(ladder)
    return ladder


def lines(ladder):
    """The ladder as text, one observation a line, then the reading."""
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
        quarantine = outbox["quarantine"]
        if quarantine is not None:
            text += "; quarantined at seq %d on %s (%s)" % (quarantine["seq"], _utc(quarantine["quarantined_at"]),
                                                            quarantine["reason"])
            if quarantine["requeued_at"] is not None:
                text += ", requeued as seq %d" % quarantine["new_seq"]
            text += ", overtaken by %d sent item(s)" % len(quarantine["overtaken_by"])
        out.append("outbox row (source):  " + text)
    if sink is None:
        out.append("inbox row (sink):     not observed (no --sink given)")
        out.append("deliveries (sink):    not observed (no --sink given)")
    else:
        match = {True: ", payload matches the outbox row", False: ", payload DIFFERS from the outbox row",
                 None: ", payload not compared"}[sink["payload_matches"]] if sink["inbox"] == "present" else ""
        out.append("inbox row (sink):     %s%s" % (sink["inbox"], match))
        outcomes = sink["deliveries"]["outcomes"]
        detail = ", ".join("%s %d" % (k, outcomes[k]) for k in sorted(outcomes)) or "none"
        out.append("deliveries (sink):    %d (%s)" % (sink["deliveries"]["count"], detail))
    out.append("reading: " + ladder["reading"])
    return out


def reading(ladder):
    """One sentence: what the observations together allow, and what not to do."""
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
        return ("the sink holds this id with another payload: every delivery will be a 409 conflict; "
                "alert, quarantine, decide which is true, requeue; do not delete")
    if at_sink is None:
        return ("pending, not marked sent; without --sink it cannot tell whether the sink applied it; "
                "a re-dispatch is safe either way (the sink's inbox turns a copy into a duplicate)")
    if at_sink:
        return "applied at the sink, not marked sent: a re-dispatch is safe and will be a duplicate; do not delete"
    if outbox["attempts"]:
        return "pending, not applied at the sink, %d attempt(s) so far: delivery will be retried" % outbox["attempts"]
    return "pending, not yet at the sink: waiting for delivery"


def _same_event(sink_payload, outbox_payload):
    try:
        return canonical(validate_event(json.loads(sink_payload))) == outbox_payload
    except (ValueError, TypeError):
        return None  # a sink payload this kit cannot read: not compared, not called a match


def _utc(timestamp):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))
