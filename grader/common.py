"""What both sides of the grader share: verdicts, message references, the protocol mark, a read-only opener.

Neutral ground: it never imports the worker, never starts a process and
never renders text (a message is an id and its fields; messages.py renders).
"""
import os
import sqlite3
import urllib.parse

MARK = "@@grade "  # prefix of the protocol lines a child writes on stdout
SNACK = {"id": "snack-7", "sku": "snack", "qty": 7}
PUBLISHER_CRASH = 73  # the publisher's after_delivery hook dies with this status
SINK_CRASH = 74  # sink.faults.CRASH_EXIT: the sink's crash faults exit with this status
INTAKE_CRASH = 75  # the intake child dies with this status right after the first COMMIT


def msg(message_id, **fields):
    """A message to print later, in the reader's language: its id in messages.MESSAGES and its fields.

    Field values are plain JSON values or other messages; a plain dict so
    that a child can send it to the parent as JSON.
    """
    return {"id": message_id, "fields": fields}


class Fail(Exception):
    """A check's expectation did not hold: what was expected, what was observed (both messages)."""

    def __init__(self, expected, observed):
        super().__init__(expected, observed)
        self.expected = expected
        self.observed = observed


def expect(condition, expected, observed):
    if not condition:
        raise Fail(expected, observed)


def describe(exc):
    """`Type: first line of the message`, at most 200 characters; language-neutral."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = text if len(text) <= 200 else text[:197] + "..."
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__


def describe_value(value):
    text = repr(value)
    return "%s (%s)" % (text if len(text) <= 80 else text[:77] + "...", type(value).__name__)


EXCEPTION_RULES = {  # the class name a rule requires -> the message stating that rule
    "DeliveryError": "rule.delivery-error",
    "Conflict": "rule.conflict",
    "ValueError": "rule.value-error",
    "KeyError": "rule.key-error",
    "WrongDatabase": "rule.wrong-database",
}


def wrong_class(kind, got, mro, error):
    """The message for an exception of class `got` (its MRO names `mro`) where a class named `kind` was required."""
    return msg("rule.exception-name", rule=msg(EXCEPTION_RULES[kind]), got=got, bases=", ".join(mro[1:]) or "-",
               error=error)


def read_only(path):
    """The grader's own observer: mode=ro, and query_only as a second line of defence."""
    if not os.path.exists(path):
        raise Fail(msg("db.exists", file=os.path.basename(path)), msg("db.no-such-file"))
    con = sqlite3.connect("file:%s?mode=ro" % urllib.parse.quote(path), uri=True, timeout=5, isolation_level=None)
    con.execute("PRAGMA query_only = ON")
    return con
