"""The operator's commands of `python -m outbox`: status, evidence, quarantined, quarantine, requeue, retry, purge, upgrade.

Each command parses nothing itself (outbox.cli.main builds the parser and maps
errors to exit statuses), opens what it needs, closes it before it returns,
and prints data on stdout. The relay's command is outbox.cli.relay, the
argument types every command shares outbox.cli.args.
"""
import contextlib
import json
import os
import sqlite3
import sys
import threading
import time

from . import relay as cli_relay
from ..ops import evidence, operations, relay, retention, sinklook
from ..export import nagios, prometheus, timestamps
from .. import __version__
from ..core import store, upgrade
from .args import UsageError, count_arg, json_int, positive_int, timeout_arg
from .opargs import duration_arg, reason_arg, sent_before_arg
from ..core.errors import OutboxError
from ..core.event import loads_strict

DEFAULT_MAX_AGE = "5m"  # status --check: CRITICAL once the oldest pending item waited longer
DEFAULT_CHECK_TIMEOUT = 10.0  # status --check: UNKNOWN past it (the plugin guidelines' default)


def add_commands(command):
    """Add the operator's sub-commands through `command(name, run, help)` (see outbox.cli.main)."""
    status = command("status", run_status, "what to watch: pending, sent, quarantined, oldest pending age, the head "
                     "item and its attempts, each quarantined item and what overtook it (read-only)")
    status.add_argument("--db", required=True, help="existing source DB")
    formats = _formats(status, prometheus_too=True)
    formats.add_argument("--check", action="store_true", help="one line and an exit status by the Nagios/Icinga "
                         "plugin convention: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN")
    # The Monitoring Plugins guidelines' flags (-c, -w, -t, -V), the long names kept as aliases.
    status.add_argument("-c", "--max-age", type=duration_arg, metavar="DURATION", help="with --check: CRITICAL when "
                        "the oldest pending item waited longer (default: %s)" % DEFAULT_MAX_AGE)
    status.add_argument("-w", "--max-quarantined", type=count_arg, metavar="N", help="with --check: WARNING when "
                        "more items are quarantined (default: 0)")
    status.add_argument("-t", "--timeout", type=timeout_arg, metavar="SECONDS", help="with --check: UNKNOWN when "
                        "the check has not finished in this time (default: %g)" % DEFAULT_CHECK_TIMEOUT)
    status.add_argument("-V", "--version", action="version", version="outbox-kit %s" % __version__)

    ladder = command("evidence", run_evidence, "the evidence ladder for one id: order row, outbox row, sink inbox "
                     "row, sink deliveries, the operator's history, each observed on its own, then one reading "
                     "(read-only)")
    ladder.add_argument("id", help="event id")
    ladder.add_argument("--db", required=True, help="existing source DB")
    ladder.add_argument("--sink", metavar="SINKDB", help="the sink DB to look into, read-only (default: not observed)")
    ladder.add_argument("--max-attempts", type=positive_int, default=relay.DEFAULT_MAX_ATTEMPTS, metavar="N",
                        help="the relay's --max-attempts, for the reading (default: %(default)s)")
    _formats(ladder, prometheus_too=False)

    listing = command("quarantined", run_quarantined, "every item out of the pending line: seq, id, reason, age, "
                      "attempts, and what overtook it (the count, the first %d ids; read-only)"
                      % operations.OVERTAKERS_SHOWN)
    listing.add_argument("--db", required=True, help="existing source DB")
    _formats(listing, prometheus_too=False)

    hold = command("quarantine", run_quarantine, "take a pending item out of the pending line (it stays unsent; "
                   "the reordering it causes is recorded)")
    hold.add_argument("id", help="event id")
    hold.add_argument("--db", required=True, help="existing source DB")
    hold.add_argument("--reason", required=True, type=reason_arg, help="why, one line of 1 to %d characters (kept "
                      "in the quarantine record)" % operations.MAX_REASON_CHARS)

    back = command("requeue", run_requeue, "put a quarantined item back in the pending line, at the tail, "
                   "optionally corrected")
    back.add_argument("id", help="event id")
    back.add_argument("--db", required=True, help="existing source DB")
    back.add_argument("--event", metavar="JSON", help="the corrected event, same id; its order row is corrected "
                      "with it, and the quarantine record keeps both payloads (default: unchanged)")

    again = command("retry", run_retry, "reset a pending item's attempt record, so the relay tries it again in its "
                    "place (after the alert, once the sink will take it); the reset is recorded")
    again.add_argument("id", help="event id")
    again.add_argument("--db", required=True, help="existing source DB")
    again.add_argument("--force", action="store_true", help="retry an item last refused as a conflict too (once "
                       "the sink's row for it is corrected; otherwise the sink answers 409 again)")

    cli_relay.add_command(command)

    purge = command("purge", run_purge, "delete sent outbox rows older than a duration, in batches of %d; never a "
                    "pending or quarantined row, never an order row, never the operator's history"
                    % retention.PURGE_BATCH)
    purge.add_argument("--db", required=True, help="existing source DB")
    purge.add_argument("--sent-before", required=True, metavar="DURATION", type=sent_before_arg,
                       help=retention.PURGE_RULE.replace("%", "%%"))

    upgrade = command("upgrade", run_upgrade, "upgrade an existing source DB to this release's schema, in place, "
                      "in one transaction")
    upgrade.add_argument("--db", required=True, help="existing source DB")


def run_status(args):
    if not args.check and (args.max_age is not None or args.max_quarantined is not None or args.timeout is not None):
        raise UsageError("--max-age (-c), --max-quarantined (-w) and --timeout (-t) go with --check")
    if args.check:
        return _check(args)
    with contextlib.closing(operations.open_store_readonly(args.db)) as con:
        figures = operations.figures(con)
        if not args.prometheus:
            open_ones = operations.quarantined(con)
    if args.json:
        figures["quarantines"] = [{key: item[key] for key in ("id", "seq", "quarantined_at", "overtakers")}
                                  for item in open_ones]
        print(json.dumps(figures, sort_keys=True))
    elif args.prometheus:
        sys.stdout.write(render_status(figures, written=time.time()))
    else:
        print("pending %d, sent %d, quarantined %d" % (figures["pending"], figures["sent"], figures["quarantined"]))
        head = figures["head"]
        if head is not None:
            retried = ", retried %d by hand, not delivered yet" % head["retried"] if head["retried"] else ""
            print("oldest pending taken in %.0fs ago; head %s (seq %d), attempts %d (%d refused%s), last error: %s" % (
                figures["oldest_pending_age_s"], head["id"], head["seq"], head["attempts"], head["permanent_failures"],
                retried, head["last_error"] or "none"))
        for item in open_ones:
            print("quarantined %s (seq %d) since %s, %s" % (
                item["id"], item["seq"], timestamps.utc(item["quarantined_at"]),
                evidence.overtaken_text(item["overtakers"])))
    return None


def _check(args):
    max_age = retention.parse_duration(DEFAULT_MAX_AGE) if args.max_age is None else args.max_age
    timeout = DEFAULT_CHECK_TIMEOUT if args.timeout is None else args.timeout
    # A DB locked or on a hung disk must not hold the plugin past its time: UNKNOWN, as the guidelines ask.
    watchdog = threading.Timer(timeout, _timed_out, args=(timeout,))
    watchdog.daemon = True
    watchdog.start()
    try:
        return _judge(args, max_age)
    finally:
        watchdog.cancel()


def _timed_out(timeout):
    sys.stdout.write(nagios.unknown("no figures within the %gs timeout (-t)" % timeout)[1] + "\n")
    sys.stdout.flush()
    os._exit(nagios.UNKNOWN)


def _judge(args, max_age):
    try:
        with contextlib.closing(operations.open_store_readonly(args.db)) as con:
            figures = operations.figures(con)
    except (OutboxError, sqlite3.Error, OSError) as exc:
        status, line = nagios.unknown("source DB %r: %s" % (args.db, exc))
    else:
        status, line = nagios.judge(figures, max_age=max_age, max_quarantined=args.max_quarantined or 0)
    print(line)
    return status


def render_status(figures, *, written=None):
    """`figures` (operations.figures) in the Prometheus text format, for a node_exporter textfile collector.

    `written` (Unix time, the moment of reading) becomes outbox_status_timestamp_seconds, so a textfile the
    cron line no longer rewrites (a broken cron, a failing command) is seen as stale, not as good news.
    """
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
        ("outbox_head_permanent_failures", "Times the sink refused the head item (the relay alerts at "
         "--max-attempts); 0 when none.", head["permanent_failures"] if head else 0),
        ("outbox_head_retried", "Times `outbox retry` reset the head item, which is not delivered yet "
         "(OutboxHeadStuck holds until it is); 0 when none.", head["retried"] if head else 0),
        ("outbox_max_attempts_pending", "Most delivery attempts of any pending item.", figures["max_attempts_pending"]),
        ("outbox_status_timestamp_seconds", "Unix time these figures were read (OutboxStatusStale reads it).",
         written),
    ):
        lines += prometheus.family(name, "gauge", help_text, [({}, value)])
    return "\n".join(lines) + "\n"


def run_evidence(args):
    with contextlib.ExitStack() as stack:
        source = stack.enter_context(contextlib.closing(operations.open_store_readonly(args.db)))
        sink = None
        if args.sink is not None:
            sink = stack.enter_context(contextlib.closing(sinklook.open_sink_readonly(args.sink)))
        ladder = evidence.gather(source, args.id, sink, max_attempts=args.max_attempts)
    if args.json:
        print(json.dumps(ladder, sort_keys=True))
    else:
        print("\n".join(evidence.lines(ladder)))


def run_quarantined(args):
    with contextlib.closing(operations.open_store_readonly(args.db)) as con:
        items = operations.quarantined(con)
    now = time.time()
    for item in items:
        item["age_s"] = round(max(0.0, now - item["quarantined_at"]), 3)
    if args.json:
        print(json.dumps({"quarantined": items}, sort_keys=True))
        return
    print("quarantined %d" % len(items))
    for item in items:
        print("  seq %d  %s  since %s (%.0f s)  attempts %d (%d refused)  last error: %s  reason: %s" % (
            item["seq"], item["id"], timestamps.utc(item["quarantined_at"]), item["age_s"], item["attempts"],
            item["permanent_failures"], item["last_error_kind"] or "none", item["reason"]))
        print("    " + evidence.overtaken_text(item["overtakers"]))


def run_quarantine(args):
    with contextlib.closing(_open_existing(args.db)) as con:
        operations.quarantine(con, args.id, args.reason)
    print("quarantined %s: out of the pending line, not sent; requeue it when it is fixed" % args.id)


def run_requeue(args):
    event = None
    if args.event is not None:
        try:
            event = loads_strict(args.event.encode("utf-8", "surrogateescape"), parse_int=json_int)
        except (ValueError, RecursionError) as exc:
            raise ValueError("--event must be one JSON object: %s" % _short(exc)) from None
    with contextlib.closing(_open_existing(args.db)) as con:
        seq = operations.requeue(con, args.id, event)
    print("requeued %s at the tail as seq %d%s" % (args.id, seq, " (corrected)" if event is not None else ""))


def run_retry(args):
    with contextlib.closing(_open_existing(args.db)) as con:
        reset = operations.retry(con, args.id, force=args.force)
    print("retry %s: its attempt record (%d attempt(s), %d refused, last failure: %s) is reset and kept in the "
          "history; the relay sends it again in its place" % (
              args.id, reset["attempts"], reset["permanent_failures"], reset["last_error_kind"] or "none"))


def run_purge(args):
    with contextlib.closing(_open_existing(args.db)) as con:
        removed = retention.purge(con, args.sent_before)
    print("purged %d sent row(s)" % removed)


def run_upgrade(args):
    with contextlib.closing(_open_existing(args.db)) as con:
        version = upgrade.schema_version(con)
    print("source DB %s is at schema %d" % (args.db, version))


def _open_existing(path, durability="full"):
    if not os.path.isfile(path):
        raise OutboxError("no source DB at %r (intake creates one)" % (path,))
    return store.init_store(path, durability=durability)


def _formats(parser, *, prometheus_too):
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print one JSON object")
    if prometheus_too:
        group.add_argument("--prometheus", action="store_true", help="print the Prometheus text format")
    return group



def _short(exc):
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
