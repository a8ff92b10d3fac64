"""sink.core: the sink's guarantee kernel.

The inbox: the sink DB's schema and `receive`, which applies each event id at
most once in one transaction; and ack, the decision that an ACK exists only
for a receipt `receive` committed. What never lives here: the HTTP front (framing,
server, store thread), the readers for people (views, metrics), faults and
the command line. tests/test_layout.py counts this folder as the kernel, with
outbox/core, and docs/audit.md gives its reading order.
"""
