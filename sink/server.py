"""The sink's HTTP boundary: connections, POST /events, GET /health and GET /metrics.

Owns the listening socket, every client connection until it is closed, and
the one store connection. It never runs SQL of its own and never decides an
outcome: it frames a request (sink.framing), validates the event, calls
`receive` once, and reports what `receive` said. It knows no fault by name:
a wrapper that wants the answer withheld raises WithholdAnswer.

Three kinds of thread, each with one job:
  the reader   (serve_forever) accepts, reads with non-blocking sockets and a
               selector, and buffers each request until its head and its
               Content-Length body are complete or its deadline passes. An
               idle or trickling client costs a buffer, never a thread.
  the workers  (WORKERS threads) take complete requests, answer each in ONE
               write, and close the connection.
  the store    (one thread) opens the store connection once and runs every
               `receive` on it, one at a time: SQLite serialises writers
               anyway, a foreign `receive` never sees two threads on its
               connection, and the WAL is never checkpointed away between
               requests because the connection stays open until stop().
One request per connection; every answer says ``Connection: close``.
"""

import collections
import concurrent.futures
import email.utils
import errno
import functools
import json
import select
import selectors
import socket
import sqlite3
import threading
import time
import traceback
from http import HTTPStatus

from outbox.db import check_durability
from outbox.errors import Conflict, InvalidEvent
from outbox.event import loads_strict, validate_event

from . import framing, inbox, metrics
from .framing import MAX_BODY, STATUS, Refused  # noqa: F401  (MAX_BODY and STATUS are part of this module's API)

EVENTS_PATH = "/events"
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
# path -> the one method it serves. A new GET route is one line here plus one
# branch in SinkServer.respond.
ALLOWED = {EVENTS_PATH: "POST", HEALTH_PATH: "GET", METRICS_PATH: "GET"}
DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_CONNECTIONS = 64
LISTEN_BACKLOG = 128
WORKERS = 4  # answering is short: a JSON parse, a wait for the store thread, one write
ACCEPTS_PER_WAKE = 64  # so a burst of connections cannot starve the reads of the others
RESUME_AFTER = 0.1  # seconds the listener rests when accept fails with no connection to close
RECV_SIZE = 65536
RESULTS = (inbox.APPLIED, inbox.DUPLICATE)
SERVER_NAME = "outbox-kit-sink/1"
PROTOCOL = "HTTP/1.0"
# accept() failing with one of these means "out of descriptors or memory", not
# "this client is bad": closing a connection, or waiting, is the cure; retrying at once is a spin.
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class WithholdAnswer(Exception):
    """Raised by a `receive` wrapper: close the connection and send no byte of an answer."""


Answer = collections.namedtuple("Answer", "status body content_type allow")
Answer.__new__.__defaults__ = ("application/json", None)
Answer.__doc__ = """What a request gets: a status, a body (dict -> JSON, str -> text), its type and any Allow."""


def make_server(
    db_path,
    host="127.0.0.1",
    port=0,
    *,
    timeout=DEFAULT_TIMEOUT,
    fault=None,
    fault_count=1,
    init_sink=None,
    receive=None,
    log=None,
    max_connections=DEFAULT_MAX_CONNECTIONS,
    durability="full",
):
    """Return a SinkServer bound and listening on (host, port), NOT yet serving.

    Call `start()` (serves in a daemon thread) or `serve_forever()`, and at the
    end `stop()` (or `shutdown()` then `server_close()`). `server_address`
    holds the real port when `port` is 0. `init_sink(db_path)` and
    `receive(con, event)` default to sink.inbox's; `init_sink` is called once,
    here, and its connection is held until stop(), so a foreign or unusable DB
    raises (WrongDatabase) now rather than at the first request. `timeout`
    (seconds, > 0) is the time a client has, from being accepted, to send its
    whole request, and again to take the answer. `max_connections` (int >= 1)
    caps the client connections open at once; at the cap, the one that has
    waited longest without a complete request is closed to make room.
    `fault` is a name from sink.faults.NAMES hitting the first `fault_count`
    valid events. `log(line)`, if given, receives one line per request and
    any internal error; by default nothing is printed. `durability` ("full" or
    "process", see outbox.db.DURABILITY) is passed to the kit's own
    `init_sink`; with a foreign `init_sink` it must stay "full" (ValueError).
    """
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise ValueError("timeout must be a number of seconds > 0, got %r" % (timeout,))
    if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
        raise ValueError("max_connections must be an int >= 1, got %r" % (max_connections,))
    # The ACK's digest is read only from the kit's own store (whatever `receive`
    # runs on it): a foreign store's inbox may hold a digest of another form,
    # which the publisher would refuse although the payloads agree.
    own_store = init_sink is None
    check_durability(durability)
    if not own_store and durability != "full":
        raise ValueError("durability %r applies to the kit's own store; a foreign init_sink sets its own" % durability)
    open_store = init_sink if init_sink is not None else functools.partial(inbox.init_sink, durability=durability)
    receive = receive if receive is not None else inbox.receive
    if fault is not None:
        from . import faults  # only here: a server without a fault never loads the fault code

        receive = faults.FaultyReceive(receive, fault, count=fault_count)
    listener = _listen(host, port)
    try:
        store = StoreThread(open_store, db_path)
    except BaseException:
        listener.close()
        raise
    return SinkServer(
        listener,
        store=store,
        receive=receive,
        held_digest=inbox.held_digest if own_store else None,
        timeout=float(timeout),
        max_connections=max_connections,
        log=log,
    )


def _listen(host, port):
    # No getfqdn(host) as http.server does: that reverse DNS lookup may leave this machine.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(LISTEN_BACKLOG)
        listener.setblocking(False)
    except BaseException:
        listener.close()
        raise
    return listener


class StoreThread:
    """The one thread that holds the store connection and runs every call on it, in turn.

    `open_store(db_path)` runs on that thread now; its exception, if any, is
    raised here. `call(fn, *args)` runs ``fn(con, *args)`` there and returns
    or raises what it did. `close()` closes the connection on its own thread
    (sqlite3 insists) and ends the thread.
    """

    def __init__(self, open_store, db_path):
        self._thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sink-store")
        try:
            self._con = self._thread.submit(open_store, db_path).result()
        except BaseException:
            self._thread.shutdown(wait=True)
            raise

    def call(self, fn, *args):
        return self._thread.submit(fn, self._con, *args).result()

    def close(self):
        try:
            self._thread.submit(self._con.close).result()
        finally:
            self._thread.shutdown(wait=True)


class _Client:
    """A connection still sending its request: its socket, buffer and deadline."""

    __slots__ = ("sock", "address", "deadline", "buffer", "head", "body_at", "length")

    def __init__(self, sock, address, deadline):
        self.sock = sock
        self.address = address
        self.deadline = deadline
        self.buffer = bytearray()
        self.head = None  # a framing.Head once the blank line has arrived
        self.body_at = 0  # where the body starts in buffer
        self.length = 0  # the body length the head declared


class SinkServer:
    """The sink's HTTP server; build it with `make_server`."""

    request_queue_size = LISTEN_BACKLOG  # a burst of connections waits in the backlog, not refused

    def __init__(self, listener, *, store, receive, held_digest, timeout, max_connections, log):
        self.socket = listener
        self.server_address = listener.getsockname()
        self.request_timeout = timeout
        self.max_connections = max_connections
        self.receive = receive
        self.log = log
        self._store = store
        self._held_digest = held_digest
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._selector.register(listener, selectors.EVENT_READ)
        self._listening = True
        self._resume_at = None  # when a listener paused with nothing to close listens again
        self._waiting = collections.OrderedDict()  # fd -> _Client, oldest first (= earliest deadline)
        self._lock = threading.Lock()
        self._in_hand = 0  # connections handed to the workers and not yet closed; under _lock
        self._workers = concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="sink-worker")
        self._stop_requested = False
        self._ran = False
        self._stopped = threading.Event()  # set when serve_forever has returned
        self._serving = None
        self._closed = False

    def url(self):
        host, port = self.server_address[:2]
        return "http://%s:%d" % ("[%s]" % host if ":" in host else host, port)

    def start(self):
        """Serve in a daemon thread; return self."""
        self._serving = threading.Thread(target=self.serve_forever, name="sink-reader", daemon=True)
        self._serving.start()
        return self

    def stop(self):
        """Stop accepting, close idle connections at once, finish the requests in hand, close everything."""
        self.shutdown()
        self.server_close()

    def shutdown(self):
        """Make serve_forever return (at once, whatever the clients do) and wait for it."""
        self._stop_requested = True
        self._wake()
        if self._serving is not None:
            self._serving.join()
        elif self._ran:
            self._stopped.wait()

    def server_close(self):
        """Close the listener and every waiting client; wait for the answers in hand; close the store."""
        if self._closed:
            return
        self._closed = True
        self.socket.close()
        for client in self._waiting.values():
            client.sock.close()
        self._waiting.clear()
        # Each request in hand is bounded: receive by SQLite's busy timeout, the answer by the timeout.
        self._workers.shutdown(wait=True)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()
        self._store.close()

    def serve_forever(self, poll_interval=None):
        """Accept and read until shutdown(); `poll_interval` is accepted for http.server's callers and unused.

        On shutdown: stop accepting, close at once every client that has not
        sent a complete head (idle, trickling), and keep reading only the
        bodies of requests already in hand, each until its own deadline.
        """
        self._ran = True
        try:
            while not self._stop_requested:
                self._serve_once()
            self._stop_listening()
            for client in list(self._waiting.values()):
                if client.head is None:
                    self._drop(client)
            while self._waiting:
                self._serve_once()
        finally:
            for client in self._waiting.values():
                client.sock.close()
            self._waiting.clear()
            self._stopped.set()

    def _serve_once(self):
        now = time.monotonic()
        # Every client gets the same timeout, so the oldest has the earliest deadline.
        deadlines = [next(iter(self._waiting.values())).deadline] if self._waiting else []
        if self._resume_at is not None:
            deadlines.append(self._resume_at)
        wait = max(0.0, min(deadlines) - now) if deadlines else None
        for key, _ in self._selector.select(wait):
            if key.fileobj is self.socket:
                self._accept()
            elif key.fileobj is self._wake_r:
                self._drain_wake()
            else:
                self._read(key.data)
        self._expire(time.monotonic())
        if not self._listening and not self._stop_requested and self._open() < self.max_connections:
            if self._resume_at is None or time.monotonic() >= self._resume_at:
                self._start_listening()

    # -- connections ---------------------------------------------------------------------------

    def _open(self):
        with self._lock:
            return len(self._waiting) + self._in_hand

    def _accept(self):
        for _ in range(ACCEPTS_PER_WAKE):
            if self._open() >= self.max_connections and not self._waiting:
                # Every slot holds a request in hand: new clients wait in the backlog until one is answered.
                self._stop_listening()
                return
            try:
                sock, address = self.socket.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.ECONNABORTED:
                    continue  # that client gave up while in the backlog; the next one is unaffected
                if exc.errno in _OUT_OF_RESOURCES:
                    # Linux takes the descriptor before it looks at the backlog, so
                    # EMFILE also comes when no one is there: close no one for that.
                    if not self._client_in_backlog():
                        return
                    # Someone is: free a descriptor and try again.
                    if self._make_room("accept failed: %s" % exc.strerror):
                        continue
                # Anything else, or nothing to free: rest the listener. Never retry at once: that is a spin.
                self.log_line("accept failed: %s; listening again in %gs" % (exc, RESUME_AFTER))
                self._stop_listening(resume_after=RESUME_AFTER)
                return
            if self._open() >= self.max_connections:
                self._make_room("the connection cap")  # someone is waiting: checked above
            sock.setblocking(False)
            client = _Client(sock, address, time.monotonic() + self.request_timeout)
            self._waiting[sock.fileno()] = client
            self._selector.register(sock, selectors.EVENT_READ, client)

    def _client_in_backlog(self):
        """True if a connection waits to be accepted; asks without a new descriptor (none may be left)."""
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(self.socket, select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([self.socket], [], [], 0)[0])

    def _make_room(self, why):
        """Close the client that has waited longest without a complete request; False if there is none."""
        if not self._waiting:
            return False
        _, oldest = self._waiting.popitem(last=False)
        self._selector.unregister(oldest.sock)
        oldest.sock.close()
        self.log_line("%s - closed without an answer to make room (%s)" % (oldest.address[0], why))
        return True

    def _stop_listening(self, resume_after=None):
        if self._listening and not self._closed:
            self._selector.unregister(self.socket)
        self._listening = False
        self._resume_at = None if resume_after is None else time.monotonic() + resume_after

    def _start_listening(self):
        self._selector.register(self.socket, selectors.EVENT_READ)
        self._listening = True
        self._resume_at = None

    def _wake(self):
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):
            pass  # a byte is already waiting, or the server is closed: the reader wakes or is gone

    def _drain_wake(self):
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _read(self, client):
        try:
            data = client.sock.recv(RECV_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = None  # reset by the client: nothing to answer
        if not data:
            refusal = None if data is None else self._refusal_at_end(client)
            if refusal is None:
                self._drop(client)
            else:
                self._hand_over(client, refusal=refusal)
            return
        client.buffer += data
        try:
            if client.head is None and not self._read_head(client):
                return
        except Refused as refusal:
            self._hand_over(client, refusal=refusal)
            return
        if len(client.buffer) - client.body_at >= client.length:
            self._hand_over(client)

    def _read_head(self, client):
        """True once the head is complete and passed every rule (then the body may follow); else Refused or False."""
        framing.check_start(client.buffer)
        end = framing.head_end(client.buffer)
        if end == -1:
            return False
        head = framing.parse_head(bytes(client.buffer[:end]))
        client.head = head
        client.body_at = end
        allowed = ALLOWED.get(head.target)
        if allowed is None:
            raise Refused(
                "no-such-path",
                "no such path %r: the sink serves only POST /events and GET /health" % head.target,
            )
        if head.method != allowed:
            raise Refused(
                "wrong-method",
                "method %s is not allowed on %s; use %s" % (head.method, head.target, allowed),
                allow=allowed,
            )
        if head.method == "POST":
            client.length = framing.body_length(head)
            framing.check_json_type(head)
        return True

    def _refusal_at_end(self, client):
        """What a client that closed its side early is told; None when it sent nothing at all."""
        if client.head is not None:
            return Refused(
                "invalid",
                "body incomplete: %d of %d bytes (Content-Length) before the client closed"
                % (len(client.buffer) - client.body_at, client.length),
            )
        if client.buffer:
            return Refused("invalid", "request head incomplete: the client closed before the blank line")
        return None

    def _expire(self, now):
        while self._waiting:
            client = next(iter(self._waiting.values()))
            if client.deadline > now:
                return
            if client.head is not None:
                self._hand_over(
                    client,
                    refusal=Refused(
                        "invalid",
                        "body incomplete: %d of %d bytes (Content-Length) within the %gs request deadline"
                        % (len(client.buffer) - client.body_at, client.length, self.request_timeout),
                    ),
                )
            else:
                # A head that never completed gets no answer: an idle or trickling client is not owed one.
                self.log_line("%s - closed: no complete request within %gs" % (client.address[0], self.request_timeout))
                self._drop(client)

    def _drop(self, client):
        del self._waiting[client.sock.fileno()]
        self._selector.unregister(client.sock)
        client.sock.close()

    def _hand_over(self, client, refusal=None):
        del self._waiting[client.sock.fileno()]
        self._selector.unregister(client.sock)
        with self._lock:
            self._in_hand += 1
        body = None if refusal is not None else bytes(client.buffer[client.body_at:client.body_at + client.length])
        self._workers.submit(self._serve, client.sock, client.address, client.head, body, refusal)

    # -- answers (worker threads) -----------------------------------------------------------------

    def _serve(self, sock, address, head, body, refusal):
        """Answer one request and close its connection; never raises."""
        status = None
        try:
            if refusal is None:
                try:
                    answer = self.respond(head, body)
                except Refused as exc:
                    refusal = exc
            if refusal is not None:
                answer = Answer(refusal.status(), refusal.body(), allow=refusal.allow)
            status = answer.status
            sock.settimeout(self.request_timeout)  # the answer gets a timeout of its own
            sock.sendall(self._encode(answer, head_only=head is not None and head.method == "HEAD"))
        except WithholdAnswer as withheld:
            self.log_line("%s - %s" % (address[0], withheld))
            _shutdown(sock)
        except OSError as exc:
            self.log_line("%s - answer not delivered: %s" % (address[0], exc))
        except Exception:
            self.log_line("%s - unhandled error:\n%s" % (address[0], traceback.format_exc().rstrip()))
        finally:
            sock.close()
            with self._lock:
                self._in_hand -= 1
            self._wake()  # a slot is free: a paused listener may listen again
        if status is not None:
            line = head.request_line() if head is not None else "-"
            self.log_line('%s - "%s" %d' % (address[0], line, status))

    def respond(self, head, body):
        """The Answer to a complete request whose route is allowed; Refused for anything untrusted."""
        if head.target == HEALTH_PATH:
            return Answer(HTTPStatus.OK, {"ok": True})
        if head.target == METRICS_PATH:
            return Answer(HTTPStatus.OK, self._metrics(), metrics.CONTENT_TYPE)
        return Answer(HTTPStatus.OK, self._post_event(body))

    def _metrics(self):
        """The deliveries log and inventory as Prometheus text, read on the store thread."""
        try:
            return self._store.call(_metrics_text)
        except sqlite3.Error as exc:  # a foreign store without the columns sink.inbox.status reads
            raise Refused("internal", "internal error: no metrics from this store: %s" % exc) from exc

    def _post_event(self, body):
        event = _parse_event(body)
        try:
            result, held = self._store.call(self._receive_once, event)
        except (WithholdAnswer, Refused):
            raise
        except Exception as exc:
            raise self._refusal_for(exc, event["id"]) from exc
        ack = {"ack": True, "id": event["id"], "result": result}
        if held is not None:
            ack["digest"] = held
        return ack

    def _receive_once(self, con, event):
        """On the store thread: receive, check its result, then read the digest of what the store holds."""
        result = self.receive(con, event)
        if not isinstance(result, str) or result not in RESULTS:
            self.log_line("receive returned %r for event %r" % (result, event["id"]))
            raise Refused(
                "internal", "internal error: receive returned %r, not one of %s" % (result, ", ".join(RESULTS))
            )
        held = self._held_digest(con, event["id"]) if self._held_digest is not None else None
        return result, held

    def _refusal_for(self, exc, event_id):
        # By class name too, so a foreign store with its own Conflict maps the same way.
        if isinstance(exc, Conflict) or type(exc).__name__ == "Conflict":
            self.log_line("conflict: %s" % exc)
            return Refused("conflict", "conflict", event_id=event_id)
        if isinstance(exc, ValueError):
            return Refused("invalid", str(exc))
        self.log_line(
            "receive failed:\n%s" % "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
        )
        return Refused("internal", "internal error: %s: %s" % (type(exc).__name__, exc))

    @staticmethod
    def _encode(answer, *, head_only):
        """Status line, headers and body as ONE bytes object, so the answer leaves in one write."""
        if isinstance(answer.body, dict):
            # The trailing newline keeps `curl` output off the shell prompt.
            data = (json.dumps(answer.body) + "\n").encode("ascii")
        else:
            data = answer.body.encode("utf-8")
        lines = [
            "%s %d %s" % (PROTOCOL, answer.status, HTTPStatus(answer.status).phrase),
            "Server: %s" % SERVER_NAME,
            "Date: %s" % email.utils.formatdate(usegmt=True),
            "Content-Type: %s" % answer.content_type,
            "Content-Length: %d" % len(data),
        ]
        if answer.allow is not None:
            lines.append("Allow: %s" % answer.allow)
        lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head if head_only else head + data

    def log_line(self, line):
        if self.log is not None:
            self.log(line)


def _metrics_text(con):
    return metrics.render(inbox.status(con))


def _parse_event(body):
    try:
        value = loads_strict(body)
    except UnicodeDecodeError as exc:
        raise Refused("invalid", "body is not UTF-8: %s" % exc) from None
    except (ValueError, RecursionError) as exc:
        raise Refused("invalid", "body is not valid JSON: %s" % exc) from None
    try:
        return validate_event(value)
    except InvalidEvent as exc:
        raise Refused("invalid", str(exc)) from None


def _shutdown(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already gone: closed just as well
