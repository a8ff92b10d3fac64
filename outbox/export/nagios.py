"""`status --check`: the source's figures judged the Nagios/Icinga plugin way.

Owns the thresholds' meaning, the status names and the one output line
(``OUTBOX OK - summary | perfdata``). It reads a dict of operations.figures and
nothing else: no DB, no clock, no printing.
"""

OK, WARNING, CRITICAL, UNKNOWN = 0, 1, 2, 3
NAMES = {OK: "OK", WARNING: "WARNING", CRITICAL: "CRITICAL", UNKNOWN: "UNKNOWN"}


def judge(figures, *, max_age, max_quarantined):
    """(status, line) for `figures` (operations.figures) against the thresholds.

    CRITICAL: the oldest pending item has waited more than `max_age` seconds
    (delivery is late, whatever the cause). WARNING: more than
    `max_quarantined` items are quarantined (each is an open incident), or the
    sink has refused the head item at least once (the relay alerts if it goes
    on), or the head was retried by hand and is not delivered yet (a retry
    clears its refusals, not the incident). OK otherwise. The line's perfdata carries every figure, with the
    warn and crit fields of every threshold that applies to it.
    """
    age = figures["oldest_pending_age_s"] or 0.0
    head = figures["head"] or {}
    refused = head.get("permanent_failures", 0)
    retried = head.get("retried", 0)
    status, problems = OK, []
    if figures["oldest_pending_age_s"] is not None and age > max_age:  # audit: G47
        status = CRITICAL
        problems.append("oldest pending item waits %.0f s (more than %d s): head %s" % (age, max_age, head["id"]))
    if figures["quarantined"] > max_quarantined:
        status = max(status, WARNING)
        problems.append("%d quarantined (more than %d): python -m outbox quarantined lists them"
                        % (figures["quarantined"], max_quarantined))
    if refused:  # audit: G47
        status = max(status, WARNING)
        problems.append("the sink refused head %s %d time(s) (%s)" % (head["id"], refused, head["last_error_kind"]))
    if retried:
        status = max(status, WARNING)
        problems.append("head %s was retried by hand %d time(s) and is not delivered yet" % (head["id"], retried))
    summary = "; ".join(problems) or "pending %d, oldest %.0f s, quarantined %d" % (
        figures["pending"], age, figures["quarantined"])
    perfdata = " ".join((
        "pending=%d;;;0" % figures["pending"],
        "oldest_pending_age=%.3fs;;%d;0" % (age, max_age),
        "quarantined=%d;%d;;0" % (figures["quarantined"], max_quarantined),
        "head_attempts=%d;;;0" % head.get("attempts", 0),
        "head_refused=%d;0;;0" % refused,  # WARNING above 0: the warn field says so
        "head_retried=%d;0;;0" % retried,
        "sent=%d;;;0" % figures["sent"],
    ))
    return status, "OUTBOX %s - %s | %s" % (NAMES[status], summary, perfdata)


def unknown(reason):
    """(UNKNOWN, line) when the figures cannot be read at all."""
    return UNKNOWN, "OUTBOX UNKNOWN - %s" % " ".join(str(reason).split())  # audit: G47
