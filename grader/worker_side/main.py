"""The worker's process: grade.py started again with --role; the kit leaves sys.path, then the worker is imported.

Roles: "zygote" (import once, fork each step: contain.serve), "serve" (a
step: calls.Server answers the deciding side), "sink" (the kit's HTTP
server in front of the worker's init_sink and receive; its answers are the
worker's own, and the grader reads the sink DB itself). contain.py has
already set the limits when main() runs. The verdicts are not made here.
"""
import argparse
import importlib.util
import os
import signal
import sys
import threading
import time
import traceback

from .. import box, contain
from ..common import msg
from . import calls
from .calls import CONTRACT, say

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KIT_PACKAGES = ("grader", "outbox", "sink", "examples", "tests")
# What a step uses of the kit, imported before the kit leaves sys.path (never by the worker's name for it).
import sink as SINK  # noqa: E402
from sink import faults as SINK_FAULTS  # noqa: E402
from sink import server as SINK_SERVER  # noqa: E402
from sink.faults import exit_after_first_commit  # noqa: E402

calls.EXIT_AFTER_FIRST_COMMIT.append(exit_after_first_commit)
calls.KIT.append(ROOT)


class ImportFailed(Exception):
    def __init__(self, expected, observed):
        super().__init__(expected, observed)
        self.expected, self.observed = expected, observed


def under(path, folder):
    path = os.path.abspath(path or os.curdir)
    return path == folder or path.startswith(folder + os.sep)


def leave_the_kit(impl):
    """sys.path: the worker's folder, then the interpreter's own library; no kit module left to import by name."""
    folder = os.path.dirname(os.path.abspath(impl))
    keep = [p for p in sys.path if p and not under(p, ROOT) and "site-packages" not in p and "dist-packages" not in p]
    sys.path[:] = [folder] + [p for p in keep if os.path.abspath(p) != folder]
    for name in list(sys.modules):
        if name.split(".")[0] in KIT_PACKAGES:
            del sys.modules[name]
    sys.dont_write_bytecode = True  # no __pycache__ beside the worker, nor in the kit


def load_impl(path):
    """Import the worker module from `path`, the kit off sys.path; ImportFailed naming the error."""
    leave_the_kit(path)
    calls.WORKER["file"] = os.path.abspath(path)
    spec = importlib.util.spec_from_file_location("worker_under_test", path)  # audit: G51
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except MemoryError:
        raise  # the memory limit, which main() reports as such
    except BaseException as exc:  # noqa: B902
        raise ImportFailed(msg("impl.imports", path=path), msg("impl.import-failed", error=calls.describe(exc)))
    return module


def role_serve(module, args):
    """Answer the deciding side's calls until it says the step is over."""
    return calls.Server(module, contain.REQUESTS[0]).serve()


def role_sink(module, args):
    stop = []
    # Only a flag: Event.set() from a handler can deadlock on the lock wait() holds.
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    if contain.WINDOWS:  # no SIGTERM to send there: the grader closes this process's request pipe instead
        threading.Thread(target=lambda: (contain.read_to_end(contain.REQUESTS[0]), stop.append(True)),
                         daemon=True).start()
    needs = [name for name in args.needs.split(",") if name]
    missing = [n for n in needs if not callable(getattr(module, n, None))]  # audit: G59
    if missing:
        say("verdict", ok=False, expected=msg("impl.defines", names=", ".join(needs)),
            observed=msg("impl.missing", names=", ".join(missing)))
        return 1
    # The kit's server imports its fault code when it starts: by the name `sink`, which a worker's own copy keeps.
    sys.modules.setdefault("sink", SINK)
    sys.modules.setdefault("sink.faults", SINK_FAULTS)
    httpd = SINK_SERVER.make_server(
        args.db, "127.0.0.1", 0, timeout=args.timeout, fault=args.fault,
        init_sink=lambda path: opened_sink(module, path), receive=module.receive,
    )
    httpd.start()
    say("listening", url=httpd.url())
    while not stop:
        time.sleep(0.02)  # how soon a SIGTERM is noticed
    httpd.stop()
    return 0


def opened_sink(module, path):
    con = module.init_sink(path)
    if not calls.is_connection(con):
        raise TypeError("init_sink must give a sqlite3.Connection, got %s" % calls.wire.safe_repr(con))
    return con


def role_zygote(module, args):
    """Stay ready with the worker imported, and fork each step's process from here (contain.serve)."""
    say("ready")
    contain.serve(args.control, lambda argv: step(module, argv), contain.cpu_seconds(args.timeout))


def step(module, argv):
    """One step, in a process forked from the zygote: the role argv names."""
    args = parse_args(argv)
    return conclude(lambda: ROLES[args.role](module, args))


ROLES = {"serve": role_serve, "sink": role_sink, "zygote": role_zygote}


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="grade.py --role")
    parser.add_argument("role", choices=sorted(ROLES))
    parser.add_argument("--impl", required=True)
    parser.add_argument("--needs", default="")
    parser.add_argument("--control", type=int)
    parser.add_argument("--db")
    parser.add_argument("--fault")
    parser.add_argument("--timeout", type=float)
    return parser.parse_args(argv)


def conclude(call):
    """Run `call()`; report how it failed (the import, the memory limit, an error); return the exit status."""
    try:
        return call() or 0
    except ImportFailed as failed:
        say("verdict", ok=False, expected=failed.expected, observed=failed.observed)
    except MemoryError:
        say("limit", limit="memory")
    except Exception as exc:
        say("error", type=calls.wire.type_name(exc), mro=calls.wire.mro_names(exc), message=calls.describe(exc),
            stage=None, function=None)
        traceback.print_exc()  # to the step's stderr, which the grader keeps (bounded) for the report
    return 1


def main(argv):
    # contain.enter() has made this the worker's process: its limits set, a
    # supervisor above it that ends whatever it leaves behind.
    args = parse_args(argv)
    # The box (grader/box.py) closes around this process right before the worker's import; the first line it says.
    say("box", isolation=box.enter(os.environ.get(box.ENV)))  # audit: G70
    return conclude(lambda: ROLES[args.role](load_impl(args.impl), args))


__all__ = ["CONTRACT", "main"]
