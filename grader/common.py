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
# What one read of the grader's own takes from a worker's DB. The contract's values are ids, skus and
# payloads of a few hundred bytes, and where the grader reads rows a check has written a few dozen: a
# worker's 40 MB payload was read whole into the grader's own process once per check (a class of them took
# it past 300 MB), and so were a worker's 20,000 extra rows.
VALUE_BYTES = 1 << 20  # one value; SQLite's own limit, Python 3.11+ only (Connection.setlimit)
MAX_COLUMNS = 64  # columns of a result: a `SELECT *` on a table of 2,000 computed columns; 3.11+ too
MAX_ROWS = 10000  # rows of one read (common.rows)
MAX_BYTES = 16 << 20  # bytes of the values of one read (common.rows)
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
    if hasattr(con, "setlimit"):  # 3.11+; before, only rows() bounds what a read takes, row by row
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, VALUE_BYTES)
        con.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, MAX_COLUMNS)
    return con


def interrupted(exc):
    """Whether `exc` is a statement that `bounded` interrupted."""
    return isinstance(exc, sqlite3.OperationalError) and str(exc) == "interrupted"


def rows(cursor, limit=MAX_ROWS, budget=MAX_BYTES):
    """Every row of `cursor` (a list), or Fail naming the bound once they pass `limit` rows or `budget` bytes.

    One row at a time, so that what is held past a bound is one row, never the rest of the result.
    """
    got, size = [], 0
    for row in iter(cursor.fetchone, None):
        size += sum(len(value) if isinstance(value, (str, bytes)) else 8 for value in row)
        if len(got) == limit or size > budget:
            cursor.close()  # its statement ends now, not when (on PyPy) the collector gets to it
            bounds = dict(limit=limit, budget=budget)
            raise Fail(msg("db.rows-bounded", **bounds), msg("db.rows-over", **bounds))
        got.append(row)
    return got


SQLITE_TOOBIG = 18  # sqlite3.h; `sqlite_errorcode` (3.11+, as setlimit) carries it


def too_big(exc):
    """Whether `exc` is a read that `bounded` refused: a value over VALUE_BYTES (SQLITE_TOOBIG)."""
    return isinstance(exc, sqlite3.DataError) and getattr(exc, "sqlite_errorcode", None) == SQLITE_TOOBIG


def too_wide(exc):
    """Whether `exc` is a read that `bounded` refused: a table of more than MAX_COLUMNS columns (SQLite then
    calls the whole schema malformed, for this connection only)."""
    return isinstance(exc, sqlite3.DatabaseError) and "too many columns" in str(exc)


def bound_refused(exc):
    """The message for a read `bounded` refused (`exc`), the worker's verdict; None for any other error."""
    if too_big(exc):
        return msg("db.value-bounded", limit=VALUE_BYTES)
    if too_wide(exc):
        return msg("db.columns-bounded", limit=MAX_COLUMNS)
    return None


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
    except sqlite3.DatabaseError as exc:
        con.close()
        if too_wide(exc):
            raise Fail(msg("db.readable"), msg("db.columns-bounded", limit=MAX_COLUMNS)) from None
        raise
    except BaseException:
        con.close()
        raise
    for name, kind in kinds:
        if kind != "table":
            con.close()
            raise Fail(msg("db.table", table=name), msg("db.not-table", table=name, kind=kind))
        computed = plain_table_problem(con, name)
        if computed is not None:
            con.close()
            raise Fail(msg("db.plain-table", table=name), computed)
    return con


def plain_table_problem(con, table):
    """None if `table` stores every column it shows, else why not: a virtual table, or a generated column,
    computes what the grader would read, past the worker's file size. (table_xinfo: SQLite 3.26+; an older
    SQLite has no generated columns.)"""
    sql = con.execute("SELECT sql FROM sqlite_master WHERE lower(name) = ? AND type = 'table'", (table,)).fetchone()
    if sql and sql[0] and sql[0].lstrip()[:14].upper() == "CREATE VIRTUAL":
        return msg("db.virtual-table", table=table)
    for column in con.execute('PRAGMA table_xinfo("%s")' % table.replace('"', '""')).fetchall():  # <= 2,000
        if column[-1]:  # hidden: 2 a VIRTUAL generated column, 3 a STORED one, 1 a virtual table's hidden one
            return msg("db.generated-column", table=table, column=column[1])
    return None


def closed_port():
    """A loopback port that nothing listens on (bound, then released): a connection to it is refused."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
    finally:
        probe.close()
