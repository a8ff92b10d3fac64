"""Opening a kit database for writing, and the one way to write to it.

Owns the connection settings shared by the source DB (outbox.core.store) and the
sink DB (sink.core.inbox), the check that a file is ours before anything touches
it, and `transaction`, the visible block every write goes through. It knows
no table of either side: each caller passes its own schema. Reading without
writing is outbox.core.readonly; bringing an older file up to date, outbox.core.upgrade.
"""
import contextlib
import os
import sqlite3
import urllib.parse

from .errors import OutboxError, WrongDatabase

# How long a statement waits for another connection's lock before it fails
# ("database is locked"). sqlite3.connect's `timeout` sets SQLite's busy timeout.
BUSY_TIMEOUT_S = 5.0

# What a COMMIT survives, by name. "full" fsyncs the WAL at every commit, so a
# committed transaction survives a power cut. "process" (synchronous=NORMAL in
# WAL mode) fsyncs only at checkpoints: a commit survives a killed process,
# since the WAL is already in the OS page cache, but the last few may be lost
# in a power cut or an OS crash. The file is never corrupted either way.
DURABILITY = {"full": "PRAGMA synchronous = FULL", "process": "PRAGMA synchronous = NORMAL"}


def check_durability(durability):
    """Return `durability` if it is a name in DURABILITY, else raise ValueError naming the choices."""
    if not isinstance(durability, str) or durability not in DURABILITY:
        raise ValueError(
            "durability must be one of %s, got %r" % (", ".join(repr(name) for name in DURABILITY), durability)
        )
    return durability


def connect(target, *, uri=False):
    """A connection in explicit-transaction mode (``isolation_level=None``) with the busy timeout BUSY_TIMEOUT_S."""
    return sqlite3.connect(target, uri=uri, isolation_level=None, timeout=BUSY_TIMEOUT_S)  # audit: G2


def open_db(path, *, application_id, version, schema, kind, durability="full"):
    """Open or create the kit database `kind` at `path` and return the connection.

    Guarantees: the connection is in explicit-transaction mode
    (``isolation_level=None``), WAL, ``synchronous=FULL`` (or ``NORMAL`` with
    ``durability="process"``, see DURABILITY), with a busy timeout of
    BUSY_TIMEOUT_S. Any other `durability` raises ValueError before the file
    is touched. A new (missing or empty) file gets `schema`, stamped with
    `application_id` and `version` in the same transaction. An existing file is
    only read before it is accepted: a file that is not SQLite, or that carries
    another application_id or version (the other side's DB included), raises
    WrongDatabase and is left byte-for-byte unchanged.
    """
    check_durability(durability)  # audit: G2
    path = os.fspath(path)
    if os.path.isdir(path):
        raise WrongDatabase("%s DB %r is a directory, not a file" % (kind, path))  # audit: G3
    if os.path.exists(path):  # look through mode=ro first: a read-write close checkpoints and deletes the -wal
        with contextlib.closing(connect("file:%s?mode=ro" % urllib.parse.quote(os.path.abspath(path)), uri=True)) as peek:
            look(peek, path, application_id=application_id, version=version, kind=kind)  # audit: G3
    con = connect(path)
    try:
        _accept_or_create(
            con, path, application_id=application_id, version=version, schema=schema, kind=kind, durability=durability
        )
    except BaseException:
        con.close()
        raise
    return con


def look(con, path, *, application_id, version, kind):
    """True if the file is new (no schema, no stamp); None if it is ours; else WrongDatabase.

    A file SQLite cannot read at all (no permission, locked past the busy
    timeout) raises OutboxError instead, naming the access a writer needs: it
    says nothing about what the file is. Only reads: nothing may write until
    the file is known to be ours or known to be empty. Even a WAL switch on a
    foreign file would change it.
    """
    try:
        found_app = con.execute("PRAGMA application_id").fetchone()[0]
        found_version = con.execute("PRAGMA user_version").fetchone()[0]
        tables = con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    except sqlite3.OperationalError as exc:  # cannot open or read it: says nothing about what it is
        raise OutboxError("cannot open %s DB %r: %s; a command that writes to it needs write access to the file "
                          "and to its directory %s" % (kind, path, exc, os.path.dirname(os.path.abspath(path)))) from None
    except sqlite3.DatabaseError as exc:
        raise WrongDatabase("%r is not a %s DB of this kit: %s" % (path, kind, exc)) from None
    if found_app == 0 and found_version == 0 and tables == 0:
        return True
    if (found_app, found_version) != (application_id, version):  # audit: G3
        raise WrongDatabase(
            "%r is not a %s DB of this kit (application_id %d, user_version %d; "
            "expected %d and %d); it was left unchanged" % (path, kind, found_app, found_version, application_id, version)
        )
    return None


def _accept_or_create(con, path, *, application_id, version, schema, kind, durability):
    is_new = look(con, path, application_id=application_id, version=version, kind=kind)  # audit: G3
    mode = con.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if mode.lower() != "wal":
        raise WrongDatabase("%r: could not switch the %s DB to WAL (journal_mode is %s)" % (path, kind, mode))
    con.execute(DURABILITY[durability])  # audit: G2
    con.execute("PRAGMA foreign_keys = ON")
    if is_new:
        with transaction(con):
            # Look again under the write lock: another process may have created it meanwhile.
            if con.execute("PRAGMA application_id").fetchone()[0] == 0:
                for statement in schema:
                    con.execute(statement)
                con.execute("PRAGMA application_id = %d" % application_id)
                con.execute("PRAGMA user_version = %d" % version)
        if con.execute("PRAGMA application_id").fetchone()[0] != application_id:
            raise WrongDatabase("%r was created as another kind of DB while %s opened it" % (path, kind))


def synchronous(con):
    """The connection's ``PRAGMA synchronous`` setting, an int (2 = FULL, 1 = NORMAL, 0 = OFF)."""
    return con.execute("PRAGMA synchronous").fetchone()[0]


def set_synchronous(con, level):
    """Set ``PRAGMA synchronous`` to the int `level` (a value `synchronous` returned)."""
    con.execute("PRAGMA synchronous = %d" % level)  # audit: G15


@contextlib.contextmanager
def transaction(con):
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; ``ROLLBACK`` and re-raise on any exception.

    IMMEDIATE takes the write lock at the start, so a transaction never fails
    half-way for lack of it. Nothing in the block may wait on the network.
    """
    con.execute("BEGIN IMMEDIATE")  # audit: G5, G7, G12, G23
    try:
        yield con
        con.execute("COMMIT")
    except BaseException:
        # SQLite may already have rolled back on its own (a full disk, say).
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
