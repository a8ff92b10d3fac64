"""The parent side's machinery: child processes, loopback servers of the grader's own, observations.

Never imports the worker or the child side: it starts `grade.py --role ...`
children (each a supervisor of contain.py's over the worker's process), reads
their output within bounds (capture.py), and reads the DBs through read-only
connections of its own.
"""
import array
import contextlib
import http.server
import json
import os
import re
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

from . import box, contain, drivers, network, remote, windows
from .capture import LINE_MAX, LINES_BUDGET, Capture, Lines, follow
from .common import SNACK, Fail, bound_refused, describe, expect, msg, read_only, rows, wrong_class
from .corpus import DEFAULT_SEED
from .stopping import Deferred
from .text import data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTRY = os.path.join(ROOT, "grade.py")
ENDED_WITHIN = 2.0  # seconds a zygote has to say that a step it was asked to kill has ended
ZYGOTE_CPU = 10  # a zygote's CPU limit, in steps' limits
# The host's settings a worker's interpreter does not get (Grader.env): the kit's path, and how its streams work.
HOST_ONLY = ("PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONUTF8")


class GraderError(Exception):
    """The grader itself cannot go on (no writable temporary directory, say): not the worker's fault."""


def socket_pair():
    """(ours, theirs): the two file descriptors of a connected socket pair, the protocol channel of a step."""
    ours, theirs = socket.socketpair()
    return ours.detach(), theirs.detach()


class Processes:
    """Every child the grader starts, so that none outlives it (timeouts, Ctrl-C, SIGTERM); and their orphans."""

    def __init__(self):
        self._lock = threading.Lock()
        self._live = set()
        self._orphans = set()
        self._jobs = {}  # Windows: each child's Job Object
        self.stopping = False

    def start(self, args, env, cwd, limits, on_line=None, pass_fds=()):
        """Start `grade.py --role --contain ... args` in a session of its own; a Child reading its three pipes."""
        if contain.WINDOWS:
            return self._start_in_job(args, env, cwd, limits, on_line)
        protocol, writer = socket_pair()
        try:
            with self._lock:
                if self.stopping:
                    raise Fail(msg("grader.keeps-running"), msg("grader.interrupted"))
                cmd = [sys.executable, ENTRY, "--role", "--contain", contain.contain_arg(os.getpid(), writer, limits)]
                proc = subprocess.Popen(cmd + list(args), env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(writer,) + tuple(pass_fds),
                                        start_new_session=True)
                self._live.add(proc)
        except BaseException:
            os.close(protocol)
            raise
        finally:
            os.close(writer)
        return Child(proc, protocol, on_line)

    def _start_in_job(self, args, env, cwd, limits, on_line):
        """Windows: the child in a Job Object of its own (windows.py), with no supervisor above it."""
        def command(handles):
            # -s -S: no user site, no site: no .pth file or usercustomize, which a worker could have left, runs
            # before the process is in its job (the kit's side needs neither)
            return [sys.executable, "-s", "-S", ENTRY, "--role", "--contain",
                    contain.contain_arg(os.getpid(), handles[1], limits, requests=handles[0])] + list(args)

        with self._lock:
            if self.stopping:
                raise Fail(msg("grader.keeps-running"), msg("grader.interrupted"))
            proc, job, requests, replies = windows.start(command, env, cwd, limits, self._live)
            self._jobs[proc] = job
        return windows.JobChild(proc, job, requests, replies, on_line, self.forget)

    def forget(self, proc):
        with self._lock:
            self._live.discard(proc)
            self._jobs.pop(proc, None)

    def popen(self, cmd, **options):
        """subprocess.Popen(cmd, **options) for other grader code (the quiz's relay runs), known from its first instant.

        Started and recorded under one lock: a sweep on another thread (a check
        ending) would otherwise find it between the two as a stray, and kill it.
        sweep spares it, kill_all ends it; call forget(proc) once it has been
        waited for.
        """
        with self._lock:
            proc = subprocess.Popen(cmd, **options)
            self._live.add(proc)
        return proc

    def sweep(self):
        """End every child of the grader it did not start itself: orphans whose supervisor was killed (Linux)."""
        if contain.WINDOWS:
            return  # no supervisor there: a child's job holds all it started
        with self._lock:
            known = {proc.pid for proc in self._live}
            for pid in contain.children():
                if pid not in known:
                    contain.kill(pid)
                    self._orphans.add(pid)
            self._orphans = {pid for pid in self._orphans if not contain.reap(pid)}

    def kill_all(self):
        with self._lock:
            self.stopping = True
            live, jobs = list(self._live), dict(self._jobs)
        for job in jobs.values():
            job.terminate()  # Windows: every process in the child's job
        for proc in live:
            if not contain.WINDOWS:
                contain.kill(proc.pid, group=True)  # its whole session: the supervisor, the worker, what they started
            elif proc not in jobs:
                with contextlib.suppress(OSError):
                    proc.kill()  # Windows: one of popen's, in no job of the grader's
        for proc in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
            self.forget(proc)
        contain.end_children()  # what the killed supervisors left: re-parented here


PROCESSES = Processes()


class Child:
    """A running child (its supervisor) and its stdout, stderr and protocol pipes, read within bounds."""

    timed_out = False  # never: a Child always runs (see Unstarted)

    def __init__(self, proc, protocol, on_line=None):
        self.proc = proc
        self.out, self.err, self.lines = Capture(), Capture(), Lines(on_line)
        self.protocol = protocol
        self.streams = {proc.stdout.fileno(): self.out, proc.stderr.fileno(): self.err, protocol: self.lines}
        self.status = None
        self.ended = threading.Event()
        self.begun = time.monotonic()

    def deadline(self, timeout):
        """When a step that may run `timeout` seconds has run past it: from its start."""
        return self.begun + timeout

    def exited(self):
        """Whether the supervisor has ended (not reaped yet, where the system allows: its pid stays reserved)."""
        if self.status is None and self.proc.returncode is not None:
            self.status = self.proc.returncode  # reaped already (PROCESSES.kill_all, on Ctrl-C or a signal)
        elif self.status is None:
            self.status = contain.peek_exit(self.proc.pid) if contain.CAN_PEEK else self.proc.poll()
        return self.status is not None

    def kill(self):
        contain.kill(self.proc.pid, group=True)

    def term(self):
        """Ask it to stop: its supervisor passes SIGTERM on to the worker's process."""
        if not self.exited():
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)

    def after_exit(self):
        self.ended.set()
        self.kill()  # what is left of its process group
        PROCESSES.sweep()

    def follow(self, deadline):
        """Read its pipes until it has ended, or the deadline (a function of nothing) has passed; True if it has."""
        return follow(self.streams, self.exited, deadline, self.kill, self.after_exit)

    def finish(self):
        """Reap the supervisor and close the pipes; its exit status (the worker's, as contain.exit_as passes it on)."""
        self.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        PROCESSES.forget(self.proc)
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()
        os.close(self.protocol)
        PROCESSES.sweep()
        return self.proc.returncode

    def output(self):
        return {"printed": self.out.total + self.err.total, "dropped": self.out.dropped + self.err.dropped}


class Run:
    """What one child did: exit status, its protocol lines, the last line of its stderr, what it printed."""

    def __init__(self, what, status, lines, stderr, timed_out=None, output=None, limits=None, printed=()):
        self.what = what  # a message: "publisher #1"
        self.printed = list(printed)  # the last lines the worker printed in it (stdout, then stderr), unescaped
        self.status = status  # its exit status; -N if signal N ended it
        self.lines = lines
        self.stderr = stderr
        self.timed_out = timed_out  # the time bound it ran past, or None
        self.output = output or {"printed": 0, "dropped": 0}
        self.limits = limits

    def first(self, kind):
        return next((line for line in self.lines if line.get("kind") == kind), None)

    def all(self, kind):
        return [line for line in self.lines if line.get("kind") == kind]

    def limit(self):
        """The message for the resource limit this child ran into, or None."""
        if self.limits is None:
            return None
        limit = self.first("limit")
        if limit and limit.get("limit") == "protocol":
            return msg("limit.protocol", what=self.what, line_kib=LINE_MAX // 1024, mib=LINES_BUDGET // (1024 * 1024))
        if limit:
            return msg("limit.memory", what=self.what, mib=self.limits.memory_mib)
        if self.status == FILE_SIZE_STATUS:
            return msg("limit.file-size", what=self.what, mib=self.limits.file_mib)
        if self.status == CPU_STATUS:
            return msg("limit.cpu", what=self.what, seconds=self.limits.cpu_seconds)
        return None

    def summary(self):
        """A message saying why this child did not do what it should have."""
        if self.timed_out is not None:
            calls = self.all("call")
            if calls and calls[-1].get("function") == "import":
                return msg("run.import-timed-out", what=self.what, seconds="%g" % self.timed_out)
            if calls and calls[-1].get("function"):
                return msg("run.timed-out-in", what=self.what, seconds="%g" % self.timed_out,
                           function=str(calls[-1].get("function")))
            return msg("run.timed-out", what=self.what, seconds="%g" % self.timed_out)
        limit = self.limit()
        if limit is not None:
            return limit
        verdict = self.first("verdict")
        if verdict and not verdict["ok"]:
            return msg("run.verdict", what=self.what, expected=verdict["expected"], observed=verdict["observed"])
        error = self.first("error")
        if error and error.get("function"):
            return msg("run.raised-in", what=self.what, function=error["function"], error=error["message"])
        if error:
            return msg("run.raised", what=self.what, error=error["message"])
        if self.status is None:
            return msg("run.lost", what=self.what)
        if self.status < 0:
            return msg("run.signal", what=self.what, signal=signal_name(-self.status))
        tail = self.stderr.strip().splitlines()[-1:] if self.stderr.strip() else []
        if tail:
            return msg("run.exit-said", what=self.what, status=self.status, said=tail[0][:200])
        return msg("run.exit", what=self.what, status=self.status)


# The status of a step ended at a limit: past the largest file (not on Windows: no such limit there), past
# its CPU time (on Windows the exit code a job's time limit gives, ERROR_NOT_ENOUGH_QUOTA; Wine enforces none).
FILE_SIZE_STATUS = -signal.SIGXFSZ if hasattr(signal, "SIGXFSZ") else None
CPU_STATUS = -signal.SIGXCPU if hasattr(signal, "SIGXCPU") else windows.CPU_TIME_EXIT


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def make_temp_dir():
    """The grader's temporary directory: in $TMPDIR exactly when it is set, else the system's.

    A TMPDIR that cannot be written is the user's choice gone wrong, not a
    reason to write elsewhere: GraderError.
    """
    where = os.environ.get("TMPDIR") or None
    try:
        return tempfile.mkdtemp(prefix="outbox-grade-", dir=where)  # audit: G55
    except OSError as exc:
        raise GraderError(msg("grader.no-temp", where=where or tempfile.gettempdir(), error=str(exc)))


def default_limits(timeout, memory_mib=contain.DEFAULT_MEMORY_MIB, file_mib=contain.DEFAULT_FILE_MIB):
    return contain.Limits(memory_mib, file_mib, contain.cpu_seconds(timeout))


class Grader:
    """Runs checks for one implementation; owns the temp dir, the worker's zygote and the child command line.

    Every step works in its check's folder (its working directory, with
    HOME and TMPDIR inside it), under `limits` (default_limits(timeout)).
    """

    def __init__(self, impl, timeout, keep, limits=None, isolation="all", shared_folder=False, seed=DEFAULT_SEED):
        self.impl = impl
        self.allow_kit_imports = False  # --allow-kit-imports: the own-work check lets a worker use the kit
        self.seed = seed  # of every corpus: each step gets it, the report shows it
        self.timeout = timeout
        self.limits = limits or default_limits(timeout)
        self.protections_off = contain.protect_host()
        self.tmp = make_temp_dir()
        self.box = box.plan(isolation, impl, self.tmp, shared_folder)  # the box its processes enter (box.py)
        self.keep = keep
        self.evidence = {}
        self.zygote = Zygote(self)
        self._net = None  # the worker's network (network.py): made with its first process, in env()
        self._net_lock = threading.Lock()

    def close(self):
        with Deferred():  # a stop signal waits until the zygote has ended and the folders are gone
            self.zygote.close()
            if self._net is not None:
                self._net.close(PROCESSES)
            if not self.keep:
                remove_tree(self.tmp)  # audit: G55

    def isolation(self):
        """The box the worker was imported in, as its zygote said before the import; else what it was to get."""
        lines = self.zygote.child.lines.lines if self.zygote.child is not None else []
        said = next((line for line in lines if line.get("kind") == "box"), None)
        return box.shown(said["isolation"] if said else box.expected(self.box))

    def workdir(self, name):
        """The folder of check `name`: its DBs, and its steps' working directory, HOME and TMPDIR."""
        path = os.path.join(self.tmp, name)  # audit: G55
        for folder in (path, os.path.join(path, "home"), os.path.join(path, "tmp")):
            os.makedirs(folder, exist_ok=True)
            box.own(folder, self.box)
        return path

    @property
    def net(self):
        """The worker's network: its own namespace, where its processes and the grader's servers for it meet.

        Made when first asked for, by the first process's env() at the latest
        (a class's graders are made together, their workers graded a few at a
        time); the box handed to every process of the worker then names it.
        """
        with self._net_lock:
            if self._net is None:
                self._net = network.for_box(self.box, PROCESSES)
                self.box.update(net=list(self._net.fds) or None, net_off=self._net.reason)
            return self._net

    def env(self, **extra):
        _ = self.net  # made before the box goes into the environment: the box names it
        # What the worker's interpreter writes and reads is the same on every host: UTF-8 (on Windows a code page
        # would fail a print("✓") that passes on Linux), buffered (under Wine an inherited PYTHONUNBUFFERED made an
        # import that prints 9 MB take 7.5 s a step, not 1.3 s, and failed every check of a worker that passes).
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and k.upper() not in HOST_ONLY}
        env["PYTHONUTF8"] = "1"
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # leave no __pycache__ beside the worker
        env["MALLOC_ARENA_MAX"] = "2"  # glibc: fewer 64 MiB arenas reserved per thread under the address-space limit
        env.update(box.env(self.box))
        env.update(extra)
        return env

    def args(self, role, needs, *args):
        return [role, "--impl", self.impl, "--needs", ",".join(needs)] + list(args)

    def for_check(self, check):
        """What one check's scenario uses: this grader, with the worker functions that check needs."""
        return CheckContext(self, check.name, check.needs)

    def start(self, role, needs, args, env, folder, on_line=None):
        """Start one step: forked by the worker's zygote, or, with an `env` of its own, a child of its own."""
        argv = self.args(role, needs, *args)
        if env is None:
            state = self.zygote.ensure()
            if state == "ready":
                step = self.zygote.spawn(argv, folder, on_line)
                if step is not None:
                    return step
            elif state == "timed out":
                return Unstarted()
        env = dict(env or self.env())
        env.update(HOME=os.path.join(folder, "home"), TMPDIR=os.path.join(folder, "tmp"))
        if contain.WINDOWS:  # the home Windows gives a process (expanduser("~")) is USERPROFILE's, never HOME's
            env.update(USERPROFILE=env["HOME"])
        return PROCESSES.start(argv, env, folder, self.limits, on_line, pass_fds=self.net.fds)

    def run(self, what, role, needs, *args, env=None, folder=None):
        """Run a step to completion within the time bound, driven from here; never raises for the worker's sake.

        `role` names its driver (drivers.py), `args` the driver's arguments.
        The step only makes the calls the driver asks for (remote.py); the
        Run's lines are the driver's own records and, if the step could not
        start (its import failed), what the step said of that.
        """
        driver, parsed = drivers.DRIVERS[role], drivers.parse_args(list(args) + ["--seed", str(self.seed)])
        parsed.net = self.net  # an in-process check's own sockets are on the worker's loopback
        session = remote.Session()
        child = self.start("serve", needs, (), env, folder or self.workdir("run"), session.on_line)
        if child.timed_out:  # the worker's import ran past --timeout: no step
            return Run(what, None, [{"kind": "call", "function": "import"}], "", timed_out=self.timeout,
                       output=child.output(), limits=self.limits)
        child.lines.keep = False
        followed = []
        reader = threading.Thread(target=lambda: followed.append(child.follow(lambda: child.deadline(self.timeout))),
                                  daemon=True)  # audit: G54
        session.attach(child.protocol, reader)
        session.kill = child.kill
        reader.start()
        lines, status = [], 1
        try:
            status = self.drive(session, driver, parsed, needs, lines)
        finally:  # whatever happened above: the step ended, its pipes closed, its process reaped
            session.close(status)
            reader.join()
            status = child.finish()
        if session.crashed is not None:
            status = session.crashed  # the grader ended it for a Crash or a Fail: the status it stands for
        timed_out = bool(followed and followed[0])
        return Run(what, None if timed_out else status, lines + session.said, child.err.last_line(),
                   timed_out=self.timeout if timed_out else None, output=child.output(), limits=self.limits,
                   printed=printed_lines(child, lines + session.said))

    @staticmethod
    def drive(session, driver, parsed, needs, lines):
        """Run `driver` against the step; its exit status. What went wrong is in `lines`, as that worker's own.

        An exception of the grader's own while it reads what the step said (a
        bug a forged line found) is an error line of this worker's step ("grader
        error on this worker"), never the end of the class's run.
        """
        status = 1
        try:
            missing = session.request("require", names=list(needs))
            expect(not missing, msg("impl.defines", names=", ".join(needs)),  # audit: G59
                   msg("impl.missing", names=", ".join(str(name) for name in missing) if isinstance(missing, list) else "?"))
            status = driver(remote.Remote(session), parsed, lines)
        except remote.StepEnded:
            lines.append(session.now_running())  # what a hang ran into, for Run.summary
        except Fail as fail:
            session.fail = session.fail or fail
        except remote.RemoteError as exc:
            lines.append(drivers.error_line(exc))
        except Exception as exc:  # noqa: B902 (see the docstring)
            session.kill()
            lines.append({"kind": "error", "type": "GraderError", "mro": ["GraderError"], "stage": None,
                          "function": None, "call": None, "frames": [],
                          "message": "grader error on this worker: %s; please report it" % describe(exc)})
        if session.fail is not None:
            lines.insert(0, {"kind": "verdict", "ok": False, "expected": session.fail.expected,
                             "observed": session.fail.observed})
        return status

    @contextlib.contextmanager
    def sink(self, db, needs, fault=None, folder=None, output=None):
        """The implementation's init_sink/receive behind the kit's HTTP server, in a process of its own.

        `output`, if given, is a dict to which what the sink printed is added.
        """
        args = ["--db", db, "--timeout", "%g" % min(self.timeout, 5.0)] + (["--fault", fault] if fault else [])
        handle = SinkProcess(self, needs, args, folder or os.path.dirname(db))
        try:
            handle.url = handle.wait_listening(self.timeout)
            yield handle
        finally:
            handle.stop(self.timeout)
            if output is not None:
                for key, value in handle.child.output().items():
                    output[key] += value


PRINTED_LINES = 5  # the last lines of what a worker printed that a failure shows
PRINTED_CHARS = 200  # of each
DROPPED = re.compile(r"\[\.\.\. [0-9]+ bytes dropped \.\.\.\]")  # capture.Capture's mark, not the worker's


def printed_lines(child, lines):
    """The last PRINTED_LINES lines the worker printed in `child` (its stdout, then its stderr), each cut short.

    Not the grader's own report of an error on stderr (a traceback the child prints after its error line):
    its frames are in the error line already, the worker's alone.
    """
    err = child.err.text()
    if any(line.get("kind") == "error" for line in lines):
        err = err.rsplit("Traceback (most recent call last):", 1)[0]
    lines = [line for text in (child.out.text(), err) for line in text.splitlines()
             if line.strip() and not DROPPED.fullmatch(line)]
    return [line[:PRINTED_CHARS] for line in lines[-PRINTED_LINES:]]


class Zygote:
    """The worker's zygote (child.role_zygote): one child that imported the worker and forks each step from there.

    Started by the first step. If the import does not finish within
    --timeout, every step is reported timed out without a process; if the
    zygote fails or dies, each later step is a child of its own, as if there
    had been none. What the import printed is counted in `output()`.
    """

    def __init__(self, grader):
        self.grader = grader
        self.lock = threading.Lock()  # starting it; its steps; sending to it
        self.state = None  # None until started, then "ready", "timed out" or "gone"
        self.child = self.sock = None
        self.steps = {}
        self.next_id = 0
        self.threads = []

    def ensure(self):
        """Start it if it is not yet; its state."""
        with self.lock:
            if self.state is None:
                # Windows has no fork: each step is a process of its own there, which imports the worker itself.
                self.state = "gone" if contain.NO_FORK else self._start()
            return self.state

    def _start(self):
        grader = self.grader
        ours, theirs = socket.socketpair()
        ready = threading.Event()
        boxed = []

        def on_line(line):
            if line.get("kind") == "box" and not boxed:
                boxed.append(box.learn(line.get("isolation")))  # the first: written before the worker's import
            if line.get("kind") in ("ready", "verdict", "error", "limit"):
                ready.set()

        folder = grader.workdir("zygote")
        env = grader.env(HOME=os.path.join(folder, "home"), TMPDIR=os.path.join(folder, "tmp"))
        # Its own CPU time is the import's and the forks' (each step then has a limit of its own): room for many.
        limits = grader.limits._replace(cpu_seconds=grader.limits.cpu_seconds * ZYGOTE_CPU)
        try:
            self.child = PROCESSES.start(grader.args("zygote", (), "--control", str(theirs.fileno()),
                                                     "--timeout", "%g" % grader.timeout),
                                         env, folder, limits, on_line, pass_fds=(theirs.fileno(),) + grader.net.fds)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock = ours
        self.threads.append(threading.Thread(target=self.child.follow, args=(lambda: float("inf"),), daemon=True))
        self.threads[-1].start()
        deadline = time.monotonic() + grader.timeout
        while not ready.wait(0.05) and not self.child.ended.is_set() and time.monotonic() < deadline:
            pass
        kinds = [line.get("kind") for line in self.child.lines.lines if line.get("kind") not in ("call", "box")]
        # Before its first step the zygote has nothing to say on its control socket: what is there, its import wrote.
        unasked = bool(select.select([ours], [], [], 0)[0])
        if ready.is_set() and kinds[:1] == ["ready"] and not unasked:
            self.threads.append(threading.Thread(target=self._listen, daemon=True))
            self.threads[-1].start()
            return "ready"
        self.child.kill()
        return "gone" if ready.is_set() or self.child.ended.is_set() else "timed out"

    def spawn(self, argv, folder, on_line):
        """A Step: `argv` run in a process forked by the zygote, in `folder`; None if the zygote is gone."""
        pipes = [os.pipe(), os.pipe(), socket_pair()]
        writers = [w for _, w in pipes]
        try:
            with self.lock:
                if self.state != "ready":
                    step = None
                else:
                    self.next_id += 1
                    step = self.steps[self.next_id] = Step(self, self.next_id, [r for r, _ in pipes], on_line)
                    request = json.dumps({"op": "spawn", "id": step.id, "argv": argv, "folder": folder}).encode() + b"\n"
                    try:
                        sent = self.sock.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", writers))])
                        self.sock.sendall(request[sent:])
                    except OSError:
                        self.state = "gone"
                        del self.steps[step.id]
                        step = None
        finally:
            for fd in writers:
                os.close(fd)
        if step is None:
            for reader, _ in pipes:
                os.close(reader)
        return step

    def signal(self, number, signum):
        with self.lock:
            if self.state == "ready":
                with contextlib.suppress(OSError):
                    self.sock.sendall(json.dumps({"op": "signal", "id": number, "signal": signum}).encode() + b"\n")

    def _listen(self):
        """Read the zygote's answers: each step's end. At EOF it is gone, and so is every step still running.

        The zygote is the worker's process: its import can write on this
        socket too. A line the zygote's own code never writes (not JSON, wrong
        types, a step not running) ends the zygote at once, and every later
        step is a child of the grader's own, whose status the grader reaps
        itself: the safer of the two ways on (the other: failing the worker).
        """
        buffer, trusted = b"", True
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            if len(buffer) > ZYGOTE_LINE:  # no line of the zygote's is this long
                lines, buffer = lines + [b""], b""
            for line in lines if trusted else ():
                answer = step_ended(line)
                with self.lock:
                    step = self.steps.pop(answer[0], None) if answer else None
                if step is None:
                    trusted = False
                    self.abort()
                    break
                step.end(answer[1])
        with self.lock:
            self.state = "gone"
            lost, self.steps = list(self.steps.values()), {}
        for step in lost:
            step.end(None)

    def abort(self):
        """End the zygote and all its steps at once: it did not answer."""
        with self.lock:
            if self.state == "ready":
                self.state = "gone"
        if self.child is not None:
            self.child.kill()
            PROCESSES.sweep()

    def close(self):
        """End it: at EOF on its control socket it ends its steps and exits."""
        with self.lock:
            if self.state == "ready":
                self.state = "gone"
            sock, self.sock = self.sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
            self.threads[0].join(self.grader.timeout)
            self.child.kill()
            for thread in self.threads:
                thread.join(5)
            sock.close()
            self.child.finish()

    def output(self):
        return self.child.output() if self.child is not None else {"printed": 0, "dropped": 0}


ZYGOTE_LINE = 4096  # bytes of one line of the zygote's ({"op": "ended", "id": N, "status": S}: under 100)


def step_ended(line):
    """(id, status) from a line the zygote writes, {"op": "ended", "id": int, "status": int}; None from any other."""
    try:
        answer = json.loads(line.decode("utf-8"))
    except Exception:  # noqa: B902 (ValueError, RecursionError: what a worker wrote, not the zygote)
        return None
    if not (isinstance(answer, dict) and answer.get("op") == "ended" and type(answer.get("id")) is int
            and type(answer.get("status")) is int):
        return None
    return answer["id"], answer["status"]


class Step:
    """One step forked by the zygote: its stdout, stderr and protocol pipes, read within bounds; its status once ended."""

    timed_out = False

    def __init__(self, zygote, number, readers, on_line):
        self.zygote, self.id = zygote, number
        self.out, self.err, self.lines = Capture(), Capture(), Lines(on_line)
        self.streams = dict(zip(readers, (self.out, self.err, self.lines)))
        self.protocol = readers[2]  # a socket: the deciding side's requests go out on it
        self.status = None
        self.ended = threading.Event()
        self.begun = time.monotonic()

    def deadline(self, timeout):
        return self.begun + timeout

    def end(self, status):
        self.status = status
        self.ended.set()

    def exited(self):
        return self.ended.is_set()

    def kill(self):
        self.zygote.signal(self.id, signal.SIGKILL)

    def term(self):
        self.zygote.signal(self.id, signal.SIGTERM)

    def after_exit(self):
        pass  # the zygote, a subreaper, has ended whatever the step left

    def follow(self, deadline):
        return follow(self.streams, self.exited, deadline, self.kill, self.after_exit)

    def finish(self):
        """Close the pipes; its exit status. A zygote that does not say it ended is ended with all its steps."""
        if not self.ended.wait(ENDED_WITHIN):
            self.zygote.abort()
            self.ended.wait(ENDED_WITHIN)
        for fd in self.streams:
            os.close(fd)
        return self.status

    def output(self):
        return {"printed": self.out.total + self.err.total, "dropped": self.out.dropped + self.err.dropped}


class Unstarted:
    """A step never started: the worker's import ran past --timeout, so each of its steps counts as timed out."""

    timed_out = True
    status = None

    def __init__(self):
        self.out, self.err, self.lines = Capture(), Capture(), Lines()
        self.lines.lines.append({"kind": "call", "function": "import"})  # it is the import that did not finish
        self.ended = threading.Event()
        self.ended.set()

    def exited(self):
        return True

    def kill(self):
        pass

    term = kill

    def follow(self, deadline):
        return True

    def finish(self):
        return None

    def output(self):
        return {"printed": 0, "dropped": 0}


class CheckContext:
    """One check's view of the Grader: its own work folder, and steps that load what it needs."""

    def __init__(self, grader, name, needs):
        self.grader, self.name, self.needs = grader, name, needs
        self.timeout = grader.timeout
        self.seed = grader.seed
        self.output = {"printed": 0, "dropped": 0}  # what the worker printed in this check's steps, in all
        self.worker = {"traceback": [], "printed": []}  # of its last step that raised or printed: shown if it fails

    def workdir(self):
        return self.grader.workdir(self.name)

    @property
    def net(self):
        """Where the grader's servers for this worker listen: its own network (network.py)."""
        return self.grader.net

    def env(self, **extra):
        return self.grader.env(**extra)

    def run(self, what, role, *args, env=None):
        run = self.grader.run(what, role, self.needs, *args, env=env, folder=self.workdir())
        for key in self.output:
            self.output[key] += run.output[key]
        error = run.first("error")
        if error and error.get("frames"):
            self.worker["traceback"] = error["frames"]
        if run.printed:
            self.worker["printed"] = run.printed
        return run

    def sink(self, db, fault=None):
        return self.grader.sink(db, self.needs, fault=fault, folder=self.workdir(), output=self.output)

    def story(self, source, sink_db):
        return Story(self.grader, self.name, source, sink_db)


class SinkProcess:
    """A running `--role sink` child: its address once it listens, its exit status once it stops."""

    def __init__(self, grader, needs, args, folder):
        self.url = None
        self.status = None
        self._ready = threading.Event()
        self.child = grader.start("sink", needs, args, None, folder, self._on_line)
        self.limits = grader.limits
        self.timeout = grader.timeout
        self._reader = threading.Thread(target=self.child.follow, args=(lambda: float("inf"),), daemon=True)
        self._reader.start()

    def _on_line(self, line):
        if line.get("kind") in ("listening", "verdict", "error", "limit"):
            self._ready.set()

    def wait_listening(self, timeout):
        if self.child.timed_out:
            raise Fail(msg("sink.listens", seconds="%g" % timeout), msg("run.timed-out", what=msg("who.sink"),
                                                                       seconds="%g" % self.timeout))
        while (not self._ready.wait(0.05) and not self.child.ended.is_set()
               and time.monotonic() < self.child.deadline(timeout)):
            pass
        lines = list(self.child.lines.lines)
        for line in lines:
            if line.get("kind") == "listening":
                return line["url"] + "/events"
        reason = next((line for line in lines if line.get("kind") in ("verdict", "error", "limit")), None)
        if reason and reason["kind"] == "verdict":
            raise Fail(reason["expected"], msg("sink.said", observed=reason["observed"]))
        if reason and reason["kind"] == "limit":  # memory, or a protocol flood (capture.Lines)
            raise Fail(msg("sink.starts"), Run(msg("who.sink"), None, [reason], "", limits=self.limits).limit())
        if reason:
            raise Fail(msg("sink.starts"), msg("sink.raised", error=reason["message"]))
        status = self.child.status if self.child.ended.is_set() else None
        limit = Run(msg("who.sink"), status, lines, "", limits=self.limits).limit() if status is not None else None
        if limit is not None:
            raise Fail(msg("sink.starts"), limit)
        raise Fail(msg("sink.listens", seconds="%g" % timeout), msg("sink.no-address", tail=self.tail()))

    def tail(self):
        return self.child.err.last_line() or "-"

    def wait_exit(self, timeout):
        deadline = time.monotonic() + timeout
        while not self.child.exited() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.status = self.child.status
        return self.status

    def stop(self, timeout):
        self.child.term()
        self._reader.join(timeout)
        if self._reader.is_alive():
            self.child.kill()
            self._reader.join(5)
        self.status = self.child.finish()


class FakeSink:
    """A loopback HTTP server of the grader's own that answers with a fixed behaviour.

    `answer(event_id) -> (status, headers, body bytes)`, or the bytes of a whole response, written as they are
    before the connection closes; `hits` lists every request that reached it, whatever its path or method (a
    trap must see none).
    """

    def __init__(self, answer=None, net=None):
        owner = self
        self.hits = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self):
                owner.hits.append((self.command, self.path))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, 65536)) if length > 0 else b""
                try:
                    event_id = json.loads(body.decode("utf-8")).get("id")
                except (ValueError, AttributeError):
                    event_id = None
                reply = answer(event_id) if answer else (502, [], b'{"error": "trap"}')
                if isinstance(reply, bytes):
                    self.close_connection = True
                    self.wfile.write(reply)
                    return
                status, headers, payload = reply
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_HEAD = do_CONNECT = _any

            def log_message(self, *args):
                pass

        listener = (net or network.HOST).listen()  # on the worker's loopback, where its send_http can reach it
        try:
            self.server = http.server.ThreadingHTTPServer(listener.getsockname(), Handler, bind_and_activate=False)
        except BaseException:
            listener.close()
            raise
        self.server.socket.close()
        self.server.socket = listener
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path="/events"):
        return "http://127.0.0.1:%d%s" % (self.server.server_address[1], path)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.thread.join(5)
        self.server.server_close()


class AnswerSink(FakeSink):
    """A FakeSink that writes, for each event id of `answers`, those exact bytes, then closes the connection.

    `answers` maps an event id to the raw HTTP response for it (grader.corpus.acks.raw_answer); an id it
    does not know gets a 502. The ACK corpus uses it: one server for every case, told apart by the id.
    """

    def __init__(self, answers, net=None):
        super().__init__(lambda event_id: answers.get(event_id, b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"),
                         net)


TRICKLE_INTERVAL = 0.2  # seconds between two bytes of the trickled answer


class TrickleSink:
    """A loopback server that answers a perfect ACK one byte every TRICKLE_INTERVAL.

    The whole answer takes `seconds()` (over 10 s): a sender whose timeout
    bounds only each read, not the exchange, waits all of it.
    """

    def __init__(self, net=None):
        body = json.dumps({"ack": True, "id": SNACK["id"], "result": "applied"}).encode()
        self.answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                       b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.listener = (net or network.HOST).listen()
        self.listener.settimeout(0.05)
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._serve, daemon=True)]

    def seconds(self):
        return len(self.answer) * TRICKLE_INTERVAL

    def url(self):
        return "http://127.0.0.1:%d/events" % self.listener.getsockname()[1]

    def _serve(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._trickle, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _trickle(self, conn):
        with conn:
            conn.settimeout(1.0)
            with contextlib.suppress(OSError):
                conn.recv(65536)  # the request; its content does not matter here
                for i in range(len(self.answer)):
                    if self.stopping.wait(TRICKLE_INTERVAL):
                        return
                    conn.sendall(self.answer[i:i + 1])

    def __enter__(self):
        self.threads[0].start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        for thread in list(self.threads):
            thread.join(5)
        self.listener.close()


def unlink(path):
    """Remove one file; on Windows one the worker made read-only too (there that refuses the removal)."""
    try:
        os.unlink(path)
    except PermissionError:
        if not contain.WINDOWS:
            raise
        os.chmod(path, 0o600)
        os.unlink(path)


def remove_tree(top):
    """Remove folder `top` and all in it, however deep the worker nested it (a loop, not recursion: a
    1,500-level tree is no RecursionError) and whatever modes it left; never raises. What cannot go
    (a path past the system's PATH_MAX) stays, as shutil.rmtree(ignore_errors=True) would leave it."""
    stack, folders = [top], []
    while stack:
        folder = stack.pop()
        folders.append(folder)
        try:
            os.chmod(folder, 0o700)  # a folder the worker made unreadable or unwritable
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    unlink(entry.path)
            except OSError:
                pass
    for folder in reversed(folders):
        try:
            os.rmdir(folder)
        except OSError:
            pass


def ack_body(event_id, **extra):
    body = {"ack": True, "id": event_id}
    body.update(extra)
    return json.dumps(body).encode("utf-8")


def payload_event(payload):
    """The event an outbox.payload holds (its JSON), or Fail naming the rule."""
    try:
        event = json.loads(payload)
    except (TypeError, ValueError):
        event = None
    expect(isinstance(event, dict), msg("rule.payload"), msg("payload.got", payload=repr(payload)))
    return event


def unreadable(message_id, exc):
    """Why a worker's DB could not be read: the value bound by its own message, any other error as it says."""
    return bound_refused(exc) or msg(message_id, error=str(exc))


def observe_source(path, event_id):
    try:
        con = read_only(path)
        try:
            order = con.execute("SELECT count(*) FROM orders WHERE id = ?", (event_id,)).fetchone()[0]
            found = rows(con.execute("SELECT sent, payload FROM outbox WHERE event_id = ?", (event_id,)))
        finally:
            con.close()
    except sqlite3.Error as exc:
        return {"error": unreadable("db.source-unreadable", exc)}
    except Fail as exc:
        return {"error": exc.observed}
    outbox = "absent" if not found else ("sent" if found[0][0] == 1 else "pending" if found[0][0] == 0 else
                                         repr(found[0][0]))
    return {"order": order == 1, "outbox": outbox if len(found) <= 1 else "%d rows" % len(found),
            "payload": found[0][1] if found else None}


def observe_sink(path, event_id, sku):
    try:
        con = read_only(path)
        try:
            inbox = con.execute("SELECT count(*) FROM inbox WHERE event_id = ?", (event_id,)).fetchone()[0]
            outcomes = [r[0] for r in rows(con.execute(
                "SELECT outcome FROM deliveries WHERE event_id = ? ORDER BY rowid", (event_id,)))]
            qty = con.execute("SELECT coalesce(sum(qty), 0) FROM inventory WHERE sku = ?", (sku,)).fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error as exc:
        return {"error": unreadable("db.sink-unreadable", exc)}
    except Fail as exc:
        return {"error": exc.observed}
    return {"inbox": inbox == 1, "deliveries": outcomes, "inventory": qty}


class Story:
    """Observations of snack-7 after each phase, kept for the evidence table (JSON types only)."""

    def __init__(self, grader, name, source, sink_db):
        self.source, self.sink_db = source, sink_db
        self.phases = []
        grader.evidence[name] = self.phases

    def observe(self, phase, ack=None):
        """`phase` a message; `ack` the list of results the publisher saw, or None if none was sent."""
        src = observe_source(self.source, SNACK["id"])
        snk = observe_sink(self.sink_db, SNACK["id"], SNACK["sku"]) if os.path.exists(self.sink_db) else {
            "inbox": False, "deliveries": [], "inventory": 0}
        for seen in (src, snk):
            expect("error" not in seen, msg("db.readable-after", phase=phase), seen.get("error"))
        # data(): the worker's schema decides what an outcome or a qty is (bytes, text, NaN): the report must hold it.
        row = data({"phase": phase, "order": src["order"], "outbox": src["outbox"], "inbox": snk["inbox"],
                    "deliveries": snk["deliveries"], "ack": ack, "inventory": snk["inventory"]})
        self.phases.append(row)
        return row


def need_ok(run):
    expect(run.status == 0, msg("run.succeeds", what=run.what), run.summary())
    return run


def delivery_error(run, expected):
    """The child's error line, which must be a DeliveryError (by class name, anywhere in its MRO)."""
    error = run.first("error")
    # An error before dispatch (init_store, intake) is no failed delivery: say what raised it instead.
    expect(run.status == 1 and error is not None and error.get("stage") == "dispatch", expected, run.summary())
    expect("DeliveryError" in error["mro"], expected,
           wrong_class("DeliveryError", error["type"], error["mro"], error["message"]))
    return error


def acks(run):
    return [a["result"] for a in run.all("ack")]
