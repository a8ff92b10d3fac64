"""The publisher's command line: intake, pending, dispatch and status on a source DB.

The edge where errors become one line on stderr and an exit status (1 for a
refused event, DB or delivery, 2 for bad arguments, 130 for Ctrl-C); the
library below it raises and never prints or exits. Every argument is checked
before any file is created or any request is sent.
"""
import argparse
import json
import os
import sqlite3
import sys
import time

from . import store
from .dispatch import dispatch
from .errors import OutboxError
from .event import validate_event
from .sender import check_timeout, check_url, send_http

PROG = "outbox"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # One line, not the usage block: --help is there for the rest.
        self.exit(2, "%s: error: %s\n" % (PROG, message))


def build_parser():
    parser = _Parser(prog="python -m outbox", description="Publisher side of outbox-kit.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    take = commands.add_parser("intake", help="take in one order (order row + outbox row, one transaction)")
    take.add_argument("--db", required=True, help="source DB (created if missing)")
    take.add_argument("--id", required=True, help="event id, e.g. snack-7")
    take.add_argument("--sku", required=True, help="stock-keeping unit, e.g. snack")
    take.add_argument("--qty", required=True, type=int, help="quantity, 1-1000000")

    show = commands.add_parser("pending", help="print unsent events in intake order (read-only)")
    show.add_argument("--db", required=True, help="existing source DB")
    show.add_argument("--limit", type=int, default=store.MAX_BATCH, help="1-16 (default: %(default)s)")

    send = commands.add_parser("dispatch", help="deliver one batch to a sink, marking each item after its ACK")
    send.add_argument("--db", required=True, help="existing source DB")
    send.add_argument("--url", required=True, help="the sink, e.g. http://127.0.0.1:8765/events")
    send.add_argument("--limit", type=int, default=store.MAX_BATCH, help="1-16 (default: %(default)s)")
    send.add_argument("--timeout", type=float, default=5.0, help="seconds per delivery (default: %(default)s)")

    status = commands.add_parser("status", help="counts of pending and sent rows, and the oldest pending (read-only)")
    status.add_argument("--db", required=True, help="existing source DB")
    return parser


def run(args):
    if args.command == "intake":
        event = validate_event({"id": args.id, "sku": args.sku, "qty": args.qty})  # before the file exists
        seq = store.intake(store.init_store(args.db), event)
        print("taken in %s as seq %d" % (args.id, seq))
    elif args.command == "pending":
        for event in store.pending(store.open_store_readonly(args.db), args.limit):
            print(json.dumps(event))
    elif args.command == "dispatch":
        check_url(args.url)
        check_timeout(args.timeout)
        if not os.path.isfile(args.db):
            raise OutboxError("no source DB at %r (intake creates one)" % args.db)
        con = store.init_store(args.db)

        def send(event):
            acked = send_http(args.url, event, timeout=args.timeout)
            print("ACK %s" % event["id"], flush=True)
            return acked

        print("marked %d sent" % dispatch(con, send, args.limit))
    elif args.command == "status":
        pending_count, sent_count, oldest = store.status(store.open_store_readonly(args.db))
        print("pending %d, sent %d" % (pending_count, sent_count))
        if oldest:
            print("oldest pending %s, taken in %.0fs ago" % (oldest[0], max(0.0, time.time() - oldest[1])))


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        run(args)
    except KeyboardInterrupt:
        print("%s: interrupted; whatever was not marked sent is still pending" % PROG, file=sys.stderr)
        return 130
    except sqlite3.Error as exc:
        print("%s: error: source DB %r: %s" % (PROG, args.db, exc), file=sys.stderr)
        return 1
    except (OutboxError, ValueError, KeyError, OSError) as exc:
        print("%s: error: %s" % (PROG, exc), file=sys.stderr)
        return 1
    return 0
