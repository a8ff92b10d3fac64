"""The corpus of validate_event: every class of input the event rule (docs/lab.md, step 1) tells apart.

`cases(seed)` gives Cases whose args are (event,); `reference_outcome(event)` is the rule itself, written
from its text: a dict with exactly id, sku, qty; id and sku str of 1-64 characters from A-Z a-z 0-9 . _ : -,
the first a letter or digit (ASCII only, no trailing newline); qty an int, not a bool, from 1 to 1,000,000.
A valid event comes back as an equal dict; anything else is a ValueError whose message names the field.
"""
import re

from . import numbered, raises, returns, rng

FIELDS = ("id", "sku", "qty")
NAME_FIRST = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
NAME_REST = NAME_FIRST + "._:-"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}\Z")  # explicit ranges: ASCII whatever the flags
SEEDED = 160
BASE = {"id": "evt-1", "sku": "box", "qty": 7}

# Characters a name may not hold, by the class a mistake would let them through as.
NOT_ASCII_LETTERS = ("\u00e9", "\u00df", "\u0131", "\u017f", "\u212a", "\uff21", "\u03b1", "\u0430", "\u00aa", "\ufb01")
NOT_ASCII_DIGITS = ("\u0663", "\uff10", "\u00b2", "\u2167", "\u0967", "\U0001d7ce", "\u2460", "\u00bd")
NOT_NAME_CHARS = (" ", "/", "@", "+", "#", "%", "*", "?", "'", "\"", ",", ";", "=", "~", "!", "$", "&", "\\",
                  "(", "[", "{", "<", "|", "^", "`")
WHITESPACE = ("\n", "\r\n", "\r", "\t", " ", "\x0b", "\x0c", "\x00", "\u00a0", "\u2028", "\u3000", "\x85")


def reference_outcome(event):
    """What the rule makes of `event`: returns(the equal dict) or raises("ValueError", the field to name)."""
    if not isinstance(event, dict):
        return raises("ValueError")
    missing = [f for f in FIELDS if f not in event]
    extra = sorted((k for k in event if k not in FIELDS), key=repr)
    if missing or extra:
        return raises("ValueError", str(missing[0]) if missing else str(extra[0]))
    for field in ("id", "sku"):
        if not isinstance(event[field], str) or not _NAME.match(event[field]):
            return raises("ValueError", field)
    qty = event["qty"]
    if isinstance(qty, bool) or not isinstance(qty, int) or not 1 <= qty <= 1000000:
        return raises("ValueError", "qty")
    return returns({"id": event["id"], "sku": event["sku"], "qty": qty})


def with_(**fields):
    return dict(BASE, **fields)


def boundary():
    """(cls, (event,), None) for every class the rule distinguishes, the edges of each first."""
    out = []

    def add(cls, event):
        out.append((cls, (event,), None))

    add("valid", with_())
    add("valid", {"id": "9" + "x" * 63, "sku": "a.b_c:d-e" + "s" * 55, "qty": 1000000})
    add("valid", {"id": "a", "sku": "Z", "qty": 1})
    add("valid", {"id": "A-1:b.c_d", "sku": "0", "qty": 999999})
    add("valid", {"qty": 7, "sku": "box", "id": "evt-1"})  # keys in another order
    for field in ("id", "sku"):
        add("name-length", with_(**{field: ""}))
        add("name-length", with_(**{field: "x" * 65}))
        add("valid", with_(**{field: "x" * 64}))
        for first in "._:-":
            add("name-first-char", with_(**{field: first + "abc"}))
            add("valid", with_(**{field: "a" + first}))
        for space in WHITESPACE:
            add("name-whitespace", with_(**{field: "abc" + space}))
        add("name-whitespace", with_(**{field: " abc"}))
        for char in NOT_NAME_CHARS:
            add("name-bad-char", with_(**{field: "a" + char + "b"}))
        for char in NOT_ASCII_LETTERS:
            add("name-non-ascii-letter", with_(**{field: "ab" + char}))
        for char in NOT_ASCII_DIGITS:
            add("name-non-ascii-digit", with_(**{field: char + "1"}))
        for value in (7, 7.0, None, True, ["abc"], {"v": "abc"}):
            add("name-not-str", with_(**{field: value}))
    for qty in (True, False):
        add("qty-bool", with_(qty=qty))
    for qty in (0, -1, 1000001, 10 ** 20, -(10 ** 20)):
        add("qty-range", with_(qty=qty))
    add("valid", with_(qty=1))
    add("valid", with_(qty=1000000))
    for qty in (7.0, 1.0, 7.5, 1e6, float("inf")):
        add("qty-not-int", with_(qty=qty))
    for qty in ("7", " 7", "\u0667", None, [7], {"n": 7}):
        add("qty-not-int", with_(qty=qty))
    add("keys", {"id": "evt-1", "sku": "box"})
    add("keys", {"id": "evt-1", "qty": 7})
    add("keys", {"sku": "box", "qty": 7})
    add("keys", {})
    add("keys", with_(extra=1))
    add("keys", with_(seq=1))
    add("keys", {"ID": "evt-1", "sku": "box", "qty": 7})
    add("keys", {"id ": "evt-1", "sku": "box", "qty": 7})
    for value in (["evt-1", "box", 7], "evt-1", None, 7, [["id", "evt-1"], ["sku", "box"], ["qty", 7]]):
        add("not-a-dict", value)
    return out


def seeded(seed):
    """SEEDED random events: valid names of random length, and names broken by one character at a random place."""
    r = rng(seed, "events")
    out = []
    for i in range(SEEDED):
        field = ("id", "sku")[i % 2]
        length = r.choice((1, 2, 63, 64, r.randint(1, 64)))
        name = r.choice(NAME_FIRST) + "".join(r.choice(NAME_REST) for _ in range(length - 1))
        kind = i % 4
        if kind == 0:
            out.append(("valid", (with_(**{field: name}, qty=r.randint(1, 1000000)),), None))
        elif kind == 1:
            pool = r.choice((NOT_NAME_CHARS, NOT_ASCII_LETTERS, NOT_ASCII_DIGITS, WHITESPACE))
            cls = {NOT_NAME_CHARS: "name-bad-char", NOT_ASCII_LETTERS: "name-non-ascii-letter",
                   NOT_ASCII_DIGITS: "name-non-ascii-digit", WHITESPACE: "name-whitespace"}[pool]
            at = r.randint(0, min(len(name), 63))
            out.append((cls, (with_(**{field: name[:at] + r.choice(pool) + name[at:][:63 - at]}),), None))
        elif kind == 2:
            out.append(("name-length", (with_(**{field: name + "x" * (65 - len(name)) + "x" * r.randint(0, 3)}),), None))
        else:
            qty = r.choice((0, 1000001, r.randint(-1000, 0), r.randint(1000001, 10 ** 9)))
            out.append(("qty-range", (with_(qty=qty),), None))
    return out


def cases(seed):
    return numbered(boundary(), seeded(seed))


CLASSES = ("valid", "name-length", "name-first-char", "name-whitespace", "name-bad-char", "name-non-ascii-letter",
           "name-non-ascii-digit", "name-not-str", "qty-bool", "qty-range", "qty-not-int", "keys", "not-a-dict")
