"""The argument types of `python -m outbox`, and the one error for arguments that do not go together.

Each type returns the value or raises argparse.ArgumentTypeError, so a bad
value is one line and exit status 2 while parsing, before any file is
opened or any request sent. The rules themselves live with what they guard
(the sender's URL and timeout, the store's batch and reason, the retention's
durations); these only turn them into argparse's terms.
"""
import argparse
import re

from . import db, retention, store
from .sender import check_timeout, check_url


class UsageError(Exception):
    """Arguments that parse one by one but not together; exit status 2 like any bad argument."""


def add_durability_flag(parser):
    """`--durability full|process` on a command that writes as it delivers or takes in."""
    parser.add_argument("--durability", choices=sorted(db.DURABILITY), default="full",
                        help="full: each commit is on disk before it returns (survives a power cut); process: "
                        "survives a killed process, not a power cut (default: %(default)s)")


def positive_int(text):
    value = _int(text)
    if value is None or value < 1:
        raise argparse.ArgumentTypeError("must be an integer >= 1, got %r" % (text,))
    return value


def count_arg(text):
    value = _int(text)
    if value is None or value < 0:
        raise argparse.ArgumentTypeError("must be an integer >= 0, got %r" % (text,))
    return value


def limit_arg(text):
    value = _int(text)
    if value is None or not 1 <= value <= store.MAX_BATCH:
        raise argparse.ArgumentTypeError("limit must be an integer from 1 to %d, got %r" % (store.MAX_BATCH, text))
    return value


def seconds_arg(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError("must be a number of seconds >= 0, got %r" % (text,))
    return value


def timeout_arg(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("timeout must be a number of seconds, got %r" % (text,)) from None
    try:
        return check_timeout(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def url_arg(text):
    try:
        check_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def duration_arg(text):
    try:
        return retention.parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def reason_arg(text):
    try:
        return store.check_reason(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _int(text):
    """The int in `text` if it is 1 to 9 ASCII digits, else None (int() would take "٣" and " 5")."""
    return int(text) if re.fullmatch("[0-9]{1,9}", text) else None
