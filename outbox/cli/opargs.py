"""The argument types of `python -m outbox` that read the operator's rules: durations and quarantine reasons.

Apart from outbox.cli.args because they import operator code (outbox.ops):
args is shared with `python -m sink`, which must not load it. Each returns
the value or raises argparse.ArgumentTypeError, like the types in args.
"""
import argparse

from ..ops import operations, retention


def duration_arg(text):
    """A duration such as "30s", "15m", "12h", "7d" (outbox.ops.retention.parse_duration), in seconds."""
    try:
        return retention.parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def sent_before_arg(text):
    """purge --sent-before: a duration as for duration_arg, whose rule says what 0s means there."""
    try:
        return retention.parse_duration(text, retention.PURGE_RULE)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def reason_arg(text):
    """A quarantine reason: one line of bounded length (outbox.ops.operations.check_reason)."""
    try:
        return operations.check_reason(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
