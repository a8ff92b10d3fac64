"""The sink DB read for people: the inventory, the deliveries log, the figures to watch.

For the server's GET /metrics and for `python -m sink show` and `status`;
the one read an ACK depends on, its digest, is sink.core.ack.held_digest.
Nothing here writes: `open_readonly` opens a connection that cannot
(outbox.core.readonly), and the others only SELECT on the connection they
are given. The tables are sink.core.inbox's, which writes them.
"""

from outbox.core import readonly
from outbox.export import timestamps

from .core.inbox import APPLICATION_ID, APPLIED, CONFLICT, DUPLICATE, SCHEMA_VERSION


def open_readonly(path):
    """Open an existing sink DB only to read it (see outbox.core.readonly); never creates a file."""
    return readonly.open_readonly(path, application_id=APPLICATION_ID, version=SCHEMA_VERSION, kind="sink")


def inventory(con):
    """All (sku, qty) rows, ordered by sku. Read-only."""
    return con.execute("SELECT sku, qty FROM inventory ORDER BY sku").fetchall()


def deliveries(con):
    """All (seq, event_id, outcome, digest, received_at) rows, in arrival order. Read-only."""
    return con.execute("SELECT seq, event_id, outcome, digest, received_at FROM deliveries ORDER BY seq").fetchall()


def status(con):
    """What an operator watches at the sink, as a dict. Read-only.

    applied, duplicates, conflicts: counts from the deliveries log;
    last_delivery_at: the latest delivery's time as UTC ISO 8601, or None
    (last_delivery_unix: the same as seconds since the epoch); inventory:
    {sku: qty}. Every figure is read in one read transaction (unless `con`
    is in one already), so a receipt committed meanwhile is in all of them or
    in none: the counts and the inventory agree.
    """
    own = not con.in_transaction
    if own:
        con.execute("BEGIN")
    try:
        counts = dict(con.execute("SELECT outcome, count(*) FROM deliveries GROUP BY outcome").fetchall())
        last = con.execute("SELECT max(received_at) FROM deliveries").fetchone()[0]
        stock = {sku: qty for sku, qty in inventory(con)}
    finally:
        if own:
            con.execute("COMMIT")  # a read transaction: it ends, nothing is written
    return {
        "applied": counts.get(APPLIED, 0),
        "duplicates": counts.get(DUPLICATE, 0),
        "conflicts": counts.get(CONFLICT, 0),
        "last_delivery_at": None if last is None else timestamps.utc(last),
        "last_delivery_unix": last,
        "inventory": stock,
    }
