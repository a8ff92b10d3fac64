"""What the sink reads while it serves, off the store thread: the ACK's digest and the /metrics text.

Owns the read-only connections the server's worker threads read through (one
per thread, opened on its first read, closed by that thread) and the snapshot
GET /metrics answers from. It never writes and runs no SQL of its own (sink.views
does): the store thread (sink.storethread) runs only `receive`, so no number of
readers adds a step to an honest POST's wait.

The snapshot is at most `max_age` seconds old when it is rendered again; while
one thread renders it, the others answer from the previous one. So a flood of
GET /metrics costs one render per `max_age`, whatever the number of readers.
"""

import threading
import time

from . import metrics, views
from .core import ack

MAX_AGE = 1.0  # seconds: the figures /metrics shows are at most this old, plus one render


class NotReady(Exception):
    """The first snapshot is being read by another thread: no figures to answer with yet (the server says 503)."""


class Readings:
    """Reads of the sink DB at `db_path` for the server's workers; `close_mine()` when a worker thread ends."""

    def __init__(self, db_path, *, max_age=MAX_AGE, clock=time.monotonic):
        self.db_path = db_path
        self.max_age = max_age
        self._clock = clock
        self._local = threading.local()
        self._render = threading.Lock()  # one render at a time; the others answer from the last snapshot
        self._snapshot = (None, None)  # (text, clock when its read began), replaced whole

    def held_digest(self, event_id):
        """The digest the inbox holds for `event_id`, or None, read on this thread's own read-only connection."""
        return ack.held_digest(self._connection(), event_id)  # audit: G26

    def metrics_text(self):
        """The sink's figures as Prometheus text, from a snapshot at most `max_age` old (plus the render under way).

        No reader waits for another's render: once a snapshot exists, a reader
        that finds another thread rendering gets the previous one; before the
        first one exists, it gets NotReady. So at most one worker is ever busy
        with /metrics, whatever the readers, and the others answer POSTs.
        """
        text, taken = self._snapshot
        if text is not None and self._clock() - taken < self.max_age:
            return text
        if not self._render.acquire(blocking=False):
            if text is None:
                raise NotReady("the sink's first /metrics snapshot is being read; ask again in a moment")
            return text  # someone renders the next one: this one is at most max_age + one render old
        try:
            text, taken = self._snapshot
            if text is None or self._clock() - taken >= self.max_age:
                began = self._clock()  # the read starts now: the age is counted from before it, never after
                text = metrics.render(views.status(self._connection()))
                self._snapshot = (text, began)
            return text
        finally:
            self._render.release()

    def open_mine(self):
        """Open this thread's connection now (the server's workers do, before it serves); OutboxError if it cannot."""
        self._connection()

    def close_mine(self):
        """Close this thread's connection, if it opened one."""
        con = getattr(self._local, "con", None)
        if con is not None:
            self._local.con = None
            con.close()

    def _connection(self):
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = views.open_readonly(self.db_path)
        return con
