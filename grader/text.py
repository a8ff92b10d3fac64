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
