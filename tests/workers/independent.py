"""A worker written from the participant's documents alone: README.md, docs/lab.md and examples/worker_stub.py.

Not a copy of the kit: its own schema, its own validation, its own HTTP client
on a raw socket. It exists to prove that the documents are enough to pass the
grader, and that the grader accepts more than one way of keeping the contract
(tests/test_grade_rules.py grades it). Standard library only; it imports
nothing from the kit.
"""
import json
import os
import socket
import sqlite3
import time
import urllib.parse  # quote, for the read-only URI


class WrongDatabase(Exception):
    """The file at that path is not this side's DB; it was left unchanged."""


class Conflict(Exception):
    """The same id was seen before with another payload."""


class DeliveryError(Exception):
    """No verified ACK: the item stays pending."""


NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-")
ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
KEYS = ("id", "sku", "qty")
MAX_ACK = 4096


def validate_event(event):
    if not isinstance(event, dict):
        raise ValueError("event must be a dict, got %s" % type(event).__name__)
    missing = [k for k in KEYS if k not in event]
    extra = sorted(repr(k) for k in event if k not in KEYS)
    if missing or extra:
        raise ValueError("event keys must be exactly id, sku, qty (missing %s, extra %s)" % (missing, extra))
    for field in ("id", "sku"):
        value = event[field]
        if (not isinstance(value, str) or not 1 <= len(value) <= 64 or value[0] not in ALNUM
                or any(c not in NAME_CHARS for c in value)):
            raise ValueError("%s must be 1-64 characters of A-Z a-z 0-9 . _ : -, first a letter or digit, got %r"
                             % (field, value))
    qty = event["qty"]
    if type(qty) is not int or not 1 <= qty <= 1000000:
        raise ValueError("qty must be an int from 1 to 1000000, got %r (%s)" % (qty, type(qty).__name__))
    return {"id": event["id"], "sku": event["sku"], "qty": qty}


def canonical(event):
    return json.dumps(event, sort_keys=True, separators=(",", ":"))


# --------------------------------------------------------------------------
# Opening a DB: look (read-only) before anything writes, then create or accept.
# --------------------------------------------------------------------------

SOURCE_SCHEMA = (
    "CREATE TABLE worker_kind (kind TEXT NOT NULL)",
    "CREATE TABLE orders (id TEXT PRIMARY KEY, sku TEXT NOT NULL, qty INTEGER NOT NULL, taken_at REAL NOT NULL)",
    "CREATE TABLE outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL UNIQUE, "
    "payload TEXT NOT NULL, sent INTEGER NOT NULL DEFAULT 0 CHECK (sent IN (0, 1)))",
    "CREATE INDEX outbox_unsent ON outbox(seq) WHERE sent = 0",
    "INSERT INTO worker_kind (kind) VALUES ('source')",
)
SINK_SCHEMA = (
    "CREATE TABLE worker_kind (kind TEXT NOT NULL)",
    "CREATE TABLE inbox (event_id TEXT PRIMARY KEY, payload TEXT NOT NULL)",
    "CREATE TABLE inventory (sku TEXT PRIMARY KEY, qty INTEGER NOT NULL)",
    "CREATE TABLE deliveries (n INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL, outcome TEXT NOT NULL)",
    "INSERT INTO worker_kind (kind) VALUES ('sink')",
)


def _kind_of(path):
    """None for a file that does not exist or holds no table; else the kind stamped in it (or raise)."""
    if not os.path.exists(path):
        return None
    uri = "file:%s?mode=ro" % urllib.parse.quote(os.path.abspath(path))
    try:
        con = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise WrongDatabase("%s: %s" % (path, exc))
    try:
        tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            return None
        if "worker_kind" not in tables:
            raise WrongDatabase("%s holds tables %s, not a DB of this worker" % (path, sorted(tables)))
        row = con.execute("SELECT kind FROM worker_kind").fetchone()
        return row[0] if row else "?"
    except sqlite3.DatabaseError as exc:
        raise WrongDatabase("%s is not an SQLite DB: %s" % (path, exc))
    finally:
        con.close()


def _open(path, kind, schema):
    found = _kind_of(path)
    if found is not None and found != kind:
        raise WrongDatabase("%s is a %s DB, not a %s DB; left unchanged" % (path, found, kind))
    con = sqlite3.connect(path, isolation_level=None, timeout=10)
    try:
        con.execute("PRAGMA journal_mode = WAL").fetchall()  # it returns a row: read it, or PyPy keeps it open
        con.execute("PRAGMA synchronous = FULL")
        if found is None:
            con.execute("BEGIN IMMEDIATE")
            try:
                if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'worker_kind'").fetchone():
                    for statement in schema:
                        con.execute(statement)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
    except BaseException:
        con.close()
        raise
    return con


def init_store(path):
    return _open(path, "source", SOURCE_SCHEMA)


def init_sink(path):
    return _open(path, "sink", SINK_SCHEMA)


class _Transaction:
    def __init__(self, con):
        self.con = con

    def __enter__(self):
        self.con.execute("BEGIN IMMEDIATE")
        return self.con

    def __exit__(self, kind, value, tb):
        self.con.execute("COMMIT" if kind is None else "ROLLBACK")
        return False


# --------------------------------------------------------------------------
# The source side.
# --------------------------------------------------------------------------


def intake(con, event):
    event = validate_event(event)
    payload = canonical(event)
    with _Transaction(con):
        row = con.execute("SELECT seq, payload FROM outbox WHERE event_id = ?", (event["id"],)).fetchone()
        if row is not None:
            if json.loads(row[1]) != event:
                raise Conflict("%r was taken in before as %s" % (event["id"], row[1]))
            return row[0]
        con.execute("INSERT INTO orders (id, sku, qty, taken_at) VALUES (?, ?, ?, ?)",
                    (event["id"], event["sku"], event["qty"], time.time()))
        return con.execute("INSERT INTO outbox (event_id, payload) VALUES (?, ?)", (event["id"], payload)).lastrowid


def pending(con, limit=16):
    if type(limit) is not int or not 1 <= limit <= 16:
        raise ValueError("limit must be an int from 1 to 16, got %r" % (limit,))
    rows = con.execute("SELECT payload FROM outbox WHERE sent = 0 ORDER BY seq LIMIT ?", (limit,)).fetchall()
    return [validate_event(json.loads(payload)) for (payload,) in rows]


def mark_sent(con, event_id):
    with _Transaction(con):
        if con.execute("UPDATE outbox SET sent = 1 WHERE event_id = ? AND sent = 0", (event_id,)).rowcount:
            return True
        if con.execute("SELECT 1 FROM outbox WHERE event_id = ?", (event_id,)).fetchone() is None:
            raise KeyError(event_id)
        return False


def dispatch(con, send, limit=16, *, after_delivery=None):
    batch = pending(con, limit)
    done = 0
    for event in batch:
        result = send(dict(event))
        if result is not True:
            raise DeliveryError("send returned %r for %r; only True is an ACK" % (result, event["id"]))
        if after_delivery is not None:
            after_delivery(dict(event))
        if mark_sent(con, event["id"]):
            done += 1
    return done


# --------------------------------------------------------------------------
# The HTTP sender, on a plain socket: no proxy handling to switch off, no redirect to refuse.
# --------------------------------------------------------------------------


def _loopback(url):
    """(host, port) of http://HOST[:PORT]/events with a loopback HOST, else ValueError. No I/O."""
    if not isinstance(url, str) or not url.startswith("http://"):
        raise ValueError("url must start with http://, got %r" % (url,))
    authority, slash, path = url[len("http://"):].partition("/")
    if slash + path != "/events":
        raise ValueError("url must be http://<loopback>[:port]/events (no other path, query or fragment): %r" % url)
    if authority.startswith("["):
        host, _, rest = authority[1:].partition("]")
        if host != "::1" or (rest and not rest.startswith(":")):
            raise ValueError("only [::1] in brackets: %r" % url)
        port_text = rest[1:] if rest else None
    else:
        host, colon, port_text = authority.partition(":")
        port_text = port_text if colon else None
    if port_text is None:
        port = 80
    elif port_text.isdigit() and port_text.isascii() and port_text[0] != "0" and int(port_text) <= 65535:
        port = int(port_text)
    else:
        raise ValueError("port must be 1-65535 without leading zeros, got %r" % port_text)
    octets = host.split(".")
    quad = len(octets) == 4 and all(o.isascii() and o.isdigit() and (o == "0" or o[0] != "0") and int(o) <= 255
                                   for o in octets)
    if not (host.lower() == "localhost" or host == "::1" or (quad and octets[0] == "127")):
        raise ValueError("host %r is not loopback" % host)
    return host, port


def send_http(url, event, *, timeout=5.0):
    host, port = _loopback(url)
    event = validate_event(event)
    body = canonical(event).encode("ascii")
    request = (b"POST /events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (host.encode("ascii"), len(body))) + body
    deadline = time.monotonic() + timeout

    def left():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DeliveryError("no answer within %gs" % timeout)
        return remaining

    data = b""
    try:
        sock = socket.create_connection((host, port), timeout=left())
        try:
            sock.settimeout(left())
            sock.sendall(request)
            while len(data) <= MAX_ACK + 65536:
                sock.settimeout(left())
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        finally:
            sock.close()
    except OSError as exc:
        raise DeliveryError("no answer from %s: %s" % (url, exc))
    head, sep, payload = data.partition(b"\r\n\r\n")
    if not sep:
        raise DeliveryError("no complete response from %s" % url)
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ")
    if len(status) < 2 or status[1] != "200":
        raise DeliveryError("status %r is not 200" % lines[0])
    headers = dict(line.lower().split(":", 1) for line in lines[1:] if ":" in line)
    length = headers.get("content-length", "").strip()
    if length.isdigit():
        if int(length) > MAX_ACK:
            raise DeliveryError("ACK of %s bytes is over 4 KiB" % length)
        if len(payload) < int(length):
            raise DeliveryError("ACK cut short")
        payload = payload[:int(length)]
    if len(payload) > MAX_ACK:
        raise DeliveryError("ACK over 4 KiB")
    try:
        ack = json.loads(payload.decode("utf-8"))
    except ValueError:
        raise DeliveryError("ACK is not JSON")
    if not isinstance(ack, dict) or ack.get("ack") is not True or ack.get("id") != event["id"]:
        raise DeliveryError("ACK %r is not an ACK for %r" % (ack, event["id"]))
    return True


# --------------------------------------------------------------------------
# The sink side.
# --------------------------------------------------------------------------


def receive(con, event):
    event = validate_event(event)
    payload = canonical(event)
    conflict = None
    with _Transaction(con):
        row = con.execute("SELECT payload FROM inbox WHERE event_id = ?", (event["id"],)).fetchone()
        if row is None:
            outcome = "applied"
            con.execute("INSERT INTO inbox (event_id, payload) VALUES (?, ?)", (event["id"], payload))
            if not con.execute("UPDATE inventory SET qty = qty + ? WHERE sku = ?", (event["qty"], event["sku"])).rowcount:
                con.execute("INSERT INTO inventory (sku, qty) VALUES (?, ?)", (event["sku"], event["qty"]))
        elif json.loads(row[0]) == event:
            outcome = "duplicate"
        else:
            outcome = "conflict"
            conflict = row[0]
        con.execute("INSERT INTO deliveries (event_id, outcome) VALUES (?, ?)", (event["id"], outcome))
    if conflict is not None:
        raise Conflict("%r was applied before as %s" % (event["id"], conflict))
    return outcome
