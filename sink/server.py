"""The sink's HTTP boundary: POST /events and GET /health on a ThreadingHTTPServer.

Owns request framing, the one table from refusals to statuses, and the
store connection of each handler thread. It never runs SQL and never decides
an outcome: it validates the event, calls `receive` once, and reports what
`receive` said. One request per connection; every answer says
``Connection: close``.
"""

import http.server
import io
import json
import socket
import socketserver
import threading
import time
import traceback
from http import HTTPStatus

from outbox.errors import Conflict, InvalidEvent
from outbox.event import loads_strict, validate_event

from . import faults, inbox

EVENTS_PATH = "/events"
HEALTH_PATH = "/health"
ALLOWED = {EVENTS_PATH: "POST", HEALTH_PATH: "GET"}  # path -> the one method it serves
MAX_BODY = 4096
DEFAULT_TIMEOUT = 10.0
LISTEN_BACKLOG = 128
RESULTS = (inbox.APPLIED, inbox.DUPLICATE)

# The one table from a refusal to its status. Every answer but 200 goes
# through it, except the few http.server gives itself (see send_error).
STATUS = {
    "invalid": HTTPStatus.BAD_REQUEST,  # untrusted framing, bad JSON, an invalid event
    "no-length": HTTPStatus.LENGTH_REQUIRED,
    "too-large": HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
    "wrong-type": HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
    "no-such-path": HTTPStatus.NOT_FOUND,
    "wrong-method": HTTPStatus.METHOD_NOT_ALLOWED,
    "conflict": HTTPStatus.CONFLICT,
    "internal": HTTPStatus.INTERNAL_SERVER_ERROR,
}


class Refused(Exception):
    """A request that gets no 200; `kind` is a key of STATUS."""

    def __init__(self, kind, message, *, event_id=None, allow=None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.event_id = event_id
        self.allow = allow

    def body(self):
        if self.event_id is None:
            return {"ack": False, "error": self.message}
        return {"ack": False, "id": self.event_id, "error": self.message}


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
):
    """Return a SinkServer bound and listening on (host, port), NOT yet serving.

    Call `start()` (serves in a daemon thread) or `serve_forever()`, and at the
    end `stop()` (or `shutdown()` then `server_close()`). `server_address`
    holds the real port when `port` is 0. `init_sink(db_path)` and
    `receive(con, event)` default to sink.inbox's; `init_sink` is called once
    here, so a foreign or unusable DB raises (WrongDatabase) now rather than at
    the first request. `timeout` (seconds, > 0) is the time a client has, from
    being accepted, to send its whole request, and again to take the answer.
    `fault` is a name from faults.NAMES hitting the first `fault_count` valid
    events. `log(line)`, if given, receives one line per request and any
    internal error; by default nothing is printed.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise ValueError("timeout must be a number of seconds > 0, got %r" % (timeout,))
    open_store = init_sink if init_sink is not None else inbox.init_sink
    receive = receive if receive is not None else inbox.receive
    if fault is not None:
        receive = faults.FaultyReceive(receive, fault, count=fault_count)
    open_store(db_path).close()
    return SinkServer(
        (host, port), db_path=db_path, timeout=float(timeout), open_store=open_store, receive=receive, log=log
    )


class SinkServer(http.server.ThreadingHTTPServer):
    """ThreadingHTTPServer with the sink's settings; build it with `make_server`."""

    request_queue_size = LISTEN_BACKLOG  # a burst of connections waits in the backlog, not refused
    # server_close() waits for the requests in hand. Each is bounded: the
    # request must arrive within the timeout, SQLite waits at most its busy
    # timeout, and the answer is sent with the timeout again.
    daemon_threads = False
    block_on_close = True

    def __init__(self, address, *, db_path, timeout, open_store, receive, log):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.db_path = db_path
        self.request_timeout = timeout
        self.open_store = open_store
        self.receive = receive
        self.log = log
        self._local = threading.local()
        self._serving = None
        super().__init__(address, SinkHandler)

    def server_bind(self):
        # HTTPServer.server_bind would also call socket.getfqdn(host): a reverse
        # DNS lookup that, for any 127.x but 127.0.0.1, may leave this machine.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def url(self):
        host, port = self.server_address[:2]
        return "http://%s:%d" % ("[%s]" % host if ":" in host else host, port)

    def start(self):
        """Serve in a daemon thread; return self."""
        self._serving = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._serving.start()
        return self

    def stop(self):
        """Stop accepting, finish the requests in hand, close the listening socket."""
        if self._serving is not None:
            self.shutdown()
            self._serving.join()
        self.server_close()

    def connection(self):
        """The store connection of the calling thread, opened on first use."""
        con = getattr(self._local, "con", None)
        if con is None:
            con = self.open_store(self.db_path)
            self._local.con = con
        return con

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            # The thread ends here; so does its connection.
            con = getattr(self._local, "con", None)
            if con is not None:
                self._local.con = None
                con.close()

    def handle_error(self, request, client_address):
        self.log_line("%s - unhandled error:\n%s" % (client_address[0], traceback.format_exc().rstrip()))

    def log_line(self, line):
        if self.log is not None:
            self.log(line)


class SinkHandler(http.server.BaseHTTPRequestHandler):
    """One request per connection: route, frame, validate, receive, answer."""

    protocol_version = "HTTP/1.0"
    server_version = "outbox-kit-sink/1"

    def setup(self):
        self.timeout = self.server.request_timeout  # StreamRequestHandler puts it on the socket
        super().setup()
        self.rfile.close()  # replaced by one that gives the whole request a single deadline
        self.rfile = io.BufferedReader(_RequestReader(self.connection, self.timeout))

    def handle_any_method(self):
        try:
            self._check_route()
            if self.command == "GET":
                status, body = HTTPStatus.OK, {"ok": True}
            else:
                status, body = HTTPStatus.OK, self._post_event()
        except Refused as refusal:
            self._answer(STATUS[refusal.kind], refusal.body(), allow=refusal.allow)
            return
        except faults.DropConnection as drop:
            self.log_message("%s", drop)
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._answer(status, body)

    # Every method a client may send lands in the same place; the route decides.
    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_TRACE = do_CONNECT = handle_any_method

    def __getattr__(self, name):
        # Any other method (PROPFIND, FOO, ...) is routed too, so a known path
        # answers 405 rather than the 501 that http.server gives by default.
        if name.startswith("do_"):
            return self.handle_any_method
        raise AttributeError(name)

    def _check_route(self):
        # The target exactly as sent: http.server's self.path has "//x" already turned into "/x".
        target = self.requestline.split()[1]
        allowed = ALLOWED.get(target)
        if allowed is None:
            raise Refused("no-such-path", "no such path %r: the sink serves only POST /events and GET /health" % target)
        if self.command != allowed:
            raise Refused(
                "wrong-method",
                "method %s is not allowed on %s; use %s" % (self.command, target, allowed),
                allow=allowed,
            )

    def _post_event(self):
        body = self._read_body()
        self._check_content_type()
        event = self._parse_event(body)
        try:
            con = self.server.connection()
            result = self.server.receive(con, event)
        except faults.DropConnection:
            raise
        except Exception as exc:
            raise self._refusal_for(exc, event["id"]) from exc
        if not isinstance(result, str) or result not in RESULTS:
            self.log_message("receive returned %r for event %r", result, event["id"])
            raise Refused(
                "internal", "internal error: receive returned %r, not one of %s" % (result, ", ".join(RESULTS))
            )
        return {"ack": True, "id": event["id"], "result": result}

    def _refusal_for(self, exc, event_id):
        # By class name too, so a foreign store with its own Conflict maps the same way.
        if isinstance(exc, Conflict) or type(exc).__name__ == "Conflict":
            self.log_message("conflict: %s", exc)
            return Refused("conflict", "conflict", event_id=event_id)
        if isinstance(exc, ValueError):
            return Refused("invalid", str(exc))
        self.log_message("receive failed:\n%s", traceback.format_exc().rstrip())
        return Refused("internal", "internal error: %s: %s" % (type(exc).__name__, exc))

    def _read_body(self):
        """The body, exactly Content-Length bytes, read within the timeout; else Refused."""
        encodings = self.headers.get_all("Transfer-Encoding")
        if encodings:
            raise Refused(
                "invalid", "Transfer-Encoding is not accepted (got %s); send one Content-Length" % ", ".join(encodings)
            )
        lengths = self.headers.get_all("Content-Length")
        if not lengths:
            raise Refused("no-length", "Content-Length is required")
        if len(lengths) > 1:
            raise Refused("invalid", "Content-Length must appear once, got %d: %s" % (len(lengths), ", ".join(lengths)))
        text = lengths[0].strip(" \t")
        if not text or not all("0" <= c <= "9" for c in text):
            raise Refused("invalid", "Content-Length must be a decimal number of bytes, got %r" % lengths[0])
        digits = text.lstrip("0") or "0"
        if len(digits) > len(str(MAX_BODY)) or int(digits) > MAX_BODY:
            raise Refused("too-large", "Content-Length %s exceeds the limit of %d bytes" % (text, MAX_BODY))
        return self._read_exactly(int(digits))

    def _read_exactly(self, length):
        chunks = []
        received = 0
        try:
            while received < length:
                chunk = self.rfile.read1(length - received)
                if not chunk:
                    raise Refused(
                        "invalid",
                        "body incomplete: %d of %d bytes (Content-Length) before the client closed"
                        % (received, length),
                    )
                chunks.append(chunk)
                received += len(chunk)
        except socket.timeout:
            raise Refused(
                "invalid",
                "body incomplete: %d of %d bytes (Content-Length) within the %gs request deadline"
                % (received, length, self.timeout),
            ) from None
        return b"".join(chunks)

    def _check_content_type(self):
        values = self.headers.get_all("Content-Type") or []
        if len(values) != 1:
            raise Refused("wrong-type", "Content-Type must be application/json once, got %s" % (values or "none"))
        media, *params = values[0].split(";")
        if media.strip().lower() != "application/json":
            raise Refused("wrong-type", "Content-Type must be application/json, got %r" % values[0])
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
                raise Refused("wrong-type", "Content-Type charset must be utf-8, got %r" % values[0])

    def _parse_event(self, body):
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

    def _answer(self, status, body, *, allow=None):
        data = json.dumps(body).encode("ascii")
        self.connection.settimeout(self.timeout)  # the answer gets a timeout of its own, not what the request left
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if allow is not None:
            self.send_header("Allow", allow)
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_error(self, code, message=None, explain=None):
        # http.server refuses some requests itself (a bad request line, an
        # unknown method, oversized headers): answer those in JSON as well.
        self.close_connection = True
        self._answer(code, {"ack": False, "error": message or HTTPStatus(code).phrase})

    def log_message(self, format, *args):
        self.server.log_line("%s - %s" % (self.address_string(), format % args))


class _RequestReader(io.RawIOBase):
    """The socket as a raw stream whose every read ends by one deadline.

    Each recv gets only the time left, so a client that trickles a byte at a
    time cannot stretch the socket timeout into minutes: the request line,
    headers and body must all arrive within `seconds` of the connection being
    accepted, else socket.timeout.
    """

    def __init__(self, sock, seconds):
        super().__init__()
        self._sock = sock
        self._deadline = time.monotonic() + seconds

    def readable(self):
        return True

    def readinto(self, buffer):
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("the request did not arrive in time")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)
