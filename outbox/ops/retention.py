"""Retention: how long sent outbox rows are kept, and removing them in bounded batches.

Owns the duration syntax (30s, 15m, 12h, 7d) and the purge loop; the SQL
is operations.purge_sent_batch. It never removes a pending or quarantined row,
nor an order row, and each batch is its own short transaction.
"""
import re
import time

from . import operations

PURGE_BATCH = 500
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"([0-9]{1,9})([smhd])\Z")
DURATION_RULE = "a whole number followed by s, m, h or d, e.g. 30s, 15m, 12h, 7d (0s means every sent row)"


def parse_duration(text):
    """Seconds in `text` (``30s``, ``15m``, ``12h``, ``7d``); anything else raises ValueError naming the rule."""
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError("duration must be %s, got %r" % (DURATION_RULE, text))
    return int(match.group(1)) * UNITS[match.group(2)]


def purge(con, older_than_s, *, batch=PURGE_BATCH, now=None):
    """Delete sent outbox rows sent at least `older_than_s` seconds ago; return how many.

    Batches of at most `batch` rows, each its own transaction, so a writer
    waits at most one batch for the lock. `now` defaults to time.time().
    """
    cutoff = (time.time() if now is None else now) - older_than_s
    removed = 0
    while True:
        count = operations.purge_sent_batch(con, cutoff, batch)  # audit: G46
        removed += count
        if count < batch:
            return removed
