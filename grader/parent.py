"""The parent side's machinery: child processes, loopback servers of the grader's own, observations.

Never imports the worker or the child side: it starts `grade.py --role ...`
children, reads their protocol lines, and reads the DBs through read-only
connections of its own.
"""
import contextlib
import http.server
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading

from .common import MARK, SNACK, Fail, expect, msg, read_only, wrong_class

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTRY = os.path.join(ROOT, "grade.py")


class GraderError(Exception):
    """The grader itself cannot go on (no writable temporary directory, say): not the worker's fault."""


class Processes:
    """Every child the grader starts, so that none outlives it (timeouts, Ctrl-C, SIGTERM)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._live = set()
        self.stopping = False

    def start(self, cmd, env):
        with self._lock:
            if self.stopping:
                raise Fail(msg("grader.keeps-running"), msg("grader.interrupted"))
            proc = subprocess.Popen(
                cmd, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                universal_newlines=True, start_new_session=True,
            )
            self._live.add(proc)
        return proc

    def kill(self, proc):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # its whole session: the child and anything it started
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        with self._lock:
            self._live.discard(proc)

    def forget(self, proc):
        with self._lock:
            self._live.discard(proc)

    def kill_all(self):
        with self._lock:
            self.stopping = True
            live = list(self._live)
        for proc in live:
            self.kill(proc)


PROCESSES = Processes()


def close_pipes(proc):
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


class Run:
    """What one child did: exit status, its protocol lines, the tail of its stderr."""

    def __init__(self, what, status, lines, stderr, timed_out=None):
        self.what = what  # a message: "publisher #1"
        self.status = status
        self.lines = lines
        self.stderr = stderr
        self.timed_out = timed_out  # the time bound it ran past, or None

    def first(self, kind):
        return next((line for line in self.lines if line.get("kind") == kind), None)

    def all(self, kind):
        return [line for line in self.lines if line.get("kind") == kind]

    def summary(self):
        """A message saying why this child did not do what it should have."""
        if self.timed_out is not None:
            return msg("run.timed-out", what=self.what, seconds="%g" % self.timed_out)
        verdict = self.first("verdict")
        if verdict and not verdict["ok"]:
            return msg("run.verdict", what=self.what, expected=verdict["expected"], observed=verdict["observed"])
        error = self.first("error")
        if error and error.get("function"):
            return msg("run.raised-in", what=self.what, function=error["function"], error=error["message"])
        if error:
            return msg("run.raised", what=self.what, error=error["message"])
        tail = self.stderr.strip().splitlines()[-1:] if self.stderr.strip() else []
        if tail:
            return msg("run.exit-said", what=self.what, status=self.status, said=tail[0][:200])
        return msg("run.exit", what=self.what, status=self.status)


def parse_lines(stdout):
    lines = []
    for raw in stdout.splitlines():
        if raw.startswith(MARK):
            with contextlib.suppress(ValueError):
                lines.append(json.loads(raw[len(MARK):]))
    return lines


def make_temp_dir():
    """The grader's temporary directory: in $TMPDIR exactly when it is set, else the system's.

    A TMPDIR that cannot be written is the user's choice gone wrong, not a
    reason to write elsewhere: GraderError.
    """
    where = os.environ.get("TMPDIR") or None
    try:
        return tempfile.mkdtemp(prefix="outbox-grade-", dir=where)
    except OSError as exc:
        raise GraderError(msg("grader.no-temp", where=where or tempfile.gettempdir(), error=str(exc)))


class Grader:
    """Runs checks for one implementation; owns the temp dir and the child command line."""

    def __init__(self, impl, timeout, keep):
        self.impl = impl
        self.timeout = timeout
        self.tmp = make_temp_dir()
        self.keep = keep
        self.evidence = {}

    def close(self):
        if not self.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def workdir(self, name):
        path = os.path.join(self.tmp, name)
        os.mkdir(path)
        return path

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        env.pop("PYTHONPATH", None)
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # leave no __pycache__ beside the worker
        env.update(extra)
        return env

    def command(self, role, needs, *args):
        return [sys.executable, ENTRY, "--role", role, "--parent", str(os.getpid()), "--impl", self.impl,
                "--needs", ",".join(needs)] + list(args)

    def for_check(self, check):
        """What one check's scenario uses: this grader, with the worker functions that check needs."""
        return CheckContext(self, check.name, check.needs)

    def run(self, what, role, needs, *args, env=None):
        """Run a child to completion within the time bound; never raises for the child's sake."""
        proc = PROCESSES.start(self.command(role, needs, *args), env or self.env())
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            PROCESSES.kill(proc)
            proc.communicate()  # the pipes' last bytes, then they are closed
            return Run(what, None, [], "", timed_out=self.timeout)
        PROCESSES.forget(proc)
        return Run(what, proc.returncode, parse_lines(out), err[-4000:])

    @contextlib.contextmanager
    def sink(self, db, needs, fault=None):
        """The implementation's init_sink/receive behind the kit's HTTP server, in a process of its own."""
        args = ["--db", db, "--timeout", "%g" % min(self.timeout, 5.0)] + (["--fault", fault] if fault else [])
        proc = PROCESSES.start(self.command("sink", needs, *args), self.env())
        handle = SinkProcess(proc)
        try:
            handle.url = handle.wait_listening(self.timeout)
            yield handle
        finally:
            handle.stop(self.timeout)


class CheckContext:
    """One check's view of the Grader: its own work folder, and children that load what it needs."""

    def __init__(self, grader, name, needs):
        self.grader, self.name, self.needs = grader, name, needs
        self.timeout = grader.timeout

    def workdir(self):
        return self.grader.workdir(self.name)

    def env(self, **extra):
        return self.grader.env(**extra)

    def run(self, what, role, *args, env=None):
        return self.grader.run(what, role, self.needs, *args, env=env)

    def sink(self, db, fault=None):
        return self.grader.sink(db, self.needs, fault=fault)

    def story(self, source, sink_db):
        return Story(self.grader, self.name, source, sink_db)


class SinkProcess:
    """A running `--role sink` child: its address once it listens, its exit status once it stops."""

    def __init__(self, proc):
        self.proc = proc
        self.url = None
        self.status = None
        self._lines = []
        self._stderr = []
        self._ready = threading.Event()
        self._readers = [threading.Thread(target=self._read, args=(proc.stdout, self._lines), daemon=True),
                         threading.Thread(target=self._read, args=(proc.stderr, self._stderr), daemon=True)]
        for reader in self._readers:
            reader.start()

    def _read(self, stream, into):
        for raw in stream:
            into.append(raw)
            if raw.startswith(MARK):
                self._ready.set()
        self._ready.set()  # EOF: the process is gone

    def wait_listening(self, timeout):
        self._ready.wait(timeout)
        lines = parse_lines("".join(self._lines))
        for line in lines:
            if line.get("kind") == "listening":
                return line["url"] + "/events"
        reason = next((line for line in lines if line.get("kind") in ("verdict", "error")), None)
        if reason and reason["kind"] == "verdict":
            raise Fail(reason["expected"], msg("sink.said", observed=reason["observed"]))
        if reason:
            raise Fail(msg("sink.starts"), msg("sink.raised", error=reason["message"]))
        raise Fail(msg("sink.listens", seconds="%g" % timeout), msg("sink.no-address", tail=self.tail()))

    def tail(self):
        text = "".join(self._stderr).strip().splitlines()
        return text[-1][:200] if text else "-"

    def wait_exit(self, timeout):
        try:
            self.status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.status = None
        return self.status

    def stop(self, timeout):
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        PROCESSES.kill(self.proc)
        # The process is gone, so both readers reach EOF; only then close the pipes they read.
        for reader in self._readers:
            reader.join(5)
        close_pipes(self.proc)


class FakeSink:
    """A loopback HTTP server of the grader's own that answers with a fixed behaviour.

    `answer(event_id) -> (status, headers, body bytes)`; `hits` lists every
    request that reached it, whatever its path or method (a trap must see none).
    """

    def __init__(self, answer=None):
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
                status, headers, payload = answer(event_id) if answer else (502, [], b'{"error": "trap"}')
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

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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


TRICKLE_INTERVAL = 0.2  # seconds between two bytes of the trickled answer


class TrickleSink:
    """A loopback server that answers a perfect ACK one byte every TRICKLE_INTERVAL.

    The whole answer takes `seconds()` (over 10 s): a sender whose timeout
    bounds only each read, not the exchange, waits all of it.
    """

    def __init__(self):
        body = json.dumps({"ack": True, "id": SNACK["id"], "result": "applied"}).encode()
        self.answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                       b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
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


def observe_source(path, event_id):
    try:
        con = read_only(path)
        try:
            order = con.execute("SELECT count(*) FROM orders WHERE id = ?", (event_id,)).fetchone()[0]
            rows = con.execute("SELECT sent, payload FROM outbox WHERE event_id = ?", (event_id,)).fetchall()
        finally:
            con.close()
    except sqlite3.Error as exc:
        return {"error": msg("db.source-unreadable", error=str(exc))}
    except Fail as exc:
        return {"error": exc.observed}
    outbox = "absent" if not rows else ("sent" if rows[0][0] == 1 else "pending" if rows[0][0] == 0 else repr(rows[0][0]))
    return {"order": order == 1, "outbox": outbox if len(rows) <= 1 else "%d rows" % len(rows),
            "payload": rows[0][1] if rows else None}


def observe_sink(path, event_id, sku):
    try:
        con = read_only(path)
        try:
            inbox = con.execute("SELECT count(*) FROM inbox WHERE event_id = ?", (event_id,)).fetchone()[0]
            outcomes = [r[0] for r in con.execute(
                "SELECT outcome FROM deliveries WHERE event_id = ? ORDER BY rowid", (event_id,))]
            qty = con.execute("SELECT coalesce(sum(qty), 0) FROM inventory WHERE sku = ?", (sku,)).fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error as exc:
        return {"error": msg("db.sink-unreadable", error=str(exc))}
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
        row = {"phase": phase, "order": src["order"], "outbox": src["outbox"], "inbox": snk["inbox"],
               "deliveries": snk["deliveries"], "ack": ack, "inventory": snk["inventory"]}
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
