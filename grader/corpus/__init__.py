"""Corpora for the rules that are functions of their inputs, and the one way a case's outcome is compared.

Each family module (events: validate_event; urls: the URL rule; acks: the ACK rule; marks: mark_sent's id
matching) gives `cases(seed)`: boundary cases first, in a fixed order, then seeded ones, each a Case with the
class of input it stands for; and `reference_outcome(...)`: what the rule's text makes of that case, computed
here from the rule alone, never by importing the kit or the worker (tests/test_grader_corpus_*.py prove the
kit's reference agrees on every case). The side that calls the worker only runs the call and reports
`observed(call)`; `differs(expected, observed)` decides. Nothing here starts a process or opens a socket.
"""
import collections
import random

from ..common import Fail, describe, describe_value, msg
from ..remote import Handle, RemoteError

DEFAULT_SEED = 24  # the fixed default of --seed: a report without --seed is reproducible as it stands

# n: its place in the corpus (1-based); cls: the class of input it stands for (an identifier docs/rules.md
# lists); args: what the call gets; extra: what the family needs besides (a fake sink's answer, the ids stored).
Case = collections.namedtuple("Case", "n cls args extra")


def numbered(boundary, seeded):
    """[Case] from (cls, args, extra) triples: the boundary ones first, then the seeded ones, numbered from 1."""
    return [Case(n, cls, args, extra) for n, (cls, args, extra) in enumerate(list(boundary) + list(seeded), 1)]


def rng(seed, family):
    """A random source of its own per family, so one family's cases never shift another's."""
    return random.Random("%s/%s" % (family, seed))


def typed(value):
    """`value` as a JSON-able form that keeps its type: 1, 1.0 and True are three different values."""
    if isinstance(value, dict):
        return ["dict", sorted([typed(k), typed(v)] for k, v in value.items())]
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [typed(v) for v in value]]
    if value is None or isinstance(value, (bool, int, float, str)):
        return [type(value).__name__, value]
    return [type(value).__name__, repr(value)]


def returns(value):
    """The expected outcome: the call returns a value equal to `value`, of the same types throughout."""
    return {"kind": "returned", "value": typed(value), "shown": describe_value(value)}


def raises(kind, field=None):
    """The expected outcome: the call raises a class named `kind` or a subclass; its message names `field`."""
    return {"kind": "raised", "class": kind, "field": field}


def observed(call):
    """Run `call()` (the worker's function on a case) and report how it ended, as a JSON-able dict.

    A Fail passes through (the grader's own verdict, such as a call in a form the worker's signature refuses),
    and so does a MemoryError (the memory limit, never an outcome a rule asks for).
    """
    try:
        value = call()
    except (Fail, MemoryError):
        raise
    except RemoteError as exc:  # the worker's, as its step described it (grader/remote.py)
        return {"kind": "raised", "mro": list(exc.mro), "error": exc.message, "message": exc.text[:500]}
    except Exception as exc:
        return {"kind": "raised", "mro": [c.__name__ for c in type(exc).__mro__], "error": describe(exc),
                "message": str(exc)[:500]}
    if isinstance(value, Handle):  # an object the step kept: its type and repr, as the step gave them
        return {"kind": "returned", "value": [value.type_name, value.shown], "shown": "%s (%s)" % (value.shown, value.type_name)}
    return {"kind": "returned", "value": typed(value), "shown": describe_value(value)}


def differs(expected, got):
    """None when `got` is the outcome the rule gives, else why not (a short English phrase, for tests)."""
    if expected["kind"] == "returned":
        if got["kind"] != "returned":
            return "raised"
        return None if got["value"] == expected["value"] else "another value"
    if got["kind"] != "raised":
        return "returned"
    if expected["class"] not in got["mro"]:
        return "another class"
    if expected["field"] is not None and expected["field"] not in got["message"]:
        return "no field named"
    return None


def want_message(expected):
    """What the rule gives, as a message: "returns {value}", "raises ValueError naming 'qty'"."""
    if expected["kind"] == "returned":
        return msg("corpus.returns", value=expected["shown"])
    if expected["field"] is not None:
        return msg("corpus.raises-naming", kind=expected["class"], field=expected["field"])
    return msg("corpus.raises", kind=expected["class"])


def got_message(got):
    if got["kind"] == "returned":
        return msg("corpus.returned", value=got["shown"])
    return msg("corpus.raised", error=got["error"])


def where(function, case, total, seed, rule):
    """The expected half of a corpus failure: the function at fault, the case's place, class and seed, the rule."""
    return msg("corpus.case", function=function, n=case.n, total=total, cls=case.cls, seed=seed, rule=rule)


def failure(function, case, total, seed, rule, got):
    """(expected, observed) messages for the first case where the worker's outcome is not the rule's.

    The function at fault and the rule first (`rule`, a message that quotes the input and what the rule
    gives), then the case (its place, its class, the seed), then what the worker did.
    """
    return where(function, case, total, seed, rule), got_message(got)
