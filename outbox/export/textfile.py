"""A node_exporter textfile, replaced whole: a temporary file beside it, then a rename.

Owns only that: a reader (the textfile collector) sees the old file or the
new one, never a half-written one. The temporary name ends in ``.tmp``, which
the collector skips (it reads ``*.prom``). No DB, no socket.
"""
import os
import tempfile
import time

# On Windows a rename onto a file that a reader holds open fails (PermissionError, access denied) until it closes
# it: a collector reads for a moment, so the rename is tried again for up to this many seconds before it fails.
WINDOWS_RENAME_PATIENCE = 1.0


def replace(path, text):
    """Write `text` to `path` atomically (same directory, os.replace); OSError if it cannot.

    The file gets mode 0644 (a collector often runs as another user); the
    temporary file is removed if anything fails before the rename.
    """
    path = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix="." + name + ".", suffix=".tmp", dir=folder)  # audit: G48
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(temporary, 0o644)
        _rename_over(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _rename_over(temporary, path):
    """os.replace; on Windows, tried again while a reader has `path` open (WINDOWS_RENAME_PATIENCE)."""
    deadline = time.monotonic() + WINDOWS_RENAME_PATIENCE
    while True:
        try:
            os.replace(temporary, path)
            return
        except PermissionError:
            if os.name != "nt" or time.monotonic() >= deadline:
                raise
            time.sleep(0.001)
