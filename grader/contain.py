"""Containment: what bounds a worker's processes, and what ends every process it starts.

Each child the grader starts is a supervisor of ours that never imports the
worker: it forks the worker's process, which sets the resource limits before
anything of the worker loads; as a child subreaper (Linux) it inherits every
orphan the worker leaves, setsid() and double forks included, and ends them all
when the step ends. The zygote (serve) forks each step the same way, from a
process that imported the worker once. grade.py is a subreaper too, and ends
the orphans of a supervisor it had to kill. Never imports the worker,
worker_side/ or parent.py.
"""
import array
import collections
import contextlib
import ctypes
import json
import os
import selectors
import signal
import socket
import sys
import time

from . import box

try:
    import resource
except ImportError:  # not POSIX: no limits (grade.py says so once)
    resource = None

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
MIB = 1024 * 1024
DEFAULT_MEMORY_MIB = 1024
DEFAULT_FILE_MIB = 64
POLL = 0.005  # seconds between two looks of a supervisor at its worker
END_WITHIN = 5.0  # seconds to end what a step left behind, however much it forks
FD_SIZE = array.array("i").itemsize
WINDOWS = os.name == "nt"  # no fork, no process groups: each child is in a Job Object instead (windows.py)
NO_LINUX = os.environ.get("OUTBOX_KIT_NO_LINUX") == "1"  # as on macOS: no Linux-only call below (box.NO_LINUX)
# Each step a fresh interpreter, as on Windows, where there is no fork: make bench measures what that costs here.
NO_FORK = WINDOWS or os.environ.get("OUTBOX_KIT_NO_FORK") == "1"
# see an exit without reaping (not on macOS: there the pid is reaped at once)
CAN_PEEK = hasattr(os, "waitid") and not NO_LINUX

Limits = collections.namedtuple("Limits", "memory_mib file_mib cpu_seconds")


def cpu_seconds(timeout):
    """The CPU time one step may use, in whole seconds: its wall bound and two more."""
    return int(timeout) + 2


# --------------------------------------------------------------------------
# Which protections this system has.
# --------------------------------------------------------------------------


def become_subreaper():
    """Make this process the reaper of its orphaned descendants; True if the system allows it (Linux 3.4+)."""
    if not sys.platform.startswith("linux") or NO_LINUX:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # this process's own symbols, libc's prctl among them
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


_GRADER_IS_SUBREAPER = []


def protect_host():
    """Once per grader process: become a subreaper. Returns the protections that are off here (names)."""
    if WINDOWS:  # a Job Object bounds memory, CPU time and processes, and ends all a child started
        return ["file-size"] + (["job-limits"] if under_wine() else [])
    if not _GRADER_IS_SUBREAPER:
        _GRADER_IS_SUBREAPER.append(become_subreaper())
    return protections_off(limits=resource is not None, subreaper=_GRADER_IS_SUBREAPER[0])


def protections_off(limits, subreaper):
    """The names of the protections missing, given what this system has ("limits", "orphans"; "file-size": Windows)."""
    return [name for name, available in (("limits", limits), ("orphans", subreaper)) if not available]


# --------------------------------------------------------------------------
# Children of a process, and ending them.
# --------------------------------------------------------------------------


def children(pid=None):
    """PIDs of the live or unreaped children of `pid` (this process): /proc, or [] where there is none."""
    pid = os.getpid() if pid is None else pid
    if NO_LINUX or WINDOWS:
        # As where there is no /proc. Windows: a child's job holds all it started; under Wine "/proc" is the Linux
        # host's, whose pids are not Windows' (one whose parent has this Windows pid is no child of ours).
        return []
    found = set()
    tasks = "/proc/%d/task" % pid
    try:
        for task in os.listdir(tasks):
            with open(os.path.join(tasks, task, "children")) as f:
                found.update(int(p) for p in f.read().split())
        return sorted(found)
    except OSError:
        pass
    try:  # a kernel without /proc/PID/task/TID/children: every process's parent, one by one
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open("/proc/%s/stat" % name) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.add(int(name))
    return sorted(found)


def kill(pid, group=False):
    with contextlib.suppress(ProcessLookupError, PermissionError):
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)


def reap(pid):
    """Collect `pid` if it has ended; True once it is gone."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return True


def end_children(within=END_WITHIN):
    """SIGKILL and reap every child of this process, until none is left or `within` seconds pass.

    In a subreaper the orphans of the ones killed come back as children, so
    the loop ends the whole tree below. Returns the number of processes ended.
    """
    deadline = time.monotonic() + within
    ended = 0
    while time.monotonic() < deadline:
        pids = children()
        if not pids:
            break
        for pid in pids:
            kill(pid)  # audit: G53
        waiting = set(pids)
        while waiting and time.monotonic() < deadline:
            waiting = {pid for pid in waiting if not reap(pid)}
            if waiting:
                time.sleep(POLL)
        ended += len(pids) - len(waiting)
    return ended


def peek_exit(pid):
    """The status of child `pid` (Popen's convention: -N for signal N) once it has ended, else None (CAN_PEEK only).

    Never reaps it, so its pid, and its process group's id, cannot be reused
    while the caller still signals them.
    """
    try:
        result = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped already, by someone else
        return None
    if result is None or result.si_pid == 0:
        return None
    return result.si_status if result.si_code == os.CLD_EXITED else -result.si_status


def decode(status):
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)


# --------------------------------------------------------------------------
# The child side: grade.py --role --contain SPEC ... enters here.
# --------------------------------------------------------------------------

PROTOCOL = []  # the fd of the grader's protocol pipe, in the worker's process
REQUESTS = []  # the fd the grader's requests come in on: PROTOCOL's own, but on Windows a pipe of its own


def contain_arg(parent, protocol_fd, limits, requests=None):
    """The --contain argument of a child: the grader's pid, the protocol pipe, the limits.

    On Windows `protocol_fd` and `requests` are the handles of two pipes, the
    lines out and the requests in (windows.start).
    """
    given = {"parent": parent, "protocol": protocol_fd, "memory_mib": limits.memory_mib,
             "file_mib": limits.file_mib, "cpu_seconds": limits.cpu_seconds}
    if requests is not None:
        given["requests"] = requests
    return json.dumps(given, separators=(",", ":"))


def read_to_end(fd):
    """Read `fd` until its end: the grader closed it (Windows: how a sink is asked to stop)."""
    with contextlib.suppress(OSError):
        while os.read(fd, 4096):
            pass


def under_wine():
    """Whether this Windows is Wine, which keeps a Job Object's limits but does not enforce them (Wine 8)."""
    try:
        return hasattr(ctypes.WinDLL("ntdll"), "wine_get_version")
    except (OSError, AttributeError):
        return False


def enter_job(given):
    """Windows: open the two pipes the grader's handles name, and wait until it has put this process in its job.

    The job (windows.py) bounds this process and all it starts; the grader
    writes "go" only once it holds it, so nothing of the worker runs before.
    """
    import msvcrt
    PROTOCOL.append(msvcrt.open_osfhandle(given["protocol"], 0))
    REQUESTS.append(msvcrt.open_osfhandle(given["requests"], os.O_RDONLY))
    first = b""
    while not first.endswith(b"\n"):
        byte = os.read(REQUESTS[0], 1)  # one byte at a time: what follows "go" is the first request
        if not byte:
            os._exit(1)  # the grader went away before it let this process go on
        first += byte


def enter(argv):
    """Called by grade.py for `--role --contain SPEC rest...`: returns `rest`, in the worker's process.

    This process stays behind as the step's supervisor (and exits as the
    worker's process did); the fork that returns has the limits set.
    """
    if argv[:1] != ["--contain"]:
        return argv
    given, rest = json.loads(argv[1]), argv[2:]
    if WINDOWS:
        enter_job(given)
        return rest
    PROTOCOL.append(given["protocol"])
    REQUESTS.append(given["protocol"])
    if resource is not None:
        set_limit(resource.RLIMIT_CORE, 0)  # in the supervisor too: it re-raises a fatal signal on itself
    become_subreaper()  # audit: G53
    sys.stdout.flush()
    sys.stderr.flush()
    worker = os.fork()
    if worker != 0:
        supervise(worker, given["parent"])  # never returns
    if resource is not None:
        set_limits(Limits(given["memory_mib"], given["file_mib"], given["cpu_seconds"]))  # audit: G57
    return rest


def set_limit(which, soft, hard=None):
    """Lower a limit of this process (never above the hard limit it has); one the system refuses stays as it was."""
    hard = soft if hard is None else hard
    _, current = resource.getrlimit(which)
    if current != resource.RLIM_INFINITY:
        soft, hard = min(soft, current), min(hard, current)
    with contextlib.suppress(ValueError, OSError):  # macOS, for one, refuses RLIMIT_AS below what is mapped
        resource.setrlimit(which, (soft, hard))


def set_limits(limits):
    """This process's limits: address space, largest file, CPU time (past it: SIGXCPU, then SIGKILL a second later)."""
    set_limit(resource.RLIMIT_AS, limits.memory_mib * MIB)  # audit: G57
    set_limit(resource.RLIMIT_FSIZE, limits.file_mib * MIB)
    set_limit(resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1)
    # Past the largest file a write gets SIGXFSZ, whose default action ends the
    # process: the parent sees the signal, and no worker's `except` hides it.
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)


def say(line):
    """Write one protocol line (MARK + JSON, no newline) to the grader, whole, with one leading newline.

    The newline ends any line a killed process left half-written before it.
    """
    data = ("\n" + line + "\n").encode("utf-8")
    fd = PROTOCOL[0] if PROTOCOL else sys.stdout.fileno()  # run by hand, without --contain: stdout
    while data:  # audit: G56
        data = data[os.write(fd, data):]


def supervise(worker, grader):
    """The supervisor's life: wait for the worker's process, pass SIGTERM on to it, end all it left; exit as it did.

    If the grader goes away first (killed), end everything at once.
    """
    stop = []
    # Only a flag: the loop below passes it on.
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    status = None
    while status is None:
        if os.getppid() != grader:  # audit: G53
            end_children()
            kill(0, group=True)
        if stop:
            del stop[:]
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGTERM)
        status = reap_orphans(worker)
        if status is None:
            time.sleep(POLL)
    end_children()
    exit_as(status)


def reap_orphans(worker):
    """Collect every child that has ended; the worker's status once it is among them, else None."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return 1
        if pid == 0:
            return None
        if pid == worker:
            return decode(status)


def exit_as(status):
    """End this process as the worker's did: the same exit status, or the same fatal signal."""
    sys.stdout.flush()
    sys.stderr.flush()
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        status = 128 - status  # a signal whose default is not to end the process
    os._exit(status)


# --------------------------------------------------------------------------
# The zygote: the worker imported once, each step's process forked from it.
# --------------------------------------------------------------------------


def enter_folder(folder):
    """Make `folder` this process's working directory, HOME and TMPDIR (home/ and tmp/ inside it)."""
    home, tmp = os.path.join(folder, "home"), os.path.join(folder, "tmp")
    for path in (home, tmp):
        os.makedirs(path, exist_ok=True)
    os.chdir(folder)
    os.environ.update(HOME=home, TMPDIR=tmp)  # audit: G55
    if "tempfile" in sys.modules:
        sys.modules["tempfile"].tempdir = None  # computed again, from the TMPDIR above


def serve(control, step, cpu):
    """The zygote's life: fork a step for each request of the grader, tell it when each ends; at EOF end them all.

    A request is one JSON line on the `control` socket: {"op": "spawn", "id",
    "argv", "folder"} sent with three file descriptors (the step's stdout,
    stderr and protocol pipes), or {"op": "signal", "id", "signal"}. Each
    spawned step answers {"op": "ended", "id", "status"} once it has ended.
    `step(argv)` runs in the step's process and returns its exit status.
    """
    sock = socket.socket(fileno=control)
    become_subreaper()  # the orphans of a step killed whole come back here, and are ended
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only so that the wakeup fd hears of it
    signal.set_wakeup_fd(wake_w)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    steps, fds, buffer = {}, [], b""  # steps: pid of its supervisor -> id
    while True:
        for key, _ in selector.select():
            if key.fd == wake_r:
                os.read(wake_r, 4096)
                continue
            data, ancillary, _, _ = sock.recvmsg(65536, socket.CMSG_SPACE(64 * FD_SIZE))
            if not data:  # the grader has gone, or is done with this worker
                for pid in steps:
                    kill(pid, group=True)
                end_children()
                os._exit(0)
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.extend(array.array("i", payload[:len(payload) - len(payload) % FD_SIZE]))
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                request = json.loads(line.decode("utf-8"))
                if request["op"] == "spawn":
                    mine, fds = fds[:3], fds[3:]
                    closing = [sock.fileno(), wake_r, wake_w] + PROTOCOL + fds + (
                        [selector.fileno()] if hasattr(selector, "fileno") else [])
                    steps[fork_step(request, mine, step, cpu, closing)] = request["id"]
                else:
                    for pid, number in steps.items():
                        if number == request["id"] and request["signal"] == signal.SIGKILL:
                            kill(pid, group=True)  # the step's supervisor, its process and all in their group
                        elif number == request["id"]:
                            with contextlib.suppress(ProcessLookupError):
                                os.kill(pid, request["signal"])  # the supervisor passes it on
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in steps:
                tell(sock, {"op": "ended", "id": steps.pop(pid), "status": decode(status)})
        for pid in children():
            if pid not in steps:
                kill(pid)  # an orphan of a step that was killed whole: its step has ended


def tell(sock, message):
    sock.sendall(json.dumps(message).encode("utf-8") + b"\n")


def fork_step(request, fds, step, cpu, closing):
    """Fork the step's supervisor (a group and a subreaper of its own), which forks the step's process."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid != 0:
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # also here, so that no kill can come before the fork's own setpgid
        for fd in fds:
            os.close(fd)
        return pid
    status = 1
    try:
        os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in closing:
            os.close(fd)
        zygote = os.getppid()
        become_subreaper()  # audit: G53
        worker = os.fork()
        if worker == 0:
            os.dup2(fds[0], 1)
            os.dup2(fds[1], 2)
            for fd in fds[:2]:
                os.close(fd)
            PROTOCOL[:] = REQUESTS[:] = [fds[2]]
            enter_folder(request["folder"])
            box.narrow(request["folder"])  # audit: G70
            if resource is not None:
                set_limit(resource.RLIMIT_CPU, cpu, cpu + 1)  # a fork's CPU time starts from 0
            try:
                status = step(request["argv"])
            except SystemExit as exc:  # the worker called sys.exit(): its status, as a process of its own ends
                status = exc.code if isinstance(exc.code, int) else 1
        else:
            for fd in fds:
                os.close(fd)
            supervise(worker, zygote)  # never returns
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(status)
