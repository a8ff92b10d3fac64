"""This kit as one worker module: what `python grade.py` grades by default.

A lab hands its participants examples/worker_stub.py; this file shows the
same contract filled in by the kit's own packages. The grader loads it from
its path in child processes of its own.
"""
import os
import sys

# Put the directory above this file first on sys.path, so a copy of the kit
# (the mutant tests copy outbox/, sink/ and examples/) grades its own packages.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from outbox import dispatch, init_store, intake, mark_sent, pending, send_http, validate_event  # noqa: E402
from sink import init_sink, receive  # noqa: E402

__all__ = ["validate_event", "init_store", "intake", "pending", "mark_sent", "dispatch", "send_http", "init_sink", "receive"]
