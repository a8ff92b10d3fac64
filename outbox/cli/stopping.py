"""The signals that ask a long-running command (`relay`, `sink serve`) to stop cleanly.

SIGTERM (a supervisor's stop) and SIGINT (Ctrl-C) everywhere, and SIGBREAK
(Ctrl-Break) where it exists: Windows, where nothing sends SIGTERM. A
handler only sets a flag; the command finishes what is in hand and exits 0.
Windows' TerminateProcess (Task Manager, a service manager's last resort) is
a kill, as SIGKILL is: nothing is lost, the item in flight is sent again and
the sink's inbox makes the second delivery a duplicate.
"""
import signal

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGBREAK") if hasattr(signal, name))
