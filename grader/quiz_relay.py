"""The quiz's two short relay runs: the kit's relay across a sink outage, and against a head item the sink refuses.

Runs only the kit's own code (outbox.ops.relay, outbox.send_http, sink.server),
on temporary files under `work` and a sink on 127.0.0.1; it never loads a
worker. The quiz runs it as a child process (`python -m grader.quiz_relay
WORK`), so that the grader's own process never imports the kit: main() prints
both runs' figures as one JSON object, or one line on stderr and exit 1. Each
run is bounded by a deadline; a run that does not end as the kit's relay must
raises RelayFailed.
"""
import json
import os
import sys
import time

from outbox import init_store, intake, send_http
from outbox.ops import operations, relay
from sink import server
from sink.core import inbox

from .common import SNACK, closed_port

OUTAGE_FAILURES = 4  # failed rounds before the sink comes up: the 4th wait is the first the cap cuts
BASE_DELAY, MAX_DELAY = 0.02, 0.1  # seconds: --base-delay and --max-delay of the outage run
MAX_ATTEMPTS = 3  # --max-attempts of the refused run
DEADLINE = 10.0  # seconds a run may take, at most (each takes well under one)
SEND_TIMEOUT = 2.0


class RelayFailed(Exception):
    """The kit's relay did not do here what it must: args[0] says what."""


def outage(work):
    """The relay started while nothing listens on the sink's port; the sink comes up after OUTAGE_FAILURES rounds.

    Returns {"failures": transient failed rounds, "kinds": their kinds, "waits":
    the seconds measured from each failed round to the next round, "bounds":
    min(MAX_DELAY, BASE_DELAY * 2^(n-1)) for each, "base", "cap", "sent",
    "alert": None, "lines": what the relay said}.
    """
    source, sink_db = os.path.join(work, "relay-outage-source.db"), os.path.join(work, "relay-outage-sink.db")
    con = init_store(source)
    sink = None
    try:
        intake(con, SNACK)
        port = closed_port()  # nothing listens there: the outage
        url = "http://127.0.0.1:%d/events" % port
        failed_at, rounds, lines, tally = [], [], [], relay.Tally()
        deadline = time.monotonic() + DEADLINE

        def on_round(tally):
            nonlocal sink
            failed = tally.failed() > len(failed_at)
            if failed and len(failed_at) + 1 >= OUTAGE_FAILURES and sink is None:
                sink = server.make_server(sink_db, "127.0.0.1", port).start()  # listening before the next round
            rounds.append(time.monotonic())  # after the sink started: the next gap is the relay's wait alone
            if failed:
                failed_at.append(rounds[-1])

        sent = relay.run(con, lambda event: send_http(url, event, timeout=SEND_TIMEOUT),
                         stop=lambda: time.monotonic() > deadline, limit=16, max_attempts=MAX_ATTEMPTS,
                         base_delay=BASE_DELAY, max_delay=MAX_DELAY, once=True, poll=0.05, say=lines.append,
                         on_round=on_round, tally=tally)
        if sent != 1 or len(failed_at) != OUTAGE_FAILURES:
            raise RelayFailed("the relay sent %d item(s) after %d failed round(s)" % (sent, len(failed_at)))
        waits = [round(rounds[rounds.index(t) + 1] - t, 3) for t in failed_at]
        bounds = [min(MAX_DELAY, BASE_DELAY * 2 ** n) for n in range(OUTAGE_FAILURES)]
        return {"failures": len(failed_at), "kinds": dict(tally.failures), "waits": waits, "bounds": bounds,
                "base": BASE_DELAY, "cap": MAX_DELAY, "sent": sent, "alert": None, "lines": lines}
    finally:
        con.close()
        if sink is not None:
            sink.stop()


def refused(work):
    """The relay against a sink that holds snack-7 with qty 7, while the source holds it with qty 9: 409 each time.

    Returns {"refusals": the head's permanent failures, "kind": its last
    failure's kind, "max_attempts", "alert": the HeadStuck message, "outbox":
    the head's state afterwards ("pending"), "lines": what the relay said}.
    """
    source, sink_db = os.path.join(work, "relay-refused-source.db"), os.path.join(work, "relay-refused-sink.db")
    held = inbox.init_sink(sink_db)
    try:
        inbox.receive(held, SNACK)
    finally:
        held.close()
    con = init_store(source)
    try:
        intake(con, dict(SNACK, qty=9))
        sink = server.make_server(sink_db, "127.0.0.1", 0).start()
        lines = []
        deadline = time.monotonic() + DEADLINE
        try:
            relay.run(con, lambda event: send_http(sink.url() + "/events", event, timeout=SEND_TIMEOUT),
                      stop=lambda: time.monotonic() > deadline, limit=16, max_attempts=MAX_ATTEMPTS,
                      base_delay=0.005, max_delay=0.01, once=True, poll=0.05, say=lines.append)
        except relay.HeadStuck as stuck:
            alert = str(stuck)
        else:
            raise RelayFailed("the relay raised no alert for a head item the sink refused")
        finally:
            sink.stop()
        head = operations.head(con)
        if head is None or head["id"] != SNACK["id"]:
            raise RelayFailed("the refused item is no longer the head of the line: %r" % (head,))
        return {"refusals": head["permanent_failures"], "kind": head["last_error_kind"], "max_attempts": MAX_ATTEMPTS,
                "alert": alert, "outbox": "pending", "lines": lines}
    finally:
        con.close()


def main(argv):
    """`python -m grader.quiz_relay WORK`: both runs, their figures as JSON on stdout; exit 1 if one failed."""
    work = argv[0]
    try:
        runs = {"outage": outage(work), "refused": refused(work)}
    except RelayFailed as exc:
        print(exc.args[0], file=sys.stderr)
        return 1
    print(json.dumps(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
