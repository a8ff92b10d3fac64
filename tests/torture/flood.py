"""A flood of GET /metrics against a real `python -m sink serve` with a large inventory, and honest POSTs timed through it.

Owns the flood of issue 29: SKUS skus in the sink DB (so /metrics is about
130 KB), READERS threads that fetch /metrics as fast as the sink answers, and
slow readers that open SLOW_PER_S connections a second, ask for /metrics and
never read the answer. The readers run in a process of their own (`python -m
tests.torture.flood PORT SECONDS`), so the honest POSTs timed here do not
queue behind them for this process's GIL. tests/test_sink_server_flood_slow.py
runs it for a few seconds; `make bench` times the honest ACKs under it against
the same sink under a flood of GET /health.
"""
import collections
import os
import socket
import subprocess
import sys
import threading
import time

from sink.core import inbox
from tests.support import DEADLINE, PYTHON, Child, python_env
from tests.torture.churn import honest_post  # the same honest client, timed the same way

SKUS = 3000
READERS = 50  # threads fetching the path as fast as the sink answers
SLOW_PER_S = 100  # slow readers opened per second, each asking and never reading
SLOW_HELD = 200  # slow readers held open at once; the oldest is closed for the next
HONEST_EVERY = 0.02  # seconds between honest POSTs (each may take churn.HONEST_TIMEOUT, retries included)
SINK_TIMEOUT = 10.0  # the sink's --timeout: what a slow reader holds a connection for, at most

FloodResult = collections.namedtuple("FloodResult", "path seconds acks lost answered stderr")


def seed_inventory(db, skus=SKUS):
    """A sink DB at `db` holding `skus` skus, one applied event each (durability "process": no fsync per event)."""
    con = inbox.init_sink(db, durability="process")
    try:
        for n in range(skus):
            inbox.receive(con, {"id": "seed-%05d" % n, "sku": "sku-%05d" % n, "qty": 1})
    finally:
        con.close()


def run_flood(workdir, *, path="/metrics", seconds=3.0, skus=SKUS):
    """Flood a fresh sink with `skus` skus on `path` for `seconds`; a FloodResult with every honest ACK's time."""
    os.makedirs(workdir)
    db = os.path.join(workdir, "sink.db")
    seed_inventory(db, skus)
    sink = Child(["serve", "--db", db, "--port", "0", "--timeout", str(SINK_TIMEOUT)], workdir)
    try:
        port = sink.port()
        url = "http://127.0.0.1:%d/events" % port
        flood = subprocess.Popen([PYTHON, "-m", "tests.torture.flood", str(port), path, str(seconds)],
                                 cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                 env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 universal_newlines=True)
        try:
            ready = flood.stdout.readline()  # the flood runs from here
            acks, lost = [], 0
            until = time.monotonic() + seconds
            n = 0
            while time.monotonic() < until and ready:
                taken = honest_post(url, "honest-%d" % n)
                n += 1
                if taken is None:
                    lost += 1
                else:
                    acks.append(taken)
                time.sleep(HONEST_EVERY)  # the honest client's pace, not synchronisation
            out, err = flood.communicate(timeout=seconds + SINK_TIMEOUT + DEADLINE)
        finally:
            if flood.poll() is None:
                flood.kill()
                flood.communicate()
        answered = int(out.split()[-1]) if out.split() else 0
        if not ready or err.strip():
            raise RuntimeError("the flood process failed: %s" % err[-2000:])
    finally:
        sink.close()
    return FloodResult(path, seconds, acks, lost, answered, sink.stderr())


def p99(times):
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else None


def describe(result):
    return ("%s flood: %d honest ACKs in %.0fs, p50 %.3fs, p99 %.3fs, max %.3fs, %d lost; %d answers to the readers"
            % (result.path, len(result.acks), result.seconds, sorted(result.acks)[len(result.acks) // 2],
               p99(result.acks), max(result.acks), result.lost, result.answered)) if result.acks else (
        "%s flood: no honest ACK, %d lost" % (result.path, result.lost))


# ---------------------------------------------------------------- the flood process


def _read_all(port, path, answered, stop):
    request = ("GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" % path).encode("ascii")
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=SINK_TIMEOUT) as sock:
                sock.sendall(request)
                while sock.recv(65536):
                    pass
            answered[0] += 1
        except OSError:
            continue  # cut to make room, or out of ports for a moment: the flood goes on


def _slow_readers(port, path, stop):
    request = ("GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" % path).encode("ascii")
    held = collections.deque()
    try:
        while not stop.is_set():
            try:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # so the answer cannot all be taken
                sock.settimeout(SINK_TIMEOUT)
                sock.connect(("127.0.0.1", port))
                sock.sendall(request)
                held.append(sock)
            except OSError:
                sock.close()
            while len(held) > SLOW_HELD:
                held.popleft().close()
            stop.wait(1.0 / SLOW_PER_S)
    finally:
        while held:
            held.popleft().close()


def flood(port, path, seconds):
    """Run READERS fast readers and the slow readers for `seconds`; return how many answers the fast ones read."""
    stop = threading.Event()
    answered = [0]
    threads = [threading.Thread(target=_read_all, args=(port, path, answered, stop)) for _ in range(READERS)]
    threads.append(threading.Thread(target=_slow_readers, args=(port, path, stop)))
    for thread in threads:
        thread.start()
    print("flooding", flush=True)
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join(SINK_TIMEOUT + DEADLINE)
    return answered[0]


if __name__ == "__main__":
    print(flood(int(sys.argv[1]), sys.argv[2], float(sys.argv[3])), flush=True)
