"""The bench's baseline sink: the same durable work as the kit's, in plain http.server.

POST /events: one BEGIN IMMEDIATE .. COMMIT per event on ONE connection held
for the life of the server (WAL, synchronous=FULL, or NORMAL with --durability
process): inbox row, inventory upsert, deliveries row; a known id only logs a
delivery. Each answer goes out in one write. Prints its URL once it listens.
No validation beyond JSON: it is the floor the kit's sink is measured against.
"""
import argparse
import hashlib
import http.server
import json
import sqlite3
import threading
import time

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS inbox (event_id TEXT PRIMARY KEY, digest TEXT NOT NULL, payload TEXT NOT NULL,"
    " applied_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS inventory (sku TEXT PRIMARY KEY, qty INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS deliveries (seq INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL,"
    " outcome TEXT NOT NULL, digest TEXT NOT NULL, received_at REAL NOT NULL)",
)
SYNCHRONOUS = {"full": "PRAGMA synchronous = FULL", "process": "PRAGMA synchronous = NORMAL"}


def record(con, event):
    """The durable work of one event, in one transaction; return its outcome."""
    payload = json.dumps(event, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(payload.encode("ascii")).hexdigest()
    now = time.time()
    con.execute("BEGIN IMMEDIATE")
    row = con.execute("SELECT digest FROM inbox WHERE event_id = ?", (event["id"],)).fetchone()
    outcome = "applied" if row is None else "duplicate" if row[0] == digest else "conflict"
    if row is None:
        con.execute("INSERT INTO inbox VALUES (?, ?, ?, ?)", (event["id"], digest, payload, now))
        cur = con.execute("UPDATE inventory SET qty = qty + ? WHERE sku = ?", (event["qty"], event["sku"]))
        if cur.rowcount == 0:
            con.execute("INSERT INTO inventory VALUES (?, ?)", (event["sku"], event["qty"]))
    con.execute(
        "INSERT INTO deliveries (event_id, outcome, digest, received_at) VALUES (?, ?, ?, ?)",
        (event["id"], outcome, digest, now),
    )
    con.execute("COMMIT")
    return outcome


def connect(path, durability="full"):
    """The baseline's one connection: WAL, synchronous FULL (or NORMAL), schema created."""
    con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    con.execute("PRAGMA journal_mode = WAL").fetchall()  # a row: read it, or PyPy keeps the statement open
    con.execute(SYNCHRONOUS[durability])
    for statement in SCHEMA:
        con.execute(statement)
    return con


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_POST(self):
        event = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            outcome = record(self.server.con, event)
        answer = json.dumps({"ack": outcome != "conflict", "id": event["id"], "result": outcome}).encode("ascii")
        status = b"200 OK" if outcome != "conflict" else b"409 Conflict"
        self.wfile.write(
            b"HTTP/1.0 " + status + b"\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(answer)).encode("ascii") + b"\r\nConnection: close\r\n\r\n" + answer
        )

    def log_message(self, format, *args):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--durability", choices=sorted(SYNCHRONOUS), default="full")
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.lock = threading.Lock()
    server.con = connect(args.db, args.durability)
    print("http://127.0.0.1:%d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()  # until SIGTERM, which ends the process
    finally:
        server.server_close()
        server.con.close()


if __name__ == "__main__":
    main()
