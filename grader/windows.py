"""Windows: each child of the grader is a fresh process in a Job Object of its own (ctypes and kernel32).

Windows has no fork, no process group to kill and no resource module, so a
step there is not forked by a zygote and has no supervisor: the grader starts
`grade.py --role --contain SPEC ...` itself, puts it in a job, and only then
lets it go on (the first line on its request pipe), before anything of the
worker loads. The job bounds it: every process it starts is in the job too,
at most ACTIVE_PROCESSES at once, each within --memory and the CPU time of
one step; closing the job ends them all (KILL_ON_JOB_CLOSE), so nothing
outlives the grader, even one killed. What a job cannot bound (the largest
file) is named in the report's protections_off. Never imports the worker.

The protocol is two pipes, not a socket: a socket is no file descriptor
there. Only the two handles named are inherited (PROC_THREAD_ATTRIBUTE_HANDLE_LIST).
"""
import contextlib
import ctypes
import os
import subprocess
import threading
import time

from .capture import Capture, Lines, follow

ACTIVE_PROCESSES = 32  # processes of one step alive at once (its own among them)
KIT_START = 60.0  # seconds a child may take to start and load the kit's side, before the worker's own time
JOIN_WITHIN = 5.0  # seconds for a stream's reader to see EOF once the job has ended
# winnt.h
JOB_OBJECT_LIMIT_PROCESS_TIME = 0x00000002
JOB_OBJECT_LIMIT_ACTIVE_PROCESS = 0x00000008
JOB_OBJECT_LIMIT_PROCESS_MEMORY = 0x00000100
JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION = 0x00000400
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x00002000
JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9
ENDED_BY_GRADER = 1  # the exit code of a process the grader ended (TerminateJobObject)
KILLED = -9  # the status a step the grader ended has, as on POSIX (-SIGKILL): never one the worker chose
CPU_TIME_EXIT = 1816  # ERROR_NOT_ENOUGH_QUOTA: the exit code of a process past its job's CPU time
TICKS_PER_SECOND = 10 ** 7  # a job's times are in units of 100 ns


class BasicLimits(ctypes.Structure):
    _fields_ = [("PerProcessUserTimeLimit", ctypes.c_int64), ("PerJobUserTimeLimit", ctypes.c_int64),
                ("LimitFlags", ctypes.c_uint32), ("MinimumWorkingSetSize", ctypes.c_size_t),
                ("MaximumWorkingSetSize", ctypes.c_size_t), ("ActiveProcessLimit", ctypes.c_uint32),
                ("Affinity", ctypes.c_size_t), ("PriorityClass", ctypes.c_uint32), ("SchedulingClass", ctypes.c_uint32)]


class ExtendedLimits(ctypes.Structure):
    _fields_ = [("BasicLimitInformation", BasicLimits), ("IoInfo", ctypes.c_uint64 * 6),
                ("ProcessMemoryLimit", ctypes.c_size_t), ("JobMemoryLimit", ctypes.c_size_t),
                ("PeakProcessMemoryUsed", ctypes.c_size_t), ("PeakJobMemoryUsed", ctypes.c_size_t)]


_KERNEL32 = []


def _kernel32():
    if _KERNEL32:
        return _KERNEL32[0]
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    handle, boolean = ctypes.c_void_p, ctypes.c_int
    for name, result, args in (("CreateJobObjectW", handle, [ctypes.c_void_p, ctypes.c_wchar_p]),
                               ("SetInformationJobObject", boolean, [handle, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32]),
                               ("AssignProcessToJobObject", boolean, [handle, handle]),
                               ("TerminateJobObject", boolean, [handle, ctypes.c_uint32]),
                               ("CloseHandle", boolean, [handle])):
        function = getattr(kernel32, name)
        function.restype, function.argtypes = result, args
    _KERNEL32.append(kernel32)
    return kernel32


class Job:
    """A Job Object with the step's limits; terminate() ends every process in it, close() too (KILL_ON_JOB_CLOSE)."""

    def __init__(self, limits):
        self._k = _kernel32()
        self._lock = threading.Lock()  # terminate() and close() come from several threads: never a closed handle
        self.handle = self._k.CreateJobObjectW(None, None)
        if not self.handle:
            raise ctypes.WinError(ctypes.get_last_error())
        info = ExtendedLimits()
        basic = info.BasicLimitInformation
        basic.LimitFlags = (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_ACTIVE_PROCESS
                            | JOB_OBJECT_LIMIT_PROCESS_MEMORY | JOB_OBJECT_LIMIT_PROCESS_TIME
                            | JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION)  # no error dialog waiting for a click
        basic.ActiveProcessLimit = ACTIVE_PROCESSES
        basic.PerProcessUserTimeLimit = limits.cpu_seconds * TICKS_PER_SECOND
        info.ProcessMemoryLimit = limits.memory_mib * 1024 * 1024
        if not self._k.SetInformationJobObject(self.handle, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS,
                                               ctypes.byref(info), ctypes.sizeof(info)):
            error = ctypes.WinError(ctypes.get_last_error())
            self.close()
            raise error

    def assign(self, process_handle):
        if not self._k.AssignProcessToJobObject(self.handle, int(process_handle)):
            raise ctypes.WinError(ctypes.get_last_error())

    def terminate(self):
        with self._lock:
            if self.handle:
                self._k.TerminateJobObject(self.handle, ENDED_BY_GRADER)

    def close(self):
        with self._lock:
            handle, self.handle = self.handle, None
            if handle:
                self._k.CloseHandle(handle)


def start(cmd, env, cwd, limits, live):
    """Start `cmd(handles)` in a job of its own; (proc, job, requests fd, replies fd) once it may go on.

    `cmd` is a function of the two handles the child inherits (its --contain
    SPEC names them). `live`, the caller's set of children, has the process
    from its first instant, under the caller's lock; not if it failed to start.
    """
    import msvcrt
    down_r, down_w = os.pipe()  # requests: grader -> step
    up_r, up_w = os.pipe()  # the step's lines: step -> grader
    theirs = [msvcrt.get_osfhandle(down_r), msvcrt.get_osfhandle(up_w)]
    job = proc = None
    try:
        job = Job(limits)
        for handle in theirs:
            os.set_handle_inheritable(handle, True)
        info = subprocess.STARTUPINFO()
        info.lpAttributeList = {"handle_list": list(theirs)}
        proc = subprocess.Popen(cmd(theirs), env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, close_fds=True, startupinfo=info,
                                creationflags=subprocess.CREATE_NEW_PROCESS_GROUP)
        live.add(proc)
        job.assign(proc._handle)  # before it reads its first line: nothing of the worker has run yet
        os.write(down_w, b"go\n")
    except BaseException:
        if proc is not None:
            live.discard(proc)
            with contextlib.suppress(OSError):
                proc.kill()
            proc.wait()
            for stream in (proc.stdout, proc.stderr):
                stream.close()
        for fd in (down_w, up_r):
            os.close(fd)
        if job is not None:
            job.close()
        raise
    finally:
        os.close(down_r)
        os.close(up_w)
    return proc, job, down_w, up_r


ABANDONED = []  # (process, readers) whose streams a reader still reads after its job ended: never closed


class JobChild:
    """A running child in its job, and its stdout, stderr and protocol pipes, read within bounds (parent.Child's sibling)."""

    timed_out = False

    def __init__(self, proc, job, requests, replies, on_line, forget):
        self.proc, self.job, self.forget = proc, job, forget
        self.out, self.err, self.lines = Capture(), Capture(), Lines(self._heard)
        self.protocol = requests  # the deciding side's requests go out on it (remote.Session)
        self.replies = replies
        self.streams = {proc.stdout.fileno(): self.out, proc.stderr.fileno(): self.err, replies: self.lines}
        self.status = None
        self.ended = threading.Event()
        self._closed = threading.Lock()
        self._requests_open = True
        self._readers = []
        self._on_line = on_line
        self.begun, self.heard = time.monotonic(), None
        self.killed = False

    def _heard(self, line):
        if self.heard is None:
            self.heard = time.monotonic()
        if self._on_line is not None:
            self._on_line(line)

    def deadline(self, timeout):
        """When a step that may run `timeout` seconds has run past it.

        From its first line (the box line, said right before the worker's
        import), not from its start: a fresh interpreter there takes seconds
        to load the kit's side under load, which is no time of the worker's.
        That start is bounded apart, by KIT_START.
        """
        return self.begun + KIT_START if self.heard is None else self.heard + timeout

    def exited(self):
        if self.status is None:
            self.status = self.proc.poll()
        return self.status is not None

    def kill(self):
        if self.proc.poll() is None:
            self.killed = True  # ended by the grader: KILLED, whatever exit code that gave
        self.job.terminate()

    def term(self):
        """Ask it to stop: its request pipe reaches EOF (there is no SIGTERM to send), which the sink role watches."""
        with self._closed:
            if self._requests_open:
                self._requests_open = False
                with contextlib.suppress(OSError):
                    os.close(self.protocol)

    def after_exit(self):
        self.ended.set()
        self.job.terminate()  # whatever it left behind in its job

    def follow(self, deadline):
        return follow(self.streams, self.exited, deadline, self.kill, self.after_exit, readers=self._readers)

    def finish(self):
        """End the job, reap the process and close the pipes; its exit status.

        A pipe is closed only once its reader has seen EOF: closing a file
        descriptor that another thread reads would wait for that read.
        """
        self.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self.forget(self.proc)
        self.term()
        readers_done = all(not thread.join(JOIN_WITHIN) and not thread.is_alive() for thread in self._readers)
        if readers_done:
            for stream in (self.proc.stdout, self.proc.stderr):
                stream.close()
            os.close(self.replies)
        else:  # kept from their finalizers too, which would close them in whichever thread dropped them last
            ABANDONED.append((self.proc, self._readers))
        self.job.close()
        return KILLED if self.killed and self.proc.returncode == ENDED_BY_GRADER else self.proc.returncode

    def output(self):
        return {"printed": self.out.total + self.err.total, "dropped": self.out.dropped + self.err.dropped}
