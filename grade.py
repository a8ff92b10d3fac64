#!/usr/bin/env python3
"""grade.py: prove "two deliveries, one application" with real processes and real files.

    python grade.py                      grade this kit (examples/worker_reference.py)
    python grade.py --impl worker.py     grade another implementation of the same contract
    python grade.py -k crash-after-ack   run one check (repeat -k for more)
    python grade.py --json               a machine-readable report on stdout
    python grade.py --list               the checks, in grader/registry.py's order

Every check runs the implementation in child processes of its own (this file,
started again with a hidden --role), so a crash, a hang or a bad import in the
implementation becomes a FAIL with a reason, never a crashed or hung grader.
The grader itself never imports the implementation. Exit status: 0 every check
passed, 1 some check failed, 2 usage error (or a Python older than 3.8),
3 grader error, 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP.

This file is only the entry point: it must still parse and run on Python 2.7,
so that an old interpreter gets one line naming the minimum version instead
of a traceback; everything else lives in the grader/ package.
"""
import os
import sys

MINIMUM = (3, 8)

if sys.version_info < MINIMUM:  # audit: G50
    # The one line the grader cannot take from grader/messages.py: nothing newer than 2.7 may load here.
    sys.stderr.write("grade.py: needs Python %d.%d or newer; this is Python %s\n"
                     % (MINIMUM[0], MINIMUM[1], sys.version.split()[0]))
    sys.exit(2)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # grading writes nothing under the kit's folder, no __pycache__ either


def main():
    """The grader's command line, or (with --role) one of its children; the exit status. `outbox-grade` runs this."""
    if sys.argv[1:2] == ["--role"]:  # audit: G51
        # A child of the grader: its supervisor stays in contain.enter(); the worker's process, its
        # limits set, returns from it to the child side, which is the only code that loads the worker.
        from grader import contain  # noqa: E402
        argv = contain.enter(sys.argv[2:])
        from grader.worker_side.main import main as child_main  # noqa: E402
        return child_main(argv)
    from grader.cli import main as grade_main  # noqa: E402  (only after the version check)
    try:
        return grade_main()
    except BrokenPipeError:  # noqa: F821  (a Python 3 name; 2.7 never gets here)
        # `python3 grade.py | head`: the reader left; the checks and clean-up already ran.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0  # audit: G58


if __name__ == "__main__":
    sys.exit(main())
