"""make bench: speed claims as ratios measured side by side in one run.

1. The pending query with 1,000,000 sent rows against 10 sent rows (the
   partial index should keep the ratio near 1), and the same query forced to
   scan the table (NOT INDEXED) as the baseline the index saves us from.
2. A whole dispatch batch of 16 over loopback HTTP against the same batch with
   a no-op send: what the network round trips cost relative to the DB work.
No thresholds: the numbers are printed for a person to read.
"""
import os
import shutil
import sys
import tempfile
import time

sys.path[:1] = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]

from outbox import dispatch, init_store, intake, send_http  # noqa: E402
from outbox.store import PENDING_SQL, pending  # noqa: E402
from sink.server import make_server  # noqa: E402

SCAN_SQL = PENDING_SQL.replace("FROM outbox", "FROM outbox NOT INDEXED")


def build(path, sent_rows, pending_rows=10):
    con = init_store(path)
    con.execute("BEGIN IMMEDIATE")
    rows = ((("s%07d" % i), "bench", 1, 0.0) for i in range(sent_rows))
    con.executemany("INSERT INTO orders (id, sku, qty, created_at) VALUES (?, ?, ?, ?)", rows)
    con.execute(
        "INSERT INTO outbox (event_id, payload, sent, created_at) "
        "SELECT id, json_object('id', id, 'qty', qty, 'sku', sku), 1, 0.0 FROM orders ORDER BY id"
    )
    con.execute("COMMIT")
    for i in range(pending_rows):
        intake(con, {"id": "p%02d" % i, "sku": "bench", "qty": 1})
    return con


def best_of(fn, repeat=200):
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def main():
    tmp = tempfile.mkdtemp(prefix="outbox-bench-")
    try:
        small = build(os.path.join(tmp, "small.db"), 10)
        print("building 1,000,000 sent rows ...", flush=True)
        large = build(os.path.join(tmp, "large.db"), 1000000)
        t_small = best_of(lambda: pending(small, 16))
        t_large = best_of(lambda: pending(large, 16))
        t_scan = best_of(lambda: large.execute(SCAN_SQL, (16,)).fetchall(), repeat=5)
        print("pending(16), 10 sent rows:          %9.1f us" % (t_small * 1e6))
        print("pending(16), 1,000,000 sent rows:   %9.1f us   ratio %.2f (1.0 = no slower)" % (t_large * 1e6, t_large / t_small))
        print("same query without the index:       %9.1f us   ratio %.0f" % (t_scan * 1e6, t_scan / t_small))

        server = make_server(os.path.join(tmp, "sink.db"), "127.0.0.1", 0)
        server.start()
        try:
            url = server.url() + "/events"
            http_db = init_store(os.path.join(tmp, "http.db"))
            noop_db = init_store(os.path.join(tmp, "noop.db"))
            rounds = 20
            t_http = t_noop = 0.0
            for r in range(rounds):
                for con in (http_db, noop_db):
                    for i in range(16):
                        intake(con, {"id": "r%02d-%02d" % (r, i), "sku": "bench", "qty": 1})
                started = time.perf_counter()
                dispatch(http_db, lambda e: send_http(url, e))
                t_http += time.perf_counter() - started
                started = time.perf_counter()
                dispatch(noop_db, lambda e: True)
                t_noop += time.perf_counter() - started
        finally:
            server.stop()
        print("dispatch of 16, loopback HTTP:      %9.1f ms" % (t_http / rounds * 1e3))
        print("dispatch of 16, send returns True:  %9.1f ms   HTTP/no-op ratio %.1f" % (t_noop / rounds * 1e3, t_http / t_noop))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
