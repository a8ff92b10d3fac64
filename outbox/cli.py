"""The publisher's command line: intake, pending, dispatch and status on a source DB.

The edge where errors become one-line messages on stderr and exit statuses;
the library below it raises and never prints or exits.
"""
import argparse
import json
import os
import sqlite3
import sys
import time

from .dispatch import dispatch
from .errors import OutboxError
from .sender import send_http
from .store import MAX_BATCH, init_store, intake, open_store_readonly, pending

PROG = "python -m outbox"


def build_parser():
    parser = argparse.ArgumentParser(prog=PROG, description="Publisher side of outbox-kit.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    take = commands.add_parser("intake", help="take in one order (order row + outbox row, one transaction)")
    take.add_argument("--db", required=True, help="source DB (created if missing)")
    take.add_argument("--id", required=True, help="event id, e.g. snack-7")
    take.add_argument("--sku", required=True)
    take.add_argument("--qty", required=True, type=int)

    show = commands.add_parser("pending", help="print unsent events in intake order (read-only)")
    show.add_argument("--db", required=True, help="existing source DB")
    show.add_argument("--limit", type=int, default=MAX_BATCH, help="1-16 (default: %(default)s)")

    send = commands.add_parser("dispatch", help="deliver one batch to a sink, marking each item after its ACK")
    send.add_argument("--db", required=True, help="existing source DB")
    send.add_argument("--url", required=True, help="the sink, e.g. http://127.0.0.1:8765/events")
    send.add_argument("--limit", type=int, default=MAX_BATCH, help="1-16 (default: %(default)s)")
    send.add_argument("--timeout", type=float, default=5.0, help="seconds per delivery (default: %(default)s)")

    status = commands.add_parser("status", help="counts of pending and sent rows, and the oldest pending")
    status.add_argument("--db", required=True, help="existing source DB")
    return parser


def open_existing(path):
    if not os.path.isfile(path):
        raise OutboxError("no source DB at %r (intake creates one)" % path)
    return init_store(path)


def run(args):
    if args.command == "intake":
        con = init_store(args.db)
        seq = intake(con, {"id": args.id, "sku": args.sku, "qty": args.qty})
        print("taken in %s as seq %d" % (args.id, seq))
    elif args.command == "pending":
        for event in pending(open_store_readonly(args.db), args.limit):
            print(json.dumps(event))
    elif args.command == "dispatch":
        con = open_existing(args.db)

        def send(event):
            acked = send_http(args.url, event, timeout=args.timeout)
            print("ACK %s" % event["id"], flush=True)
            return acked

        marked = dispatch(con, send, args.limit)
        print("marked %d sent" % marked)
    elif args.command == "status":
        con = open_store_readonly(args.db)
        counts = dict(con.execute("SELECT sent, count(*) FROM outbox GROUP BY sent").fetchall())
        oldest = con.execute("SELECT event_id, created_at FROM outbox WHERE sent = 0 ORDER BY seq LIMIT 1").fetchone()
        print("pending %d, sent %d" % (counts.get(0, 0), counts.get(1, 0)))
        if oldest:
            print("oldest pending %s, taken in %.0fs ago" % (oldest[0], max(0.0, time.time() - oldest[1])))


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        run(args)
    except (OutboxError, ValueError, KeyError, sqlite3.Error, OSError) as exc:
        print("outbox: error: %s" % (exc,), file=sys.stderr)
        return 1
    return 0
