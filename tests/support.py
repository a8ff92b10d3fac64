"""Test helpers: temporary files, condition waits, real loopback servers.

Nothing here mocks sqlite3 or sockets; servers bind 127.0.0.1 port 0 and are
shut down and joined by the test that started them.
"""
import concurrent.futures
import contextlib
import http.client
import http.server
import io
import json
import os
import queue
import re
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

from outbox.ops import relay as outbox_relay
from outbox.core import store as outbox_store
from outbox.core import upgrade as outbox_upgrade
from sink.server import make_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The reader docs (issue 22): README.md is the front door; each page it sends a reader to, beside it in docs/.
# Each has a Japanese counterpart, japanese(path). Tests that look for "what the docs say" read them all.
READER_DOCS = ("README.md", "docs/participants.md", "docs/hosts.md", "docs/api.md", "docs/operating.md",
               "docs/reliability.md")
DEADLINE = 10.0  # seconds any single wait in a test may take
# PyPy's fresh processes take about twice CPython's CPU before its JIT warms up (grade.py: 2.9 s against 1.8 s):
# a bound on many of them at once, on a loaded machine, is that much longer there.
WINDOWS = os.name == "nt"
# Windows has no fork: each step of a grade is a fresh interpreter that imports the worker itself, and under Wine
# a start costs about a second of a 2-core machine (grade.py: 35-60 s there, 1.9 s here): three times the bound.
SLOWER = 2 if hasattr(sys, "pypy_version_info") else 3 if WINDOWS else 1
PYTHON = sys.executable


def posix_only(needs):
    """Skip a case or a class on Windows, saying what it needs there; tests/run.py lists each by name and reason."""
    return unittest.skipIf(WINDOWS, "POSIX only: " + needs)


def japanese(path):
    """The Japanese counterpart of a reader doc: README.md -> README.ja.md, docs/api.md -> docs/api.ja.md."""
    return path[:-len(".md")] + ".ja.md"


def read_doc(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def read_docs(lang="en"):
    """Every reader doc of one language, one after the other (README.md first)."""
    return "\n".join(read_doc(path if lang == "en" else japanese(path)) for path in READER_DOCS)


def wait_until(predicate, timeout=DEADLINE, what="condition"):
    """Poll `predicate` until it returns a true value; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(0.005)  # polling interval, not synchronisation


def fuzz_seed(variable, default):
    """The seed of a seeded random test: `default`, or the integer in the environment variable `variable`.

    The default is fixed, so `make test` is the same run every time and a
    failure is reproducible as it stands; the variable runs another stream.
    The seed is printed on stderr either way, with the line that repeats it.
    """
    seed = int(os.environ.get(variable) or default)
    sys.stderr.write("\n  seed %d (%s=%d reproduces it)\n" % (seed, variable, seed))
    return seed


class TempDirTestCase(unittest.TestCase):
    """Gives each test `self.tmp`, a fresh directory removed afterwards."""

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="outbox-kit-test-")
        self.addCleanup(remove_tree, self.tmp)

    def path(self, *names):
        return os.path.join(self.tmp, *names)


class LoopbackServer:
    """A real ThreadingHTTPServer on 127.0.0.1, port 0, in a daemon thread.

    Use as a context manager; `url(path)` builds a URL to it; `requests` lists
    (method, path, headers dict, body bytes) for every request handled. A
    handler function ``handle(request_handler, body) -> None`` writes the
    answer itself.
    """

    def __init__(self, handle):
        owner = self
        self.requests = []
        self._lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with owner._lock:
                    owner.requests.append((self.command, self.path, dict(self.headers), body))
                handle(self, body)

            do_GET = do_POST = do_PUT = do_CONNECT = _any

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path="/events"):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.thread.join(DEADLINE)
        self.server.server_close()


def reply(handler, status, body, headers=()):
    """Write a complete response with a correct Content-Length."""
    if isinstance(body, str):
        body = body.encode("utf-8")
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    for name, value in headers:
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


def ev(event_id, sku="snack", qty=1):
    """An event dict, as the API takes it."""
    return {"id": event_id, "sku": sku, "qty": qty}


def echo_ack(handler, body):
    """A LoopbackServer handler that ACKs every event, as a sink would: 200 and its id."""
    event = json.loads(body.decode())
    reply(handler, 200, json.dumps({"ack": True, "id": event["id"], "result": "applied"}))


def run_cli(package, *args, cwd=ROOT, env=None, timeout=60):
    """Run `python -m PACKAGE ARGS` to its end (bounded); return the CompletedProcess, text mode."""
    return subprocess.run([sys.executable, "-m", package] + list(args), cwd=cwd, env=env or python_env(),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout)


def run_on_a_terminal(args, *, env, timeout, cwd=ROOT, stream="stderr"):
    """Run `args` with `stream` (stderr or stdout) on a pseudo-terminal, the other piped.

    Returns (exit status, the piped stream's bytes, the terminal's bytes).
    """
    if WINDOWS:
        raise unittest.SkipTest("POSIX only: a pseudo-terminal (pty)")
    import pty  # POSIX only; imported here so that the module loads everywhere
    master, slave = pty.openpty()
    try:
        streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        streams[stream] = slave
        proc = subprocess.Popen(args, cwd=cwd, env=env, **streams)
        os.close(slave)
        slave = None
        out, err = proc.communicate(timeout=timeout)
        out = err if stream == "stdout" else out
        seen = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side is closed, all read
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
        if slave is not None:
            os.close(slave)
    return proc.returncode, out, seen


def python_env(**extra):
    """Environment for a child Python that imports this checkout, with no proxy settings.

    On Windows a pipe's encoding is the ANSI code page (cp1252), in which
    grade.py writes Japanese as escapes: the children there write UTF-8, as
    the tests read it (a test of the escapes sets PYTHONIOENCODING itself).
    """
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["PYTHONPATH"] = ROOT
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if WINDOWS:
        env["PYTHONIOENCODING"] = "utf-8"
    env.update(extra)
    return env


def text_of(data):
    """What a child wrote, as text: UTF-8, with Windows' \\r\\n line ends read as \\n (as universal_newlines reads them)."""
    text = data.decode("utf-8")
    return text.replace("\r\n", "\n") if WINDOWS else text


def free_loopback_socket():
    """A listening socket on 127.0.0.1 port 0 that never accepts (for timeout tests)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock


# The sink over HTTP and as a process (test_sink_server, test_sink_faults, test_sink_cli, ...).

EVENT = {"id": "e1", "sku": "apple", "qty": 3}


def body_of(event):
    return json.dumps(event).encode("utf-8")


def post(port, body, **options):
    """One request on its own connection to 127.0.0.1; see post_to."""
    return post_to("127.0.0.1", port, body, **options)


def post_to(host, port, body, *, path="/events", method="POST", content_type="application/json", headers=None):
    """One request on its own connection; return (status, response headers, decoded JSON body)."""
    conn = http.client.HTTPConnection(host, port, timeout=DEADLINE)
    try:
        sent = {} if content_type is None else {"Content-Type": content_type}
        sent.update(headers or {})
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        data = response.read()
        return response.status, response, (json.loads(data.decode("ascii")) if data else None)
    finally:
        conn.close()


def request_bytes(head_lines, body=b"", *, method="POST", target="/events"):
    head = ["%s %s HTTP/1.1" % (method, target), "Host: 127.0.0.1"] + list(head_lines)
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def source_rows(con):
    """Every row of a source DB's orders and outbox tables, on `con`."""
    return (
        con.execute("SELECT * FROM orders ORDER BY id").fetchall(),
        con.execute("SELECT * FROM outbox ORDER BY seq").fetchall(),
    )


def snapshot(path):
    """Every row of the three sink tables, read through a fresh connection."""
    con = sqlite3.connect(path)
    try:
        return {
            "inbox": con.execute("SELECT * FROM inbox ORDER BY event_id").fetchall(),
            "inventory": con.execute("SELECT * FROM inventory ORDER BY sku").fetchall(),
            "deliveries": con.execute("SELECT * FROM deliveries ORDER BY seq").fetchall(),
        }
    finally:
        con.close()


# Windows has no SIGTERM, and Wine 8 delivers no console control event (GenerateConsoleCtrlEvent fails there), so
# on Windows a test asks a relay or a sink to stop through the child's stdin: a thread of the child raises the signal
# each line names, in the child, as Windows' console does from a thread of its own on Ctrl-C or Ctrl-Break. The
# handlers that then run are the command's own. SIGTERM, a supervisor's stop, is Ctrl-Break there (ask_to_stop).
STOP_DOOR = """
import runpy, signal, sys, threading
def door():
    for line in sys.stdin:
        signal.raise_signal(getattr(signal, line.strip()))
threading.Thread(target=door, daemon=True).start()
kind, target = sys.argv[1:3]
sys.argv = [target] + sys.argv[3:]
if kind == "-m":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})
"""
WINDOWS_STOP = {signal.SIGTERM: "SIGBREAK", signal.SIGINT: "SIGINT"}
STOP_STDIN = subprocess.PIPE if WINDOWS else subprocess.DEVNULL  # the stdin of a stoppable() child


def stoppable(args, python=(PYTHON,)):
    """`python args` (args: ["-m", "sink", ...] or ["-c", PROGRAM, ...]) as a command ask_to_stop() can stop.

    On POSIX the command as it is; on Windows behind STOP_DOOR, with its stdin STOP_STDIN (a pipe).
    """
    return list(python) + (["-c", STOP_DOOR] if WINDOWS else []) + list(args)


def ask_to_stop(proc, signum):
    """Send SIGTERM or SIGINT to a stoppable() child: a signal on POSIX, a line through its stdin door on Windows."""
    if not WINDOWS:
        proc.send_signal(signum)
        return
    line = WINDOWS_STOP[signum] + "\n"
    proc.stdin.write(line if isinstance(proc.stdin, io.TextIOBase) else line.encode("ascii"))
    proc.stdin.flush()


class Child:
    """`python -m sink ARGS` (or `python -c PROGRAM ARGS`) as a real process; stdout lines are read with a deadline.

    `python` is the command that starts the interpreter (with its options, or
    behind setpriv); `env` defaults to python_env(); `stdin=subprocess.PIPE`
    lets the test write to the child (`proc.stdin`). With the default stdin,
    signal() asks it to stop on every system (stoppable(), ask_to_stop()).
    """

    def __init__(self, args, cwd, *, program=None, python=(PYTHON,), env=None, stdin=None):
        target = ["-c", program] if program is not None else ["-m", "sink"]
        self.door = stdin is None
        command = stoppable(target + list(args), python) if self.door else list(python) + target + list(args)
        if stdin is None:
            stdin = STOP_STDIN
        self.proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=env if env is not None else python_env(),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
        )
        self._lines = queue.Queue()
        self._stderr = []
        self._pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self._lines.put), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self._stderr.append), daemon=True),
        ]
        for pump in self._pumps:
            pump.start()

    @staticmethod
    def _pump(stream, put):
        for line in stream:
            put(line)
        stream.close()

    def line(self, timeout=DEADLINE):
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                "no line from the child within %.1fs; stderr so far: %r" % (timeout, "".join(self._stderr))
            ) from None

    def port(self):
        """Read the URL line the server prints once it listens; return its port."""
        url = self.line().strip()
        match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)", url)
        if match is None:
            raise AssertionError("expected http://127.0.0.1:PORT, got %r" % url)
        return int(match.group(1))

    def wait(self, timeout=DEADLINE):
        return self.proc.wait(timeout)

    def stderr_so_far(self):
        return "".join(self._stderr)

    def stderr(self):
        """Everything the child wrote to stderr; call after it exited."""
        for pump in self._pumps:
            pump.join(DEADLINE)
        return "".join(self._stderr)

    def signal(self, signum):
        if self.door:
            ask_to_stop(self.proc, signum)
        else:
            self.proc.send_signal(signum)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(DEADLINE)
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        for pump in self._pumps:
            pump.join(DEADLINE)


SHORT = 0.5  # server timeout where a test waits on it


def read_to_eof(sock):
    chunks = []
    while True:
        chunk = sock.recv(65536)  # bounded by the socket's DEADLINE timeout
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def exchange(port, data, *, half_close=True):
    """Send raw bytes, read until the server closes; return (status, headers, JSON body, raw bytes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        raw = read_to_eof(sock)
    if not raw:
        return None, {}, None, raw
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return status, headers, (json.loads(body.decode("ascii")) if body else None), raw


def trickle(port):
    """Send a request head to 127.0.0.1:`port` one byte per 0.05 s, never silent for long, until the server closes.

    True once it closed (a reset or broken pipe counts), False if it still had
    not after DEADLINE seconds.
    """
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as slow:
        slow.sendall(b"POST /events HTTP/1.1\r\nX-Slow: ")
        while time.monotonic() - started < DEADLINE:  # a bound on the loop, not a speed target
            try:
                slow.sendall(b"a")
                readable, _, _ = select.select([slow], [], [], 0.05)  # the pause; ends early if the server closes
                if readable and read_to_eof(slow) == b"":
                    return True
            except ConnectionError:  # reset or broken pipe: closed just as well
                return True
    return False


def cpu_seconds(pid):
    """utime + stime of process `pid`: /proc/PID/stat on Linux, GetProcessTimes on Windows (callers skip elsewhere)."""
    if WINDOWS:
        return windows_cpu_seconds(pid)
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat(5)
    return ticks / os.sysconf("SC_CLK_TCK")


def windows_cpu_seconds(pid):
    """Kernel + user time of process `pid` (kernel32: OpenProcess, GetProcessTimes; FILETIMEs count 100 ns)."""
    import ctypes
    from ctypes import wintypes
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    kernel32.OpenProcess.restype = wintypes.HANDLE
    kernel32.OpenProcess.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
    kernel32.GetProcessTimes.argtypes = [wintypes.HANDLE] + [ctypes.POINTER(wintypes.FILETIME)] * 4
    kernel32.CloseHandle.argtypes = [wintypes.HANDLE]
    handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        raise ctypes.WinError(ctypes.get_last_error())
    times = [wintypes.FILETIME() for _ in range(4)]  # creation, exit, kernel, user
    try:
        if not kernel32.GetProcessTimes(handle, *[ctypes.byref(t) for t in times]):
            raise ctypes.WinError(ctypes.get_last_error())
    finally:
        kernel32.CloseHandle(handle)
    return sum(t.dwHighDateTime << 32 | t.dwLowDateTime for t in times[2:]) / 1e7


def outcomes(path):
    return [row[2] for row in snapshot(path)["deliveries"]]


def stock(path):
    return dict(snapshot(path)["inventory"])


class ServerTestCase(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.db_path = self.path("sink.db")

    def start(self, **options):
        options.setdefault("timeout", SHORT)
        server = make_server(self.db_path, **options).start()
        self.addCleanup(server.stop)
        return server

    def port(self, **options):
        return self.start(**options).server_address[1]

    def child(self, *args, program=None):
        child = Child(args, self.tmp, program=program)
        self.addCleanup(child.close)
        return child


# Environments: a copy of the kit, another user (test_environments*).

UNPRIVILEGED = ("nobody", "nogroup")


def unprivileged_prefix():
    """The command prefix that runs a program as `nobody`, or None with the reason it cannot.

    Only root can switch users; setpriv (util-linux) drops every capability
    and supplementary group, so the child is a plain unprivileged user.
    """
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None, "needs root to run a child as %s" % UNPRIVILEGED[0]
    try:
        import grp
        import pwd
        pwd.getpwnam(UNPRIVILEGED[0])
        grp.getgrnam(UNPRIVILEGED[1])
    except (ImportError, KeyError):
        return None, "no user %s / group %s here" % UNPRIVILEGED
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None, "no setpriv here"
    return [setpriv, "--reuid=" + UNPRIVILEGED[0], "--regid=" + UNPRIVILEGED[1], "--clear-groups"], None


_UNPRIVILEGED_PYTHON = []


def unprivileged_python():
    """The command that starts Python as the unprivileged user, or None with the reason it cannot.

    This interpreter if that user may run it (and its children may run it
    again, which is what the grader and the runner do); else python3 from the
    system directories, at or above the floor. An interpreter under a private
    home (say /root/.pyenv) is out of that user's reach, as on a real host.
    """
    if _UNPRIVILEGED_PYTHON:
        return _UNPRIVILEGED_PYTHON[0]
    prefix, reason = unprivileged_prefix()
    found = (None, reason)
    if prefix is not None:
        candidates = [PYTHON, shutil.which("python3", path=os.pathsep.join(("/usr/local/bin", "/usr/bin", "/bin")))]
        probe = ("import subprocess, sys; sys.exit(0 if sys.version_info >= (3, 8) and "
                 "subprocess.call([sys.executable, '-c', 'pass']) == 0 else 1)")
        found = (None, "no Python >= 3.8 that %s may run (tried %s)" % (UNPRIVILEGED[0], ", ".join(map(str, candidates))))
        for python in candidates:
            if python is None:
                continue
            try:
                ok = subprocess.run(prefix + [python, "-c", probe], cwd="/", stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=DEADLINE).returncode == 0
            except (OSError, subprocess.SubprocessError):
                ok = False
            if ok:
                found = (prefix + [python], None)
                break
    _UNPRIVILEGED_PYTHON.append(found)
    return found


MATRIX = "OUTBOX_KIT_MATRIX"  # set by tests/all_pythons.py for the suites it runs after `make test`'s


def checked_by_make_test(python):
    """Why a test that runs `python` rather than this interpreter is left out here, or None to run it.

    A test that falls back to the system's python3 (this interpreter being
    out of another user's reach) runs exactly the same under every
    interpreter of the matrix; `make test` runs it (CI's first step), so the
    matrix's suites leave it out, by name, instead of running it again.
    """
    if os.environ.get(MATRIX) and python and os.path.realpath(python) != os.path.realpath(sys.executable):
        return "it runs %s, not this interpreter: make test runs it, once for them all (%s is set)" % (python, MATRIX)
    return None


def give_to_unprivileged(path):
    """Make `path` (a directory of this test's) owned and writable by the unprivileged user."""
    import grp
    import pwd
    os.chown(path, pwd.getpwnam(UNPRIVILEGED[0]).pw_uid, grp.getgrnam(UNPRIVILEGED[1]).gr_gid)
    os.chmod(path, 0o700)


def kit_files():
    """Repository-relative paths of the kit's files: git's list (tracked and new), or a walk without git."""
    try:
        listed = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=DEADLINE)
        if listed.returncode == 0 and listed.stdout:
            return sorted(set(name for name in listed.stdout.decode("utf-8").split("\0")
                              if name and os.path.isfile(os.path.join(ROOT, name))))
    except (OSError, subprocess.SubprocessError):
        pass
    found = []
    for directory, subdirs, files in os.walk(ROOT):
        subdirs[:] = [d for d in subdirs if d not in (".git", "__pycache__")]
        found.extend(os.path.relpath(os.path.join(directory, f), ROOT) for f in files if not f.endswith(".pyc"))
    return sorted(found)


# The audit map's markers (docs/audit.md): `  # audit: G3` after code, or on a line of its own.
_AUDIT_TRAILING = re.compile(r"[ \t]+# audit: G[0-9]+(?:, G[0-9]+)*[ \t]*$", re.M)
_AUDIT_LINE = re.compile(r"^[ \t]*# audit: G[0-9]+(?:, G[0-9]+)*[ \t]*\n", re.M)


def without_audit_markers(text):
    """`text` without the audit map's marker comments: a mutant's anchor is written against the code alone,
    so placing or moving a marker never makes a patch stale (the mutant copy simply has none)."""
    return _AUDIT_TRAILING.sub("", _AUDIT_LINE.sub("", text))


# The suite copies with shutil.copy, never copy2 (nor copytree's default, which is copy2): on Windows copy2 calls
# CopyFile2 from Python 3.12 on, which Wine 8 lacks (the process aborts). No test needs the copied timestamps.


def copy_kit(dest):
    """Copy the kit's files into the new directory `dest`, then make the copy read-only for everyone."""
    for name in kit_files():
        target = os.path.join(dest, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy(os.path.join(ROOT, name), target)
    set_tree_mode(dest, writable=False)


def set_tree_mode(top, *, writable):
    """chmod -R a-w (files 0444, directories 0555) or back to u+w, so the tree can be removed."""
    for directory, _, files in os.walk(top):
        os.chmod(directory, 0o755 if writable else 0o555)
        for name in files:
            path = os.path.join(directory, name)
            mode = os.stat(path).st_mode & 0o777
            os.chmod(path, (mode | 0o644) if writable else (mode & 0o555) | 0o444)


def copy_packages(dest, folders, *, source=None):
    """Copy `folders` of the kit (or of `source`) under `dest`, writable by their owner whatever the original's modes.

    A lab host may hand the suite a read-only checkout; copytree keeps those
    modes, and a mutant patched into the copy must still be writable.
    """
    for folder in folders:
        shutil.copytree(os.path.join(source or ROOT, folder), os.path.join(dest, folder), copy_function=shutil.copy,
                        ignore=shutil.ignore_patterns("__pycache__"))
        set_tree_mode(os.path.join(dest, folder), writable=True)


def remove_tree(top):
    """Remove a test's directory even where a test left parts of it read-only; never raises."""
    if os.path.isdir(top):
        with contextlib.suppress(OSError):
            set_tree_mode(top, writable=True)
    shutil.rmtree(top, ignore_errors=True)


def tree_listing(top):
    """Every path under `top`, relative, sorted: to prove nothing was added or removed."""
    found = []
    for directory, subdirs, files in os.walk(top):
        found.extend(os.path.relpath(os.path.join(directory, name), top) for name in subdirs + files)
    return sorted(found)


def parse_prometheus(text):
    """A small strict parser of the text format: {(name, labels tuple): value}; AssertionError on any breach."""
    name_re = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
    sample_re = re.compile(r"(%s)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*=\"(?:[^\"\\\n]|\\[\\\"n])*\",?)*\})? (\S+)\Z" % name_re)
    assert text.endswith("\n"), "text must end with a newline"
    helps, types, samples = set(), {}, {}
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            name = line.split(" ")[2]
            assert re.fullmatch(name_re, name) and name not in helps, line
            helps.add(name)
        elif line.startswith("# TYPE "):
            parts = line.split(" ")
            assert len(parts) == 4 and parts[3] in ("gauge", "counter") and parts[2] not in types, line
            types[parts[2]] = parts[3]
        else:
            match = sample_re.match(line)
            assert match, "not a sample line: %r" % line
            name = match.group(1)
            assert name in types and name in helps, "sample before its HELP and TYPE: %r" % line
            labels = tuple(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
            value = float(match.group(3))
            assert (name, labels) not in samples, "repeated sample %r" % line
            samples[(name, labels)] = value
    return samples


def build_v1(path, ids, sent=()):
    """A source DB exactly as release 1 wrote it: SCHEMA_V1, stamped 1, rows through release 1's SQL."""
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode = WAL").fetchall()  # consumed: PyPy keeps an unread statement open
        con.execute("BEGIN IMMEDIATE")
        for statement in outbox_upgrade.SCHEMA_V1:
            con.execute(statement)
        con.execute("PRAGMA application_id = %d" % outbox_store.APPLICATION_ID)
        con.execute("PRAGMA user_version = 1")
        for event_id in ids:
            con.execute("INSERT INTO orders (id, sku, qty, created_at) VALUES (?, 'snack', 1, 1.0)", (event_id,))
            con.execute("INSERT INTO outbox (event_id, payload, sent, created_at) VALUES (?, ?, 0, 1.0)",
                        (event_id, '{"id":"%s","qty":1,"sku":"snack"}' % event_id))
        for event_id in sent:
            con.execute("UPDATE outbox SET sent = 1, sent_at = 2.0 WHERE event_id = ?", (event_id,))
        con.execute("COMMIT")
    finally:
        con.close()


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


# The relay in process (test_outbox_relay, test_outbox_evidence).

RELAY_DEADLINE = 20.0  # seconds (real) one in-process relay run may take


def run_relay(path, send, stop=lambda: False, **options):
    """relay.run on a connection of its own, in a daemon thread, bounded by RELAY_DEADLINE.

    The stop flag also rises at the deadline, so a loop that honours it ends;
    one that does not is abandoned (a daemon thread) and the test fails.
    Defaults: limit 16, max_attempts 3, once, poll 0, rand() 0 (every backoff wait 0).
    """
    deadline = time.monotonic() + RELAY_DEADLINE
    settings = dict(limit=16, max_attempts=3, base_delay=10.0, max_delay=10.0, once=True, poll=0.0,
                    rand=lambda: 0.0)
    settings.update(options)
    outcome = {}

    def body():
        con = outbox_store.init_store(path)
        try:
            outcome["result"] = outbox_relay.run(con, send, stop=lambda: stop() or time.monotonic() > deadline,
                                                 **settings)
        except BaseException as exc:  # handed to the test's thread below
            outcome["error"] = exc
        finally:
            con.close()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(RELAY_DEADLINE + 5.0)
    if thread.is_alive():
        raise AssertionError("relay.run did not return within %.0fs" % RELAY_DEADLINE)
    if time.monotonic() > deadline:
        raise AssertionError("relay.run ran into the test's deadline (%.0fs)" % RELAY_DEADLINE)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


# Processes the grader and torture tests start.


def stop(proc):
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def children_running(marker):
    """PIDs of live processes whose command line mentions `marker` (Linux /proc; callers skip without it)."""
    return [pid for pid, cmdline in grader_children() if marker in cmdline]


def grader_children():
    """(pid, command line) of every live child process of a grader (`grade.py ... --role`), read once from /proc."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = f.read().decode("utf-8", "replace")
            with open("/proc/%s/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if "grade.py" in cmdline and "--role" in cmdline and state != "Z":
            found.append((int(pid), cmdline))
    return found


def run_two_at_a_time(calls):
    """The results of the argument-less `calls`, run two at a time (each waits on child processes)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return [future.result() for future in [pool.submit(call) for call in calls]]


# Workers that the grader's containment and class tests write: the kit's functions, some of them replaced.

KIT_WORKER = """import os, signal, sys, time
sys.path.insert(0, %r)
from outbox import dispatch, init_store as kit_init_store, intake, mark_sent, pending, send_http, validate_event
from sink import init_sink, receive

def init_store(path):
    return kit_init_store(path)
""" % ROOT


def write_worker(path, body="", *, kit=True):
    """Write a worker module at `path` (folders made as needed): the kit's functions, then `body` (dedented)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write((KIT_WORKER if kit else "") + textwrap.dedent(body))
    return path


def read_rows(path, sql):
    """The rows `sql` reads from the SQLite file at `path`, through a read-only connection of the test's own."""
    con = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()
