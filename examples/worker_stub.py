"""worker.py: the lab's exercise. Fill in each function; then run

    python grade.py --impl path/to/worker.py

Every function below is graded through its contract alone, by real processes
that crash and reopen your files. As shipped, each one raises
NotImplementedError, and every check of the grader fails with a reason.
Standard library only. The grader reads your DBs itself, so keep these tables:
source `orders(id, ...)` and `outbox(seq, event_id, payload, sent, ...)`, where
`sent` is 0 or 1 and `payload` is the JSON of the event (one object with id,
sku and qty); sink `inbox(event_id, ...)`, `inventory(sku, qty)` and
`deliveries(event_id, outcome, ...)`, one row per delivery in arrival order.
Both DBs in WAL mode, every connection you return with synchronous=FULL.
Exceptions are judged by class name: define (or import) classes named
DeliveryError, Conflict and WrongDatabase, and use ValueError and KeyError.
See CHANGELOG.md for what each grader release asks of a worker.
examples/worker_stub_ja.py is this stub with its docstrings in Japanese.
"""


def validate_event(event):
    """Return a NEW dict with exactly id, sku, qty, or raise a ValueError naming the field.

    id, sku: str, 1-64 characters from A-Z a-z 0-9 . _ : -, first a letter or digit.
    qty: int from 1 to 1,000,000; a bool is not an int here.
    """
    raise NotImplementedError("validate_event")


def init_store(path):
    """Open or create the source DB (orders, outbox); return a sqlite3.Connection.

    outbox.seq records intake order (INTEGER PRIMARY KEY AUTOINCREMENT). WAL,
    synchronous=FULL on the connection you return. A sink DB (or any file that
    is not your source DB) raises an exception class named WrongDatabase and is
    left byte-for-byte unchanged: look before you write, even a PRAGMA.
    """
    raise NotImplementedError("init_store")


def intake(con, event):
    """Write the order row and its unsent outbox row in ONE transaction; return the seq.

    The same id with the same event again: return the existing seq, write nothing.
    The same id with another event: raise an exception class named Conflict.
    """
    raise NotImplementedError("intake")


def pending(con, limit=16):
    """Return up to `limit` unsent events (dicts id, sku, qty) in seq order; change nothing.

    limit: an int from 1 to 16 (not a bool), else ValueError. Its cost must
    not grow with the number of sent rows: give it an index that holds only
    unsent rows (CREATE INDEX ... ON outbox(seq) WHERE sent = 0).
    """
    raise NotImplementedError("pending")


def mark_sent(con, event_id):
    """Mark that outbox row sent in its own transaction: True if changed, False if already sent.

    An unknown id raises KeyError.
    """
    raise NotImplementedError("mark_sent")


def dispatch(con, send, limit=16, *, after_delivery=None):
    """Send one batch of pending events in seq order; return how many were marked sent.

    send(copy) must return exactly True for an item to be marked; then call
    after_delivery(copy) if given, then mark_sent with the id you selected
    (not the one in the dict send saw). Stop at the first failure and let the
    original exception out; a non-True result raises. Hold no transaction
    while send runs.
    """
    raise NotImplementedError("dispatch")


def send_http(url, event, *, timeout=5.0):
    """POST the event as JSON to http://<loopback>[:port]/events; return True on a verified ACK.

    Refuse (ValueError) any other URL (another host, https, another path, user
    info, a query, a fragment) before any socket or name lookup. No proxies,
    no redirects. `timeout` bounds the whole exchange, not each read: a sink
    that answers one byte at a time must not hold the call past it.
    A verified ACK: status 200, a body of at most 4 KiB, a JSON object with
    "ack": true and "id" equal to the id sent. Anything else raises an
    exception whose class is named DeliveryError (or inherits from one).
    """
    raise NotImplementedError("send_http")


def init_sink(path):
    """Open or create the sink DB (inbox, inventory, deliveries); return a sqlite3.Connection.

    WAL, synchronous=FULL on the connection you return. A source DB (or any
    file that is not your sink DB) raises WrongDatabase, the file unchanged.
    """
    raise NotImplementedError("init_sink")


def receive(con, event):
    """Apply an event at most once; return "applied" or "duplicate".

    In ONE transaction: a new id adds qty to the sku's inventory and records the
    id in the inbox; a known id with the same payload changes nothing but the
    deliveries log; a known id with another payload logs a conflict, COMMITS
    it, and only then raises an exception class named Conflict. Every call on
    a valid event logs one deliveries row (outcome applied, duplicate or conflict).
    """
    raise NotImplementedError("receive")
