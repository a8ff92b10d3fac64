"""The publisher's command line: the parser of every command, and the one place errors become exit statuses.

The edge where errors become one line on stderr and an exit status; the
library below it raises and never prints or exits. Every argument is checked
while parsing (outbox.cli.args), or by the command before it opens anything
(UsageError), so a bad one opens, creates or upgrades no file and sends
nothing; every connection a command opens is closed before it returns.
The operator's commands (status, evidence, quarantined, quarantine, requeue,
retry, purge, upgrade) live in outbox.cli.ops, the relay in outbox.cli.relay.
"""
import contextlib
import json
import os
import sqlite3
import sys

from ..ops import attempts, operations
from . import ops as cli_ops
from ..core import store
from .args import Parser, UsageError, add_durability_flag, limit_arg, timeout_arg, url_arg
from ..core.dispatch import dispatch
from ..core.errors import OutboxError
from ..core.event import validate_event
from ..core.sender import send_http

PROG = "outbox"
EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_ALERT = 3
EXIT_INTERRUPTED = 130
EXIT_STATUSES = (
    "exit status: 0 done; 1 refused (an invalid event, an unusable DB, a failed delivery, an unknown or "
    "wrong-state id); 2 bad arguments; 3 relay alert (the sink refused the head item --max-attempts times, or "
    "did not answer for --give-up-after); 130 Ctrl-C (a command other than relay). status --check: 0 OK, "
    "1 WARNING, 2 CRITICAL, 3 UNKNOWN."
)


class _Parser(Parser):
    name = PROG


def build_parser():
    parser = _Parser(prog="python -m outbox", description="Publisher side of outbox-kit.", epilog=EXIT_STATUSES)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    def command(name, run, help_text):
        sub = commands.add_parser(name, help=help_text, description=help_text, epilog=EXIT_STATUSES)
        sub.set_defaults(run=run)
        return sub

    take = command("intake", _intake, "take in one order (order row + outbox row, one transaction)")
    take.add_argument("--db", required=True, help="source DB (created if missing)")
    take.add_argument("--id", required=True, help="event id, e.g. snack-7")
    take.add_argument("--sku", required=True, help="stock-keeping unit, e.g. snack")
    take.add_argument("--qty", required=True, type=int, help="quantity, 1-1000000")
    add_durability_flag(take)

    show = command("pending", _pending, "print unsent events in seq order, as dispatch sends them (read-only)")
    show.add_argument("--db", required=True, help="existing source DB")
    show.add_argument("--limit", type=limit_arg, default=store.MAX_BATCH, help="1-16 (default: %(default)s)")

    send = command("dispatch", _dispatch, "deliver one batch to a sink, marking each item after its ACK")
    send.add_argument("--db", required=True, help="existing source DB")
    send.add_argument("--url", required=True, type=url_arg, help="the sink, e.g. http://127.0.0.1:8765/events")
    send.add_argument("--limit", type=limit_arg, default=store.MAX_BATCH, help="1-16 (default: %(default)s)")
    send.add_argument("--timeout", type=timeout_arg, default=5.0, help="seconds per delivery (default: %(default)s)")
    add_durability_flag(send)

    cli_ops.add_commands(command)
    return parser


def _intake(args):
    event = validate_event({"id": args.id, "sku": args.sku, "qty": args.qty})  # before the file exists  # audit: G36
    with contextlib.closing(store.init_store(args.db, durability=args.durability)) as con:
        seq = store.intake(con, event)
    print("taken in %s as seq %d" % (args.id, seq))


def _pending(args):
    with contextlib.closing(operations.open_store_readonly(args.db)) as con:
        events = store.pending(con, args.limit)
    for event in events:
        print(json.dumps(event))


def _dispatch(args):
    if not os.path.isfile(args.db):
        raise OutboxError("no source DB at %r (intake creates one)" % args.db)

    def send(event):
        acked = send_http(args.url, event, timeout=args.timeout)
        print("ACK %s" % event["id"], flush=True)
        return acked

    with contextlib.closing(store.init_store(args.db, durability=args.durability)) as con:
        print("marked %d sent" % dispatch(con, send, args.limit, **attempts.hooks(con)))


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args) or EXIT_OK
    except UsageError as exc:
        parser.error(str(exc))
    except KeyboardInterrupt:
        print("%s: interrupted; whatever was not marked sent is still pending" % PROG, file=sys.stderr)
        return EXIT_INTERRUPTED
    except sqlite3.Error as exc:
        print("%s: error: source DB %r: %s" % (PROG, args.db, exc), file=sys.stderr)
        return EXIT_REFUSED
    except RecursionError:  # audit: G36
        print("%s: error: input nested too deeply to read" % PROG, file=sys.stderr)
        return EXIT_REFUSED
    except (OutboxError, ValueError, LookupError, OSError) as exc:  # audit: G36
        message = exc.args[0] if isinstance(exc, LookupError) and exc.args else exc
        print("%s: error: %s" % (PROG, message), file=sys.stderr)
        return EXIT_REFUSED
