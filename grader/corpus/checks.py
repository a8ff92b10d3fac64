"""The thin layer between the corpora and the checks: run each case on the worker, fail on the first difference.

One function per family, called from the check that owns the rule (validate-event, url-rule, mark-sent in
the worker's process; untrusted-ack splits it: `send_acks` runs in the sender, `judge_acks` in the parent).
Each failure names the function at fault and the rule first, then the case: its input, its class, its place
in the corpus and the seed, and both outcomes. Calling the worker is all the worker side does here; what
the rule gives comes from the family module, never from the worker's process state.
"""
import copy

from . import acks, differs, events, failure, marks, observed, urls, want_message, where
from ..common import Fail, msg


def validate_event(impl, seed):
    """Every case of the validate_event corpus; returns how many ran."""
    cases = events.cases(seed)
    for case in cases:
        event = case.args[0]
        given = copy.deepcopy(event)
        expected = events.reference_outcome(event)
        got = observed(lambda: impl.validate_event(given))
        if differs(expected, got):
            rule = msg("corpus.rule-event", event=repr(event), want=want_message(expected))
            raise Fail(*failure("validate_event", case, len(cases), seed, rule, got))
        if given != event or type(given) is not type(event):
            raise Fail(where("validate_event", case, len(cases), seed, msg("validate.untouched", event=repr(event))),
                       msg("validate.changed", got=repr(given)))
    return len(cases)


def url_rule(impl, seed, guard, trap_port, closed_port, event):
    """Every case of the URL corpus through send_http, under `guard` (child.NetworkGuard); returns how many ran.

    A URL the rule refuses runs with every socket refused, and must raise ValueError having reached none; a
    taken one on the closed port must be tried (a DeliveryError); a taken one on another port (1, 65535, 80
    when absent) runs with connect refused, and must have tried to connect to loopback on that port.
    """
    cases = urls.cases(seed)
    for case in cases:
        url = urls.url_of(case, trap_port, closed_port)
        want = urls.reference_outcome(url)
        shown = repr(url)
        if want["kind"] == "raised":
            expected = msg("url.refused", url=shown)
            guard.arm("all")
        elif "{closed}" in case.args[0]:
            expected = msg("url.loopback", url=shown)
            guard.arm(None)
        else:
            expected = msg("url.connects", url=shown, port=want["port"])
            guard.arm("connect")
        try:
            got = observed(lambda: impl.send_http(url, dict(event), timeout=2))
        finally:
            seen, connected = guard.disarm()
        at = lambda: where("send_http", case, len(cases), seed, expected)  # noqa: E731
        if want["kind"] == "raised":
            if seen:
                raise Fail(at(), msg("url.socket", event=seen[0]))
            if differs(want, got):
                raise Fail(at(), got_or_class(got, "ValueError"))
        elif got["kind"] == "raised" and "ValueError" in got["mro"]:
            raise Fail(at(), msg("url.refused-loopback", error=got["error"]))
        elif "{closed}" in case.args[0]:
            if got["kind"] != "raised" or "DeliveryError" not in got["mro"]:
                raise Fail(at(), got_or_class(got, "DeliveryError"))
        elif not connected or connected[0] != want["port"]:
            raise Fail(at(), msg("url.connected", ports=repr(connected) if connected else "-"))
    return len(cases)


def got_or_class(got, kind):
    """What the worker did instead of raising `kind`: it returned, or raised another class."""
    if got["kind"] == "returned":
        return msg("corpus.returned", value=got["shown"])
    return msg("rule.exception-name", rule=msg({"ValueError": "rule.value-error", "DeliveryError": "rule.delivery-error"}[kind]),
               got=got["mro"][0], bases=", ".join(got["mro"][1:]) or "-", error=got["error"])


def mark_sent(impl, con, flags, seed, known=(), marked=()):
    """Every case of the mark_sent corpus on `con`, STORED taken in already; `flags()` reads {id: sent}.

    `known` and `marked`: the ids the DB held before STORED, and those of them sent (marks.reference_outcomes).
    """
    cases = marks.cases(seed)
    for case, expected in zip(cases, marks.reference_outcomes(cases, known, marked)):
        event_id = case.args[0]
        before = flags()
        got = observed(lambda: impl.mark_sent(con, event_id))
        after = flags()
        turned = sorted((k for k in after if after[k] != before.get(k)), key=repr)
        rule = msg("corpus.rule-mark", event_id=repr(event_id), want=want_message(expected), marks=repr(expected["marks"]))
        if differs(expected, got):
            raise Fail(*failure("mark_sent", case, len(cases), seed, rule, got))
        if turned != expected["marks"]:
            raise Fail(where("mark_sent", case, len(cases), seed, rule), msg("corpus.turned", marks=repr(turned)))
    return len(cases)


def send_acks(impl, url, seed, report, part=0, parts=1):
    """The sender's half: send each case's event to the answering sink at `url`; `report(n, outcome)` each.

    Only every `parts`-th case from the `part`-th: the parent runs the parts side by side, since each case is
    a round trip between two processes, whose wait, not its work, is what a loaded machine stretches.
    """
    for case in acks.cases(seed)[part::parts]:
        report(case.n, observed(lambda: impl.send_http(url, dict(case.args[0]), timeout=2)))


def judge_acks(outcomes, seed, unfinished=None):
    """The parent's half: the first case whose outcome (from `outcomes`, {n: outcome}) is not the rule's.

    `unfinished`: why the sender ended before its last case (a message), or None; it is what a case without
    an outcome shows, since that is the case the sender was on.
    """
    cases = acks.cases(seed)
    for case in cases:
        expected = acks.reference_outcome(case.args[0], case.extra)
        got = outcomes.get(case.n)
        if got is None:
            raise Fail(where("send_http", case, len(cases), seed, answer_rule(case, expected)),
                       unfinished or msg("corpus.no-outcome"))
        if differs(expected, got):
            raise Fail(where("send_http", case, len(cases), seed, answer_rule(case, expected)),
                       got_message_for_ack(got))
    return len(cases)


def answer_rule(case, expected):
    answer = case.extra
    body = answer["body"]
    shown = body if len(body) <= 100 else "%s... (%d bytes)" % (body[:60], len(body.encode("latin-1")))
    return msg("corpus.rule-ack", event_id=repr(case.args[0]["id"]), status=answer["status"],
               framing=msg("framing." + answer["framing"]), size=len(body.encode("latin-1")), body=repr(shown),
               want=want_message(expected))


def got_message_for_ack(got):
    if got["kind"] == "returned":
        return msg("corpus.returned", value=got["shown"])
    if "ValueError" in got["mro"] or "DeliveryError" not in got["mro"]:
        return got_or_class(got, "DeliveryError")
    return msg("corpus.raised", error=got["error"])
