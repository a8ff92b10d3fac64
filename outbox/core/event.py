"""The event: its rules, its canonical bytes and its digest.

The only place that decides whether an event is valid, and how JSON read off
the wire is parsed (`loads_strict`). The publisher and the sink both call
them, so the two sides can never disagree on what an event is. No I/O here.
"""
import hashlib
import json
import re

from .errors import InvalidEvent

FIELDS = ("id", "sku", "qty")
_FIELD_SET = frozenset(FIELDS)
QTY_MIN = 1
QTY_MAX = 1000000
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}\Z")
QUOTE_CHARS = 120  # longest value (its repr) a kernel message quotes; the sender's body excerpt too


def validate_event(event):
    """Return a NEW dict with exactly `id`, `sku` and `qty`, or raise InvalidEvent.

    Rules: `event` is a dict with exactly those keys; `id` and `sku` are str of
    1-64 characters from ``A-Z a-z 0-9 . _ : -`` whose first character is a
    letter or digit; `qty` is an int (not a bool) from 1 to 1,000,000. The
    message names the field and the rule. The argument is never modified.
    """
    if not isinstance(event, dict):  # audit: G1
        raise InvalidEvent("event must be a dict with keys id, sku, qty, got %s" % type(event).__name__)
    if event.keys() != _FIELD_SET:  # a dict's keys compare with a set as a set, without building one
        keys = set(event)
        missing = sorted(_FIELD_SET - keys, key=str)
        extra = sorted(keys - _FIELD_SET, key=repr)
        parts = []
        if missing:
            parts.append("missing %s" % ", ".join(missing))
        if extra:
            parts.append("unexpected %s" % ", ".join(repr(k) for k in extra))
        raise InvalidEvent("event must have exactly the keys id, sku, qty: %s" % "; ".join(parts))
    for field in ("id", "sku"):
        value = event[field]
        if not isinstance(value, str) or not _NAME.match(value):  # audit: G1
            raise InvalidEvent(
                "%s must be a str of 1-64 characters from A-Z a-z 0-9 . _ : - starting "
                "with a letter or digit, got %s" % (field, show(value))
            )
    qty = event["qty"]
    if isinstance(qty, bool) or not isinstance(qty, int) or not QTY_MIN <= qty <= QTY_MAX:  # audit: G1
        raise InvalidEvent("qty must be an int from %d to %d, got %s" % (QTY_MIN, QTY_MAX, show(qty)))
    return {"id": event["id"], "sku": event["sku"], "qty": int(qty)}


# One encoder for every call: json.dumps with options builds a new one each time.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def canonical(event):
    """The one serialisation of a valid event: sorted keys, no spaces, ASCII."""
    return _CANONICAL.encode(validate_event(event))


def validate_and_serialise(event):
    """``(validate_event(event), canonical(event))`` with the rules checked once, not twice."""
    valid = validate_event(event)
    return valid, _CANONICAL.encode(valid)


def digest(event):
    """SHA-256 (hex) of `canonical(event)`: equal digests mean identical events."""
    return payload_digest(canonical(event))


def payload_digest(payload):
    """SHA-256 (hex) of a payload that `canonical` made: ``digest`` without validating again."""
    return hashlib.sha256(payload.encode("ascii")).hexdigest()


def loads_strict(data, parse_int=int):
    """Parse UTF-8 JSON bytes; an object with a repeated key raises ValueError.

    The one way both sides read JSON off the wire: plain json.loads keeps the
    last of two "id" keys, so two readers of one body could disagree on it.
    `parse_int` as for json.loads (outbox.cli.args.json_int keeps 5000 digits from int()).
    """
    return json.loads(data.decode("utf-8"), object_pairs_hook=_unique_keys, parse_int=parse_int)


def _unique_keys(pairs):
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("repeated key in a JSON object: %s" % show(keys))
    return dict(pairs)


def clip(value):
    """repr(value), cut to QUOTE_CHARS: the kernel's one rule for quoting a value in a message."""
    text = repr(value)
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS - 3] + "..."


def show(value):
    """clip(value) with its type: "True (bool)"."""
    return "%s (%s)" % (clip(value), type(value).__name__)
