"""The parent's handle on one torture child: start it, read its "@" lines, kill it, clean up.

Owns every subprocess, pipe and deadline of the torture run. Each wait ends
by a deadline; `close` kills whatever still runs and closes every pipe. It
knows the child's protocol lines, not what they mean for an invariant.
"""
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from tests.support import ROOT, WINDOWS, python_env

WAIT = 30.0  # seconds any one wait for a child may take; generous for a loaded 2-core box
# The exit status of a child that kill() killed: -SIGKILL on POSIX; on Windows kill() is TerminateProcess, status 1.
KILLED = 1 if WINDOWS else -signal.SIGKILL


class ChildFailed(Exception):
    """A child did not do what the run needed (no such line in time, wrong exit status)."""


class Child:
    """`python -m tests.torture.child ROLE ARGS...` with stdin/stdout pipes and stderr in a file."""

    def __init__(self, workdir, name, role, *args, root=ROOT):
        self.name = name
        self.lines = []
        self._queue = queue.Queue()
        self._stderr_path = os.path.join(workdir, name + ".stderr")
        self._stderr = open(self._stderr_path, "wb")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.torture.child", role] + [str(a) for a in args],
                cwd=root,
                env=python_env(PYTHONPATH=root),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                universal_newlines=True,
            )
        except BaseException:
            self._stderr.close()
            raise
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def expect(self, prefix, timeout=WAIT):
        """The first new line starting with "@" + prefix; ChildFailed if the child ends or time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._queue.get(timeout=max(0.0, left))
            except queue.Empty:
                raise ChildFailed("%s: no '@%s' line within %gs; %s" % (self.name, prefix, timeout, self.tail())) from None
            if line is None:
                self._queue.put(None)  # later calls see the end too
                raise ChildFailed("%s ended before '@%s'; %s" % (self.name, prefix, self.tail()))
            self.lines.append(line)
            if line.startswith("@" + prefix):
                return line[len(prefix) + 1:].strip()

    def tell(self, command):
        """Write one command line; a child that is already gone just does not hear it."""
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def kill(self):
        """SIGKILL, from outside (on Windows TerminateProcess, as abrupt: no handler, no cleanup runs)."""
        if self.proc.poll() is None:
            self.proc.kill()

    def wait(self, timeout=WAIT):
        """The exit status (negative: killed by that signal); ChildFailed if it runs past `timeout`."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise ChildFailed("%s still running after %gs; %s" % (self.name, timeout, self.tail())) from None

    def expect_exit(self, statuses, timeout=WAIT):
        status = self.wait(timeout)
        if status not in statuses:
            raise ChildFailed("%s exited with %s, expected %s; %s" % (self.name, status, " or ".join(map(str, statuses)), self.tail()))
        return status

    def running(self):
        return self.proc.poll() is None

    def tail(self):
        self._stderr.flush()
        with open(self._stderr_path, "rb") as f:
            err = f.read()[-600:].decode("utf-8", "replace").strip()
        return "stdout %s; stderr %s" % (self.lines[-4:], err.replace("\n", " | ") or "empty")

    def close(self):
        """Kill if still running, reap, close every pipe and file. Safe to call twice."""
        self.kill()
        try:
            self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            pass  # SIGKILL cannot be refused; only a stuck kernel gets here
        try:
            self.proc.stdin.close()
        except OSError:
            pass  # a broken pipe may refuse the last flush
        self._reader.join(WAIT)  # the child is gone, so its stdout is at EOF
        self.proc.stdout.close()
        self._stderr.close()


class Children:
    """Every child of one run, closed together however the run ends.

    `root` is the checkout the children import the kit from (a mutant copy in
    the tests that prove the matrix can fail).
    """

    def __init__(self, workdir, root=ROOT):
        self.workdir = workdir
        self.root = root
        self._all = []
        self._count = 0

    def start(self, role, *args):
        self._count += 1
        child = Child(self.workdir, "%s-%d" % (role, self._count), role, *args, root=self.root)
        self._all.append(child)
        return child

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for child in self._all:
            child.close()
