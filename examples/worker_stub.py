"""worker.py: the lab's exercise. Fill in each function; then run

    python grade.py --impl path/to/worker.py

Every function below is graded through its contract alone, by real processes
that crash and reopen your files. As shipped, each one raises
NotImplementedError, and every check of the grader fails with a reason.
Standard library only. The signatures below are the contract: the grader
calls your functions with exactly these parameters (the kit's own extras,
durability=, require_digest=, before_send=, on_failure= and intake_many, are
not part of it).
The grader reads your DBs itself, so keep these tables:
source `orders(id, ...)` and `outbox(seq, event_id, payload, sent, ...)`, where
`sent` is 0 or 1, `seq` an INTEGER PRIMARY KEY AUTOINCREMENT (never reused)
and `payload` the JSON of the event (one object with id, sku and qty); sink
`inbox(event_id, ...)`, `inventory(sku, qty)` (one row per sku) and
`deliveries(event_id, outcome, ...)`, one row per delivery in arrival order.
Both DBs in WAL mode, every connection you return with synchronous=FULL or
EXTRA. Exceptions are judged by class name: define (or import) classes named
DeliveryError, Conflict and WrongDatabase, and use ValueError and KeyError.
docs/rules.md lists every rule with the check that enforces it; CHANGELOG.md
says what each grader release asks of a worker. examples/worker_stub_ja.py is
this stub with its docstrings in Japanese.
"""


def validate_event(event):
    """Return a NEW dict with exactly id, sku, qty, or raise a ValueError naming the field.

    id, sku: str, 1-64 characters from A-Z a-z 0-9 . _ : -, first a letter or digit.
    qty: int from 1 to 1,000,000; a bool is not an int here.
    Never modify the argument.
    """
    raise NotImplementedError("validate_event")


def init_store(path):
    """Open or create the source DB (orders, outbox); return a sqlite3.Connection.

    outbox.seq records intake order (INTEGER PRIMARY KEY AUTOINCREMENT). WAL,
    synchronous=FULL (or EXTRA) on the connection you return. New: a missing
    file, a 0-byte file with no -wal beside it, an SQLite file with no table.
    Anything else that is not your source DB (a sink DB, a text file, another
    application's DB) raises an exception class named WrongDatabase, and the
    file and its -wal are left byte-for-byte unchanged: look before you write,
    even a PRAGMA. The other side may still have its DB open, its tables only
    in its -wal: look through SQLite (mode=ro), not at the size, not with
    immutable=1.
    """
    raise NotImplementedError("init_store")


def intake(con, event):
    """Write the order row and its unsent outbox row in ONE transaction; return the seq.

    Validate first: an invalid event raises ValueError and writes nothing.
    Return the seq of the outbox row (an int); a seq is never reused.
    The same id with the same event again: return the existing seq, write nothing.
    The same id with another event (any field, the sku alone too): raise an
    exception class named Conflict, write nothing.
    """
    raise NotImplementedError("intake")


def pending(con, limit=16):
    """Return up to `limit` unsent events (dicts with exactly id, sku, qty) in seq order; change nothing.

    limit: an int from 1 to 16 (not a bool), else ValueError. Leave no
    transaction open. Its cost must not grow with the number of sent rows:
    give it an index that holds only unsent rows
    (CREATE INDEX ... ON outbox(seq) WHERE sent = 0).
    """
    raise NotImplementedError("pending")


def mark_sent(con, event_id):
    """Mark that outbox row sent in its own transaction: True if changed, False if already sent.

    Only that row, committed before you return. An unknown id raises KeyError.
    """
    raise NotImplementedError("mark_sent")


def dispatch(con, send, limit=16, *, after_delivery=None):
    """Send one batch of at most `limit` pending events in seq order; return how many were marked sent.

    send(copy) must return exactly True for an item to be marked; then call
    after_delivery(copy) if given, then mark_sent with the id you selected.
    `send` and `after_delivery` each get a copy of their own of the selected
    event (a new dict with `id`, `sku`, `qty`); `dispatch` marks with the id of
    its own selection, so rewriting a copy changes nothing.
    Stop at the first failure and let the original exception object out; a
    non-True result raises. Hold no transaction while send runs. Return how
    many items this call marked.
    """
    raise NotImplementedError("dispatch")


def send_http(url, event, *, timeout=5.0):
    """POST the event as JSON to http://<loopback>[:port]/events; return exactly True on a verified ACK.

    Refuse (ValueError) any other URL before any socket or name lookup: another
    host, https, another path (/events/ too), user info, a query, a fragment.
    Loopback is localhost in any letter case, 127.a.b.c (each 0-255, no leading
    zeros: not 127.000.0.1, 127.0.0.256 or 127.1) or [::1]; the port is 1-65535
    without leading zeros, or absent (80): an empty port and port 0 are refused.
    No proxies, no redirects. `timeout` bounds the whole exchange, not each
    read: a sink that answers one byte at a time must not hold the call past it.
    A verified ACK: status 200 exactly, a body of at most 4 KiB (4,096 bytes
    pass), a JSON object with "ack": true and "id" equal to the id sent (other
    keys are ignored; you need not check a "digest"). Anything else raises an
    exception whose class is named DeliveryError (or inherits from one).
    """
    raise NotImplementedError("send_http")


def init_sink(path):
    """Open or create the sink DB (inbox, inventory, deliveries); return a sqlite3.Connection.

    WAL, synchronous=FULL (or EXTRA) on the connection you return. New files
    and refusals as in init_store: a source DB, a text file or another
    application's DB raises WrongDatabase, the file and its -wal unchanged.
    """
    raise NotImplementedError("init_sink")


def receive(con, event):
    """Apply an event at most once; return exactly "applied" or "duplicate".

    Validate first: an invalid event raises ValueError and writes nothing.
    In ONE transaction: a new id adds qty to its sku's inventory (two events of
    one sku add up) and records the id in the inbox; a known id with the same
    payload changes nothing but the deliveries log; a known id with another
    payload (any field, the sku alone too) logs a conflict, COMMITS it, and
    only then raises an exception class named Conflict. Every call on a valid
    event logs one deliveries row (outcome applied, duplicate or conflict).
    """
    raise NotImplementedError("receive")
