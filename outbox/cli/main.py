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
import io
import json
import os
import sqlite3
import sys

from ..ops import attempts, operations
from . import ops as cli_ops
from .. import batch as intake_batch
from ..core import store
from .args import (Parser, UsageError, add_durability_flag, json_int, limit_arg, qty_arg, run_for_a_reader,
                   timeout_arg, url_arg)
from ..core.dispatch import dispatch
from ..core.errors import OutboxError
from ..core.event import loads_strict, validate_event
from ..core.sender import send_http
from ..export import nagios

PROG = "outbox"
EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_ALERT = 3
EXIT_INTERRUPTED = 130
INTAKE_BATCH = 500  # events per transaction of `intake --file`: one fsync each, a bounded write transaction
MAX_LINE = 65536  # bytes of one line of `intake --file`; an event is well under 200
# Commands that only read a DB and print to stdout: a reader that closes the pipe early (`| head`) ends
# them quietly with status 0 (outbox.cli.args.run_for_a_reader).
READ_AND_PRINT = frozenset(("pending", "status", "evidence", "quarantined"))
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

    take = command("intake", _intake, "take in one order (order row + outbox row, one transaction), or a file "
                   "of them, one JSON event a line, in transactions of %d" % INTAKE_BATCH)
    take.add_argument("--db", required=True, help="source DB (created if missing)")
    take.add_argument("--id", help="event id, e.g. snack-7")
    take.add_argument("--sku", help="stock-keeping unit, e.g. snack")
    take.add_argument("--qty", type=qty_arg, help="quantity, 1-1000000")
    take.add_argument("--file", metavar="PATH", help="JSON lines, one event each ({\"id\", \"sku\", \"qty\"}), - for "
                      "stdin, instead of --id, --sku and --qty: a batch with an invalid line takes in nothing, "
                      "every invalid line of it is named, and the intake stops there; the same file run again "
                      "takes in only what is new")
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
    one = (args.id, args.sku, args.qty)
    if args.file is not None:
        if one != (None, None, None):
            raise UsageError("--file takes the place of --id, --sku and --qty")
        return _intake_file(args)
    if None in one:
        raise UsageError("intake needs --id, --sku and --qty (or --file)")
    event = validate_event({"id": args.id, "sku": args.sku, "qty": args.qty})  # before the file exists  # audit: G36
    with contextlib.closing(store.init_store(args.db, durability=args.durability)) as con:
        seq = store.intake(con, event)
    print("taken in %s as seq %d" % (args.id, seq))


def _intake_file(args):
    """Take in the JSON lines of --file in transactions of INTAKE_BATCH (intake_many): all of a batch or none.

    Why all-or-nothing, and stop: the pending line is in seq order, which is
    the file's order; taking the valid lines around an invalid one would put
    that one, once fixed, behind the lines after it. Since an identical
    event taken in again is not a second one, the fixed file can simply be
    run again: what was taken in before is taken in once.
    """
    source = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")
    name = "stdin" if args.file == "-" else args.file
    taken = batches = 0
    con = None
    try:
        lines = enumerate(iter(lambda: source.readline(MAX_LINE + 1), b""), 1)
        while True:
            batch, errors = _read_batch(lines)
            if errors:
                for number, message in errors:
                    print("%s: error: %s line %d: %s" % (PROG, name, number, message), file=sys.stderr)
                print("%s: took in %d event(s) in %d transaction(s); nothing of the batch with the invalid line(s) "
                      "(lines %d-%d) or after it" % (PROG, taken, batches, batch[0][0], batch[-1][0]), file=sys.stderr)
                return EXIT_REFUSED
            if not batch:
                break
            if con is None:
                con = store.init_store(args.db, durability=args.durability)
            try:
                intake_batch.intake_many(con, [event for _, event in batch])
            except OutboxError as exc:  # a Conflict: an id already taken in, or twice in the batch, with another payload
                print("%s: error: %s lines %d-%d: %s" % (PROG, name, batch[0][0], batch[-1][0], exc), file=sys.stderr)
                print("%s: took in %d event(s) in %d transaction(s); nothing of that batch or after it"
                      % (PROG, taken, batches), file=sys.stderr)
                return EXIT_REFUSED
            taken += len(batch)
            batches += 1
    finally:
        if con is not None:
            con.close()
        if source is not sys.stdin.buffer:
            source.close()
    print("took in %d event(s) from %s in %d transaction(s)" % (taken, name, batches))
    return None


def _read_batch(lines):
    """The next INTAKE_BATCH events, as [(line number, event)], and [(line number, why)] for the invalid ones.

    Blank lines are skipped. A batch with an invalid line is still read to its
    end, so every invalid line of it is named at once.
    """
    batch, errors = [], []
    for number, raw in lines:
        if not raw.strip():
            continue
        try:
            if len(raw) > MAX_LINE:
                raise ValueError("longer than %d bytes" % MAX_LINE)
            try:
                value = loads_strict(raw, parse_int=json_int)
            except ValueError as exc:  # bad UTF-8 too
                raise ValueError("not valid JSON: %s" % exc) from None
            batch.append((number, validate_event(value)))
        except (ValueError, RecursionError, OutboxError) as exc:  # InvalidEvent is an OutboxError and a ValueError
            errors.append((number, str(exc) if not isinstance(exc, RecursionError) else "nested too deeply"))
            batch.append((number, None))
        if len(batch) == INTAKE_BATCH:
            break
    return batch, errors


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
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["status"] and "--check" in argv:
        return _plugin(parser, argv)
    args = parser.parse_args(argv)
    try:
        if args.command in READ_AND_PRINT:
            return run_for_a_reader(args.run, args) or EXIT_OK
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


def _plugin(parser, argv):
    """`status --check` as a Nagios plugin: a bad argument is UNKNOWN (3) with one line on stdout, not exit 2.

    The Monitoring Plugins guidelines ask for it: a monitoring daemon shows
    exit 2 as CRITICAL and reads only stdout. --help and --version exit 0.
    """
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            args = parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code in (0, None):
            return EXIT_OK
        reason = said.getvalue().strip().splitlines()[-1] if said.getvalue().strip() else "bad arguments"
        print(nagios.unknown(reason)[1])
        return nagios.UNKNOWN
    return args.run(args)
