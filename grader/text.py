"""Every string that came from a worker, made safe to show: the one escaping rule of the grader.

A worker's messages, names and printed output are data. Before any of them reaches a terminal, a CSV cell
or an HTML page, `shown` writes each character a reader could not see or that would act on the display
(control characters such as ESC, NUL and BEL, bidi overrides, zero-width and other format characters,
unassigned and private-use code points, lone surrogates) as a Python escape (`\\x1b`, `\\u202e`), so two
strings that differ only in such characters look different. Letters of every script, Japanese included,
and the ordinary and ideographic spaces pass unchanged. This module formats and never writes.
"""

KEPT_SPACES = (" ", "\u3000")


def shown(value, newlines=False):
    """`value` (any object; not a str: its `str`, or a note when even that fails) with unseen characters escaped.

    With `newlines=True` a line feed stays a line break (printed output, tracebacks); a tab and a carriage
    return are escaped all the same.
    """
    if not isinstance(value, str):
        try:
            value = str(value)
        except Exception as exc:  # a worker's __str__ may raise anything; its text is not worth the grader's run
            return "<unprintable %s: str() raised %s>" % (type(value).__name__, type(exc).__name__)
    return "".join(c if c.isprintable() or c in KEPT_SPACES or (newlines and c == "\n")
                   else _escaped(c) for c in value)


def _escaped(char):
    code = ord(char)
    if code < 0x100:
        return "\\x%02x" % code
    if code < 0x10000:
        return "\\u%04x" % code
    return "\\U%08x" % code


def csv_cell(value):
    """`shown(value)` for a spreadsheet: a cell a spreadsheet would read as a formula gets a leading apostrophe."""
    text = shown(value)
    if text[:1] in ("=", "+", "-", "@"):
        return "'" + text
    return text


LIMIT = 4096  # characters of one worker string a report keeps; a longer one is shown cut
ITEMS = 100  # items of one list or dict a report keeps
DEPTH = 20  # nesting a report keeps; deeper is shown as a note
INT_BITS = 63  # an int a report keeps as a number (a JSON reader's int64); a larger one is described


def cut(text, limit=LIMIT):
    return text if len(text) <= limit else text[:limit - 3] + "..."


def data(value, depth=0):
    """`value` (anything a worker's call or DB gave, or a message holding it) as JSON types any report can hold.

    Strings are `shown` and cut at LIMIT characters, bytes and other objects
    become their repr (a repr that raises is named), NaN and infinities their
    text, an int past 64 bits a note of its size, lists and dicts at most
    ITEMS entries and DEPTH levels. Never raises, whatever `value` is.
    """
    if value is None or isinstance(value, bool):
        return value
    if type(value) is int:
        return value if value.bit_length() <= INT_BITS else "<an int of %d bits>" % value.bit_length()
    if type(value) is float:
        return value if value - value == 0 else repr(value)  # nan and inf: no JSON number
    if type(value) is str:
        return cut(shown(value[:LIMIT + 1]))
    if depth >= DEPTH:
        return "<nested deeper than %d levels>" % DEPTH
    if type(value) in (list, tuple):
        items = [data(v, depth + 1) for v in value[:ITEMS]]
        return items + ["<%d more>" % (len(value) - ITEMS)] if len(value) > ITEMS else items
    if type(value) is dict:
        out = {}
        for key in list(value)[:ITEMS]:
            out[data(key, depth + 1) if type(key) is str else cut(_repr(key), 200)] = data(value[key], depth + 1)
        return out
    return cut(_repr(value))


def _repr(value):
    try:
        text = repr(value)
    except Exception as exc:  # a worker's __repr__ (or an int too long for str) may raise anything
        return "<%s whose repr raised %s>" % (type(value).__name__, type(exc).__name__)
    return shown(text[:LIMIT + 1] if isinstance(text, str) else "<a repr that is not a str>")
