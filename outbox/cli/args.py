"""The parser and the argument types of both command lines (`python -m outbox`, `python -m sink`).

Each type returns the value or raises argparse.ArgumentTypeError, so a bad
value is one line and exit status 2 while parsing, before any file is
opened or any request sent. The rules themselves live with what they guard
(the sender's URL, loopback host and timeout, the store's batch); these only
turn them into argparse's terms, so both command lines read every value
alike. It imports no operator code (outbox.ops): `python -m sink` loads this
module, and the types that read operator rules are outbox.cli.opargs.
"""
import argparse
import errno
import io
import os
import re
import sys

from ..core import db, event, store
from ..core.sender import check_timeout, check_url, loopback_host

EXIT_USAGE = 2
MAX_INT_DIGITS = 100  # digits of an integer the command line makes an int of (a qty needs 7)
# A number as typed on a command line: ASCII digits, at most 9 of them (int()
# and float() would also take "٣", " 5", "1_0", "1e3" or "nan").
_INT = re.compile("[0-9]{1,9}")
# An integer as --qty may be typed: the event rule, not the parser, says which are in range.
_WHOLE = re.compile("-?[0-9]+")
# A number of seconds: digits with an optional fraction ("10", "0.5", ".5").
_SECONDS = re.compile(r"[0-9]{1,9}(?:\.[0-9]{0,9})?|\.[0-9]{1,9}")


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose every usage error is one line, "NAME: error: ...", and exit status 2.

    NAME is the class attribute `name`: each command line subclasses it once
    with its own (its sub-commands' parsers are of the same class).
    """

    name = "outbox-kit"

    def error(self, message):
        # One line, not the usage block: --help is there for the rest.
        self.exit(EXIT_USAGE, "%s: error: %s\n" % (self.name, message))  # audit: G36


class _Stdout(io.FileIO):
    """fd 1, where a write to a pipe whose reader has left raises BrokenPipeError, as it does on POSIX."""

    def write(self, data):
        try:
            return super().write(data)
        except BrokenPipeError:
            raise
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            raise BrokenPipeError(errno.EPIPE, "the reader of stdout has left") from None


def stdout_pipe_as_on_posix():
    """On Windows, rebuild sys.stdout so that a reader that left is a BrokenPipeError there too.

    Windows reports a write to a pipe whose reader closed as EINVAL (its
    ERROR_NO_DATA), which reads like any other bad argument; only the writes
    to fd 1 are told apart, over a FileIO of its own with the same encoding,
    errors and buffering (under -u or PYTHONUNBUFFERED the text layer sits on
    the FileIO itself, and still does). A console (not a FileIO) and other
    systems are left as they are.
    """
    out = sys.stdout
    buffer = getattr(out, "buffer", None)
    if os.name != "nt" or type(getattr(buffer, "raw", buffer)) is not io.FileIO:
        return
    out.flush()
    raw = _Stdout(out.fileno(), "w", closefd=False)
    sys.stdout = io.TextIOWrapper(raw if type(buffer) is io.FileIO else io.BufferedWriter(raw), encoding=out.encoding,
                                  errors=out.errors, line_buffering=out.line_buffering, write_through=out.write_through)


def run_for_a_reader(run, args):
    """`run(args)` for a command that only reads and prints, its stdout flushed; status 0 if the reader left.

    A reader that closes the pipe early (`sink show | head`) has what it
    wanted: no "Broken pipe" line and no exit status 1 for that. stdout is
    pointed at os.devnull, so the interpreter's last flush at exit has
    nothing to report. Only for commands whose one pipe is stdout (they
    open DB files, no socket): a server or the relay must not take a
    BrokenPipeError for a reader that left.
    """
    stdout_pipe_as_on_posix()
    try:
        status = run(args)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
        return 0
    return status


class UsageError(Exception):
    """Arguments that parse one by one but not together; exit status 2 like any bad argument."""


def add_durability_flag(parser, *, what="each commit is on disk before it returns"):
    """`--durability full|process` on a command that writes as it delivers, takes in or receives."""
    parser.add_argument("--durability", choices=sorted(db.DURABILITY), default="full",
                        help="full: %s (survives a power cut); process: survives a killed process, not a power cut "
                        "(default: %%(default)s)" % what)


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


class LongNumber(str):
    """A JSON integer of more than MAX_INT_DIGITS digits, as json_int reads it: its digits, never made an int.

    So validate_event refuses a 5000-digit qty like any value that is not an
    int, naming the field ("qty must be an int from 1 to 1000000, got a
    number of 5000 digits (LongNumber)"), the same on every Python: int()
    past 4300 digits raises with advice about sys.set_int_max_str_digits.
    """

    def __repr__(self):
        return "a number of %d digits" % len(self.lstrip("-"))


def json_int(text):
    """`parse_int` for loads_strict where the command line reads an event (intake --file, requeue --event)."""
    return int(text) if len(text.lstrip("-")) <= MAX_INT_DIGITS else LongNumber(text)


def qty_arg(text):
    """intake --qty: an integer in ASCII digits, made an int only if short; the event rule judges its range.

    5000 digits get the event rule's own words, naming the field, on every
    Python (int() would answer with advice about sys.set_int_max_str_digits,
    or spend the time where there is no such limit).
    """
    if _WHOLE.fullmatch(text) and len(text.lstrip("-")) <= MAX_INT_DIGITS:
        return int(text)
    got = ("a number of %d digits" % len(text.lstrip("-"))) if _WHOLE.fullmatch(text) else event.clip(text)
    raise argparse.ArgumentTypeError("qty must be an int from %d to %d, got %s" % (event.QTY_MIN, event.QTY_MAX, got))


def seconds_arg(text):
    """A delay: a number of seconds, 0 included ("0", "0.5", "10")."""
    if not _SECONDS.fullmatch(text):
        raise argparse.ArgumentTypeError("must be a number of seconds >= 0 such as 0.5 or 10, got %r" % (text,))
    return float(text)


def timeout_arg(text):
    """A timeout: a number of seconds written as for seconds_arg, above 0 and at most sender.MAX_TIMEOUT."""
    if not _SECONDS.fullmatch(text):
        raise argparse.ArgumentTypeError("timeout must be a number of seconds such as 0.5 or 10, got %r" % (text,))
    try:
        return check_timeout(float(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def url_arg(text):
    try:
        check_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def loopback_host_arg(text):
    """A host to listen on: loopback by the sender's one rule (sender.loopback_host), as it is to be bound."""
    host = loopback_host(text)
    if host is None:
        raise argparse.ArgumentTypeError("must be a loopback address (localhost, 127.x.y.z without leading zeros, "
                                         "or ::1), got %r" % (text,))
    return host


def _int(text):
    """The int in `text` if it is 1 to 9 ASCII digits, else None."""
    return int(text) if _INT.fullmatch(text) else None
