"""The sink's figures in the Prometheus text format, for `GET /metrics` and `python -m sink status`.

Turns the dict of sink.views.status into text and nothing else: no SQL,
no HTTP. The server calls `render(views.status(con))` and sends the result
as ``text/plain; version=0.0.4``.
"""
from outbox.export import prometheus

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def render(status):
    """`status` (sink.views.status) as Prometheus text: deliveries by outcome, inventory, last delivery time."""
    lines = prometheus.family(
        "sink_deliveries_total", "counter", "Deliveries logged by the sink, by outcome (one row each).",
        [({"outcome": "applied"}, status["applied"]), ({"outcome": "duplicate"}, status["duplicates"]),
         ({"outcome": "conflict"}, status["conflicts"])],
    )
    lines += prometheus.family(
        "sink_last_delivery_timestamp_seconds", "gauge", "Time of the latest delivery (Unix seconds); absent before any.",
        [({}, status.get("last_delivery_unix"))],
    )
    lines += prometheus.family(
        "sink_inventory_qty", "gauge", "Quantity on hand per sku.",
        [({"sku": sku}, qty) for sku, qty in sorted(status["inventory"].items())],
    )
    return "\n".join(lines) + "\n"
