"""The corpus of mark_sent's id matching: one row, by its id, exactly (docs/lab.md, step 6).

`STORED` are the ids the check takes in first (in this order); `cases(seed)` gives Cases whose args are
(event_id,), to be called in turn on that one DB. `reference_outcomes(cases)` is the rule, written from
its text, case by case: an id stored and not yet marked is marked, that row alone, and mark_sent returns
True; stored and marked already: False, nothing changes; any other str (a pattern that SQL's LIKE or GLOB
would match, another letter case, spaces around it, a prefix) is unknown: KeyError, nothing changes.
Each expected outcome carries "marks": the ids that call must turn sent.
"""
from . import numbered, raises, returns, rng

# Ids a pattern, a case-insensitive or a numeric comparison would confuse with one another.
STORED = ("a_b", "aXb", "a.b", "ab", "abc", "Ab", "AB", "1", "100", "1.0", "x-1", "x:1", "item", "item-2", "Item-2",
          "a-b", "a:b", "z9")
SEEDED = 120
PATTERNS = ("%", "_", "a%", "%b", "a_b", "a_", "_b", "%%", "*", "a*", "a?b", "?", "[a]b", "a[_]b", "a%b", "A_",
            "it%", "ite_", "item%", "%2", "1%", "1_0", "x_1", "x%1", "Item%", "i*")
LOOSE = ("A_B", "AXB", "axb", "ITEM", "Item", "item ", " item", "item\n", "item\t", "\u0131tem", "\uff49tem",
         "01", "1.00", "1e2", "100.0", " 1", "+1", "0x64", "x-01", "x:01", "z09", "abc\x00", "ite", "items",
         "em", "a", "b", "", " ", "item-", "-2", "ab ", "aB", "aBc", "ABC", "A.B", "a,b", "a b", "a-b ", "a:B")


def reference_outcomes(cases, known=(), marked=()):
    """[expected outcome] for `cases` called in this order on a DB holding STORED, none marked yet.

    `known`: ids the DB holds besides, of which `marked` are sent already (the check's own rows before).
    """
    stored, marked = set(STORED) | set(known), set(marked)
    out = []
    for case in cases:
        event_id = case.args[0]
        if event_id in stored and event_id not in marked:
            marked.add(event_id)
            expected = dict(returns(True), marks=[event_id])
        elif event_id in stored:
            expected = dict(returns(False), marks=[])
        else:
            expected = dict(raises("KeyError"), marks=[])
        out.append(expected)
    return out


def boundary():
    # Patterns and loose spellings while every row is still unmarked, so any row they would catch is there.
    out = [("pattern", (p,), None) for p in PATTERNS] + [("loose", (s,), None) for s in LOOSE]
    out += [("exact", (s,), None) for s in ("a_b", "item")]
    out += [("pattern", ("a_b",), None), ("loose", ("ITEM",), None), ("repeat", ("item",), None)]
    out += [("exact", (s,), None) for s in STORED if s not in ("a_b", "item")]
    out += [("repeat", (s,), None) for s in STORED]
    return out


def seeded(seed):
    """SEEDED calls: a stored id again, or one changed by one character (case, a wildcard, a space)."""
    r = rng(seed, "marks")
    out = []
    for _ in range(SEEDED):
        base = r.choice(STORED)
        at = r.randint(0, len(base))
        change = r.choice(("%", "_", "*", "?", " ", "0", "upper", "drop"))
        if change == "upper":
            probe = base[:at] + base[at:at + 1].swapcase() + base[at + 1:]
        elif change == "drop":
            probe = base[:at] + base[at + 1:]
        else:
            probe = base[:at] + change + base[at:]
        out.append(("repeat" if probe in STORED else "seeded", (probe,), None))
    return out


def cases(seed):
    return numbered(boundary(), seeded(seed))


CLASSES = ("pattern", "loose", "exact", "repeat", "seeded")
