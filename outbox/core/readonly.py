"""Reading a kit database without writing or creating any file.

Owns the one read-only URI of the kit (`readonly_uri`) and the connections
opened through it: the source's read-only commands (outbox.ops.operations), the
publisher's view of a sink (outbox.ops.sinklook), the sink's own (sink.views)
and the look outbox.core.upgrade takes at a file before it upgrades it all open
here. Nothing here writes: ``mode=ro``, and ``query_only`` on top. (The
grader observes a worker's DB with a reader of its own, grader.common.)
"""
import os
import sqlite3
import urllib.parse

from . import db
from .errors import OutboxError, WrongDatabase

WRITER_COMMAND = {"source": "python3 -m outbox upgrade --db %s", "sink": "python3 -c \"import sqlite3, sys; "
                  "sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint')\" %s"}  # a writer rebuilds the -shm
_SQLITE_HEADER = b"SQLite format 3\x00"


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
        if db.look(con, path, application_id=application_id, version=version, kind=kind):
            raise WrongDatabase("%r is an empty file, not a %s DB of this kit" % (path, kind))
        con.execute("PRAGMA query_only = ON")  # audit: G37
    except BaseException:
        con.close()
        raise
    return con


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
    uri = "file:%s?mode=ro" % urllib.parse.quote(absolute)  # audit: G37
    wal, shm = absolute + "-wal", absolute + "-shm"
    # Both beside it: plain mode=ro whatever the header says, so the header is not read. Reading it opens and
    # closes the file, and that close drops every POSIX lock this process holds on it, an open connection's
    # too: another process's closing connection then takes itself for the last, and deletes the -wal.
    if os.path.exists(wal) and os.path.exists(shm):
        return uri
    if not _in_wal_mode(absolute):
        return uri
    if not os.path.exists(wal) or os.path.getsize(wal) == 0:
        return uri + "&immutable=1"
    writer = WRITER_COMMAND[kind] % path if kind in WRITER_COMMAND else "any command that writes to it"
    raise OutboxError(  # audit: G37
        "cannot read %r without creating a file: its write-ahead log %s holds commits not in the main file, and %s, "
        "the index SQLite needs to read them, is missing; do not remove the -wal. With no process using the DB, a "
        "user who may write in %s rebuilds the index by opening it to write once: %s; then read it again" % (
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
        con = db.connect(uri, uri=True)
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
