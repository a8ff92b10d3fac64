"""sink: the receiving half of outbox-kit, a warehouse that applies each event once.

`init_sink` opens the sink DB, `receive` applies an event at most once in one
transaction ("applied", "duplicate", or Conflict), and `make_server` puts
`receive` behind POST /events. The event rules are outbox.event's, shared
with the publisher. Standard library only.
"""

__version__ = "2.0.0"  # always outbox.__version__: one kit, one version

from outbox.errors import Conflict, InvalidEvent, WrongDatabase

from .inbox import init_sink, receive
from .server import make_server

__all__ = ["Conflict", "InvalidEvent", "WrongDatabase", "init_sink", "make_server", "receive"]
