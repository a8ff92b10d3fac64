"""The calls between the two sides of the grader: how a value crosses, as JSON, and what cannot cross.

The deciding side (remote.py) asks the worker's process (worker_side/) to
make calls; each side holds the objects it cannot send (a connection, a
cursor, a callback) and sends a numbered handle in their place. Neutral
ground, imported by both sides: no processes, no worker, no messages.

    plain JSON            None, bool, int (up to MAX_DIGITS digits), float, str (up to MAX_TEXT)
    {"$d": {key: value}}  a dict with str keys      {"$t": [...]}  a tuple
    {"$b": "hex"}         bytes (up to MAX_TEXT)     {"$h": n, ...} a handle: an object the sender keeps
"""
import json

from .contract import SIGNATURES as CONTRACT  # the worker contract, written once: both sides name calls by it
MAX_TEXT = 16 * 1024  # characters of a str (bytes of bytes) that cross; a longer one is a handle, its repr cut
MAX_DIGITS = 1000  # digits of an int that crosses; a larger one is a handle
MAX_DEPTH = 50  # nesting that crosses; deeper values are handles
SHOWN = 200  # characters of a handle's repr


def cut(text, limit=SHOWN):
    return text if len(text) <= limit else text[:limit - 3] + "..."


def safe_repr(value):
    """repr(value) cut to SHOWN characters; a repr that raises or recurses is named, never raised."""
    try:
        text = repr(value)
    except BaseException as exc:  # noqa: B902 (a worker's __repr__ may raise anything, SystemExit included)
        text = "<%s whose repr raised %s>" % (type_name(value), type_name(exc))
    return cut(text if isinstance(text, str) else "<a repr that is not a str>")


def type_name(value):
    try:
        return str(type(value).__name__)
    except BaseException:  # noqa: B902
        return "?"


def mro_names(value):
    try:
        return [str(c.__name__) for c in type(value).__mro__]
    except BaseException:  # noqa: B902
        return [type_name(value)]


def encode(value, keep, depth=0):
    """`value` as JSON types; `keep(value)` gives what stands for anything that cannot cross as it is (a handle)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and type(value) is str and len(value) <= MAX_TEXT:
        return value
    if type(value) is float:
        return value
    if type(value) is int and (-10 ** MAX_DIGITS < value < 10 ** MAX_DIGITS):
        return value
    if type(value) is bytes and len(value) <= MAX_TEXT:
        return {"$b": value.hex()}
    if depth < MAX_DEPTH:
        if type(value) is dict and all(type(k) is str for k in value):
            return {"$d": {k: encode(v, keep, depth + 1) for k, v in value.items()}}
        if type(value) is list:
            return [encode(v, keep, depth + 1) for v in value]
        if type(value) is tuple:
            return {"$t": [encode(v, keep, depth + 1) for v in value]}
    return keep(value)


def decode(value, handle):
    """The value `encode` gave; `handle(fields)` makes what stands for a handle on this side."""
    if isinstance(value, list):
        return [decode(v, handle) for v in value]
    if not isinstance(value, dict):
        return value
    if "$d" in value:
        return {k: decode(v, handle) for k, v in value["$d"].items()}
    if "$t" in value:
        return tuple(decode(v, handle) for v in value["$t"])
    if "$b" in value:
        return bytes.fromhex(value["$b"])
    return handle(value)


def write_back(target, state):
    """Make the dict or list `target` hold `state` (what the other side's copy became during a call)."""
    if isinstance(target, dict) and isinstance(state, dict):
        target.clear()
        target.update(state)
    elif isinstance(target, list) and isinstance(state, list):
        target[:] = state


def dumps(message):
    return json.dumps(message, separators=(",", ":"))
