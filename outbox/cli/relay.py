"""`python -m outbox relay`: outbox.ops.relay at the command line, with its signals, stderr lines and metrics file.

Owns what the loop must not know: the signal handlers (they only set a
flag), the wording of the alert's next steps (they name the DB), and the
node_exporter textfile the relay rewrites each round. The loop is
outbox.ops.relay; errors become exit statuses in outbox.cli.main.
"""
import contextlib
import os
import signal
import sys
import time

from ..ops import failures, relay
from ..export import prometheus, textfile
from ..core import store
from .args import add_durability_flag, limit_arg, positive_int, seconds_arg, timeout_arg, url_arg
from .opargs import duration_arg
from .stopping import STOP_SIGNALS
from ..core.errors import OutboxError
from ..core.sender import HeldConnection

POLL = 0.5  # seconds between looks at an empty pending line
EXIT_ALERT = 3


def add_command(command):
    """Add `relay` through `command(name, run, help)` (see outbox.cli.main)."""
    loop = command("relay", run_relay, "deliver continuously: dispatch batches over one held HTTP/1.1 connection "
                   "(send_http's checks on every request); ride out a sink "
                   "that does not answer (retried for ever, capped backoff with full jitter); alert when the sink "
                   "refuses the head item; SIGTERM, Ctrl-C or (Windows) Ctrl-Break let the item in flight "
                   "finish, then exit 0")
    loop.add_argument("--db", required=True, help="existing source DB (see --create)")
    loop.add_argument("--create", action="store_true", help="create the source DB if it is missing, as the first "
                      "intake would, and wait for that intake: for a relay started before the service (default: a "
                      "missing DB is refused, exit 1, so a mistyped path never becomes a new DB watched for ever)")
    loop.add_argument("--url", required=True, type=url_arg,
                      help="the sink, e.g. http://127.0.0.1:8765/events")
    loop.add_argument("--limit", type=limit_arg, default=store.MAX_BATCH,
                      help="batch size, 1-16 (default: %(default)s)")
    loop.add_argument("--max-attempts", type=positive_int, default=relay.DEFAULT_MAX_ATTEMPTS, metavar="N",
                      help="times the sink may refuse the head item (4xx, 409, an untrusted ACK) before the alert, "
                      "exit 3; no answer and 5xx never count (default: %(default)s)")
    loop.add_argument("--give-up-after", type=duration_arg, metavar="DURATION",
                      help="exit 3 once the sink has not answered for this long, e.g. 10m, for cron-style runs "
                      "(default: retry for ever)")
    loop.add_argument("--base-delay", type=seconds_arg, default=0.5, metavar="S",
                      help="backoff after the first failure, at most (default: %(default)s)")
    loop.add_argument("--max-delay", type=seconds_arg, default=10.0, metavar="S",
                      help="cap of any backoff wait: how soon delivery resumes once the sink is back "
                      "(default: %(default)s)")
    loop.add_argument("--timeout", type=timeout_arg, default=5.0,
                      help="seconds per delivery (default: %(default)s)")
    loop.add_argument("--metrics-file", metavar="PATH", help="rewrite this node_exporter textfile each round, "
                      "atomically: outbox_relay_sent_total, _attempts_total, _failures_total{kind}, "
                      "_last_success_timestamp_seconds (default: none)")
    add_durability_flag(loop)
    loop.add_argument("--once", action="store_true", help="exit 0 as soon as nothing is pending (default: wait "
                      "for new intake, polling every %gs)" % POLL)


def run_relay(args):
    if not os.path.isfile(args.db):
        if not args.create:
            raise OutboxError("no source DB at %r (intake creates one): start the relay after the first intake, or "
                              "with --create to create it now" % (args.db,))
        # Said, never silent: a mistyped path shows here as a new, empty DB.
        print("relay: no source DB at %r: creating it (--create); nothing to deliver until the first intake"
              % (args.db,), file=sys.stderr, flush=True)
    tally = relay.Tally()
    metrics = _MetricsFile(args.metrics_file)
    metrics.write(tally, first=True)  # an unwritable path is refused before anything is sent
    stops = []

    def on_signal(signum, frame):
        # Only a flag: the loop sees it between items and in every wait.
        stops.append(signum)  # audit: G40

    def say(line):
        print(line, file=sys.stderr, flush=True)

    # One HTTP/1.1 connection held across sends (outbox.core.sender.HeldConnection): each send is still
    # send_http's one request with its checks; the connection is dropped at the first doubt.
    with contextlib.closing(store.init_store(args.db, durability=args.durability)) as con, \
            HeldConnection(args.url, timeout=args.timeout) as held:
        previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
        try:
            relay.run(
                con, held.send, stop=lambda: bool(stops),
                limit=args.limit, max_attempts=args.max_attempts, base_delay=args.base_delay,
                max_delay=args.max_delay, give_up_after=args.give_up_after, once=args.once, poll=POLL, say=say,
                on_round=metrics.write, tally=tally)
        except relay.Alert as exc:
            print("relay: %s" % exc, file=sys.stderr)
            for line in _next_steps(exc, args):
                print("relay: %s" % line, file=sys.stderr)
            print("relay: marked %d sent" % tally.sent, flush=True)
            return EXIT_ALERT
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    print("relay: marked %d sent%s" % (tally.sent, "; stopped by signal" if stops else ""), flush=True)
    return None


def _next_steps(alert, args):
    """What to run next, naming this DB: evidence first, then the two ways back (retry, quarantine)."""
    head = alert.head
    if isinstance(alert, relay.GaveUp):
        steps = ["nothing is lost; once the sink answers: python -m outbox relay --db %s --url %s" % (
            args.db, args.url)]
        if head is not None:
            steps.insert(0, "look: python -m outbox evidence %s --db %s --sink SINK_DB" % (head["id"], args.db))
        return steps
    if head.get("last_error_kind") == "conflict":  # a retry would get the same 409: name the way that can help
        back = ("then, the sink holding another payload for it: python -m outbox requeue %s --db %s --event JSON "
                "(JSON: the payload that is true), or retry --force once the sink's row is corrected"
                % (head["id"], args.db))
    else:
        back = ("then, once the sink will take it: python -m outbox retry %s --db %s (tries it again in its place)"
                % (head["id"], args.db))
    return [
        "look: python -m outbox evidence %s --db %s --sink SINK_DB" % (head["id"], args.db),
        back,
        "or, to let the line behind it flow: python -m outbox quarantine %s --db %s --reason \"...\" "
        "(out of line, reordered, recorded)" % (head["id"], args.db),
    ]


class _MetricsFile:
    """The --metrics-file, rewritten whole after every round; a write that fails is said once, not fatal.

    The first write (before any send) is the exception: a path that cannot be
    written at all is refused there, with exit status 1.
    """

    def __init__(self, path):
        self.path = path
        self.failing = False
        self.started = time.time()  # so a relay that never had a failure-free round still has a gauge to alert on

    def write(self, tally, first=False):
        if self.path is None:
            return
        try:
            textfile.replace(self.path, render_relay(tally, started=self.started, written=time.time()))
        except OSError as exc:
            if first:
                raise OSError("--metrics-file %r cannot be written: %s" % (self.path, exc)) from None
            if not self.failing:
                print("relay: metrics file %r not written (%s); delivery goes on" % (self.path, exc),
                      file=sys.stderr, flush=True)
            self.failing = True
            return
        if self.failing:
            print("relay: metrics file %r written again" % self.path, file=sys.stderr, flush=True)
        self.failing = False


def render_relay(tally, *, started=None, written=None):
    """`tally` (relay.Tally) in the Prometheus text format: three counters and three gauges.

    `started` and `written` (Unix times: the relay's start, this file's
    writing) are there from the first round, so an alert reading them can
    never go dead: a relay that never succeeded still says when it started,
    and a file no one rewrites any more (a dead relay whose last file the
    collector keeps serving) grows old.
    """
    lines = prometheus.family("outbox_relay_sent_total", "counter", "Items this relay marked sent after a "
                              "verified ACK, since it started.", [({}, tally.sent)])
    lines += prometheus.family("outbox_relay_attempts_total", "counter", "Sends this relay started, since it "
                               "started.", [({}, tally.attempts)])
    lines += prometheus.family(
        "outbox_relay_failures_total", "counter", "Failed sends by kind (transient: no-answer, server-error; "
        "the rest count toward --max-attempts), since it started.",
        [({"kind": kind}, tally.failures.get(kind, 0)) for kind in sorted(failures.COUNTED)])
    lines += prometheus.family(
        "outbox_relay_last_success_timestamp_seconds", "gauge", "Unix time of the relay's last round without a "
        "failure (absent before the first).", [({}, tally.last_success)])
    lines += prometheus.family(
        "outbox_relay_started_timestamp_seconds", "gauge", "Unix time this relay started (OutboxRelaySilent reads "
        "it until the first round without a failure).", [({}, started)])
    lines += prometheus.family(
        "outbox_relay_textfile_timestamp_seconds", "gauge", "Unix time the relay wrote this file (after every "
        "round): an old one means a relay that is dead or stuck.", [({}, written)])
    return "\n".join(lines) + "\n"
