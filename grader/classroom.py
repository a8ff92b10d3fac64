"""Grading one worker or a whole class: which workers, their checks spread over --jobs, progress on stderr.

Each worker has a Grader of its own (its own temporary folder, its own
zygote). Every check of every worker is a task in one pool of --jobs
threads, the workers' tasks queued in the workers' order. A worker that hangs
holds only its own tasks' slots, each for its bounded time; a worker that does
not compile is graded without a child at all. Never imports the worker.
"""
import collections
import concurrent.futures
import os
import sys
import threading
import time
import traceback

from .common import QUERY_S, Fail, bound_refused, describe, interrupted, msg
from .messages import render, text
from .parent import PROCESSES, Grader
from .results import skipped_entry
from .stopping import Completions
from .text import data, shown

Worker = collections.namedtuple("Worker", "name path")
TICK = 1.0  # seconds between two refreshes of the live progress line


class UsageError(Exception):
    """A list of workers that cannot be graded as given: the message names the path and the rule."""


def find_workers(paths):
    """The workers named by --impl (see find_class), without the entries that were not graded."""
    return find_class(paths)[0]


def find_class(paths):
    """(workers, skipped) named by --impl: files, and directories (*.py in it, */worker.py one level down).

    Workers are sorted, each named by its file's stem, or by its folder if
    the file is a worker.py (found in a folder, or named directly: the same
    name either way). A worker found in a directory whose name an earlier
    one has (ann.py, then ann/worker.py) is not graded but listed in
    `skipped` with the first one's path; two files named directly with one
    name are a UsageError, as are a missing path and a file not ending in
    .py. Every other entry of a directory is in `skipped`
    (results.skipped_entry) with the reason it was not graded: nothing in a
    class folder is left out silently.
    """
    workers, skipped, seen = [], [], {}
    for given in paths:
        path = os.path.abspath(given)
        if os.path.isdir(path):
            found, left = scan(path)
            if not found:
                raise UsageError(msg("usage.empty-dir", path=path))
            skipped.extend(left)
            for worker in found:
                if worker.name in seen:  # ann.py beside ann/worker.py: the class is graded, this entry listed
                    skipped.append(skipped_entry(worker.path, msg("skip.duplicate", name=worker.name,
                                                                  first=seen[worker.name])))
                else:
                    seen[worker.name] = worker.path
                    workers.append(worker)
        elif not os.path.isfile(path):
            raise UsageError(msg("usage.no-impl", path=path))
        elif not path.endswith(".py"):
            raise UsageError(msg("usage.not-module", path=path, why=msg("usage.not-py")))
        elif name_of(path) in seen:  # two files named on the command line: the teacher's to say which
            raise UsageError(msg("usage.duplicate", name=name_of(path), first=seen[name_of(path)], second=path))
        else:
            seen[name_of(path)] = path
            workers.append(Worker(name_of(path), path))
    return workers, skipped


def scan(folder):
    """A class folder's workers (sorted) and its other entries, each with the reason it is not one."""
    found, left = [], []
    for entry in sorted(os.listdir(folder)):
        path = os.path.join(folder, entry)
        candidate = os.path.join(path, "worker.py") if os.path.isdir(path) else path
        if os.path.islink(candidate) and not os.path.exists(candidate):
            reason = "skip.dangling"
        elif os.path.isfile(candidate):
            reason = None if candidate.endswith(".py") else "skip.not-py"
        elif os.path.lexists(candidate):
            reason = "skip.not-file"  # a FIFO (opening it would block), a socket, a device
        else:
            reason = "skip.no-worker"
        if reason is None:
            found.append(Worker(name_of(candidate), candidate))
        else:
            left.append(skipped_entry(candidate if reason != "skip.no-worker" else path, msg(reason)))
    return sorted(found), left


def name_of(path):
    """A worker's name: its folder for a worker.py, else its file's stem."""
    folder, file = os.path.split(path)
    return os.path.basename(folder) if file == "worker.py" else file[:-3]


def compile_error(path):
    """None if `path` compiles (compiled only, never run here), else a message saying where it does not."""
    try:
        with open(path, "rb") as f:
            source = f.read()
        compile(source, path, "exec")  # bytes: a coding declaration counts, as it does for import
    except (SyntaxError, ValueError, RecursionError) as exc:  # RecursionError: nested too deep to compile
        return msg("usage.syntax", line=getattr(exc, "lineno", None) or "?", error=describe(exc))  # audit: G59
    except OSError as exc:
        return msg("plain", text=describe(exc))
    return None


def run_check(grader, check, lang, context=None):
    """One check's result: its verdict (pass, fail, or error: the grader's own fault), its messages, its time."""
    context = context if context is not None else grader.for_check(check)
    started = time.monotonic()
    status, error = "pass", None
    try:
        expected, observed = check.run(context)
    except Fail as fail:
        status, expected, observed = "fail", fail.expected, fail.observed
    except Exception as exc:
        if interrupted(exc):  # the worker's DB made a bounded read of the grader's own run over: its verdict
            status, expected = "fail", msg("check.runs", name=check.name)
            observed = msg("db.query-bounded", seconds="%g" % QUERY_S)
        elif bound_refused(exc):  # a value or a table of the worker's DB over a read's bounds: its verdict too
            status, expected = "fail", msg("check.runs", name=check.name)
            observed = bound_refused(exc)
        else:  # a bug in the grader itself: a readable line, its own status, the traceback on --debug
            status, error = "error", traceback.format_exc()
            expected, observed = msg("check.runs", name=check.name), msg("check.grader-error", error=describe(exc))
    # Whatever a worker put in them (bytes, NaN, a huge int, ESC, a megabyte), every report can hold them.
    expected, observed = data(expected), data(observed)
    return {"name": check.name, "status": status, "ok": status == "pass",
            "expected": render(expected, "en"), "observed": render(observed, "en"),
            "expected_message": expected, "observed_message": observed,
            "text": (render(expected, lang), render(observed, lang)),
            "seconds": round(time.monotonic() - started, 3), "traceback": error,
            "output": dict(getattr(context, "output", None) or {"printed": 0, "dropped": 0}),
            "worker": worker_evidence(context, status)}


def worker_evidence(context, status):
    """What the worker's own code showed in a failed check: its innermost frames, the last lines it printed.

    Empty for a check that passed, or that failed without either. Raw: each is escaped where it is shown.
    """
    seen = getattr(context, "worker", None) or {}
    if status != "fail":
        return {"traceback": [], "printed": []}
    return {"traceback": list(seen.get("traceback") or []), "printed": list(seen.get("printed") or [])}


def not_compiling(check, error, lang):
    """A check's result for a worker that does not compile: a fail naming the line, without any child."""
    expected, observed = msg("impl.compiles"), error
    return {"name": check.name, "status": "fail", "ok": False, "expected": render(expected, "en"),
            "observed": render(observed, "en"), "expected_message": expected, "observed_message": observed,
            "text": (render(expected, lang), render(observed, lang)), "seconds": 0.0, "traceback": None,
            "output": {"printed": 0, "dropped": 0}, "worker": {"traceback": [], "printed": []}}


class Graded:
    """One worker's grading: its Grader, its results (registry order once done), its time."""

    def __init__(self, worker, grader, checks):
        self.worker, self.grader, self.checks = worker, grader, checks
        self.by_name = {}
        self.tasks = 0
        self.started = None  # when its first check began: a class queues workers behind each other
        self.seconds = 0.0

    def run(self, check, lang):
        """Run one of its checks (in a pool thread): its result."""
        if self.started is None:
            self.started = time.monotonic()
        return run_check(self.grader, check, lang)

    def add(self, results):
        for result in results:
            self.by_name[result["name"]] = result
        self.tasks -= 1
        if self.done():
            now = time.monotonic()
            self.seconds = now - (self.started or now)  # no check started (it does not compile): 0, never -0.0

    def done(self):
        return self.tasks <= 0

    @property
    def results(self):
        return [self.by_name[c.name] for c in self.checks if c.name in self.by_name]

    def counts(self):
        statuses = [r["status"] for r in self.results]
        return {status: statuses.count(status) for status in ("pass", "fail", "error")}


class Tasks:
    """The checks handed to a thread pool: none starts after stop(), which returns once none is running.

    Submit `tasks.run` with the check's function and arguments. The grader
    removes its temporary folders only after stop(), in the finally of a
    stopping.Completions block (no stop signal unwinds it half-way).
    """

    def __init__(self):
        self.changed = threading.Condition()
        self.running = 0
        self.stopped = False

    def run(self, function, *args):
        """`function(*args)` (in a pool thread): its result; None, without calling it, once stop() was called."""
        with self.changed:
            if self.stopped:
                return None
            self.running += 1
        try:
            return function(*args)
        finally:
            with self.changed:
                self.running -= 1
                self.changed.notify_all()

    def stop(self):
        """Start no more checks; return once none is running (each is bounded by its steps' time-outs).

        A KeyboardInterrupt or a stop signal while it waits (outside a
        Completions block) does not end the wait (what is running still holds
        the folders); it is raised after.
        """
        raised = None
        with self.changed:
            self.stopped = True
            while self.running:
                try:
                    self.changed.wait()
                except BaseException as exc:  # noqa: B902 - Ctrl-C or Stopped: wait first, raise after
                    raised = raised or exc
        if raised is not None:
            raise raised


def grade_all(workers, checks, options, lang, on_results=None, on_worker=None, on_tick=None):
    """Grade every worker with `checks`, --jobs tasks at once; a list of Graded, in the workers' order.

    `options`: timeout, keep, jobs, limits. `on_results(graded, results)` and
    `on_worker(graded)` are called in this thread as results come in, and
    `on_tick()` at least every TICK seconds.
    """
    graded, futures, order = [], {}, {}
    folders = collections.Counter(os.path.dirname(worker.path) for worker in workers)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=options.jobs)
    tasks = Tasks()
    with Completions() as done:  # a stop signal is raised by done.wait, never inside the pool's locks
        try:
            for worker in workers:
                grader = Grader(worker.path, options.timeout, options.keep, limits=options.limits,
                                isolation=getattr(options, "isolation", "all"),
                                shared_folder=folders[os.path.dirname(worker.path)] > 1, seed=options.seed)
                grader.allow_kit_imports = getattr(options, "allow_kit_imports", False)
                one = Graded(worker, grader, checks)
                graded.append(one)
                error = compile_error(worker.path)  # audit: G59, G60
                if error is not None:
                    one.tasks = 1
                    one.add([not_compiling(check, error, lang) for check in checks])
                    with done.unwinding_allowed():  # output, which may block on a reader: a stop unwinds it
                        if on_results:
                            on_results(one, one.results)
                        if on_worker:
                            on_worker(one)
                    continue
                one.tasks = len(checks)
                for check in checks:
                    future = done.watch(pool.submit(tasks.run, one.run, check, lang))
                    futures[future], order[future] = one, len(order)
            waiting = len(futures)
            while waiting:
                finished = done.wait(TICK)
                waiting -= len(finished)
                for future in sorted(finished, key=lambda f: order[f]):
                    one = futures[future]
                    result = future.result()
                    one.add([result])
                    if on_results:
                        with done.unwinding_allowed():
                            on_results(one, [result])
                    if one.done():
                        one.grader.close()  # its zygote and its files: a class keeps only a few workers' at once
                        if on_worker:
                            with done.unwinding_allowed():
                                on_worker(one)
                if on_tick and not finished:
                    with done.unwinding_allowed():
                        on_tick()
        finally:
            try:
                PROCESSES.kill_all()  # no step starts from here on
                tasks.stop()
            finally:
                pool.shutdown(wait=True)
                for one in graded:
                    one.grader.close()
    return graded


class Progress:
    """Progress on stderr: a live line on a terminal, else one line per finished worker."""

    def __init__(self, total, lang, stream=None):
        self.total, self.lang = total, lang
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.done = 0
        self.started = time.monotonic()

    def tick(self):
        """Redraw the live line (on a terminal only): workers done, of all, and the time so far."""
        if self.live and self.done < self.total:
            self.draw()

    def eta(self):
        """Seconds left at the pace so far, or None before the first worker finishes."""
        if not self.done:
            return None
        return (time.monotonic() - self.started) / self.done * (self.total - self.done)

    def draw(self):
        seconds, eta = "%.0f" % (time.monotonic() - self.started), self.eta()
        line = (text(self.lang, "progress.live", done=self.done, total=self.total, seconds=seconds) if eta is None else
                text(self.lang, "progress.live-eta", done=self.done, total=self.total, seconds=seconds, eta="%.0f" % eta))
        self.stream.write("\r" + line + "\x1b[K")
        self.stream.flush()

    def worker_done(self, one):
        self.done += 1
        counts = one.counts()
        if self.live:
            self.draw()
            if self.done == self.total:
                self.stream.write("\n")
        else:
            fields = dict(done=self.done, total=self.total, name=shown(one.worker.name), passed=counts["pass"],
                          checks=len(one.checks), seconds="%.1f" % one.seconds)
            if self.done < self.total:
                self.stream.write(text(self.lang, "progress.eta", eta="%.0f" % self.eta(), **fields) + "\n")
            else:
                self.stream.write(text(self.lang, "progress.worker", **fields) + "\n")
        self.stream.flush()
