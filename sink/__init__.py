"""sink: the receiving half of outbox-kit, a warehouse that applies each event once.

`init_sink` opens the sink DB, `receive` applies an event at most once in one
transaction ("applied", "duplicate", or Conflict), and `make_server` puts
`receive` behind POST /events. The event rules are outbox.event's, shared
with the publisher. Standard library only.
"""
import sys

# The floor first, in syntax Python 2.7 can read: `python -m sink` on an old
# interpreter prints one line and exits 2; a plain import raises ImportError.
if sys.version_info < (3, 8):
    _TOO_OLD = "outbox-kit needs Python 3.8 or newer; this is Python %s" % sys.version.split()[0]
    if getattr(sys, "argv", [""])[0] in ("-m", "-c"):  # being run by `python -m` (2.7 shows "-c")
        sys.stderr.write(_TOO_OLD + "\n")
        sys.exit(2)
    raise ImportError(_TOO_OLD)

__version__ = "3.0.0"  # always outbox.__version__: one kit, one version

from outbox.errors import Conflict, InvalidEvent, WrongDatabase

from .inbox import init_sink, receive
from .server import make_server

__all__ = ["Conflict", "InvalidEvent", "WrongDatabase", "init_sink", "make_server", "receive"]
