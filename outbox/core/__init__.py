"""outbox.core: the publisher's guarantee kernel.

Every line an event's guarantee runs through on the publishing side lives
here: the errors, the event rules, opening a DB (with what `init_store` runs
before `db.open_db`: the history tables, the upgrade and its read-only look),
the store, `dispatch` and the HTTP sender. What never does: operator code
(outbox.ops), exporters (outbox.export) and command lines (outbox.cli); no
module here imports them. tests/test_layout.py counts this folder as the
kernel and docs/audit.md gives its reading order.
"""
