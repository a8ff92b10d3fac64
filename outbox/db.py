"""Opening a kit database, and the one way to write to it.

Owns the connection settings shared by the source DB (outbox.store) and the
sink DB (sink.inbox), the check that a file is ours before anything touches
it, and `transaction`, the visible block every write goes through. It knows
no table of either side: each caller passes its own schema.
"""
import contextlib
import os
import sqlite3
import urllib.parse

from .errors import OutboxError, WrongDatabase

BUSY_TIMEOUT_MS = 5000

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


def open_db(path, *, application_id, version, schema, kind, durability="full"):
    """Open or create the kit database `kind` at `path` and return the connection.

    Guarantees: the connection is in explicit-transaction mode
    (``isolation_level=None``), WAL, ``synchronous=FULL`` (or ``NORMAL`` with
    ``durability="process"``, see DURABILITY), with a busy timeout of
    BUSY_TIMEOUT_MS. Any other `durability` raises ValueError before the file
    is touched. A new (missing or empty) file gets `schema`, stamped with
    `application_id` and `version` in the same transaction. An existing file is
    only read before it is accepted: a file that is not SQLite, or that carries
    another application_id or version (the other side's DB included), raises
    WrongDatabase and is left byte-for-byte unchanged.
    """
    check_durability(durability)
    path = os.fspath(path)
    if os.path.isdir(path):
        raise WrongDatabase("%s DB %r is a directory, not a file" % (kind, path))
    con = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000.0)
    try:
        _accept_or_create(
            con, path, application_id=application_id, version=version, schema=schema, kind=kind, durability=durability
        )
    except BaseException:
        con.close()
        raise
    return con


def open_readonly(path, *, application_id, version, kind):
    """Open an existing kit database `kind` only to read it.

    Never creates a file, not even SQLite's -wal or -shm (see readonly_uri),
    so it works in a directory this user cannot write: a missing path, an
    empty file or a file that is not this kind of kit DB raises
    WrongDatabase; a file it cannot read without creating one raises
    OutboxError saying what is needed. The connection is opened with
    ``mode=ro`` and has ``query_only`` set, a second line of defence.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise WrongDatabase("no %s DB at %r: no such file" % (kind, path))
    con = connect_readonly(path, kind)
    try:
        if _look(con, path, application_id=application_id, version=version, kind=kind):
            raise WrongDatabase("%r is an empty file, not a %s DB of this kit" % (path, kind))
        con.execute("PRAGMA query_only = ON")
    except BaseException:
        con.close()
        raise
    return con


# What a reader needs, by kind, when SQLite cannot read a WAL without creating its index.
WRITER_COMMAND = {"source": "python -m outbox upgrade --db %s", "sink": "python -m sink serve --db %s"}
_SQLITE_HEADER = b"SQLite format 3\x00"


def readonly_uri(path, kind):
    """The URI that reads the SQLite file `path` without writing or creating any file.

    In WAL mode, with both the -wal and the -shm file beside it (a writer has
    it open, or left them behind), ``mode=ro`` reads through them and creates
    nothing. Without them, ``mode=ro`` alone would create them (or fail, in a
    directory this user may not write): when no -wal holds anything, the main
    file holds every commit and ``immutable=1`` reads it alone (a writer that
    opens it meanwhile writes to a new -wal first; the main file changes only
    at a checkpoint). A -wal with commits but no -shm cannot be read without
    creating one, so OutboxError says what is needed instead. A file that is
    not in WAL mode, or not SQLite, gets plain ``mode=ro``.
    """
    absolute = os.path.abspath(path)
    uri = "file:%s?mode=ro" % urllib.parse.quote(absolute)
    if not _in_wal_mode(absolute):
        return uri
    wal, shm = absolute + "-wal", absolute + "-shm"
    if os.path.exists(wal) and os.path.exists(shm):
        return uri
    if not os.path.exists(wal) or os.path.getsize(wal) == 0:
        return uri + "&immutable=1"
    writer = WRITER_COMMAND[kind] % path if kind in WRITER_COMMAND else "any command that writes to it"
    raise OutboxError(
        "cannot read %r without creating a file: its write-ahead log %s holds commits not yet in the main file, "
        "and %s, the index SQLite needs to read them, is missing; run a command that writes to it as a user who "
        "may write in %s (%s), then read it again" % (
            path, os.path.basename(wal), os.path.basename(shm), os.path.dirname(absolute), writer))


def connect_readonly(path, kind):
    """A connection through readonly_uri(path, kind), tried once.

    A file SQLite cannot open (no read permission on it, or on its -wal or
    -shm) raises OutboxError naming what this user needs; a file that is not
    a database is left to the caller's own check.
    """
    uri = readonly_uri(path, kind)
    con = None
    try:
        con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000.0)
        con.execute("PRAGMA schema_version").fetchone()  # the first read opens the files
    except sqlite3.OperationalError as exc:
        if con is not None:
            con.close()
        raise OutboxError("cannot open %s DB %r to read it: %s; this user needs read access to it%s" % (
            kind, path, exc, "" if "immutable" in uri else " and to its -wal and -shm files")) from None
    except sqlite3.DatabaseError:
        pass  # "file is not a database": the caller's own check refuses it, naming what it expected
    except BaseException:
        if con is not None:
            con.close()
        raise
    return con


def _in_wal_mode(path):
    """True if `path` starts with an SQLite header that says WAL (format numbers 2 at bytes 18 and 19)."""
    try:
        with open(path, "rb") as f:
            header = f.read(20)
    except OSError:
        return False  # sqlite3 gives the precise refusal
    return header[:16] == _SQLITE_HEADER and header[18:20] == b"\x02\x02"


def _look(con, path, *, application_id, version, kind):
    """True if the file is new (no schema, no stamp); None if it is ours; else WrongDatabase.

    Only reads: nothing may write until the file is known to be ours or known
    to be empty. Even a WAL switch on a foreign file would change it.
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
    if (found_app, found_version) != (application_id, version):
        raise WrongDatabase(
            "%r is not a %s DB of this kit (application_id %d, user_version %d; "
            "expected %d and %d); it was left unchanged" % (path, kind, found_app, found_version, application_id, version)
        )
    return None


def _accept_or_create(con, path, *, application_id, version, schema, kind, durability):
    is_new = _look(con, path, application_id=application_id, version=version, kind=kind)
    con.execute("PRAGMA busy_timeout = %d" % BUSY_TIMEOUT_MS)
    mode = con.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if mode.lower() != "wal":
        raise WrongDatabase("%r: could not switch the %s DB to WAL (journal_mode is %s)" % (path, kind, mode))
    con.execute(DURABILITY[durability])
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


@contextlib.contextmanager
def transaction(con):
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; ``ROLLBACK`` and re-raise on any exception.

    IMMEDIATE takes the write lock at the start, so a transaction never fails
    half-way for lack of it. Nothing in the block may wait on the network.
    """
    con.execute("BEGIN IMMEDIATE")
    try:
        yield con
        con.execute("COMMIT")
    except BaseException:
        # SQLite may already have rolled back on its own (a full disk, say).
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise


def upgrade_in_place(path, *, application_id, version, upgrades, kind):
    """Bring an existing kit DB `kind` at `path` up to schema `version`, or refuse it.

    `upgrades` maps each older version to the statements that take it one step
    up. A missing or empty file, or a file already at `version`, is left to
    open_db. An older version is upgraded in ONE transaction (every step, then
    the new user_version), so it ends either fully upgraded or untouched. A
    file stamped with a newer version, or with a version `upgrades` does not
    know, raises WrongDatabase and is left byte-for-byte unchanged; so does a
    file that is not ours (open_db's own check says so).
    """
    path = os.fspath(path)
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        return
    found = _stamped_version(path, application_id=application_id)
    if found is None or found == version:
        return
    if found > version:
        raise _written_by_newer(path, kind, found, version)
    if any(step not in upgrades for step in range(found, version)):
        raise WrongDatabase("%r: no upgrade from %s DB schema %d; it was left unchanged" % (path, kind, found))
    con = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000.0)
    try:
        with transaction(con):
            # Look again under the write lock: another process may have upgraded it meanwhile.
            current = con.execute("PRAGMA user_version").fetchone()[0]
            for step in range(current, version):
                for statement in upgrades[step]:
                    con.execute(statement)
            con.execute("PRAGMA user_version = %d" % version)
    finally:
        con.close()


def refuse_other_version_readonly(path, *, application_id, version, kind, command):
    """Raise WrongDatabase if `path` is our DB at a schema other than `version`; only reads.

    Read-only openers cannot upgrade a file: for an older one the message
    names `command` (with %s for the path), for a newer one it says so.
    """
    path = os.fspath(path)
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        return
    found = _stamped_version(path, application_id=application_id)
    if found is not None and found > version:
        raise _written_by_newer(path, kind, found, version)
    if found is not None and found < version:
        raise WrongDatabase(
            "%r is a %s DB of an earlier release (schema %d, this code reads %d); upgrade it in place "
            "first with: %s (nothing was changed)" % (path, kind, found, version, command % path)
        )


def _written_by_newer(path, kind, found, version):
    return WrongDatabase(
        "%r is a %s DB written by a newer release (schema %d; this code knows up to %d); "
        "it was left unchanged" % (path, kind, found, version)
    )


def _stamped_version(path, *, application_id):
    """user_version of `path` if it carries `application_id`, else None. Only reads, and creates no file."""
    try:
        con = connect_readonly(path, "kit")
    except OutboxError:
        return None  # open_db / open_readonly give the precise refusal
    try:
        if con.execute("PRAGMA application_id").fetchone()[0] != application_id:
            return None
        return con.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError:
        return None
    finally:
        con.close()


@contextlib.contextmanager
def bookkeeping(con):
    """`transaction`, committed without an fsync of its own (``synchronous = NORMAL`` at most).

    For records that help an operator but decide nothing, such as a delivery
    attempt: losing the last few to a power cut is harmless, and an fsync per
    attempt would double the cost of every delivery. The connection's own
    setting is read first and restored afterwards, whatever it was.
    """
    previous = con.execute("PRAGMA synchronous").fetchone()[0]
    con.execute("PRAGMA synchronous = %d" % min(previous, 1))  # 1 = NORMAL; never raise OFF to NORMAL
    try:
        with transaction(con):
            yield con
    finally:
        con.execute("PRAGMA synchronous = %d" % previous)
