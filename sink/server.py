"""The sink's HTTP boundary: connections, POST /events, GET /health and GET /metrics.

Owns the listening socket, every client connection until it is closed, and,
through sink.storethread, the one store connection. It never parses HTTP (a framing.Reader per
connection does), never runs SQL of its own and never decides an outcome: it
moves bytes into each Reader, validates the event, and hands it to
sink.core.ack, which calls `receive` once and makes the ACK from its result. It knows no fault by name: a wrapper that wants
the answer withheld raises WithholdAnswer.

Three kinds of thread, each with one job:
  the reader   (serve_forever) accepts, reads with non-blocking sockets and a
               selector, and moves clients between states: waiting (its
               Reader needs more), in hand (handed to a worker), closed. An
               idle or trickling client costs a buffer, never a thread; an
               error of one client closes that client, never the loop.
  the workers  (WORKERS threads) take complete requests, answer each in ONE
               write without waiting, and close the connection, or hand a
               kept one back to the reader (below). What a slow reader leaves
               of an answer is handed back too: the reader thread writes the
               rest by its deadline, then closes it (or reads a kept one again).
  the store    (one thread, sink.storethread) opens the store connection
               once and runs every `receive` on it, one at a time: SQLite
               serialises writers anyway, a foreign `receive` never sees two
               threads on its connection, and the WAL is never checkpointed
               away between requests because the connection stays open
               until stop().
All are daemon threads: a `receive` that never returns cannot hold the process
up. Fail loud: if one of them dies, `failure` says which and why, every request
still answered gets 503, stop() raises it, and `python -m sink serve` exits 70.
One request per connection, with one exception: an HTTP/1.1 request that
asks for ``Connection: keep-alive`` (the kit's relay does), framed exactly and
answered 200, gets ``HTTP/1.1 ... Connection: keep-alive`` and its connection
goes back to the reader with a fresh framing.Reader, as a new client would:
the same deadline, the same cap, nothing carried over from the last request.
At most KEPT_REQUESTS requests ride one connection: the last one's answer
says ``Connection: close``, so a client that keeps asking cannot hold a slot
for ever (each answer's fresh deadline bounds the idle time, this the life).
An idle kept connection waits in line for room like any other: it goes to
the back of the line when it is read again, and the line's front (the one
that has waited longest) is closed first. Every other answer says
``Connection: close``.
"""

import collections
import email.utils
import errno
import functools
import json
import queue
import select
import selectors
import socket
import sqlite3
import threading
import time
import traceback
from http import HTTPStatus

from outbox.core.db import check_durability
from outbox.core.errors import Conflict, InvalidEvent, OutboxError
from outbox.core.event import loads_strict, validate_event

from . import framing, logqueue, metrics, readings, views
from .core import ack, inbox
from .storethread import StoreGone, StoreThread, exception_line
from .framing import NEED_MORE, Refused, Unanswered
from .framing import MAX_BODY, STATUS  # noqa: F401  (part of this module's API)

EVENTS_PATH = "/events"
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
# path -> the one method it serves. A new route is one line here plus one
# branch in SinkServer.respond: the 404 text and `python -m sink serve --help`
# name the routes from this table.
ALLOWED = {EVENTS_PATH: "POST", HEALTH_PATH: "GET", METRICS_PATH: "GET"}  # audit: G28
ROUTES_TEXT = framing.routes_text(ALLOWED)  # "POST /events, GET /health and GET /metrics"
DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_CONNECTIONS = 64
KEPT_REQUESTS = 1000  # requests one kept-alive connection may carry; its last answer says close
# The listen backlog: at least the cap, and the system's own maximum where that is larger (the kernel
# clamps it to its limit, net.core.somaxconn on Linux). A fixed 128 made complete requests above the cap
# meet the 1 s SYN retransmit when a burst overflowed it.
MIN_LISTEN_BACKLOG = max(128, socket.SOMAXCONN)
WORKERS = 4  # answering is short: a JSON parse, a wait for the store thread, one write
# Accepts per wake of the reader, so a burst of connections cannot starve the
# reads of the others; at most half the cap, so a client accepted in a burst
# is read before the same burst can evict it to make room.
ACCEPTS_PER_WAKE = 64
RESUME_AFTER = 0.1  # seconds the listener rests when accept fails with no connection to close
STOP_GRACE = 0.5  # seconds stop() waits past the request timeout before it abandons what still runs
RECV_SIZE = 65536
RESULTS = ack.RESULTS
SERVER_NAME = "outbox-kit-sink/1"
PROTOCOL = "HTTP/1.0"
# The interim answer to `Expect: 100-continue` (an HTTP/1.1 client's, see
# framing.Reader.wants_continue); 1xx exists only from HTTP/1.1 on.
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
# accept() failing with one of these means "out of descriptors or memory", not
# "this client is bad": closing a connection, or waiting, is the cure; retrying at once is a spin.
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
# The lines an attack repeats by the thousand, summed per logqueue.INTERVAL: kind -> (verb, what) of the summary.
REPEATED = {
    "room": ("closed", "connection(s) without an answer to make room"),
    "cut": ("cut", "answer(s) short to make room"),
    "expired": ("closed", "connection(s) with no complete request within the timeout"),
}


class WithholdAnswer(Exception):
    """Raised by a `receive` wrapper: close the connection and send no byte of an answer."""


class ThreadDied(RuntimeError):
    """A thread of the server died: `thread` names it ("reader", "store" or "worker"), __cause__ is what it raised."""

    thread = None


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
    `receive(con, event)` default to sink.core.inbox's; `init_sink` is called once,
    here, and its connection is held until stop(), so a foreign or unusable DB
    raises (WrongDatabase) now rather than at the first request. `timeout`
    (seconds, > 0) is the time a client has, from being accepted, to send its
    whole request, and again to take the answer; stop() returns within
    `timeout` + 1 s. `max_connections` (int >= 1) caps the client connections
    open at once; at the cap, the one that has waited longest without a
    complete request is closed to make room. `fault` is a name from
    sink.faults.NAMES hitting the first `fault_count` valid events.
    `log(line)`, if given, receives one line per request, one per fault that
    fires and per client closed unanswered, and every internal error with its
    traceback; by default nothing is printed. It is called from every thread
    of the server; an Exception it raises loses that line and nothing else.
    `durability` ("full" or "process", see outbox.core.db.DURABILITY) is passed to
    the kit's own `init_sink`; with a foreign `init_sink` it must stay "full"
    (ValueError).
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
    if fault is not None:  # audit: G35
        from . import faults  # only here: sink.server needs it only for a fault (python -m sink loads it for --fault)

        # A log with a drain() (sink.logqueue.QueuedLog) writes the fault's line out before a crash fault exits.
        drain = getattr(log, "drain", None)
        receive = faults.FaultyReceive(receive, fault, count=fault_count, log=functools.partial(_log_to, log),
                                       before_exit=None if drain is None else functools.partial(drain, 1.0))
    listener = _listen(host, port, backlog=max(max_connections, MIN_LISTEN_BACKLOG))
    try:
        store = StoreThread(open_store, db_path)  # audit: G25
    except BaseException:
        listener.close()
        raise
    try:
        return SinkServer(
            listener,
            store=store,
            receive=receive,
            # The kit's own store is read off the store thread (sink.readings); a foreign one has its own form.
            reads=readings.Readings(db_path) if own_store else None,
            timeout=float(timeout),
            max_connections=max_connections,
            log=log,
        )
    except BaseException:
        listener.close()
        store.close(timeout)
        raise


def _listen(host, port, *, backlog):
    # No getfqdn(host) as http.server does: that reverse DNS lookup may leave this machine.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(backlog)
        listener.setblocking(False)
    except BaseException:
        listener.close()
        raise
    return listener


def _log_to(log, line):
    """Hand `line` to `log`, if any. A log that raises an Exception loses that line, never a client or a thread."""
    if log is not None:
        try:
            log(line)
        except Exception:  # audit: G34
            pass  # a log cannot report its own failure; whatever was logging goes on


class _Client:
    """A connection the reader holds: its socket, its framing.Reader, and whether it is gone from the reader."""

    __slots__ = ("sock", "address", "reader", "gone", "served")

    def __init__(self, sock, address, reader, served=0):
        self.sock = sock
        self.address = address
        self.reader = reader
        self.gone = False  # closed, or handed to a worker: a selector key that still names it is skipped
        self.served = served  # requests this connection carried and had answered before this one (keep-alive)


class _Opened:
    """A worker's word that its read-only connection is open (`error` None) or could not be (`error` why)."""

    __slots__ = ("done", "error")

    def __init__(self):
        self.done = threading.Event()
        self.error = None


class _Sending:
    """An answer the reader thread finishes writing: the part its client has not taken yet, and until when.

    `keep`: the answer said keep-alive, so once it is written whole the
    connection is read again as a new client (never before: no next request
    is read while an answer is still going out).
    """

    __slots__ = ("sock", "address", "rest", "deadline", "keep", "served", "line", "gone")

    def __init__(self, sock, address, rest, deadline, *, keep, served):
        self.sock = sock
        self.address = address
        self.rest = rest  # a memoryview of what is left to write
        self.deadline = deadline
        self.keep = keep
        self.served = served  # requests the connection has carried, this one included
        self.line = None  # the request's log line, written once this ends
        self.gone = False


class SinkServer:
    """The sink's HTTP server; build it with `make_server`."""

    def __init__(self, listener, *, store, receive, reads, timeout, max_connections, log):
        self.socket = listener
        self.server_address = listener.getsockname()
        self.request_timeout = timeout
        self.kept_requests = KEPT_REQUESTS
        self.max_connections = max_connections
        # A burst of connections waits in the backlog, not refused (see MIN_LISTEN_BACKLOG).
        self.request_queue_size = max(max_connections, MIN_LISTEN_BACKLOG)
        self.receive = receive
        self.log = log
        self._store = store
        self._reads = reads
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._selector.register(listener, selectors.EVENT_READ)
        self._listening = True
        self._resume_at = None  # when a listener paused with nothing to close listens again
        self._repeats = logqueue.Repeats(REPEATED)  # the reader thread's repeated lines, summed
        # Clients keyed by the _Client itself, which a close does not change (a socket's
        # fileno() becomes -1); oldest first, which is also earliest deadline first.
        self._waiting = collections.OrderedDict()
        # Answers being finished by the reader thread (_Sending), oldest first, which is earliest deadline first;
        # workers hand them over through _handed_back.
        self._sending = collections.OrderedDict()
        self._handed_back = queue.SimpleQueue()
        self._accepts_per_wake = min(ACCEPTS_PER_WAKE, max(1, max_connections // 2))
        self._lock = threading.Lock()
        self._in_hand = set()  # sockets handed to the workers and not yet closed; under _lock
        self._failure = None  # the first ThreadDied; under _lock
        self._jobs = queue.SimpleQueue()
        self._kept = queue.SimpleQueue()  # (sock, address) answered whole with keep-alive, back to the reader
        # Each worker opens its read-only connection before the server serves anyone, and make_server waits
        # for them: those descriptors are taken before clients can use them up, and a DB the workers cannot
        # read is refused here, not answered 500 at the first request.
        opened = [_Opened() for _ in range(WORKERS)]
        self._workers = [
            threading.Thread(target=self._work, args=(opened[n],), name="sink-worker-%d" % n, daemon=True)
            for n in range(WORKERS)
        ]
        for worker in self._workers:
            worker.start()
        for one in opened:
            one.done.wait()
        errors = [one.error for one in opened if one.error is not None]
        if errors:
            for _ in self._workers:
                self._jobs.put(None)
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()
            raise errors[0]
        store.on_death = functools.partial(self._fail, "store")
        self._stop_requested = False
        self._give_up = None  # when stop() abandons what still runs
        self._ran = False
        self._stopped = threading.Event()  # set when serve_forever has returned
        self._serving = None
        self._closed = False

    def url(self):
        host, port = self.server_address[:2]
        return "http://%s:%d" % ("[%s]" % host if ":" in host else host, port)

    @property
    def failure(self):
        """None while every thread of the server lives; else the ThreadDied of the first to die.

        From then on every request that is still answered gets 503 (GET /health
        included), and stop() raises it once everything is closed.
        """
        return self._failure

    def start(self):
        """Serve in a daemon thread; return self."""
        self._serving = threading.Thread(target=self._serve_in_thread, name="sink-reader", daemon=True)
        self._serving.start()
        return self

    def stop(self):
        """Stop serving and close everything; return within the request timeout + 1 s, whatever clients or receive do.

        At once: stop accepting, close every connection that has not sent a
        complete head (idle, trickling). Then a body already arriving gets
        until its own deadline (at most the timeout from now), and every
        request in hand is answered. What still runs at the timeout +
        STOP_GRACE (a `receive` that does not return) is abandoned and logged:
        its client's connection is shut, its thread left to end on its own,
        the store connection left open until the process ends. Raises
        ThreadDied, once all is closed, if a thread of the server died.
        """
        self.shutdown()  # audit: G32
        self.server_close()
        if self._failure is not None:
            raise self._failure  # audit: G33

    def shutdown(self):
        """Make serve_forever return and wait for it: at once for idle clients, by their deadlines for bodies."""
        if self._give_up is None:
            self._give_up = time.monotonic() + self.request_timeout + STOP_GRACE  # audit: G32
        self._stop_requested = True
        self._wake()
        if self._serving is not None:
            self._serving.join(max(0.0, self._give_up - time.monotonic()))
        elif self._ran:
            self._stopped.wait(max(0.0, self._give_up - time.monotonic()))

    def server_close(self):
        """Close the listener and waiting clients; wait (bounded, see stop) for the answers in hand; close the store."""
        if self._closed:
            return
        self._closed = True
        give_up = self._give_up if self._give_up is not None else time.monotonic() + self.request_timeout + STOP_GRACE
        self.socket.close()
        for client in list(self._waiting):
            self._close(client)
        for _ in self._workers:
            self._jobs.put(None)
        for worker in self._workers:
            worker.join(max(0.0, give_up - time.monotonic()))  # audit: G32
        busy = [worker.name for worker in self._workers if worker.is_alive()]  # audit: G32
        if busy:
            with self._lock:
                for sock in self._in_hand:
                    _shutdown(sock)  # its client hears the end now, not when the stuck call returns
                held = len(self._in_hand)
            self.log_line(
                "stop: %s still busy at the stop deadline with %d connection(s) in hand (a receive that does not "
                "return?): those connections are shut and the threads abandoned" % (", ".join(busy), held)
            )
        while True:  # answers handed back after the reader ended: it will not finish them
            try:
                self._sending[self._handed_back.get_nowait()] = None
            except queue.Empty:
                break
        for sending in list(self._sending):
            self._finish(sending, "answer not delivered: the sink stopped before the client took it")
        self._take_back()  # closes what a worker kept after the reader stopped taking them back
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()
        if not self._store.close(max(0.0, give_up - time.monotonic())):
            self.log_line("stop: the store thread is still inside a call at the stop deadline: abandoned, "
                          "its connection open until the process ends")

    def serve_forever(self, poll_interval=None):
        """Accept and read until shutdown(); `poll_interval` is accepted for http.server's callers and unused.

        No client ends this loop: an error of one client closes that client.
        Anything that still escapes is a failure of the reader itself: it is
        recorded (`failure`), the listener is closed so new clients are refused
        rather than left waiting, and it is raised here.
        On shutdown: stop accepting, close at once every client that has not
        sent a complete head (idle, trickling), and keep reading only the
        bodies of those whose head is in, each until its own deadline.
        """
        self._ran = True
        try:
            while not self._stop_requested:
                self._serve_once()
            self._stop_listening()
            for client in list(self._waiting):
                if client.reader.head is None:  # audit: G32
                    self._close(client)
            give_up = self._give_up if self._give_up is not None else float("inf")
            # Bodies still arriving, requests in hand, answers being finished: each by its deadline, all by give_up.
            while self._open() and time.monotonic() < give_up:
                self._serve_once()
        except BaseException as exc:
            self.socket.close()  # first, so that once `failure` is set no new client is left waiting
            self._fail("reader", exc)  # audit: G33
            raise
        finally:
            for client in list(self._waiting):
                self._close(client)
            self._take_handed_back()
            for sending in list(self._sending):
                self._finish(sending, "answer not delivered: the sink stopped before the client took it")
            for line in self._repeats.due(time.monotonic(), every=True):
                self.log_line(line)
            self._stopped.set()

    def _serve_in_thread(self):
        try:
            self.serve_forever()
        except BaseException:
            pass  # serve_forever recorded it as `failure` and logged its traceback: no one else to tell

    def _serve_once(self):
        now = time.monotonic()
        # Every client gets the same timeout, so the oldest has the earliest deadline.
        deadlines = [next(iter(self._waiting)).reader.deadline] if self._waiting else []
        if self._sending:
            deadlines.append(next(iter(self._sending)).deadline)
        if self._resume_at is not None:
            deadlines.append(self._resume_at)
        if self._stop_requested and self._give_up is not None:
            deadlines.append(self._give_up)
        if self._repeats.next_due() is not None:
            deadlines.append(self._repeats.next_due())
        wait = max(0.0, min(deadlines) - now) if deadlines else None
        accept = False
        for key, _ in self._selector.select(wait):
            if key.fileobj is self.socket:
                accept = True
            elif key.fileobj is self._wake_r:
                self._drain_wake()
                self._take_back()
            elif key.data.gone:
                pass  # a client closed or handed over earlier in this batch is skipped
            elif isinstance(key.data, _Sending):
                self._send_more(key.data)
            else:
                self._for_client(key.data, self._read)
        self._take_handed_back()
        # Reads first, then accepts: a client whose request is in is handed over before anyone is evicted.
        if accept and self._listening:
            self._accept()
        self._expire(time.monotonic())
        for line in self._repeats.due(time.monotonic()):
            self.log_line(line)
        # Listen again once a slot is free, or once a client holds one that an accept may close to make room
        # (a kept connection back from a worker, idle, or an answer a slow reader takes: in hand when it paused).
        if not self._listening and not self._stop_requested and (
                self._open() < self.max_connections or self._waiting or self._sending):
            if self._resume_at is None or time.monotonic() >= self._resume_at:
                self._start_listening()

    # -- connections (the reader thread) ---------------------------------------------------------

    def _for_client(self, client, step, *args):
        """Run `step(client, *args)`; an error in it closes that client alone, logged, and the loop goes on."""
        try:
            step(client, *args)
        except Exception:
            self.log_line("%s - closed after an internal error:\n%s"
                          % (client.address[0], traceback.format_exc().rstrip()))
            self._close(client)  # audit: G30

    def _open(self):
        """Connections that hold a slot: waiting for their request, in hand, or taking their answer."""
        with self._lock:
            return len(self._waiting) + len(self._in_hand)  # a _Sending's socket stays in _in_hand

    def _accept(self):
        for _ in range(self._accepts_per_wake):
            if self._open() >= self.max_connections and not self._waiting and not self._sending:  # audit: G31
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
            reader = framing.Reader(ALLOWED, time.monotonic() + self.request_timeout, self.request_timeout)
            client = _Client(sock, address, reader)
            self._waiting[client] = None
            self._for_client(client, self._register)

    def _register(self, client):
        client.sock.setblocking(False)
        self._selector.register(client.sock, selectors.EVENT_READ, client)
        self._read(client)  # a client that sent its request with the connect is served without another wake

    def _take_back(self):
        """Read again, as new clients, the connections the workers kept (keep-alive); close them once stopping."""
        while True:
            try:
                sock, address, served = self._kept.get_nowait()
            except queue.Empty:
                return
            self._read_again(sock, address, served)

    def _read_again(self, sock, address, served):
        """A kept connection whose answer is written whole: out of hand, and read as a new client (closed once stopping).

        `served`: the requests it has carried so far (under self.kept_requests).
        """
        with self._lock:
            self._in_hand.discard(sock)
        if self._stop_requested or self._closed:
            sock.close()
            return
        reader = framing.Reader(ALLOWED, time.monotonic() + self.request_timeout, self.request_timeout)
        client = _Client(sock, address, reader, served=served)
        self._waiting[client] = None
        self._for_client(client, self._register)

    def _client_in_backlog(self):
        """True if a connection waits to be accepted; asks without a new descriptor (none may be left)."""
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(self.socket, select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([self.socket], [], [], 0)[0])

    def _make_room(self, why):
        """Close the client that has waited longest without a complete request; False if there is none.

        With none waiting, the client slowest to take its answer is cut
        instead: an answer is idempotent (a publisher that loses an ACK sends
        again, and the inbox makes it a duplicate), a slot held by a reader
        that does not read is not.
        """
        if not self._waiting:
            if not self._sending:
                return False
            cut = next(iter(self._sending))  # audit: G31
            self._finish(cut, "answer cut short to make room (%s)" % why, repeated="cut")
            return True
        oldest = next(iter(self._waiting))  # audit: G31
        self.log_repeated("room", "%s - closed without an answer to make room (%s)" % (oldest.address[0], why))
        self._close(oldest)
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
            self._close(client)  # reset by the client: there is no one to answer
            return
        outcome = client.reader.feed(data) if data else client.reader.eof()
        if outcome is not NEED_MORE:
            self._settle(client, outcome)
        elif client.reader.wants_continue:  # audit: G29
            client.reader.continue_sent()
            try:
                client.sock.send(CONTINUE)
            except OSError:
                pass  # full or gone: the client sends its body after its own wait, or its end is read next

    def _expire(self, now):
        expired = []
        for client in self._waiting:
            if client.reader.deadline > now:
                break
            expired.append(client)
        for client in expired:
            self._for_client(client, self._settle, client.reader.expire(now))  # audit: G30
        late = []
        for sending in self._sending:
            if sending.deadline > now:
                break
            late.append(sending)
        for sending in late:
            self._finish(sending, "answer not delivered: the client did not take it within %gs" % self.request_timeout)

    # -- answers the reader thread finishes -------------------------------------------------------

    def _take_handed_back(self):
        """Watch each answer a worker could not write at once; the reader writes the rest as its client reads."""
        while True:
            try:
                sending = self._handed_back.get_nowait()
            except queue.Empty:
                return
            self._sending[sending] = None
            try:
                self._selector.register(sending.sock, selectors.EVENT_WRITE, sending)
            except (ValueError, OSError) as exc:  # closed under us, or the selector is being torn down
                self._finish(sending, "answer not delivered: %s" % exc)

    def _send_more(self, sending):
        try:
            sent = _send_now(sending.sock, sending.rest)
        except OSError as exc:
            self._finish(sending, "answer not delivered: %s" % exc)
            return
        sending.rest = sending.rest[sent:]
        if not sending.rest:
            self._finish(sending, None)

    def _finish(self, sending, note, *, repeated=None):
        """End an answer the reader was writing, log its request's line.

        Written whole (`note` None) with keep-alive: its connection is read
        again as a new client. Else it is closed and its slot freed.
        """
        if sending.gone:
            return
        sending.gone = True
        self._sending.pop(sending, None)
        kept = note is None and sending.keep
        try:
            self._selector.unregister(sending.sock)
        except (KeyError, ValueError, OSError):
            pass  # never registered, or the selector is being torn down
        finally:
            if not kept:
                sending.sock.close()
                with self._lock:
                    self._in_hand.discard(sending.sock)
        line = sending.line if note is None else "%s %s" % (sending.line, _one_line(note))
        if repeated is not None:
            self.log_repeated(repeated, line)
        else:
            self.log_line(line)  # audit: G34
        if kept:
            self._read_again(sending.sock, sending.address, sending.served)

    def _settle(self, client, outcome):
        """Act on a final outcome of `client`'s Reader: close it unanswered, or hand it to the workers."""
        if isinstance(outcome, Unanswered):
            # A kept connection that sends nothing more is done, not suspect.
            if outcome.reason is not None and not (client.served and client.reader.received == 0):
                self.log_repeated("expired", "%s - closed: %s" % (client.address[0], outcome.reason))
            self._close(client)
        elif outcome is not NEED_MORE:
            self._hand_over(client, outcome)

    def _close(self, client):
        """Forget `client` and close its socket; a second call does nothing."""
        if client.gone:
            return
        client.gone = True
        self._waiting.pop(client, None)
        try:
            self._selector.unregister(client.sock)
        except (KeyError, ValueError, OSError):
            pass  # never registered (it failed on the way in), or the selector is being torn down
        finally:
            client.sock.close()

    def _hand_over(self, client, outcome):
        """Give the connection and its outcome (a Request or a Refused) to the workers; the reader forgets it."""
        del self._waiting[client]
        self._selector.unregister(client.sock)
        client.gone = True
        with self._lock:
            self._in_hand.add(client.sock)
        # A connection carries at most kept_requests requests: each answer's fresh deadline bounds its idle
        # time, this bounds its life.
        may_keep = client.reader.may_keep() and client.served + 1 < self.kept_requests  # audit: G27
        self._jobs.put((client.sock, client.address, client.reader.head, outcome, may_keep, client.served + 1))

    # -- failures -------------------------------------------------------------------------------

    def _fail(self, thread, exc):
        """Log that `thread` died of `exc`, with its traceback; then record it (the first death is `failure`)."""
        died = ThreadDied("the %s thread died: %s" % (thread, exception_line(exc)))
        died.__cause__ = exc
        died.thread = thread
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
        try:
            # Logged before it is recorded: whoever watches `failure` (the CLI exits at once) finds it in the log.
            self.log_line("%s; every request is answered 503 from now on:\n%s" % (died, text))
        except BaseException:
            pass  # the log may be what failed: the failure is recorded below all the same
        with self._lock:
            if self._failure is None:
                self._failure = died  # audit: G33
        self._wake()

    # -- answers (worker threads) -----------------------------------------------------------------

    def _work(self, opened):
        try:
            if self._reads is not None:
                self._reads.open_mine()
        except BaseException as exc:
            opened.error = exc
            return
        finally:
            opened.done.set()
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                self._serve(*job)
        except BaseException as exc:
            self._fail("worker", exc)
        finally:
            if self._reads is not None:
                self._reads.close_mine()

    def _serve(self, sock, address, head, outcome, may_keep, served):
        """Answer one request, close its connection (or hand a kept one back), log one line; no Exception leaves here.

        The answer is written without waiting: what the client does not take
        at once (a slow reader of a large /metrics) is handed back to the
        reader thread, which finishes it by its deadline and then closes and
        logs (or, kept, reads the connection again). So no client can hold a
        worker, and the honest POSTs behind it.
        """
        status = note = handed = None
        keep = False
        try:
            refusal = outcome if isinstance(outcome, Refused) else None
            if refusal is None:
                try:
                    answer = self.respond(outcome.head, outcome.body)
                except Refused as exc:
                    refusal = exc
            if refusal is not None:
                answer = Answer(refusal.status(), refusal.body(), allow=refusal.allow)
                note = refusal.detail or refusal.message
            status = answer.status
            keep = may_keep and status == HTTPStatus.OK and not self._stop_requested and self._failure is None
            data = self._encode(answer, head_only=head is not None and head.method == "HEAD", keep=keep)
            sent = _send_now(sock, data)
            if sent < len(data):
                handed = _Sending(sock, address, memoryview(data)[sent:], time.monotonic() + self.request_timeout,
                                  keep=keep, served=served)
        except WithholdAnswer as withheld:
            keep = False
            note = "no answer: %s" % withheld
            _shutdown(sock)
        except OSError as exc:
            keep = False
            note = "answer not delivered: %s" % exc
        except Exception:
            keep = False
            note = "unhandled error:\n%s" % traceback.format_exc().rstrip()
        finally:
            if handed is not None:
                pass  # still in hand (and counted) until the reader has written the rest
            elif keep:
                self._kept.put((sock, address, served))  # still in hand (and counted) until the reader takes it back
            else:
                with self._lock:
                    self._in_hand.discard(sock)
                sock.close()
        line = head.request_line() if head is not None else "-"
        shown = [] if status is None else [str(int(status))]
        if note is not None:
            shown.append(note if note.startswith("unhandled") else _one_line(note))
        text = '%s - "%s" %s' % (address[0], line, " ".join(shown))
        if handed is not None:
            handed.line = text  # logged by the reader thread once the answer is written or given up
            self._handed_back.put(handed)
        else:
            self.log_line(text)  # audit: G34
        self._wake()  # a slot is free (a paused listener may listen again), or an answer is to finish

    def respond(self, head, body):
        """The Answer to a complete request whose route is allowed; Refused for anything untrusted.

        Once a thread of the server has died (`failure`), or the store has
        ended, every request is refused with 503 and nothing is written.
        """
        if self._failure is not None:  # audit: G33
            raise Refused("unavailable", "the sink cannot serve: %s" % self._failure)
        try:
            if head.target == HEALTH_PATH:  # audit: G28
                return Answer(HTTPStatus.OK, {"ok": True})
            if head.target == METRICS_PATH:
                return Answer(HTTPStatus.OK, self._metrics(), metrics.CONTENT_TYPE)
            return Answer(HTTPStatus.OK, self._post_event(body))
        except StoreGone as exc:
            raise Refused("unavailable", "the sink cannot serve: %s" % exc) from None

    def _metrics(self):
        """The deliveries log and inventory as Prometheus text: a snapshot of bounded age (sink.readings).

        Read on this worker's own read-only connection, never on the store
        thread; a foreign store, whose file may not be the kit's, is read on
        its store connection as before.
        """
        try:
            if self._reads is not None:
                return self._reads.metrics_text()
            return self._store.call(_metrics_text)
        except readings.NotReady as exc:
            raise Refused("unavailable", str(exc)) from None
        except (sqlite3.Error, OutboxError) as exc:  # a foreign store without the columns sink.views.status reads
            raise Refused("internal", "internal error: no metrics from this store: %s" % exc) from exc

    def _post_event(self, body):
        event = _parse_event(body)
        try:
            # The receipt and its ACK (sink.core.ack), on the store thread; the digest is read below, off it.
            answer = self._store.call(self._receive_once, event)  # audit: G26
        except (WithholdAnswer, Refused, StoreGone):
            raise
        except Exception as exc:
            raise self._refusal_for(exc, event["id"]) from exc
        held = self._held_digest(event["id"])
        if held is not None:
            answer["digest"] = held  # the digest of what the inbox holds, read after the receipt (sink.core.ack)
        return answer

    def _receive_once(self, con, event):
        """On the store thread: sink.core.ack.acknowledge, the receipt and then its ACK. Nothing else runs there."""
        try:
            return ack.acknowledge(con, self.receive, event)  # audit: G26
        except ack.BadResult as exc:
            raise Refused("internal", "internal error: %s" % exc) from None

    def _held_digest(self, event_id):
        """The digest of what the kit's store now holds for `event_id` (committed by receive), or None.

        Read on this worker's own read-only connection (sink.readings, through
        sink.core.ack.held_digest): `receive` has committed, so that connection
        sees it. A foreign store gets no digest.
        """
        if self._reads is None:
            return None
        try:
            return self._reads.held_digest(event_id)  # audit: G26
        except (sqlite3.Error, OutboxError) as exc:
            # No ACK without the digest: the publisher retries, and the inbox makes it a duplicate.
            raise Refused("internal", "internal error: cannot read the digest the sink holds: %s" % exc) from exc

    def _refusal_for(self, exc, event_id):
        # By class name too, so a foreign store with its own Conflict maps the same way.
        if isinstance(exc, Conflict) or type(exc).__name__ == "Conflict":
            # The client hears "conflict"; the request's log line says which payloads met.
            return Refused("conflict", "conflict", event_id=event_id, detail="conflict: %s" % exc)  # audit: G24
        if isinstance(exc, ValueError):
            return Refused("invalid", str(exc))
        self.log_line(
            "receive failed:\n%s" % "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
        )
        return Refused("internal", "internal error: %s: %s" % (type(exc).__name__, exc))

    @staticmethod
    def _encode(answer, *, head_only, keep=False):
        """Status line, headers and body as ONE bytes object, so the answer leaves in one write.

        `keep`: the connection stays open for the next request (HTTP/1.1 keep-alive), else Connection: close.
        """
        if isinstance(answer.body, dict):
            # The trailing newline keeps `curl` output off the shell prompt.
            data = (json.dumps(answer.body) + "\n").encode("ascii")
        else:
            data = answer.body.encode("utf-8")
        lines = [
            "%s %d %s" % ("HTTP/1.1" if keep else PROTOCOL, answer.status, HTTPStatus(answer.status).phrase),
            "Server: %s" % SERVER_NAME,
            "Date: %s" % email.utils.formatdate(usegmt=True),
            "Content-Type: %s" % answer.content_type,
            "Content-Length: %d" % len(data),
        ]
        if answer.allow is not None:
            lines.append("Allow: %s" % answer.allow)
        lines.append("Connection: keep-alive" if keep else "Connection: close")  # audit: G27
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head if head_only else head + data

    def log_line(self, line):
        _log_to(self.log, line)

    def log_repeated(self, kind, line):
        """Log `line`, one of REPEATED's `kind`: the first in an interval as it is, the others as one count.

        Reader thread only (the tally has no lock).
        """
        for shown in self._repeats.note(kind, line, time.monotonic()):
            self.log_line(shown)


def _metrics_text(con):
    return metrics.render(views.status(con))


def _parse_event(body):
    try:
        value = loads_strict(body)
    except UnicodeDecodeError as exc:
        raise Refused("invalid", "body is not UTF-8: %s" % exc) from None
    except (ValueError, RecursionError) as exc:
        raise Refused("invalid", "body is not valid JSON: %s" % exc) from None
    try:
        return validate_event(value)  # audit: G27
    except InvalidEvent as exc:
        raise Refused("invalid", str(exc)) from None


def _one_line(text):
    """`text` as one log line: a line break a client or a foreign error put in it is shown, not obeyed."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _send_now(sock, data):
    """How many bytes of `data` the non-blocking `sock` took without waiting (OSError if the client is gone)."""
    view = memoryview(data)
    sent = 0
    while sent < len(view):
        try:
            sent += sock.send(view[sent:])
        except BlockingIOError:
            break
    return sent


def _shutdown(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already gone: closed just as well
