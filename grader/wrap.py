"""Lines for a terminal: display width, the width of the stream's terminal, and wrapping by each script's rules.

Owns the one line-breaking rule of the grader's output (--help, the quiz, the
reports). English breaks at spaces. Japanese, which has none, may break
between any two characters except where its own rules (JIS X 4051's kinsoku)
forbid: no line starts with closing punctuation, a small kana or a
prolonged-sound mark, none ends with an opening bracket, and a number stays
with its counter (「1号」, 「第3問」, 「20,000件」). A paragraph's last line is
never a lone 「す。」: it takes a few characters from the line above.
It formats and never writes.
"""
import os
import re
import unicodedata

DEFAULT_COLUMNS = 80  # when the stream is no terminal and COLUMNS says nothing
# Closing punctuation, small kana, 「ー」 and 「々」 (JIS X 4051 classes 2-5, 9), and their ASCII peers.
NO_BREAK_BEFORE = ("、。，．・：；？！）」』】〕〉》ー々ゝゞヽヾ"
                   "ぁぃぅぇぉっゃゅょゎゕゖァィゥェォッャュョヮヵヶ"
                   ",.:;!?)]}%")
NO_BREAK_AFTER = "（「『【〔〈《([{"
MIN_TAIL = 6  # columns: a Japanese paragraph's last line holds at least three characters, if it can
_PIECES = re.compile(r"[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]+\s*|\S\s*|\s+")


def display_width(cell):
    """Columns `cell` takes in a terminal: wide (East Asian) characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in cell)


def columns(stream):
    """The width, in columns, of the terminal `stream` writes to: COLUMNS if set, else the terminal's, else 80."""
    given = os.environ.get("COLUMNS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        width = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):  # not a file, closed, or no terminal
        return DEFAULT_COLUMNS
    return width if width > 0 else DEFAULT_COLUMNS


def wrap(text, width):
    """`text` as lines of at most `width` terminal columns (a wide character takes two).

    Breaks at spaces, and next to wide characters, except where breakable()
    says no; never inside an ASCII word, a hyphenated name included. A piece
    that cannot be broken and is wider than `width` overflows its line.
    """
    lines = []
    for paragraph in text.split("\n"):
        pieces = _PIECES.findall(paragraph)
        cuts = [0]  # the index of the piece that starts each line
        for i in range(1, len(pieces) + 1):
            if _width(pieces[cuts[-1]:i]) > width:
                cut = next((j for j in range(i - 1, cuts[-1], -1) if breakable(pieces[j - 1], pieces[j])), None)
                if cut is not None:
                    cuts.append(cut)
        if len(cuts) > 1 and _is_wide(pieces[-1]) and _width(pieces[cuts[-1]:]) < MIN_TAIL:
            cuts[-1] = _longer_tail(pieces, cuts, width)
        for start, end in zip(cuts, cuts[1:] + [len(pieces)]):
            lines.append("".join(pieces[start:end]).rstrip())
    return lines


def breakable(before, after):
    """Whether a line may end after the piece `before` and the next start with `after`."""
    if before[-1:].isspace():
        return after[:1] not in NO_BREAK_BEFORE
    if after[:1] in NO_BREAK_BEFORE or before[-1:] in NO_BREAK_AFTER:
        return False
    # A number and the character next to it: 「1号」, 「第3問」, 「7秒」 stay on one line.
    return not ((before[-1:].isdigit() and _is_wide(after)) or (_is_wide(before) and after[:1].isdigit()))


def _longer_tail(pieces, cuts, width):
    """The last line's start, moved back so that it holds at least MIN_TAIL columns and the line above keeps some."""
    above, last = cuts[-2], cuts[-1]
    for j in range(last - 1, above, -1):
        tail = _width(pieces[j:])
        if tail > width:
            break
        if tail >= MIN_TAIL and breakable(pieces[j - 1], pieces[j]):
            return j
    return last


def _width(pieces):
    return display_width("".join(pieces).rstrip())


def _is_wide(piece):
    return bool(piece) and unicodedata.east_asian_width(piece[0]) in "WF"
