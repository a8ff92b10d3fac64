"""What both sides of the grader share: verdicts, message references, the protocol mark, its own DB connections.

Neutral ground: it never imports the worker, never starts a process and
never renders text (a message is an id and its fields; messages.py renders).
"""
import os
import socket
import sqlite3
import time
import urllib.parse

MARK = "@@grade "  # prefix of the protocol lines a child writes on stdout
SNACK = {"id": "snack-7", "sku": "snack", "qty": 7}
PUBLISHER_CRASH = 73  # the publisher's after_delivery hook dies with this status
INTAKE_CRASH = 75  # the intake child dies with this status right after the first COMMIT
# Two of the kit's constants, copied because the parent side never imports the kit (it would be importing
# the reference worker's code into the grader); tests/test_grader_common.py keeps each equal to the kit's.
SINK_CRASH = 74  # sink.faults.CRASH_EXIT: the sink's crash faults exit with this status
BUSY_TIMEOUT_S = 5.0  # outbox.core.db.BUSY_TIMEOUT_S: how long the grader's own connections wait for a worker's lock


def msg(message_id, **fields):
    """A message to print later, in the reader's language: its id in messages.MESSAGES and its fields.

    Field values are plain JSON values or other messages; a plain dict so
    that a child can send it to the parent as JSON.
    """
    return {"id": message_id, "fields": fields}


class Fail(Exception):
    """A check's expectation did not hold: what was expected, what was observed (both messages)."""

    def __init__(self, expected, observed):
        super().__init__(expected, observed)
        self.expected = expected
        self.observed = observed


def expect(condition, expected, observed):
    if not condition:
        raise Fail(expected, observed)


def describe(exc):
    """`Type: first line of the message`, at most 200 characters; language-neutral."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = text if len(text) <= 200 else text[:197] + "..."
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__


def describe_value(value):
    text = repr(value)
    return "%s (%s)" % (text if len(text) <= 80 else text[:77] + "...", type(value).__name__)


EXCEPTION_RULES = {  # the class name a rule requires -> the message stating that rule
    "DeliveryError": "rule.delivery-error",
    "Conflict": "rule.conflict",
    "ValueError": "rule.value-error",
    "KeyError": "rule.key-error",
    "WrongDatabase": "rule.wrong-database",
}


def wrong_class(kind, got, mro, error):
    """The message for an exception of class `got` (its MRO names `mro`) where a class named `kind` was required."""
    return msg("rule.exception-name", rule=msg(EXCEPTION_RULES[kind]), got=got, bases=", ".join(mro[1:]) or "-",
               error=error)


QUERY_S = 5.0  # seconds one statement of the grader's own on a worker's DB may run before it is interrupted
# Bytes of one value (or row) the grader reads from a worker's DB. The contract's values are ids, skus and
# payloads of a few hundred bytes: a worker's 60 MB payload was read whole into the grader's own process,
# once per check, and a class of them took it past 300 MB. Python 3.11+ only (Connection.setlimit).
VALUE_BYTES = 1 << 20
# Rows one read of the grader's own takes from a worker's DB (common.rows). Where the grader reads rows, a
# check has written a few dozen; a worker's millions (64 MiB of file holds 2 million) are not read.
MAX_ROWS = 10000
# The contract's tables: a view (or anything else) by one of these names is a failed check, not a query to run.
CONTRACT_TABLES = ("orders", "outbox", "inbox", "deliveries", "inventory")


def connect(target, *, uri=False, timeout=BUSY_TIMEOUT_S):
    """A connection of the grader's own to a worker's DB: explicit transactions, the busy timeout BUSY_TIMEOUT_S,
    and every statement bounded to QUERY_S seconds (bounded)."""
    return bounded(sqlite3.connect(target, uri=uri, isolation_level=None, timeout=timeout))


def bounded(con, seconds=None):
    """`con`, each of its statements interrupted once it has run `seconds` (default QUERY_S; sqlite3.OperationalError
    "interrupted"): a worker's view or trigger that never ends costs the grader `seconds`, not its run."""
    seconds = QUERY_S if seconds is None else seconds
    started = [time.monotonic()]
    con.set_trace_callback(lambda statement: started.__setitem__(0, time.monotonic()))  # each statement's start
    con.set_progress_handler(lambda: time.monotonic() - started[0] > seconds, 10000)
    if hasattr(con, "setlimit"):  # 3.11+; before, a value is bounded by the worker's file size only (--file-size)
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, VALUE_BYTES)
    return con


def interrupted(exc):
    """Whether `exc` is a statement that `bounded` interrupted."""
    return isinstance(exc, sqlite3.OperationalError) and str(exc) == "interrupted"


def rows(cursor, limit=MAX_ROWS):
    """Every row of `cursor` (a list), or Fail naming the bound once it has more than `limit`: never all of them."""
    got = cursor.fetchmany(limit + 1)
    if len(got) > limit:
        raise Fail(msg("db.rows-bounded", limit=limit), msg("db.rows-over", limit=limit))
    return got


def too_big(exc):
    """Whether `exc` is a read that `bounded` refused: a value (or row) over VALUE_BYTES."""
    return isinstance(exc, sqlite3.DataError) and str(exc) == "string or blob too big"


def read_only(path):
    """The grader's own observer: mode=ro, and query_only as a second line of defence.

    Plain ``mode=ro``, unlike the kit's outbox.core.readonly: the grader reads a
    worker's DB in its own temporary folder, often while the worker holds it
    open with commits only in its -wal, so it must read through the WAL (and
    may create the -shm); ``immutable=1`` would miss those commits.
    """
    if not os.path.exists(path):
        raise Fail(msg("db.exists", file=os.path.basename(path)), msg("db.no-such-file"))
    con = connect("file:%s?mode=ro" % urllib.parse.quote(path), uri=True)  # audit: G52
    try:
        con.execute("PRAGMA query_only = ON")  # audit: G52
        kinds = con.execute("SELECT lower(name), type FROM sqlite_master WHERE lower(name) IN (%s)"
                            % ", ".join("?" * len(CONTRACT_TABLES)), CONTRACT_TABLES).fetchall()
    except BaseException:
        con.close()
        raise
    for name, kind in kinds:
        if kind != "table":
            con.close()
            raise Fail(msg("db.table", table=name), msg("db.not-table", table=name, kind=kind))
    return con


def closed_port():
    """A loopback port that nothing listens on (bound, then released): a connection to it is refused."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
    finally:
        probe.close()
