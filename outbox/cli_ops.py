"""The operator's commands of `python -m outbox`: status, evidence, quarantine, requeue, relay, purge, upgrade.

Each command parses nothing itself (outbox.cli builds the parser and maps
errors to exit statuses), opens what it needs, closes it before it returns,
and prints data on stdout; the relay's progress and alert go to stderr.
"""
import argparse
import contextlib
import json
import os
import signal
import sys
import time

from . import db, evidence, prometheus, relay, retention, sinkview, store
from .errors import OutboxError
from .event import loads_strict
from .sender import check_timeout, check_url, send_http

RELAY_POLL = 0.5  # seconds between looks at an empty pending line


def add_commands(command):
    """Add the operator's sub-commands through `command(name, run, help)` (see outbox.cli)."""
    status = command("status", run_status, "what to watch: pending, sent, quarantined, oldest pending age, the head "
                     "item and its attempts (read-only)")
    status.add_argument("--db", required=True, help="existing source DB")
    _formats(status, prometheus_too=True)

    ladder = command("evidence", run_evidence, "the evidence ladder for one id: order row, outbox row, sink inbox "
                     "row, sink deliveries, each observed on its own, then one reading (read-only)")
    ladder.add_argument("id", help="event id")
    ladder.add_argument("--db", required=True, help="existing source DB")
    ladder.add_argument("--sink", metavar="SINKDB", help="the sink DB to look into, read-only (default: not observed)")
    _formats(ladder, prometheus_too=False)

    hold = command("quarantine", run_quarantine, "take a pending item out of the pending line (it stays unsent; "
                   "the reordering it causes is recorded)")
    hold.add_argument("id", help="event id")
    hold.add_argument("--db", required=True, help="existing source DB")
    hold.add_argument("--reason", required=True, help="why, one line (kept in the quarantine record)")

    back = command("requeue", run_requeue, "put a quarantined item back in the pending line, at the tail, "
                   "optionally corrected")
    back.add_argument("id", help="event id")
    back.add_argument("--db", required=True, help="existing source DB")
    back.add_argument("--event", metavar="JSON", help="the corrected event, same id; its order row is corrected "
                      "with it (default: unchanged)")

    loop = command("relay", run_relay, "deliver continuously: dispatch batches with send_http, backoff with full "
                   "jitter after a failure, an alert when the head item is stuck; SIGTERM or Ctrl-C let the item "
                   "in flight finish, then exit 0")
    loop.add_argument("--db", required=True, help="existing source DB")
    loop.add_argument("--url", required=True, help="the sink, e.g. http://127.0.0.1:8765/events")
    loop.add_argument("--limit", type=int, default=store.MAX_BATCH, help="batch size, 1-16 (default: %(default)s)")
    loop.add_argument("--max-attempts", type=_positive_int, default=5, metavar="N",
                      help="attempts of the head item before the alert, exit 3 (default: %(default)s)")
    loop.add_argument("--base-delay", type=_seconds, default=0.5, metavar="S",
                      help="backoff after the first failure, at most (default: %(default)s)")
    loop.add_argument("--max-delay", type=_seconds, default=30.0, metavar="S",
                      help="cap of any backoff wait (default: %(default)s)")
    loop.add_argument("--timeout", type=float, default=5.0, help="seconds per delivery (default: %(default)s)")
    add_durability_flag(loop)
    loop.add_argument("--once", action="store_true", help="exit 0 as soon as nothing is pending (default: wait "
                      "for new intake, polling every %gs)" % RELAY_POLL)

    purge = command("purge", run_purge, "delete sent outbox rows older than a duration, in batches of %d; never a "
                    "pending or quarantined row, never an order row" % retention.PURGE_BATCH)
    purge.add_argument("--db", required=True, help="existing source DB")
    purge.add_argument("--sent-before", required=True, metavar="DURATION", type=_duration,
                       help=retention.DURATION_RULE.replace("%", "%%"))

    upgrade = command("upgrade", run_upgrade, "upgrade an existing source DB to this release's schema, in place, "
                      "in one transaction")
    upgrade.add_argument("--db", required=True, help="existing source DB")


def run_status(args):
    with contextlib.closing(store.open_store_readonly(args.db)) as con:
        figures = store.figures(con)
    if args.json:
        print(json.dumps(figures, sort_keys=True))
    elif args.prometheus:
        sys.stdout.write(render_status(figures))
    else:
        print("pending %d, sent %d, quarantined %d" % (figures["pending"], figures["sent"], figures["quarantined"]))
        head = figures["head"]
        if head is not None:
            print("oldest pending taken in %.0fs ago; head %s (seq %d), attempts %d, last error: %s" % (
                figures["oldest_pending_age_s"], head["id"], head["seq"], head["attempts"],
                head["last_error"] or "none"))


def render_status(figures):
    """`figures` (store.figures) in the Prometheus text format, for a node_exporter textfile collector."""
    head = figures["head"]
    lines = []
    for name, help_text, value in (
        ("outbox_pending", "Items in the pending line (unsent, not quarantined).", figures["pending"]),
        ("outbox_sent", "Outbox rows marked sent after a verified ACK (purged rows not counted).", figures["sent"]),
        ("outbox_quarantined", "Items out of the pending line, waiting for a fix and a requeue.",
         figures["quarantined"]),
        ("outbox_oldest_pending_age_seconds", "Seconds since the intake of the oldest pending item; 0 when none.",
         figures["oldest_pending_age_s"] or 0),
        ("outbox_head_attempts", "Delivery attempts of the head of the pending line; 0 when none.",
         head["attempts"] if head else 0),
        ("outbox_max_attempts_pending", "Most delivery attempts of any pending item.", figures["max_attempts_pending"]),
    ):
        lines += prometheus.family(name, "gauge", help_text, [({}, value)])
    return "\n".join(lines) + "\n"


def run_evidence(args):
    with contextlib.ExitStack() as stack:
        source = stack.enter_context(contextlib.closing(store.open_store_readonly(args.db)))
        sink = None
        if args.sink is not None:
            sink = stack.enter_context(contextlib.closing(sinkview.open_sink_readonly(args.sink)))
        ladder = evidence.gather(source, args.id, sink)
    if args.json:
        print(json.dumps(ladder, sort_keys=True))
    else:
        print("\n".join(evidence.lines(ladder)))


def run_quarantine(args):
    with contextlib.closing(_open_existing(args.db)) as con:
        store.quarantine(con, args.id, args.reason)
    print("quarantined %s: out of the pending line, not sent; requeue it when it is fixed" % args.id)


def run_requeue(args):
    event = None
    if args.event is not None:
        try:
            event = loads_strict(args.event.encode("utf-8"))
        except ValueError as exc:
            raise ValueError("--event must be one JSON object: %s" % exc) from None
    with contextlib.closing(_open_existing(args.db)) as con:
        seq = store.requeue(con, args.id, event)
    print("requeued %s at the tail as seq %d%s" % (args.id, seq, " (corrected)" if event is not None else ""))


def run_relay(args):
    check_url(args.url)
    check_timeout(args.timeout)
    if isinstance(args.limit, bool) or not 1 <= args.limit <= store.MAX_BATCH:
        raise ValueError("limit must be an int from 1 to %d, got %r" % (store.MAX_BATCH, args.limit))
    stops = []

    def on_signal(signum, frame):
        # Only a flag: the loop sees it between items and in every wait.
        stops.append(signum)

    def progress(delivered, pending, rate):
        print("relay: delivered %d, pending %d, %.1f events/s" % (delivered, pending, rate), file=sys.stderr,
              flush=True)

    with contextlib.closing(_open_existing(args.db, durability=args.durability)) as con:
        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            delivered = relay.run(
                con, lambda event: send_http(args.url, event, timeout=args.timeout), stop=lambda: bool(stops),
                limit=args.limit, max_attempts=args.max_attempts, base_delay=args.base_delay,
                max_delay=args.max_delay, once=args.once, poll=RELAY_POLL, progress=progress)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    print("relay: marked %d sent%s" % (delivered, "; stopped by signal" if stops else ""), flush=True)


def run_purge(args):
    with contextlib.closing(_open_existing(args.db)) as con:
        removed = retention.purge(con, args.sent_before)
    print("purged %d sent row(s)" % removed)


def run_upgrade(args):
    with contextlib.closing(_open_existing(args.db)) as con:
        version = store.schema_version(con)
    print("source DB %s is at schema %d" % (args.db, version))


def add_durability_flag(parser):
    """`--durability full|process` on a command that writes as it delivers or takes in."""
    parser.add_argument("--durability", choices=sorted(db.DURABILITY), default="full",
                        help="full: each commit is on disk before it returns (survives a power cut); process: "
                        "survives a killed process, not a power cut (default: %(default)s)")


def _open_existing(path, durability="full"):
    if not os.path.isfile(path):
        raise OutboxError("no source DB at %r (intake creates one)" % (path,))
    return store.init_store(path, durability=durability)


def _formats(parser, *, prometheus_too):
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print one JSON object")
    if prometheus_too:
        group.add_argument("--prometheus", action="store_true", help="print the Prometheus text format")


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError("must be an integer >= 1, got %r" % (text,))
    return value


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError("must be a number of seconds >= 0, got %r" % (text,))
    return value


def _duration(text):
    try:
        return retention.parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
