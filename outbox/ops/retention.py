"""Retention: how long sent outbox rows are kept, and removing them in bounded batches.

Owns the duration syntax (30s, 15m, 12h, 7d, at most 3650d) and the purge loop; the SQL
is operations.purge_sent_batch. It never removes a pending or quarantined row,
nor an order row, and each batch is its own short transaction.
"""
import re
import time

from . import operations
from ..core.event import clip

PURGE_BATCH = 500
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_DURATION = "3650d"  # ten years: longer is a typo, never a plan (and is refused, not cut down)
MAX_DURATION_S = 3650 * 86400
_DURATION = re.compile(r"([0-9]+)([smhd])\Z")
DURATION_RULE = "a whole number followed by s, m, h or d, e.g. 30s, 15m, 12h, 7d, at most %s" % MAX_DURATION
PURGE_RULE = DURATION_RULE + "; 0s means every sent row"  # true of purge --sent-before alone


def parse_duration(text, rule=DURATION_RULE):
    """Seconds in `text` (``30s``, ``15m``, ``12h``, ``7d``, at most MAX_DURATION); else ValueError naming `rule`.

    `rule` is the wording for the flag that reads it (PURGE_RULE for purge),
    so a message says only what is true of that flag.
    """
    match = _DURATION.match(text) if isinstance(text, str) else None
    # 13 digits already exceed MAX_DURATION_S in seconds; a longer string is never turned into an int.
    if match is None or len(match.group(1)) > 12 or int(match.group(1)) * UNITS[match.group(2)] > MAX_DURATION_S:
        raise ValueError("duration must be %s, got %s" % (rule, clip(text)))
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
