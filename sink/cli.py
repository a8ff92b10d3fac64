"""Command line of the sink: `python -m sink serve`, `show` and `status`.

The only module of the sink that prints or handles signals, and the one that
chooses the exit status of a run (a crash fault in faults.py ends the process
with CRASH_EXIT itself, on purpose). It turns the library's errors into one
line on stderr and never shows a traceback for a bad argument or an unusable DB.

Exit status: 0 done (serve: stopped by SIGTERM, Ctrl-C or, on Windows, Ctrl-Break); 1 the DB or the
address is unusable; 2 bad arguments; 70 (serve) a thread of the server died,
its traceback logged: exit at once, so a supervisor restarts the sink; 74
(faults.CRASH_EXIT) a crash fault fired, on purpose.
"""

import argparse
import contextlib
import json
import re
import signal
import sqlite3
import sys
import time

from outbox.cli.stopping import STOP_SIGNALS
from outbox.cli.args import Parser, add_durability_flag, loopback_host_arg, positive_int, run_for_a_reader, timeout_arg
from outbox.core.errors import OutboxError
from outbox.export.timestamps import utc

from . import faults, logqueue, metrics, server, views

PROG = "sink"
EXIT_OK = 0
EXIT_DB = 1
EXIT_THREAD_DIED = 70  # EX_SOFTWARE in sysexits.h: the server failed, not the caller
STOP_POLL = 0.1  # seconds between looks at the stop flag and at the server's threads
LOG_DRAIN = 1.0  # seconds the log may take to write what is queued once the server has stopped


class _Parser(Parser):
    name = PROG


def main(argv=None):
    """Run the command in `argv` (default sys.argv[1:]); return the exit status.

    Bad arguments end in SystemExit(2) from argparse, after one line on stderr.
    """
    args = _build_parser().parse_args(argv)
    try:
        if args.command in ("show", "status"):  # read-only: a reader that left (`| head`) is no error
            return run_for_a_reader(args.run, args)
        return args.run(args)
    except (OutboxError, OSError) as exc:  # audit: G36
        print("%s: error: %s" % (PROG, exc), file=sys.stderr)
        return EXIT_DB
    except sqlite3.Error as exc:
        print("%s: error: sink DB %r: %s" % (PROG, args.db, exc), file=sys.stderr)
        return EXIT_DB


def _build_parser():
    parser = _Parser(
        prog="python -m sink",
        description="The warehouse sink of outbox-kit.",
        epilog=(
            "exit status: 0 done; 1 the DB or address is unusable; 2 bad arguments; "
            "%d a thread of the server died (serve; its traceback is logged); "
            "%d a crash fault fired (serve --fault crash-...)." % (EXIT_THREAD_DIED, faults.CRASH_EXIT)
        ),
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    serve = commands.add_parser(
        "serve",
        help="receive events over HTTP",
        description=(
            "Serve %s. Prints http://HOST:PORT once listening, then one line on stderr per request, per fault "
            "that fires and per client closed unanswered. SIGTERM, Ctrl-C or (Windows) Ctrl-Break closes idle "
            "connections at once, "
            "finishes the requests in hand (within --timeout + 1 s) and exits 0. A thread of the server that dies "
            "exits %d at once; a crash fault exits %d." % (server.ROUTES_TEXT, EXIT_THREAD_DIED, faults.CRASH_EXIT)
        ),
        epilog=(
            "faults: drop-after-commit (receive commits, the connection closes with no answer); "
            "crash-before-commit (exit %d as receive is about to COMMIT); "
            "crash-after-commit (exit %d right after receive's first COMMIT)." % (faults.CRASH_EXIT, faults.CRASH_EXIT)
        ),
    )
    serve.add_argument("--db", required=True, metavar="PATH", help="sink DB file, created if missing")
    serve.add_argument(
        "--host",
        type=loopback_host_arg,
        default="127.0.0.1",
        help="loopback address to bind: localhost, 127.x.y.z or ::1 only, the rule the publisher's URLs follow "
        "(default: %(default)s)",
    )
    serve.add_argument("--port", type=_port, default=8765, help="TCP port, 0 picks a free one (default: %(default)s)")
    serve.add_argument(
        "--timeout",
        type=timeout_arg,
        default=server.DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="seconds a client has to send its whole request, and again to take the answer (default: %(default)s)",
    )
    serve.add_argument(
        "--max-connections",
        type=positive_int,
        default=server.DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help="client connections open at once; at the cap the one waiting longest without a complete "
        "request is closed (default: %(default)s)",
    )
    serve.add_argument(
        "--fault",
        choices=faults.NAMES,
        metavar="NAME",
        help="inject fault NAME (one of: %s) into the first valid events that reach receive (default: %%(default)s)"
        % ", ".join(faults.NAMES),
    )
    serve.add_argument(
        "--fault-count",
        type=positive_int,
        default=1,
        metavar="N",
        help="drop-after-commit: how many events it hits before the server behaves normally; "
        "a crash fault ends the process at its first hit (default: %(default)s)",
    )
    add_durability_flag(serve, what="each commit is on disk before the ACK")
    serve.set_defaults(run=_serve)

    show = commands.add_parser(
        "show",
        help="print the inventory and the deliveries log",
        description="Print the inventory and the deliveries log of an existing sink DB. Never creates or changes it.",
    )
    show.add_argument("--db", required=True, metavar="PATH", help="an existing sink DB file")
    show.set_defaults(run=_show)

    status = commands.add_parser(
        "status",
        help="print what to watch: applied, duplicates, conflicts, last delivery, inventory",
        description="Print the sink's figures from an existing sink DB (read-only). Never creates or changes it.",
        epilog="exit status: 0 done; 1 the DB is unusable; 2 bad arguments.",
    )
    status.add_argument("--db", required=True, metavar="PATH", help="an existing sink DB file")
    formats = status.add_mutually_exclusive_group()
    formats.add_argument("--json", action="store_true", help="print one JSON object")
    formats.add_argument("--prometheus", action="store_true", help="print the Prometheus text format")
    status.set_defaults(run=_status)
    return parser


def _serve(args):
    # Every line of a running sink goes through one bounded queue: a stderr nobody reads loses lines, counted,
    # and never stops the sink from answering or from stopping.
    log = logqueue.QueuedLog(sys.stderr.fileno(), prefix=lambda: utc(time.time()))
    try:
        return _run(args, log)
    finally:
        log.close(LOG_DRAIN)


def _run(args, log):
    try:
        srv = server.make_server(
            args.db,
            args.host,
            args.port,
            timeout=args.timeout,
            fault=args.fault,
            fault_count=args.fault_count,
            max_connections=args.max_connections,
            durability=args.durability,
            log=log,
        )
    except OSError as exc:
        raise OSError("cannot listen on %s port %d: %s" % (args.host, args.port, exc)) from None
    stop = []

    def on_signal(signum, frame):
        # Only a flag: shutdown() from here would wait on the very thread it interrupts.
        stop.append(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)
    srv.start()
    try:
        print(srv.url(), flush=True)
        while not stop and srv.failure is None:
            time.sleep(STOP_POLL)
    except BaseException:
        srv.stop()
        raise
    if srv.failure is None:
        log.plain("%s: stopping: finishing the requests in hand" % PROG)
        try:
            srv.stop()
        except server.ThreadDied:
            pass  # died while stopping: reported below like any other death
    if srv.failure is not None:
        # At once: another stop() could wait on the thread that is gone. Its traceback is in the log above.
        log.plain("%s: error: %s; exiting with status %d" % (PROG, srv.failure, EXIT_THREAD_DIED))
        return EXIT_THREAD_DIED  # audit: G33
    return EXIT_OK


def _show(args):
    con = views.open_readonly(args.db)
    try:
        stock = views.inventory(con)
        log = views.deliveries(con)
    finally:
        con.close()
    print("inventory (%d)" % len(stock))
    print(_table(("sku", "qty"), stock))
    print()
    print("deliveries (%d)" % len(log))
    rows = [(seq, utc(at), outcome, event_id, digest[:12]) for seq, event_id, outcome, digest, at in log]
    print(_table(("seq", "received (UTC)", "outcome", "event_id", "digest"), rows))
    return EXIT_OK


def _status(args):
    with contextlib.closing(views.open_readonly(args.db)) as con:
        figures = views.status(con)
    if args.json:
        print(json.dumps({k: v for k, v in figures.items() if k != "last_delivery_unix"}, sort_keys=True))
    elif args.prometheus:
        sys.stdout.write(metrics.render(figures))
    else:
        print("applied %d, duplicates %d, conflicts %d, last delivery %s" % (
            figures["applied"], figures["duplicates"], figures["conflicts"], figures["last_delivery_at"] or "never"))
        for sku, qty in sorted(figures["inventory"].items()):
            print("  %s  %d" % (sku, qty))
    return EXIT_OK


def _table(headers, rows):
    cells = [[str(v) for v in headers]] + [[str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def _port(text):
    if not re.fullmatch("[0-9]{1,5}", text) or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError("must be an integer from 0 to 65535, got %r" % text)
    return int(text)


if __name__ == "__main__":
    sys.exit(main())
