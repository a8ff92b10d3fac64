"""The seeded soak: SIGKILLs at random moments while a few hundred events are delivered.

Owns the kill schedule (from the seed: where each kill lands in the stream
of applied events, the jitter, the victims alternating publisher and sink,
the publisher's batch size) and the recovery after each kill. The seed
reproduces the schedule; the exact instant a kill lands still depends on
the machine. Invariants are invariants.py's, checked after every recovery.
"""
import collections
import os
import random
import sqlite3
import time
import urllib.parse

from . import child, invariants
from .matrix import take_in
from .procs import WAIT, ChildFailed, Children

SKUS = ("apple", "pear", "plum", "fig", "kiwi")
POLL = 0.002  # seconds between looks at the sink's inbox count
SoakResult = collections.namedtuple("SoakResult", "seed events kills violations deliveries")


def make_events(rng, count, first=0):
    return [{"id": "soak-%04d" % i, "sku": rng.choice(SKUS), "qty": rng.randint(1, 50)} for i in range(first, first + count)]


def run_soak(seed, workdir, *, events=300, kills=12, log=None):
    """`kills` SIGKILLs, alternating publisher and sink, while `events` events are delivered."""
    os.makedirs(workdir)
    rng = random.Random(seed)
    source = os.path.join(workdir, "source.db")
    sink = os.path.join(workdir, "sink.db")
    taken_in = take_in(source, make_events(rng, events))
    # Kill i lands once the sink has applied positions[i] events, plus a jitter;
    # a tenth of the stream is left after the last one for it to land in.
    positions = sorted(rng.sample(range(1, max(2, events - events // 10)), kills))
    hits = collections.Counter()
    violations = []
    landed = 0
    try:
        with Children(workdir) as children:
            server, url = _start_sink(children, sink)
            publisher = _start_publisher(children, rng, source, url)
            while landed < kills:
                _wait_applied(sink, positions[landed], publisher)
                time.sleep(rng.uniform(0.0, 0.01))  # jitter: where in one event's path the kill lands
                victim = "publisher" if landed % 2 == 0 else "sink"
                if victim == "publisher" and not publisher.running():
                    # Everything was delivered before the kill could land: take more in and go on.
                    publisher.expect_exit((0,))
                    more = make_events(rng, 20, first=len(taken_in))
                    take_in(source, more)
                    taken_in += more
                    if log:
                        log("soak: all delivered before kill %d could land; %d more taken in" % (landed + 1, len(more)))
                    publisher = _start_publisher(children, rng, source, url)
                    continue
                if victim == "publisher":
                    publisher.kill()
                    publisher.wait()
                else:
                    server.kill()
                    server.wait()
                    publisher.expect_exit((0, child.DELIVERY_FAILED))
                landed += 1
                # No publisher runs now: the first pending event is the one this kill may have hit.
                first = _first_pending(source)
                if first is not None:
                    hits[first] += 1
                if log:
                    log("soak kill %d/%d: %s, first pending %s" % (landed, kills, victim, first))
                if victim == "sink":
                    server, url = _start_sink(children, sink)
                publisher = _start_publisher(children, rng, source, url)
                observed = invariants.check(source, sink, taken_in, hits=hits, recovered=False)
                violations += ["after kill %d (%s): %s" % (landed, victim, v) for v in observed.violations]
            publisher.expect("done", timeout=WAIT + events * 0.1)
            publisher.expect_exit((0,))
            server.tell("stop")
            server.expect_exit((0,))
        observed = invariants.check(source, sink, taken_in, hits=hits, recovered=True)
        violations += ["after the last recovery: " + v for v in observed.violations]
        deliveries = sum(observed.deliveries.values())
    except (ChildFailed, OSError, sqlite3.Error) as exc:
        violations.append("%s: %s" % (type(exc).__name__, exc))
        deliveries = 0
    return SoakResult(seed, len(taken_in), landed, violations, deliveries)


def _start_sink(children, sink):
    """A fresh sink child and its /events URL."""
    server = children.start("sink", "--db", sink)
    return server, server.expect("ready") + "/events"


def _start_publisher(children, rng, source, url):
    return children.start("publisher", "--db", source, "--url", url, "--limit", rng.randint(1, 16))


def _readonly(path):
    return sqlite3.connect("file:%s?mode=ro" % urllib.parse.quote(os.path.abspath(path)), uri=True,
                           isolation_level=None, timeout=10.0)


def _wait_applied(sink, position, publisher):
    """Until the sink has applied `position` events, or the publisher has ended."""
    deadline = time.monotonic() + WAIT
    con = _readonly(sink)
    try:
        while con.execute("SELECT count(*) FROM inbox").fetchone()[0] < position and publisher.running():
            if time.monotonic() > deadline:
                raise ChildFailed("the sink did not reach %d applied events within %gs" % (position, WAIT))
            time.sleep(POLL)  # polling interval, not synchronisation
    finally:
        con.close()


def _first_pending(source):
    con = _readonly(source)
    try:
        row = con.execute("SELECT event_id FROM outbox WHERE sent = 0 ORDER BY seq LIMIT 1").fetchone()
    finally:
        con.close()
    return row[0] if row else None
