"""One run of the crash matrix: crash one process at one point, recover, check the files.

Owns the choreography of a run: which children start, who waits for whom,
who dies how, then a fresh sink and a fresh publisher until nothing is
pending. Each run works in a directory of its own and closes every child it
started. The invariants themselves live in invariants.py.
"""
import collections
import json
import os
import sqlite3

from outbox import init_store, intake

from . import child, invariants, points
from tests.support import ROOT

from .procs import KILLED, ChildFailed, Children

RunResult = collections.namedtuple("RunResult", "point mode target violations deliveries hit_deliveries skipped")

NOT_YET = "n/a until attempts exist"


def attempts_exist(workdir):
    """True if this checkout's outbox table has an `attempts` column (issue 9, another branch)."""
    path = os.path.join(workdir, "probe.db")
    con = init_store(path)
    try:
        return any(row[1] == "attempts" for row in con.execute("PRAGMA table_info(outbox)"))
    finally:
        con.close()


def run_case(point, mode, index, workdir, *, events=points.EVENTS, root=ROOT):
    """Crash at `point` in `mode` aimed at events[index]; return a RunResult.

    `index` may point past `events` (a target that is never reached): the run
    must then report the point as not reached, which is how the tests prove
    the harness can fail. The children import the kit from `root`.
    """
    os.makedirs(workdir)
    target = events[index]["id"] if index < len(events) else "no-such-event"
    if point.key == "after-attempt" and not attempts_exist(workdir):
        return RunResult(point, mode, target, [], 0, 0, skipped=NOT_YET)
    source = os.path.join(workdir, "source.db")
    sink = os.path.join(workdir, "sink.db")
    violations = []
    hits = {target: 1}
    taken_in = []
    try:
        with Children(workdir, root) as children:
            if point.victim == points.INTAKE:
                taken_in = _crash_intake(children, point, mode, index, source, events)
            else:
                taken_in = take_in(source, events)
                _crash_delivery(children, point, mode, index, target, source, sink)
            observed = invariants.check(source, sink, taken_in, hits=hits, recovered=False)
            violations += ["after the crash: " + v for v in observed.violations]
            violations += _expected_states(point, index, target, source, sink, events)
            _recover(children, source, sink)
        observed = invariants.check(source, sink, taken_in, hits=hits, recovered=True)
        violations += ["after recovery: " + v for v in observed.violations]
    except (ChildFailed, OSError, sqlite3.Error, ValueError) as exc:
        violations.append("%s: %s" % (type(exc).__name__, exc))
        observed = invariants.Observed([], collections.Counter())
    return RunResult(
        point, mode, target, violations, sum(observed.deliveries.values()), observed.deliveries[target], skipped=None
    )


def take_in(source, events):
    """Take `events` in through the kit's own intake, in a connection of this process; return them as a list."""
    con = init_store(source)
    try:
        for event in events:
            intake(con, event)
    finally:
        con.close()
    return list(events)


def _crash_intake(children, point, mode, index, source, events):
    """Events before the target taken in, the target's intake killed, those after taken in."""
    taken_in = take_in(source, events[:index])
    victim = children.start("intake", "--db", source, "--event", json.dumps(events[index]),
                            "--point", point.key, "--mode", mode)
    _die(victim, mode)
    return taken_in + take_in(source, events[index + 1:])


def _crash_delivery(children, point, mode, index, target, source, sink):
    """A sink and a publisher deliver `events` until the victim dies at `point`."""
    sink_args = ["--db", sink, "--mode", mode, "--target", target]
    publisher_args = ["--db", source, "--limit", points.BATCH, "--mode", mode, "--target", target, "--index", index]
    if point.victim == points.SINK and point.key != "after-response":
        sink_args += ["--point", point.key]
    elif point.key == "sink-committed":
        sink_args += ["--point", "hold-after-commit"]
    elif point.key == "after-response":
        publisher_args += ["--point", "hold-after-ack"]
    else:
        publisher_args += ["--point", point.key]
    server = children.start("sink", *sink_args)
    url = server.expect("ready") + "/events"
    publisher = children.start("publisher", "--url", url, *publisher_args)

    if point.key == "sink-committed":
        # The sink holds its answer; the publisher dies waiting for it.
        server.expect("committed")
        _kill_now(publisher, mode)
        server.tell("go")
        _stop(server)
    elif point.key == "after-response":
        # The publisher holds its verified ACK until the sink is dead.
        publisher.expect("acked")
        _kill_now(server, mode)
        publisher.tell("go")
        publisher.expect_exit((0, child.DELIVERY_FAILED))
    elif point.victim == points.PUBLISHER:
        _die(publisher, mode)
        _stop(server)
    else:
        _die(server, mode)
        publisher.expect_exit((child.DELIVERY_FAILED,))


def _die(victim, mode):
    """Wait until the victim is at its point, then see it die: by its own os._exit or by SIGKILL."""
    victim.expect("at")
    if mode == points.KILL:
        victim.kill()
        victim.expect_exit((KILLED,))
    else:
        victim.expect_exit((child.CRASH_EXIT,))


def _kill_now(victim, mode):
    """Kill a victim that is busy elsewhere: SIGKILL, or "die" so that it calls os._exit itself."""
    if mode == points.KILL:
        victim.kill()
        victim.expect_exit((KILLED,))
    else:
        victim.tell("die")
        victim.expect_exit((child.CRASH_EXIT,))


def _stop(server):
    server.tell("stop")
    server.expect_exit((0,))


def _recover(children, source, sink):
    """A fresh sink and a fresh publisher that runs until nothing is pending."""
    server = children.start("sink", "--db", sink)
    url = server.expect("ready") + "/events"
    publisher = children.start("publisher", "--db", source, "--url", url)
    publisher.expect("done")
    publisher.expect_exit((0,))
    _stop(server)


def _expected_states(point, index, target, source, sink, events):
    """Right after the crash: events before the target delivered, the target as the point says, the rest untouched."""
    violations = []
    for i, event in enumerate(events):
        if i == index:
            expected = point.hit
        elif point.victim == points.INTAKE or i > index:
            expected = (False, False)
        else:
            expected = (True, True)
        found = invariants.state(source, sink, event["id"])
        if found != expected:
            violations.append("after the crash: %s is %s, the point predicts %s" % (event["id"], _show(found), _show(expected)))
    if point.key == "after-attempt" and index < len(events):
        recorded = invariants.attempts(source, target)
        if not recorded:
            violations.append("after the crash: %s has attempts %r, the point predicts at least 1" % (target, recorded))
    return violations


def _show(state):
    if state == points.ABSENT:
        return state
    applied, sent = state
    return "%s and %s" % ("applied" if applied else "not applied", "sent" if sent else "pending")
