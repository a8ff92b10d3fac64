"""Connection churn against a real `python -m sink serve`, at its connection cap.

Owns the churn patterns (every way a client may send: nothing, one byte, a
trickled head, half a body, a head that expects 100-continue, a whole request;
times every way it may end: close, reset, half-close and read), the honest
clients that time their ACKs, and the verdict of one run: honest POSTs get
their ACK within HONEST_WITHIN (median) during and after the churn, the sink
spends under CPU_PER_10S of CPU per 10 s (read from /proc; judged by `make
torture` and `make bench`, not by the test suite), no thread of it
died (GET /health is 200, its log has no traceback) and SIGTERM ends it with 0.
tests/test_sink_server_churn_slow.py runs it for a few seconds; `make torture` for
10 s at each cap.
"""
import collections
import os
import signal
import socket
import sqlite3
import statistics
import struct
import threading
import time

from outbox import send_http
from outbox.core.errors import DeliveryError
from tests.support import DEADLINE, Child, cpu_seconds, post

SENDS = ("nothing", "one byte", "a trickled head", "half a body", "a head expecting 100-continue", "a whole request")
ENDS = ("close", "reset", "half-close and read")
PATTERNS = tuple((send, end) for send in SENDS for end in ENDS)
CHURNERS = 6  # threads, each cycling through every pattern from its own starting point
PACE = 0.04  # seconds a churner rests between connections: churn, not a flood (FloodTest is the flood)
TRICKLE_PAUSE = 0.02  # seconds between the bytes of a trickled head
HONEST_EVERY = 0.2  # seconds between honest POSTs during the churn
HONEST_AFTER = 5  # honest POSTs once the churn has stopped
HONEST_TIMEOUT = 5.0  # seconds an honest POST may take, retries included, before it counts as lost
HONEST_WITHIN = 1.0  # the median ACK time the issue asks for, in seconds
CPU_PER_10S = 0.5  # the sink's CPU budget, in seconds per 10 s of churn
IO_TIMEOUT = 15.0  # any one socket operation of a churner (the sink's own timeout is 10 s)

ChurnResult = collections.namedtuple(
    "ChurnResult", "cap seconds connections honest_during honest_after cpu_per_10s violations")

_EVENT = b'{"id": "churn", "sku": "apple", "qty": 1}'
_HEAD = (b"POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
         b"Content-Length: %d\r\n" % len(_EVENT))
_WHOLE = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"  # answered, but the churner may not read it


def churn_once(port, send, end, stop):
    """One connection: send `send`, then end it by `end`. A reset or close by the sink is part of the game."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT)
    try:
        if send == "one byte":
            sock.sendall(b"P")
        elif send == "a trickled head":
            for byte in _HEAD[:12]:
                if stop.is_set():
                    break
                sock.sendall(bytes([byte]))
                stop.wait(TRICKLE_PAUSE)  # the trickle's pace
        elif send == "half a body":
            sock.sendall(_HEAD + b"\r\n" + _EVENT[:len(_EVENT) // 2])
        elif send == "a head expecting 100-continue":
            sock.sendall(_HEAD + b"Expect: 100-continue\r\n\r\n")
        elif send == "a whole request":
            sock.sendall(_WHOLE)
        if end == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
        elif end == "half-close and read":
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
    except OSError:
        pass  # reset or closed by the sink (at the cap, the longest waiting is closed): expected
    finally:
        sock.close()


def churner(port, number, stop, made, errors):
    """Churner `number`: every pattern in turn, from its own starting point, until `stop`."""
    n = number * len(PATTERNS) // CHURNERS
    try:
        while not stop.is_set():
            send, end = PATTERNS[n % len(PATTERNS)]
            try:
                churn_once(port, send, end, stop)
            except OSError:
                pass  # the connect itself failed (a full backlog, out of ports for a moment): try the next
            made[number] += 1
            n += 1
            stop.wait(PACE)  # the churn's pace, not synchronisation
    except Exception as exc:  # a broken churner makes the run prove nothing: reported as a violation
        errors.append("churner %d: %s: %s" % (number, type(exc).__name__, exc))


def honest_post(url, event_id):
    """Seconds until `event_id` is ACKed, retrying at once after a lost connection as a publisher would; else None."""
    started = time.monotonic()
    while time.monotonic() - started < HONEST_TIMEOUT:
        try:
            if send_http(url, {"id": event_id, "sku": "pear", "qty": 1}, timeout=HONEST_TIMEOUT) is True:
                return time.monotonic() - started
        except DeliveryError:
            continue  # closed to make room before its request was read: the sink's defence, retried
    return None


def run_churn(workdir, *, cap, seconds, log=None, cpu_budget=CPU_PER_10S):
    """Churn a fresh sink at `cap` for `seconds`; a ChurnResult (violations empty when every promise held).

    `cpu_budget` (seconds of the sink's CPU per 10 s) is judged only when
    given: the test suite and `make torture` pass None, since the machine
    moves it (what else it runs, and the machine itself); `make bench` judges it.
    """
    os.makedirs(workdir)
    db = os.path.join(workdir, "sink.db")
    violations = []
    sink = Child(["serve", "--db", db, "--port", "0", "--max-connections", str(cap)], workdir)
    try:
        port = sink.port()
        url = "http://127.0.0.1:%d/events" % port
        stop = threading.Event()
        made = [0] * CHURNERS
        during = []
        churners = [threading.Thread(target=churner, args=(port, n, stop, made, violations)) for n in range(CHURNERS)]

        def honest_during():
            while not stop.is_set():
                during.append(honest_post(url, "during-%d" % len(during)))
                stop.wait(HONEST_EVERY)  # the honest clients' pace

        honest = threading.Thread(target=honest_during)
        cpu_before, started = cpu_seconds(sink.proc.pid), time.monotonic()
        for thread in churners + [honest]:
            thread.start()
        stop.wait(seconds)  # the churn runs this long
        stop.set()
        for thread in churners + [honest]:
            thread.join(IO_TIMEOUT + HONEST_TIMEOUT)
        window = time.monotonic() - started
        cpu_per_10s = (cpu_seconds(sink.proc.pid) - cpu_before) / window * 10.0
        after = [honest_post(url, "after-%d" % n) for n in range(HONEST_AFTER)]
        violations += _judge(during, after, cpu_per_10s, cpu_budget)
        status, _, answer = post(port, None, path="/health", method="GET", content_type=None)
        if (status, answer) != (200, {"ok": True}):
            violations.append("GET /health after the churn: %s %s" % (status, answer))
        sink.signal(signal.SIGTERM)
        code = sink.wait(DEADLINE)
        if code != 0:
            violations.append("the sink exited %s on SIGTERM, not 0" % code)
        stderr = sink.stderr()
        if "Traceback" in stderr or "thread died" in stderr:
            violations.append("the sink logged a traceback: %s" % stderr[stderr.find("Traceback") - 200:][:2000])
        applied = _applied(db)
        acked = sum(1 for seconds_taken in during + after if seconds_taken is not None)
        if applied != acked:
            violations.append("%d honest events ACKed but %d applied" % (acked, applied))
    finally:
        sink.close()
    result = ChurnResult(cap, round(window, 1), sum(made), during, after, cpu_per_10s, violations)
    if log:
        log(describe(result))
    return result


def _judge(during, after, cpu_per_10s, cpu_budget):
    violations = []
    for name, times in (("during", during), ("after", after)):
        lost = [n for n, taken in enumerate(times) if taken is None]
        if not times or lost:
            violations.append("honest POSTs %s the churn: %d of %d never ACKed within %gs"
                              % (name, len(lost), len(times), HONEST_TIMEOUT))
        elif statistics.median(times) >= HONEST_WITHIN:
            violations.append("honest POSTs %s the churn: median ACK %.3fs, not under %gs"
                              % (name, statistics.median(times), HONEST_WITHIN))
    if cpu_budget is not None and cpu_per_10s >= cpu_budget:
        violations.append("the sink's CPU: %.3fs per 10 s, not under %gs" % (cpu_per_10s, cpu_budget))
    return violations


def _applied(db):
    """How many events the sink holds (only honest ones can complete), read after it has exited."""
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM inbox").fetchone()[0]
    finally:
        con.close()


def describe(result):
    """One line: the cap, the churn, the honest ACK times, the CPU."""
    def median(times):
        taken = [t for t in times if t is not None]
        return "%.3fs" % statistics.median(taken) if taken else "-"

    return ("churn at cap %d: %d connections in %.1fs (%d patterns), honest ACK median %s during (%d), %s after (%d), "
            "sink CPU %.3fs per 10 s" % (result.cap, result.connections, result.seconds, len(PATTERNS),
                                         median(result.honest_during), len(result.honest_during),
                                         median(result.honest_after), len(result.honest_after), result.cpu_per_10s))
