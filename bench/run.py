"""make bench: every speed figure of the kit as a ratio to a stdlib baseline, in one run.

Each figure runs ours (A) and its baseline (B) interleaved in this run, A B
then B A, for at least 5 rounds, and reports the median of the per-round
ratios with their min and max; never a number from another run. In-process
figures take turns step by step within each round (`paired`); servers and
whole processes take turns slice by slice (`interleave`). A/A rows (a
baseline against a second copy of itself) show the noise. Prints a table and
writes bench/results.json. Standard library only; slices are bounded in time,
so a loaded machine gives fewer events per slice rather than a longer run.
"""
import argparse
import contextlib
import http.client
import json
import os
import platform
import select
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

try:
    import resource
except ImportError:  # Windows: no CPU-seconds of the children there; the rows say n/a
    resource = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":
    sys.path[:1] = [ROOT]  # run as a script, sys.path[0] is bench/, not the root with the packages

from bench import baseline_sink  # noqa: E402
from tests import windows_leg  # noqa: E402
from outbox import dispatch, init_store, intake, intake_many, send_http  # noqa: E402
from outbox.core import db, store  # noqa: E402
from outbox.export import timestamps  # noqa: E402
from outbox.core.sender import HeldConnection  # noqa: E402
from outbox.core.store import pending  # noqa: E402
from sink.core import inbox  # noqa: E402

ROUNDS = 5
SLICE_S = 0.2  # one in-process slice of one side
HTTP_SLICE_S = 0.4  # one slice of 4 client threads against one server
WARMUP = 0.25  # a warm-up slice is this fraction of a measured one
HTTP_THREADS = 4
E2E_EVENTS = 400  # per side per round: 5 rounds deliver 2,000 events per side
E2E_CAP_S = 1.5  # ... unless a slice runs out of time first (then the row says how many)
CEILING_SLICE_S = 0.5  # each side's share of a round of the rows against the disk, batch by batch
CEILING_EVENTS = 12000  # pending events per side of such a row: more than 6 rounds of 1 s at 2,000/s
BULK_BATCH = 1000
BIG_SENT = 1000000
SMALL_SENT = 1000
MEMORY_SMALL, MEMORY_LARGE = 1000, 100000
MEMORY_CAP_S = 6.0
CHILD_START_S = 15.0
FLOOD_S = 2.0  # seconds of each /metrics or /health flood
CHURN_S = 5.0  # seconds of each churn round
RESULTS = os.path.join(ROOT, "bench", "results.json")


# ---------------------------------------------------------------- measuring


def interleave(ours, baseline, rounds, *, warmup=True):
    """Run ``ours(tag)`` and ``baseline(tag)`` alternately: A B, B A, A B, ...

    Returns (ours values, baseline values, per-round ratios ours/baseline). A
    warm-up call of each side (tag "warm", see span) comes first and is thrown away.
    """
    if warmup:
        ours("warm")
        baseline("warm")
    a_values, b_values, ratios = [], [], []
    for r in range(rounds):
        if r % 2 == 0:
            a, b = ours("r%d" % r), baseline("r%d" % r)
        else:
            b, a = baseline("r%d" % r), ours("r%d" % r)
        a_values.append(a)
        b_values.append(b)
        ratios.append(a / b)
    return a_values, b_values, ratios


def row(figure, unit, measured, *, goal, met, note=""):
    a_values, b_values, ratios = measured
    return {
        "figure": figure,
        "unit": unit,
        "ours": statistics.median(a_values),
        "baseline": statistics.median(b_values),
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "rounds": len(ratios),
        "goal": goal,
        "met": met,
        "note": note,
    }


def not_measured(figure, note, goal=""):
    return {"figure": figure, "unit": "", "ours": None, "baseline": None, "ratio": None, "ratio_min": None,
            "ratio_max": None, "rounds": 0, "goal": goal, "met": None, "note": note}


def span(tag, seconds=SLICE_S):
    """How long a slice runs: a warm-up one only briefly."""
    return seconds * WARMUP if tag == "warm" else seconds


def paired(ours, baseline, rounds, seconds=SLICE_S):
    """The finest interleaving, for steps of a few milliseconds at most.

    Within each round the sides take turns step by step (A B, B A, A B, ...)
    for 2 x `seconds`, and each side's rate counts only the time spent in its
    own steps, so both meet the same load from the rest of the machine. A step
    returns how many events it did. Returns (ours rates, baseline rates,
    per-round ratios ours/baseline); a short warm-up round is thrown away.
    """
    steps = (ours, baseline)

    def one_round(first, seconds):
        spent, done = [0.0, 0.0], [0, 0]
        turn = first
        deadline = time.perf_counter() + 2 * seconds
        while time.perf_counter() < deadline:
            for side in ((0, 1) if turn % 2 == 0 else (1, 0)):
                started = time.perf_counter()
                done[side] += steps[side]()
                spent[side] += time.perf_counter() - started
            turn += 1
        return done[0] / spent[0], done[1] / spent[1]

    one_round(0, seconds * WARMUP)
    a_values, b_values, ratios = [], [], []
    for r in range(rounds):
        a, b = one_round(r, seconds)
        a_values.append(a)
        b_values.append(b)
        ratios.append(a / b)
    return a_values, b_values, ratios


def one(call, *args):
    """Do `call` for one event; return 1, the count `paired` adds up."""
    call(*args)
    return 1


def events(tag, count, start=0):
    return [{"id": "%s-%06d" % (tag, i), "sku": "sku%d" % (i % 8), "qty": 1 + i % 9}
            for i in range(start, start + count)]


class Counter:
    """Hands out distinct event ids across the slices of one side."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.next = 0

    def take(self, count):
        batch = events(self.prefix, count, self.next)
        self.next += count
        return batch


# ---------------------------------------------------------------- raw baselines


def raw_store(path, durability="full"):
    """A source DB on a plain connection with the kit's pragmas and tables, none of its code."""
    con = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    con.execute("PRAGMA journal_mode = WAL").fetchall()  # a row: read it, or PyPy keeps the statement open
    con.execute(db.DURABILITY[durability])
    con.execute("PRAGMA busy_timeout = 5000").fetchall()
    con.execute("PRAGMA foreign_keys = ON")
    for statement in store.SCHEMA:
        con.execute(statement)
    return con


def raw_payload(event):
    return json.dumps(event, sort_keys=True, separators=(",", ":"))


def raw_intake(con, event):
    now = time.time()
    con.execute("BEGIN IMMEDIATE")
    con.execute("INSERT INTO orders (id, sku, qty, created_at) VALUES (?, ?, ?, ?)",
                (event["id"], event["sku"], event["qty"], now))
    con.execute("INSERT INTO outbox (event_id, payload, sent, created_at) VALUES (?, ?, 0, ?)",
                (event["id"], raw_payload(event), now))
    con.execute("COMMIT")


def raw_intake_many(con, batch):
    now = time.time()
    con.execute("BEGIN IMMEDIATE")
    con.executemany("INSERT INTO orders (id, sku, qty, created_at) VALUES (?, ?, ?, ?)",
                    [(e["id"], e["sku"], e["qty"], now) for e in batch])
    con.executemany("INSERT INTO outbox (event_id, payload, sent, created_at) VALUES (?, ?, 0, ?)",
                    [(e["id"], raw_payload(e), now) for e in batch])
    con.execute("COMMIT")
    return len(batch)


# ---------------------------------------------------------------- in-process figures


def intake_rows(tmp, rounds):
    rows = []
    for durability in ("full", "process"):
        ours_con = init_store(os.path.join(tmp, "intake-%s.db" % durability), durability=durability)
        raw_con = raw_store(os.path.join(tmp, "intake-raw-%s.db" % durability), durability)
        ours_ids, raw_ids = Counter("i-" + durability), Counter("r-" + durability)
        try:
            measured = paired(
                lambda: one(intake, ours_con, ours_ids.take(1)[0]),
                lambda: one(raw_intake, raw_con, raw_ids.take(1)[0]),
                rounds,
            )
        finally:
            ours_con.close()
            raw_con.close()
        ratio = statistics.median(measured[2])
        rows.append(row("intake, one event per transaction (%s)" % durability, "events/s", measured,
                        goal="ratio >= 0.95", met=ratio >= 0.95))
    # A/A: the raw intake against a second copy of itself, the noise of the fsync-bound rows.
    first, second = raw_store(os.path.join(tmp, "aa-1.db")), raw_store(os.path.join(tmp, "aa-2.db"))
    ids_one, ids_two = Counter("aa1"), Counter("aa2")
    try:
        measured = paired(
            lambda: one(raw_intake, first, ids_one.take(1)[0]),
            lambda: one(raw_intake, second, ids_two.take(1)[0]),
            rounds,
        )
    finally:
        first.close()
        second.close()
    rows.append(row("A/A: raw intake vs raw intake (full)", "events/s", measured, goal="noise: ratio near 1",
                    met=None))
    return rows


def bulk_row(tmp, rounds):
    ours_con = init_store(os.path.join(tmp, "bulk.db"))
    raw_con = raw_store(os.path.join(tmp, "bulk-raw.db"))
    ours_ids, raw_ids = Counter("b"), Counter("br")
    try:
        measured = paired(
            lambda: len(intake_many(ours_con, ours_ids.take(BULK_BATCH))),
            lambda: raw_intake_many(raw_con, raw_ids.take(BULK_BATCH)),
            rounds,
        )
    finally:
        ours_con.close()
        raw_con.close()
    ratio, ours_rate = statistics.median(measured[2]), statistics.median(measured[0])
    return row("bulk intake, intake_many of %d" % BULK_BATCH, "events/s", measured,
               goal="ratio >= 0.9 and >= 50,000 events/s", met=ratio >= 0.9 and ours_rate >= 50000)


def build_source(path, sent_rows, unsent_rows=16):
    """A source DB with `sent_rows` sent rows (executemany, one transaction) and `unsent_rows` pending ones."""
    con = init_store(path)
    con.execute("BEGIN IMMEDIATE")
    con.executemany("INSERT INTO orders (id, sku, qty, created_at) VALUES (?, 'bench', 1, 0.0)",
                    (("s%07d" % i,) for i in range(sent_rows)))
    # One statement instead of a second executemany: half the build time. The
    # payloads are canonical (sorted keys, no spaces), as intake writes them.
    con.execute(
        "INSERT INTO outbox (event_id, payload, sent, created_at, sent_at) "
        """SELECT id, '{"id":"' || id || '","qty":1,"sku":"bench"}', 1, 0.0, 0.0 FROM orders ORDER BY id"""
    )
    con.execute("COMMIT")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()  # a row: read it, or PyPy keeps the statement open
    intake_many(con, events("u", unsent_rows))
    return con


def pending_row(tmp, rounds):
    started = time.perf_counter()
    big = build_source(os.path.join(tmp, "pending-big.db"), BIG_SENT)
    built = time.perf_counter() - started
    small = build_source(os.path.join(tmp, "pending-small.db"), SMALL_SENT)

    def call(con):
        if len(pending(con, 16)) != 16:
            raise RuntimeError("pending(16) did not find the 16 unsent rows")
        return 1

    try:
        calls = paired(lambda: call(big), lambda: call(small), rounds)
    finally:
        big.close()
        small.close()
    # From calls per second to microseconds per call, and to a time ratio.
    measured = ([1e6 / rate for rate in calls[0]], [1e6 / rate for rate in calls[1]], [1 / r for r in calls[2]])
    ratio = statistics.median(measured[2])
    return row("pending(16), 1,000,000 sent vs 1,000 sent", "us/call", measured, goal="time ratio <= 1.5",
               met=ratio <= 1.5, note="1,000,000 rows built in %.1f s" % built)


def receive_rows(tmp, rounds):
    rows = []
    for durability in ("full", "process"):
        ours_con = inbox.init_sink(os.path.join(tmp, "receive-%s.db" % durability), durability=durability)
        raw_con = baseline_sink.connect(os.path.join(tmp, "receive-raw-%s.db" % durability), durability)
        ours_ids, raw_ids = Counter("rc-" + durability), Counter("rr-" + durability)
        try:
            measured = paired(
                lambda: one(inbox.receive, ours_con, ours_ids.take(1)[0]),
                lambda: one(baseline_sink.record, raw_con, raw_ids.take(1)[0]),
                rounds,
            )
        finally:
            ours_con.close()
            raw_con.close()
        ratio = statistics.median(measured[2])
        rows.append(row("receive in process (%s)" % durability, "events/s", measured, goal="ratio >= 0.9",
                        met=ratio >= 0.9))
    return rows


# ---------------------------------------------------------------- child processes


def child_env():
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["PYTHONPATH"] = ROOT
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class Child:
    """A server child process that prints its URL once it listens; stopped with SIGTERM."""

    def __init__(self, args, log_path):
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen([sys.executable] + args, cwd=ROOT, env=child_env(), stdout=subprocess.PIPE,
                                     stderr=self.log)
        ready, _, _ = select.select([self.proc.stdout], [], [], CHILD_START_S)
        line = self.proc.stdout.readline().decode("ascii", "replace").strip() if ready else ""
        if not line.startswith("http://"):
            self.stop()
            raise RuntimeError(
                "%s did not print its URL within %gs (see %s)" % (" ".join(args), CHILD_START_S, log_path)
            )
        self.url = line
        host, port = line[len("http://"):].rsplit(":", 1)
        self.address = (host, int(port))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.log.close()


def kit_sink(tmp, name, durability="full"):
    args = ["-m", "sink", "serve", "--db", os.path.join(tmp, name + ".db"), "--port", "0"]
    if durability != "full":
        args += ["--durability", durability]
    return Child(args, os.path.join(tmp, name + ".log"))


def baseline_server(tmp, name, durability="full"):
    args = [os.path.join(ROOT, "bench", "baseline_sink.py"), "--db", os.path.join(tmp, name + ".db"),
            "--durability", durability]
    return Child(args, os.path.join(tmp, name + ".log"))


def serve_supports_durability():
    result = subprocess.run([sys.executable, "-m", "sink", "serve", "--help"], cwd=ROOT, env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True, timeout=30)
    return "--durability" in result.stdout


# ---------------------------------------------------------------- HTTP figures


def post_once(address, event):
    """One POST /events on a new connection; return its latency in seconds. Anything but an applied ACK raises."""
    body = json.dumps(event).encode("ascii")
    started = time.perf_counter()
    conn = http.client.HTTPConnection(address[0], address[1], timeout=10)
    try:
        conn.request("POST", "/events", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        answer = response.read()
    finally:
        conn.close()
    elapsed = time.perf_counter() - started
    if response.status != 200 or json.loads(answer.decode("utf-8")).get("result") != "applied":
        raise RuntimeError("%s answered %d %r" % (address, response.status, answer[:200]))
    return elapsed


def http_slice(address, prefix, latencies, seconds):
    """HTTP_THREADS clients, a new connection per request, for `seconds`; return events/s."""
    counts = [0] * HTTP_THREADS
    errors = []
    started = time.perf_counter()
    deadline = started + seconds

    def client(n):
        try:
            while time.perf_counter() < deadline:
                event = {"id": "%s-%d-%06d" % (prefix, n, counts[n]), "sku": "sku%d" % (counts[n] % 8), "qty": 1}
                latencies.append(post_once(address, event))
                counts[n] += 1
        except Exception as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(HTTP_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return sum(counts) / (time.perf_counter() - started)


def kept(tag, latencies):
    """Where a slice puts its latencies: a warm-up slice's are thrown away."""
    return [] if tag == "warm" else latencies


def tail(latencies):
    ordered = sorted(latencies)
    p50 = ordered[len(ordered) // 2]
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return p50, p99


def http_row(figure, name, ours_address, base_address, rounds, *, goal_tail=True):
    """`name` keeps this row's event ids apart from other rows' on the same server."""
    ours_latencies, base_latencies = [], []
    measured = interleave(
        lambda tag: http_slice(ours_address, "%s-a-%s" % (name, tag), kept(tag, ours_latencies),
                               span(tag, HTTP_SLICE_S)),
        lambda tag: http_slice(base_address, "%s-b-%s" % (name, tag), kept(tag, base_latencies),
                               span(tag, HTTP_SLICE_S)),
        rounds,
    )
    (a50, a99), (b50, b99) = tail(ours_latencies), tail(base_latencies)
    ratio = statistics.median(measured[2])
    note = "p50/p99 ms: ours %.2f/%.2f (p99/p50 %.1f), baseline %.2f/%.2f (p99/p50 %.1f)" % (
        a50 * 1e3, a99 * 1e3, a99 / a50, b50 * 1e3, b99 * 1e3, b99 / b50)
    if not goal_tail:
        return row(figure, "events/s", measured, goal="noise: ratio near 1", met=None, note=note)
    met = ratio >= 0.9 and (a99 / a50) <= 1.5 * (b99 / b50)
    return row(figure, "events/s", measured, goal="ratio >= 0.9; p99/p50 <= 1.5x baseline's", met=met, note=note)


def metrics_flood_row(tmp, rounds):
    """Honest ACKs' p99 under a GET /metrics flood (3,000 skus, slow readers) against the same flood on /health."""
    from tests.torture import flood  # the flood of issue 29, shared with tests/test_sink_server_flood_slow.py

    results = {"/metrics": [], "/health": []}

    def one(path, tag):
        result = flood.run_flood(os.path.join(tmp, "flood-%s-%s" % (path.strip("/"), tag)), path=path,
                                 seconds=FLOOD_S * (WARMUP if tag == "warm" else 1))
        if tag != "warm":
            results[path].append(result)
        return flood.p99(result.acks) if result.acks else float("inf")

    measured = interleave(lambda tag: one("/metrics", tag), lambda tag: one("/health", tag), rounds)
    worst = max(measured[0])
    lost = sum(result.lost for result in results["/metrics"])
    note = "p99 of honest ACKs, s: /metrics flood %s, /health flood %s; %d lost under /metrics" % (
        ", ".join("%.3f" % v for v in measured[0]), ", ".join("%.3f" % v for v in measured[1]), lost)
    return row("honest ACK p99 under a /metrics flood (3,000 skus) vs a /health flood", "s", measured,
               goal="p99 < 1 s in every round, none lost", met=worst < 1.0 and lost == 0, note=note)


def churn_cpu_row(tmp, rounds):
    """The sink's CPU per 10 s of connection churn at the default cap, against issue 9's budget of 0.5 s."""
    from tests.torture import churn  # the churn of issue 17, run by tests/test_sink_server_churn_slow.py too

    values = []
    for n in range(rounds):
        result = churn.run_churn(os.path.join(tmp, "churn-%d" % n), cap=64, seconds=CHURN_S, cpu_budget=None)
        values.append(result.cpu_per_10s)
    budget = churn.CPU_PER_10S
    measured = (values, [budget] * len(values), [v / budget for v in values])
    return row("sink CPU per 10 s of churn at the default cap, vs the budget", "s", measured,
               goal="ratio < 1 (under %g s per 10 s)" % budget, met=max(values) < budget,
               note="measured here, not in the test suite: a CPU budget depends on what else the machine runs")


def pending_source(path, prefix, count):
    """A source DB at `path` holding `count` pending events, for the kit's side of a delivery row."""
    con = init_store(path)
    intake_many(con, events(prefix, count))
    return con


def raw_source(path, prefix, count):
    """The same tables and pending rows as pending_source, written and then used by plain sqlite3 only."""
    init_store(path).close()
    con = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    con.execute("PRAGMA synchronous = FULL")
    with db.transaction(con):
        con.executemany("INSERT INTO orders (id, sku, qty, created_at) VALUES (?, ?, ?, 0.0)",
                        [(e["id"], e["sku"], e["qty"]) for e in events(prefix, count)])
        con.executemany("INSERT INTO outbox (event_id, payload, sent, created_at) VALUES (?, ?, 0, 0.0)",
                        [(e["id"], raw_payload(e)) for e in events(prefix, count)])
    return con


def raw_mark_sent(con, event_id):
    """The publisher's durable commit of one delivery, in plain sqlite3."""
    con.execute("BEGIN IMMEDIATE")
    con.execute("UPDATE outbox SET sent = 1, sent_at = ? WHERE event_id = ?", (time.time(), event_id))
    con.execute("COMMIT")


def delivery_slice(deliver_batch, sent, side):
    """A slice of `deliver_batch()` calls (each returns how many it marked, 0 when none is left); events/s.

    Bounded by E2E_EVENTS and E2E_CAP_S; whole batches of up to 16, so a slice
    may overshoot E2E_EVENTS by up to 15. `sent[side]` adds up what was marked.
    """
    def measure(tag):
        done = 0
        started = time.perf_counter()
        while done < E2E_EVENTS and time.perf_counter() - started < E2E_CAP_S:
            marked = deliver_batch()
            if marked == 0:
                break
            done += marked
        sent[side] += done
        return done / (time.perf_counter() - started)
    return measure


def raw_batches(con, deliver_one):
    """Plain sqlite3's delivery loop: the next 16 unsent rows in seq order, `deliver_one(event_id, payload)` each."""
    def deliver_batch():
        batch = con.execute("SELECT event_id, payload FROM outbox WHERE sent = 0 ORDER BY seq LIMIT 16").fetchall()
        for event_id, payload in batch:
            deliver_one(event_id, payload)
        return len(batch)
    return deliver_batch


def e2e_rows(tmp, ours_sink, base_sink, rounds):
    """End-to-end delivery against a raw urllib loop into the baseline server, and against the disk's ceiling."""
    total = (E2E_EVENTS + store.MAX_BATCH) * rounds
    ours_url, base_url = ours_sink.url + "/events", base_sink.url + "/events"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def raw_send(event_id, payload):
        request = urllib.request.Request(base_url, data=payload.encode("ascii"), method="POST",
                                         headers={"Content-Type": "application/json"})
        with opener.open(request, timeout=5) as response:
            if not (response.status == 200 and json.loads(response.read().decode("utf-8")).get("ack") is True):
                raise RuntimeError("baseline sink did not ACK %s" % event_id)

    rows = []
    with contextlib.ExitStack() as stack:
        ours_con = stack.enter_context(contextlib.closing(pending_source(os.path.join(tmp, "e2e.db"), "e", total)))
        raw_con = stack.enter_context(contextlib.closing(raw_source(os.path.join(tmp, "e2e-raw.db"), "e", total)))
        sent = {"ours": 0, "baseline": 0}

        def raw_deliver(event_id, payload):
            raw_send(event_id, payload)
            raw_mark_sent(raw_con, event_id)

        # No warm-up slice: the HTTP rows before this one warmed both servers.
        measured = interleave(
            delivery_slice(lambda: dispatch(ours_con, lambda event: send_http(ours_url, event)), sent, "ours"),
            delivery_slice(raw_batches(raw_con, raw_deliver), sent, "baseline"), rounds, warmup=False)
        rows.append(row("end-to-end delivery, dispatch + send_http", "events/s", measured, goal="ratio >= 0.8",
                        met=statistics.median(measured[2]) >= 0.8,
                        note="events sent: ours %d, baseline %d" % (sent["ours"], sent["baseline"])))
        rows.append(ceiling_row(tmp, "send_http", lambda con: dispatch(con, lambda event: send_http(ours_url, event)),
                                rounds))
        held = stack.enter_context(HeldConnection(ours_url))
        rows.append(ceiling_row(tmp, "HeldConnection.send", lambda con: dispatch(con, held.send), rounds))
    return rows


def ceiling_row(tmp, name, deliver_batch, rounds):
    """Kit delivery `deliver_batch(con)` against the disk's ceiling for the same work, in the same run.

    The ceiling: per event, the two durable commits a delivery pays (the
    sink's receive, in the baseline sink's SQL, and the publisher's mark_sent),
    in plain sqlite3 on the same file system at synchronous=FULL, WAL, with no
    HTTP at all. No loop that delivers over HTTP can beat it. The sides take
    turns batch by batch (`paired`), so both meet the same load from the rest
    of the machine and the same state of the disk.
    """
    total = CEILING_EVENTS
    with contextlib.ExitStack() as stack:
        ours_con = stack.enter_context(contextlib.closing(
            pending_source(os.path.join(tmp, "ceiling-%s.db" % name), "c" + name, total)))
        raw_con = stack.enter_context(contextlib.closing(
            raw_source(os.path.join(tmp, "ceiling-%s-raw.db" % name), "c" + name, total)))
        sink_con = stack.enter_context(contextlib.closing(
            baseline_sink.connect(os.path.join(tmp, "ceiling-%s-sink.db" % name))))
        sent = {"ours": 0, "baseline": 0}

        def two_commits(event_id, payload):
            baseline_sink.record(sink_con, json.loads(payload))
            raw_mark_sent(raw_con, event_id)

        def counted(side, batch):
            def step():
                done = batch()
                if done == 0:
                    raise RuntimeError("the %s side ran out of its %d pending events" % (side, total))
                sent[side] += done
                return done
            return step

        measured = paired(counted("ours", lambda: deliver_batch(ours_con)),
                          counted("baseline", raw_batches(raw_con, two_commits)), rounds, CEILING_SLICE_S)
    ratio = statistics.median(measured[2])
    return row("end-to-end vs the disk: dispatch + %s vs two durable commits per event, no HTTP" % name,
               "events/s", measured, goal="ratio >= 0.6", met=ratio >= 0.6,
               note="events sent: ours %d, ceiling %d" % (sent["ours"], sent["baseline"]))


def sink_ceiling_row(address, tmp, rounds):
    """The kit's sink over HTTP (HTTP_THREADS clients) against its disk ceiling: one durable commit per event."""
    with contextlib.closing(baseline_sink.connect(os.path.join(tmp, "sink-ceiling.db"))) as con:
        ids = Counter("sc")

        def ceiling(tag):
            count = 0
            started = time.perf_counter()
            deadline = started + span(tag, HTTP_SLICE_S)
            while time.perf_counter() < deadline:
                baseline_sink.record(con, ids.take(1)[0])
                count += 1
            return count / (time.perf_counter() - started)

        measured = interleave(
            lambda tag: http_slice(address, "sc-a-%s" % tag, [], span(tag, HTTP_SLICE_S)), ceiling, rounds)
    return row("sink over HTTP (full) vs the disk: %d threads vs one durable commit per event, no HTTP"
               % HTTP_THREADS, "events/s", measured, goal="shows the headroom: 1.0 is the disk's pace", met=None)


# ---------------------------------------------------------------- whole processes


def wall(args, cpu=None, env=None, python=(sys.executable,)):
    """Seconds `python args` took; `cpu`, if a list, gets the CPU-seconds it and its descendants used.

    `env`: the child's environment (default: child_env()); `python`: the command that is the interpreter.
    """
    before = children_cpu()
    started = time.perf_counter()
    # Pipes, read and thrown away: Wine's Windows python does not start with a NUL device or a file as a stream.
    result = subprocess.run(list(python) + args, cwd=ROOT, env=env or child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, timeout=300)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError("%s exited %d" % (" ".join(args), result.returncode))
    if cpu is not None:
        cpu.append(children_cpu() - before)
    return elapsed


def children_cpu():
    """CPU-seconds of every process this one has waited for, and of those they waited for (the zygotes' steps).

    NaN where there is no resource module (Windows): a figure made of it reads nan, never a made-up 0.
    """
    if resource is None:
        return float("nan")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def grade_row(rounds):
    cpu = []
    measured = interleave(lambda tag: wall(["grade.py"], cpu), lambda tag: wall(["-c", "pass"]), rounds, warmup=False)
    ours = statistics.median(measured[0])
    return row("grade: python grade.py vs python -c pass", "s", measured, goal="grade.py under 2 s", met=ours < 2.0,
               note="%.2f CPU-seconds per run (median), load average %s" % (statistics.median(cpu), load_average()))


def spawn_row(rounds):
    """What Windows's lack of fork costs, measured here: grade.py with each step a fresh interpreter vs forked."""
    no_fork = dict(child_env(), OUTBOX_KIT_NO_FORK="1")
    measured = interleave(lambda tag: wall(["grade.py"], env=no_fork), lambda tag: wall(["grade.py"]), rounds,
                          warmup=False)
    return row("grade: each step a fresh interpreter (OUTBOX_KIT_NO_FORK=1, as on Windows) vs forked by the zygote",
               "s", measured, goal="none: what no fork costs", met=None,
               note="Windows has no fork, so each step imports the worker itself (under Wine: the next row)")


def wine_row():
    """grade.py under Wine with the Windows CPython that make test-windows unpacked, vs grade.py here: one run each.

    A run under Wine takes about 35 s, so one run of each side (after one
    warm-up run under Wine, whose first start may make Wine's prefix).
    """
    figure = "grade: Windows CPython %s under Wine vs python grade.py here" % windows_leg.NEWEST
    exe = windows_leg.cached_python(windows_leg.NEWEST)
    if not shutil.which("wine") or exe is None:
        return not_measured(figure, "n/a (no Wine or no Windows CPython here: make test-windows installs both)")
    wine = ("wine", exe)
    env = dict(child_env(), WINEDEBUG="-all")
    measured = interleave(lambda tag: wall(["grade.py"], env=env, python=wine), lambda tag: wall(["grade.py"]), 1)
    return row(figure, "s", measured, goal="none: what Windows (under Wine, on 2 cores) costs", met=None,
               note="one run each: fresh interpreters started by Wine; not a Windows host")


CLASS_SIZE = 30
LARGE_CLASS = 500  # the figure a host of a course plans with: the 30's pace, scaled
CLASS_WORKER = """import sys
sys.path.insert(0, %r)
from outbox import dispatch, init_store, intake, mark_sent, pending, send_http, validate_event
from sink import init_sink, receive
"""


def class_row(tmp):
    """grade.py on a class of CLASS_SIZE copies of the reference worker, with the default --jobs: one run.

    The copies reach the kit by its absolute path, as the reference does, so
    the run allows kit imports (--allow-kit-imports): a class of correct workers.

    The baseline is CLASS_SIZE runs of `python grade.py` one after another,
    estimated from one of them (the class, not that, is what is measured).
    """
    folder = os.path.join(tmp, "class")
    os.mkdir(folder)
    for n in range(CLASS_SIZE):
        with open(os.path.join(folder, "worker%02d.py" % n), "w", encoding="utf-8") as f:
            f.write(CLASS_WORKER % ROOT)
    allow = ["--allow-kit-imports"]
    wall(["grade.py", "--impl", os.path.join(folder, "worker00.py")] + allow)  # warm the caches
    one = wall(["grade.py", "--impl", os.path.join(folder, "worker00.py")] + allow)
    load = load_average()
    cpu = []
    seconds = wall(["grade.py", "--impl", folder, "--report", os.path.join(tmp, "class-report")] + allow, cpu)
    return {"figure": "class: grade.py --report on %d copies of the reference, default --jobs" % CLASS_SIZE,
            "unit": "s", "ours": seconds, "baseline": one * CLASS_SIZE, "ratio": seconds / (one * CLASS_SIZE),
            "ratio_min": None, "ratio_max": None, "rounds": 1, "goal": "under 40 s", "met": seconds < 40.0,
            "note": "%.2f CPU-seconds per worker (a host sizes shards by it); %d workers would take about %.0f min "
                    "at this pace; baseline: %d x one run (%.2f s); load average %s before, %s after" % (
                        cpu[0] / CLASS_SIZE, LARGE_CLASS, seconds / CLASS_SIZE * LARGE_CLASS / 60, CLASS_SIZE, one,
                        load, load_average())}


# Runs the relay as its only child, so RUSAGE_CHILDREN is the relay's own peak.
# A relay still draining after the cap gets SIGTERM, which it answers by
# finishing the item in flight.
PEAK_WRAPPER = """
import json, resource, signal, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
try:
    code = proc.wait(float(sys.argv[1]))
    stopped = False
except subprocess.TimeoutExpired:
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(30)
    stopped = True
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"code": code, "stopped": stopped, "peak_kib": peak // 1024 if sys.platform == "darwin" else peak}))
"""


def relay_available():
    result = subprocess.run([sys.executable, "-m", "outbox", "relay", "--help"], cwd=ROOT, env=child_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    return result.returncode == 0


def memory_row(tmp, sink):
    # Draining all of MEMORY_LARGE takes minutes here (one durable commit per
    # event on each side), past the bench's budget; each run is cut at
    # MEMORY_CAP_S, so this row shows whether the backlog's size costs memory
    # (the relay holds one batch at a time), not a whole drain.
    figure = "memory: relay --once, peak RSS, %d vs %d pending (%gs each)" % (MEMORY_LARGE, MEMORY_SMALL, MEMORY_CAP_S)
    goal = "the %d run uses at most 5 MiB more" % MEMORY_LARGE
    if not relay_available():
        return not_measured(figure, "n/a (relay not built)", goal)
    if sys.platform != "linux" and sys.platform != "darwin":
        return not_measured(figure, "n/a (no ru_maxrss here)", goal)
    peaks, notes = {}, []
    for count in (MEMORY_SMALL, MEMORY_LARGE):
        path = os.path.join(tmp, "relay-%d.db" % count)
        con = init_store(path)
        for start in range(0, count, 10000):
            intake_many(con, events("m%d" % count, min(10000, count - start), start))
        con.close()
        relay = [sys.executable, "-m", "outbox", "relay", "--db", path, "--url", sink.url + "/events", "--once"]
        result = subprocess.run([sys.executable, "-c", PEAK_WRAPPER, str(MEMORY_CAP_S)] + relay, cwd=ROOT,
                                env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                universal_newlines=True, timeout=MEMORY_CAP_S + 60)
        lines = result.stdout.strip().splitlines()
        report = json.loads(lines[-1]) if result.returncode == 0 and lines else {"code": "?"}
        if report["code"] != 0:
            return not_measured(figure, "relay exited %s" % report["code"], goal)
        check = sqlite3.connect(path)
        try:
            drained = check.execute("SELECT count(*) FROM outbox WHERE sent = 1").fetchone()[0]
        finally:
            check.close()
        peaks[count] = report["peak_kib"] / 1024.0
        stopped = " (SIGTERM after %gs)" % MEMORY_CAP_S if report["stopped"] else ""
        notes.append("%d: %d drained%s" % (count, drained, stopped))
    more = peaks[MEMORY_LARGE] - peaks[MEMORY_SMALL]
    result = {"figure": figure, "unit": "MiB", "ours": peaks[MEMORY_LARGE], "baseline": peaks[MEMORY_SMALL],
              "ratio": None, "ratio_min": None, "ratio_max": None, "rounds": 1, "goal": goal, "met": more <= 5.0,
              "note": "+%.1f MiB; %s" % (more, "; ".join(notes))}
    return result


# ---------------------------------------------------------------- the run


def show(value, unit):
    if value is None:
        return "-"
    if unit == "events/s":
        return "{:,.0f}/s".format(value)
    if unit == "us/call":
        return "%.1f us" % value
    if unit == "s":
        return "%.2f s" % value
    if unit == "MiB":
        return "%.1f MiB" % value
    return "%g" % value


def table(rows):
    header = ("figure", "ours", "baseline", "ratio (min-max)", "goal", "met")
    lines = [header]
    for r in rows:
        ratio = "-" if r["ratio"] is None else "%.2f (%.2f-%.2f)" % (r["ratio"], r["ratio_min"], r["ratio_max"]) \
            if r["ratio_min"] is not None else "%.2f" % r["ratio"]
        met = {True: "yes", False: "NO", None: "-"}[r["met"]]
        lines.append((r["figure"], show(r["ours"], r["unit"]), show(r["baseline"], r["unit"]), ratio, r["goal"], met))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for n, line in enumerate(lines):
        out.append("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    notes = ["  %s: %s" % (r["figure"], r["note"]) for r in rows if r["note"]]
    return "\n".join(out + (["", "notes:"] + notes if notes else []))


def load_average():
    """The 1-minute load average, or None where the platform has none."""
    try:
        return round(os.getloadavg()[0], 1)
    except (AttributeError, OSError):
        return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help="rounds per figure, at least 5 (default: %(default)s)")
    parser.add_argument("--out", default=RESULTS, help="where to write the results (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.rounds < 5:
        parser.error("--rounds must be at least 5, got %d" % args.rounds)
    started = time.perf_counter()
    load_before = load_average()
    tmp = tempfile.mkdtemp(prefix="outbox-bench-")
    rows = []
    children = {}  # name -> Child, stopped at the end
    errors = []

    def step(name, make):
        print("... %s (%.0f s so far)" % (name, time.perf_counter() - started), file=sys.stderr, flush=True)
        try:
            made = make()
        except Exception as exc:  # one broken figure must not hide the others
            errors.append(name)
            made = not_measured(name, "error: %s: %s" % (type(exc).__name__, exc))
        rows.extend(made if isinstance(made, list) else [made])

    def start(name, make):
        """Start a server child; a server that cannot start is a row of its own, and its figures error out."""
        try:
            children[name] = make()
        except Exception as exc:
            errors.append("start " + name)
            rows.append(not_measured("start " + name, "error: %s: %s" % (type(exc).__name__, exc)))

    try:
        step("intake", lambda: intake_rows(tmp, args.rounds))
        step("bulk intake", lambda: bulk_row(tmp, args.rounds))
        step("receive", lambda: receive_rows(tmp, args.rounds))
        step("pending at scale", lambda: pending_row(tmp, args.rounds))
        start("sink", lambda: kit_sink(tmp, "sink"))
        start("baseline", lambda: baseline_server(tmp, "baseline"))
        start("baseline twin", lambda: baseline_server(tmp, "baseline-twin"))
        step("sink over HTTP", lambda: http_row("sink over HTTP (full), %d threads" % HTTP_THREADS, "hf",
                                                children["sink"].address, children["baseline"].address, args.rounds))
        step("sink vs the disk", lambda: sink_ceiling_row(children["sink"].address, tmp, args.rounds))
        step("A/A over HTTP", lambda: http_row("A/A: baseline server vs baseline server", "aa",
                                               children["baseline twin"].address, children["baseline"].address,
                                               args.rounds, goal_tail=False))
        if "baseline twin" in children:
            children.pop("baseline twin").stop()
        figure = "sink over HTTP (process), %d threads" % HTTP_THREADS
        if serve_supports_durability():
            start("sink, process", lambda: kit_sink(tmp, "sink-process", "process"))
            start("baseline, process", lambda: baseline_server(tmp, "baseline-process", "process"))
            step("sink over HTTP, process", lambda: http_row(figure, "hp", children["sink, process"].address,
                                                             children["baseline, process"].address, args.rounds))
        else:
            rows.append(not_measured(figure, "n/a (python -m sink serve has no --durability yet)",
                                     "ratio >= 0.9; p99/p50 <= 1.5x baseline's"))
        step("end-to-end", lambda: e2e_rows(tmp, children["sink"], children["baseline"], args.rounds))
        step("grade", lambda: grade_row(args.rounds))
        step("no fork", lambda: spawn_row(args.rounds))
        step("under Wine", wine_row)
        step("class", lambda: class_row(tmp))
        step("memory", lambda: memory_row(tmp, children["sink"]))
        step("metrics flood", lambda: metrics_flood_row(tmp, args.rounds))
        step("churn CPU", lambda: churn_cpu_row(tmp, args.rounds))
    finally:
        for child in children.values():
            child.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.perf_counter() - started
    results = {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "date": timestamps.utc(time.time()),
        "elapsed_s": round(elapsed, 1),
        # Other work on the machine shows in every slice; the A/A rows show how much.
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "rounds": args.rounds,
        "rows": rows,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    print("Python %s, SQLite %s, %s cores, %d rounds, %.0f s, load average %s before, %s after" % (
        results["python"], results["sqlite"], results["cpus"], args.rounds, elapsed, load_before,
        results["load_average_after"]))
    print(table(rows))
    print("\nwritten to %s" % os.path.relpath(args.out, ROOT))
    if errors:
        print("could not measure: %s" % ", ".join(errors), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
