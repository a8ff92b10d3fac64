"""sink: the receiving half of outbox-kit, a warehouse that applies each event once.

`init_sink` opens the sink DB, `receive` applies an event at most once in one
transaction ("applied", "duplicate", or Conflict), and `make_server` puts
`receive` behind POST /events. The event rules are outbox.core.event's, shared
with the publisher. Standard library only.
"""
# The floor first: this import runs outbox's own guard (outbox/__init__.py, in syntax Python 2.7 can
# read) before anything else of the kit, so `python -m sink` on an old interpreter prints the kit's one
# line and exits 2, and a plain import raises ImportError. One guard for both packages, not a copy.
from outbox.core.errors import Conflict, InvalidEvent, WrongDatabase  # audit: G50

__version__ = "4.0.0"  # always outbox.__version__: one kit, one version

from .core.inbox import init_sink, receive
from .server import make_server

__all__ = ["Conflict", "InvalidEvent", "WrongDatabase", "init_sink", "make_server", "receive"]
