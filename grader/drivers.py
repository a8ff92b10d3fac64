"""The steps of the scenarios, driven from the grader's own process: intake, publish, send, one in-process check.

Each driver gets the worker as remote.Remote, the step's arguments and a
list of records ("lines": intake, ack, sent, done, error, verdict), which
scenarios.py reads through parent.Run; it returns the step's exit status.
The records are the grader's own: what each call returned, as it saw it.
"""
import argparse
import json
import time

from . import checks, corpus
from .corpus import checks as corpus_checks
from .checks import EVENT_KEYS, connect, describe, describe_value, keys_of, mro
from .common import INTAKE_CRASH, PUBLISHER_CRASH, SNACK, Fail, msg
from .remote import Crash, Handle


def json_value(value):
    """`value` itself when JSON has the same type (true, 1, "ok", null), else its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def drive_intake(impl, args, lines):
    con = connect(impl, "init_store", args.db)
    if args.crash_after_first_commit:
        impl.crash_after_first_commit(con, INTAKE_CRASH)  # the step ends right after the first COMMIT
    for event in json.loads(args.events):
        lines.append({"kind": "intake", "id": event["id"], "seq": json_value(impl.intake(con, event))})
    lines.append({"kind": "done"})
    return 0


def drive_publish(impl, args, lines):
    con = connect(impl, "init_store", args.db)
    for event in json.loads(args.events or "[]"):
        impl.intake(con, event)

    def send(event):
        if not isinstance(event, dict) or set(event) != EVENT_KEYS:
            raise Fail(msg("publish.event"), msg("publish.event-keys", keys=keys_of(event)))
        result = impl.send_http(args.url, event)
        lines.append({"kind": "ack", "id": json_value(event.get("id")), "result": json_value(result)})
        if result is not True:
            raise Fail(msg("rule.send-http-true"), msg("publish.send-http-returned", value=describe_value(result)))
        return result

    def crash(event):
        raise Crash(PUBLISHER_CRASH)  # no finally, no close: the publisher's process just stops

    try:
        marked = impl.dispatch(con, send, after_delivery=crash if args.crash_after_ack else None)
    except Fail:
        raise
    except Exception as exc:
        lines.append(error_line(exc, stage="dispatch"))
        return 1
    lines.append({"kind": "done", "marked": json_value(marked)})
    return 0


def error_line(exc, stage=None):
    names = mro(exc)
    return {"kind": "error", "type": names[0] if names else "?", "mro": names, "message": describe(exc), "stage": stage,
            "function": getattr(exc, "function", None), "call": getattr(exc, "call", None),
            "frames": getattr(exc, "frames", [])}


def drive_send(impl, args, lines):
    """send_http(url, snack-7, timeout=--send-timeout) to --url, or to each URL of --urls (a JSON list), in turn.

    With --corpus acks: the ACK corpus's part --part of --parts to --url, one "outcome" record a case.
    """
    if args.corpus == "acks":
        corpus_checks.send_acks(impl, args.url, args.seed, lambda n, got: lines.append({"kind": "outcome", "n": n, "outcome": got}),
                                args.part, args.parts)
        return 0
    for url in json.loads(args.urls) if args.urls else [args.url]:
        started = time.monotonic()
        try:
            result = impl.send_http(url, dict(SNACK), timeout=args.send_timeout)
        except Fail:
            raise
        except Exception as exc:
            names = mro(exc)
            lines.append({"kind": "sent", "url": url, "seconds": round(time.monotonic() - started, 3), "result": None,
                          "shown": None, "type": names[0] if names else "?", "mro": names, "message": describe(exc)})
            continue
        lines.append({"kind": "sent", "url": url, "seconds": round(time.monotonic() - started, 3),
                      "result": json_value(result) if not isinstance(result, Handle) else repr(result),
                      "shown": describe_value(result), "type": None, "mro": [], "message": None})
    return 0


def drive_check(impl, args, lines):
    extra = {"seed": args.seed} if args.check in checks.SEEDED else {}
    if args.check in checks.NETWORKED:
        extra["net"] = args.net
    expected, observed = checks.IN_PROCESS[args.check](impl, args.db, **extra)
    lines.append({"kind": "verdict", "ok": True, "expected": expected, "observed": observed})
    return 0


def drive_kit(impl, args, lines):
    lines.append({"kind": "kit", "modules": impl.kit_modules()})
    return 0


DRIVERS = {"kit": drive_kit, "intake": drive_intake, "publish": drive_publish, "send": drive_send, "check": drive_check}


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="a step")
    parser.add_argument("--check", choices=sorted(checks.IN_PROCESS))
    parser.add_argument("--db")
    parser.add_argument("--url")
    parser.add_argument("--urls")
    parser.add_argument("--events")
    parser.add_argument("--send-timeout", type=float)
    parser.add_argument("--crash-after-ack", action="store_true")
    parser.add_argument("--crash-after-first-commit", action="store_true")
    parser.add_argument("--seed", type=int, default=corpus.DEFAULT_SEED)
    parser.add_argument("--corpus", choices=("acks",))
    parser.add_argument("--part", type=int, default=0)
    parser.add_argument("--parts", type=int, default=1)
    return parser.parse_args(argv)
