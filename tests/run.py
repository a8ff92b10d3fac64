"""Run the whole suite and end with the line ``N passed, N failed``.

Each test module (tests/test_*.py) runs in a worker process of its own, at
most --jobs at a time, modules named *_slow first and then largest first,
because the slow ones (real subprocesses and servers) are independent. A
module still running WORKER_TIMEOUT seconds (300; 900 on Windows, where a
process starts slower) after its own worker started is killed and counted
as one failure, so a hung test ends as a failure, never as a hung `make
test`; there is no deadline for the suite as a whole. Exit 0 only when
nothing failed and at least one test ran. Each skipped case is listed by
name with its reason (on Windows, each that needs POSIX).

Works from any current directory. The interpreter's own -X and -W options
(python -X dev -W error::ResourceWarning tests/run.py) are passed on to every
worker, so they apply to the tests and not only to this runner. This file
stays parseable by Python 2.7, so that an old interpreter gets one line
naming the minimum version (exit 2) instead of a SyntaxError.
"""
from __future__ import print_function

import sys

MIN_PYTHON = (3, 8)
if sys.version_info < MIN_PYTHON:  # audit: G50
    sys.stderr.write("outbox-kit needs Python %d.%d or newer; this is Python %s\n"
                     % (MIN_PYTHON + (sys.version.split()[0],)))
    sys.exit(2)

import argparse
import compileall
import concurrent.futures
import glob
import json
import os
import signal
import subprocess
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MARK = "@@counts "
# Seconds for one module, from its worker's start. Windows has no fork, and under Wine each process start costs
# about a second: a module that starts a hundred processes takes minutes there (test_outbox_cli_ops: 2 min alone).
WORKER_TIMEOUT = 900 if os.name == "nt" else 300
# Run as a script, sys.path[0] is tests/; the suite imports outbox, sink and tests.* from the root.
sys.path[:1] = [ROOT]


def interpreter_options():
    """This interpreter's -X and -W options, to start every worker with the same ones."""
    options = []
    for name, value in sys._xoptions.items():
        options.append("-X" + (name if value is True else "%s=%s" % (name, value)))
    options.extend("-W" + option for option in sys.warnoptions)
    return options


def module_size(name):
    """Size of the file behind a dotted name (tests.test_x, or tests.test_x.SomeTest.test_y); 0 if none."""
    parts = name.split(".")
    while parts:
        path = os.path.join(ROOT, *parts) + ".py"
        if os.path.isfile(path):
            return os.path.getsize(path)
        parts.pop()
    return 0


def compile_sources():
    """Write the bytecode of every package here once, before any worker starts.

    Under PYTHONDONTWRITEBYTECODE=1 (set on many lab hosts and CI machines)
    each of the suite's thousands of processes compiled the grader, the kit
    and the tests again from source: about a fifth of a grade.py run's CPU.
    Python still reads a __pycache__ it did not write; .gitignore has it.
    """
    for name in ("outbox", "sink", "grader", "tests", "examples", "backend", "bench"):
        folder = os.path.join(ROOT, name)
        if os.path.isdir(folder):
            compileall.compile_dir(folder, quiet=2)


def run_modules(names, verbosity):
    suite = unittest.TestSuite()
    loader = unittest.defaultTestLoader
    for name in names:
        suite.addTests(loader.loadTestsFromName(name))
    unraisable = []
    default_hook = sys.unraisablehook

    def count_unraisable(info):
        # Under -W error::ResourceWarning a leaked socket or file raises in its
        # finaliser, where unittest cannot see it: count it here instead.
        unraisable.append(info)
        default_hook(info)

    sys.unraisablehook = count_unraisable
    try:
        result = unittest.TextTestRunner(stream=sys.stderr, verbosity=verbosity).run(suite)
    finally:
        sys.unraisablehook = default_hook
    if unraisable:
        print("%d unraisable exception(s) in %s, counted as failures (see stderr)"
              % (len(unraisable), ", ".join(names)), file=sys.stderr)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses) + len(unraisable)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    names_failed = [test.id() for test, _ in result.failures + result.errors]
    names_failed += [test.id() for test in result.unexpectedSuccesses]
    names_failed += ["unraisable exception in %s" % ", ".join(names)] if unraisable else []
    names_skipped = [[test.id(), reason] for test, reason in result.skipped]
    return passed, failed, skipped, names_failed, cpu_seconds(), names_skipped


def cpu_seconds():
    """CPU seconds of this worker and the children it has reaped; None where resource is missing (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default: %(default)s)")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--times", metavar="FILE",
                        help="write each module's wall and CPU seconds to FILE as JSON, slowest first")
    parser.add_argument("--worker", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("modules", nargs="*", help="test modules to run (default: all), e.g. tests.test_outbox_store")
    args = parser.parse_args(argv)
    verbosity = 2 if args.verbose else 1
    if args.worker is not None:
        counts = run_modules(args.worker, verbosity)
        print(MARK + json.dumps(counts), flush=True)
        return 0
    names = args.modules or [
        "tests." + os.path.basename(p)[:-3] for p in glob.glob(os.path.join(HERE, "test_*.py"))
    ]
    # Modules named *_slow first, then largest file first: a fair guess at
    # slowest first. Each module is one worker process, taken by whichever of
    # the --jobs slots frees up first.
    names.sort(key=lambda name: (not any(part.endswith("_slow") for part in name.split(".")), -module_size(name)))
    jobs = max(1, min(args.jobs, len(names)))
    started = time.monotonic()
    compile_sources()
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # A suite started in the background by a shell (`make test &`) inherits SIGINT ignored, and so would
        # every grade.py its tests send Ctrl-C to: they would fail for the shell's reason. Its workers get the
        # default back (a handler is reset to the default at exec; an ignored signal stays ignored).
        signal.signal(signal.SIGINT, signal.default_int_handler)

    seconds = {}

    def run_worker(name):
        begun = time.monotonic()
        try:
            return run_module(name)
        finally:
            seconds[name] = time.monotonic() - begun

    def run_module(name):
        cmd = ([sys.executable] + interpreter_options() + [os.path.join(HERE, "run.py")] + (["-v"] if args.verbose else [])
               + ["--worker", name])
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, universal_newlines=True)
        try:
            out, _ = proc.communicate(timeout=WORKER_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            try:
                proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:  # a child of the test still holds the pipe: stop reading it
                proc.stdout.close()
                proc.wait()
            print("%s ran past %ds and was killed; counted as one failure" % (name, WORKER_TIMEOUT))
            return 0, 1, 0, [name + " (killed)"], None, []
        lines = [line for line in out.splitlines() if line.startswith(MARK)]
        if proc.returncode != 0 or not lines:
            print("%s died (exit %s) before reporting; counted as one failure" % (name, proc.returncode))
            return 0, 1, 0, [name + " (died)"], None, []
        return json.loads(lines[-1][len(MARK):])

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        counts = list(pool.map(run_worker, names))
    passed, failed, skipped = (sum(c[i] for c in counts) for i in range(3))
    elapsed = time.monotonic() - started
    slowest = sorted(seconds, key=seconds.get, reverse=True)
    print("slowest modules: %s" % ", ".join("%s %.0fs" % (name.split("tests.", 1)[-1], seconds[name])
                                            for name in slowest[:4]))
    if args.times:
        cpu = dict(zip(names, (c[4] for c in counts)))
        with open(args.times, "w") as out:
            json.dump([[name, round(seconds[name], 1), cpu[name] and round(cpu[name], 1)] for name in slowest],
                      out, indent=1)
    # Each skipped case by name and reason (on Windows, every case that needs POSIX), then what failed:
    # the names just above the count, so a log cut to its tail still says what failed.
    for name, reason in sorted((n for c in counts for n in c[5]), key=lambda skip: (skip[1], skip[0])):
        print("skipped: %s (%s)" % (name, reason))
    for name in sorted(n for c in counts for n in c[3]):
        print("failed: %s" % name)
    print("ran %d tests in %.1fs with %d workers (Python %s), %d skipped"
          % (passed + failed + skipped, elapsed, jobs, sys.version.split()[0], skipped))
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
