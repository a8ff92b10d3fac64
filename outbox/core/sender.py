"""The HTTP sender: POST one event to a loopback sink and verify its ACK.

The only module that opens an HTTP connection. It talks to loopback only,
never follows a redirect or a proxy, and returns True only on a verified ACK.
`send_http` is one request on its own connection (the worker contract); `HeldConnection`
is the same request over one connection kept between sends (the kit's relay).
Its loopback rule (`loopback_host`) is the kit's one: the sink's --host uses it too.
"""
import http.client
import re
import select
import socket
import time
import urllib.error
import urllib.request

from .errors import NoAnswer, UntrustedAck
from .event import QUOTE_CHARS, canonical, clip, digest, loads_strict, show, validate_event

MAX_ACK_BYTES = 4096
MAX_TIMEOUT = 3600.0  # seconds; more is a mistake, and near-infinite values overflow the socket layer
# A held connection idle for longer is closed rather than reused: the sink closes
# idle ones at its own timeout (10 s by default), and a request must not meet that close.
HOLD_IDLE_S = 1.0
# The request head over a held connection (Content-Length and the body follow). The kit's
# sink keeps a connection only when asked exactly so (sink.framing.Reader.may_keep).
_HELD_HEAD = "POST /events HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"

_RULE = "url must be http://<loopback>[:port]/events"
_UNSAFE_CHAR = re.compile(r"[^\x21-\x7e]")  # anything but printable ASCII without space
_URL = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://"
    r"(?:(?P<userinfo>[^/?#@]*)@)?"
    r"(?P<host>\[[^\]/?#@]*\]|[^:/?#@\[\]]*)"
    r"(?::(?P<port>[^/?#@]*))?"
    r"(?P<path>/[^?#]*)?"
    r"(?:\?(?P<query>[^#]*))?"
    r"(?:#(?P<fragment>.*))?"
)
_IPV4 = re.compile(r"(?:0|[1-9][0-9]{0,2})(?:\.(?:0|[1-9][0-9]{0,2})){3}")
_PORT = re.compile(r"[1-9][0-9]{0,4}")
_LENGTH = re.compile(r"[0-9]{1,18}")


def check_url(url):
    """Return (host, port) of a safe sink URL, or raise ValueError naming what is wrong.

    Safe is exactly ``http://HOST[:PORT]/events``: HOST is ``localhost`` (any case),
    a dotted quad in 127.0.0.0/8 without leading zeros, or ``[::1]`` (returned as
    ``::1``); PORT is 1-65535 without leading zeros (80 if absent); no user info,
    query, fragment, escape, whitespace or control character. No DNS, no I/O.
    """
    if not isinstance(url, str):
        raise ValueError("%s; got %s, not a str" % (_RULE, show(url)))
    # Printable ASCII only, checked first: it also makes lower() below plain ASCII.
    bad = _UNSAFE_CHAR.search(url)
    if bad:
        raise ValueError("%s; %r at position %d is whitespace, a control character or not ASCII"
                         % (_RULE, bad.group(), bad.start()))
    match = _URL.fullmatch(url)
    if match is None:
        raise ValueError("%s; cannot parse %s" % (_RULE, show(url)))
    parts = match.groupdict()
    if parts["scheme"] != "http":  # audit: G18
        raise ValueError("%s; scheme %r is not http" % (_RULE, parts["scheme"]))
    for part, name in (("userinfo", "user info"), ("query", "query"), ("fragment", "fragment")):
        if parts[part] is not None:
            raise ValueError("%s; %s %r is not allowed" % (_RULE, name, parts[part]))
    host = loopback_host(parts["host"])
    if host is None:
        raise ValueError("%s; host %r is not loopback (localhost, 127.x.y.z without leading "
                         "zeros, or [::1])" % (_RULE, parts["host"]))
    port = parts["port"]
    if port is not None and not (_PORT.fullmatch(port) and int(port) <= 65535):
        raise ValueError("%s; port %r is not 1-65535 without leading zeros" % (_RULE, port))
    if parts["path"] != "/events":  # audit: G18
        raise ValueError("%s; path %r is not /events" % (_RULE, parts["path"] or ""))
    return host, 80 if port is None else int(port)


def check_timeout(timeout):
    """Return `timeout` if it is an int or float of seconds in (0, MAX_TIMEOUT] (not a bool), else ValueError."""
    # The range test also refuses nan and inf.
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT:
        raise ValueError("timeout must be a positive int or float of seconds up to %g, got %s"  # audit: G20
                         % (MAX_TIMEOUT, show(timeout)))
    return timeout


def send_http(url, event, *, timeout=5.0, require_digest=False):
    """POST `event` as canonical JSON to `url`; return True only on a verified ACK.

    Before any I/O: InvalidEvent for a bad event, ValueError for an unsafe `url`
    (see check_url) or a `timeout` that is not an int or float in (0, MAX_TIMEOUT].
    `timeout` bounds the whole exchange (connect, send, headers, body). A verified
    ACK is status 200 and a complete body of at most MAX_ACK_BYTES holding a JSON
    object with ``"ack": true`` and ``"id"`` equal to the event's id, whose
    ``"digest"``, if present, equals digest(event): the sink holds exactly this
    event, not another one under the same id. With ``require_digest=True`` an
    ACK without a digest is refused too (a foreign sink may not send one). Otherwise
    NoAnswer (refused, closed, reset, timed out, cut short) or UntrustedAck (an
    answer that is not proof). Proxies are ignored and redirects never followed.
    """
    event = validate_event(event)
    check_url(url)  # audit: G18
    check_timeout(timeout)
    where = "POST %s for %r" % (url, event["id"])
    headers = {"Content-Type": "application/json", "Connection": "close"}
    request = urllib.request.Request(url, data=canonical(event).encode("ascii"), headers=headers, method="POST")
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            if response.status != 200:  # audit: G21
                raise _bad_status(response, response.status, where)
            body = _read_ack(response, where)
    except urllib.error.HTTPError as exc:  # non-2xx, including every refused redirect
        try:
            raise _bad_status(exc, exc.code, where) from exc  # audit: G22
        finally:
            exc.close()
    except (OSError, http.client.HTTPException) as exc:  # URLError and socket.timeout are OSErrors
        raise _no_answer(exc, timeout, where) from exc  # audit: G22
    _check_ack(body, event["id"], digest(event), where, require_digest=require_digest)  # audit: G21
    return True


class HeldConnection:
    """One HTTP/1.1 connection to one sink, held across sends: how the kit's relay delivers.

    ``send(event)`` keeps send_http's contract request by request: the same
    refusals before any I/O, a connect to loopback addresses only (G18), no
    proxy and no redirect (nothing here reads a proxy variable or follows a
    Location, G19), a total deadline of `timeout` per request (G20), the same
    ACK checks (G21) and the same failures (G22). It only adds reuse: after a
    verified ACK in an HTTP/1.1 response that keeps the connection, the next
    send goes over the same one. Anything else drops it, and the next send
    connects afresh: any failure; an answer that is HTTP/1.0, says
    ``Connection: close``, has no length or came with more bytes than itself;
    a connection idle for over HOLD_IDLE_S; one on which the sink closed or
    sent a byte nobody asked for (looked at before each request is written).
    A request is written once, head and body in one write: a connection that
    fails after the request went out is not retried within the call, which
    would be a second delivery the caller did not decide; the call raises what
    a fresh connection's failure raises, and the caller's next round retries.
    One sending loop owns it (not thread-safe); close() it at the end.
    """

    def __init__(self, url, *, timeout=5.0, require_digest=False):
        self.host, self.port = check_url(url)  # audit: G18
        self.url = url
        self.timeout = check_timeout(timeout)
        self.require_digest = require_digest
        self._head = (_HELD_HEAD % ("[%s]" % self.host if ":" in self.host else self.host, self.port)).encode("ascii")
        self._sock = None  # the held _DeadlineSocket, or None
        self._idle_since = None  # time.monotonic() of the held connection's last ACK
        self.opened = 0  # connections made so far: the bench and the tests read it

    def send(self, event):
        """POST `event` over the held connection (or a new one); True only on a verified ACK, as send_http."""
        event = validate_event(event)
        where = "POST %s for %r" % (self.url, event["id"])
        body = canonical(event).encode("ascii")
        response = None
        try:
            sock = self._take(time.monotonic() + self.timeout)  # audit: G20
            sock.sendall(self._head + b"Content-Length: %d\r\n\r\n" % len(body) + body)  # audit: G19
            response = _KeptResponse(sock, method="POST")
            response.begin()
            status = response.status
            if status != 200:  # audit: G21
                raise _bad_status(response, status, where)
            ack = _read_ack(response, where)
            # Reused only if HTTP/1.1 keeps it and exactly the answer was read: nothing of it is left to misread.
            keep = (response.version == 11 and not response.will_close and response.isclosed()
                    and not response.overran)
            _check_ack(ack, event["id"], digest(event), where, require_digest=self.require_digest)  # audit: G21
        except (OSError, http.client.HTTPException) as exc:
            self._drop(response)
            raise _no_answer(exc, self.timeout, where) from exc  # audit: G22
        except BaseException:
            self._drop(response)
            raise
        if keep:
            self._idle_since = time.monotonic()
        else:
            self._drop(response)
        return True

    def close(self):
        """Close the held connection, if any; the next send connects afresh."""
        self._drop(None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _drop(self, response):
        if response is not None:
            response.close()
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def _take(self, deadline):
        """The held socket if it is still clean, else a new one connected to loopback; either ends by `deadline`."""
        if self._sock is not None and (time.monotonic() - self._idle_since > HOLD_IDLE_S or _stirred(self._sock)):
            self._drop(None)
        if self._sock is None:
            conn = _DeadlineConnection(self.host, port=self.port, deadline=deadline)
            self.opened += 1
            conn.connect()  # loopback addresses only; OSError if none accepts  # audit: G18
            self._sock = conn.sock
        else:
            self._sock.deadline = deadline  # this request's own deadline, as on a fresh connection
        return self._sock


class _KeptResponse(http.client.HTTPResponse):
    """An HTTPResponse that notes, as its body ends, whether bytes beyond it came in with it (`overran`).

    http.client reads ahead into a buffer that it drops with the answer: bytes
    the sink sent after the answer would vanish there unseen. They are looked
    at here instead, so that a connection that carried them is not reused.
    """

    overran = False

    def __init__(self, sock, *args, **kwargs):
        super().__init__(sock, *args, **kwargs)
        self._deadline_sock = sock

    def _close_conn(self):  # http.client calls it once, when the body is read (3.8-3.13)
        if self.fp is not None:
            self.overran = _buffered(self.fp, self._deadline_sock)
        super()._close_conn()


def _buffered(fp, sock):
    """True if the reader `fp` of `sock` holds bytes not yet read; reads nothing more from the socket."""
    deadline, sock.deadline = sock.deadline, float("-inf")  # a read from the socket now times out at once
    try:
        return len(fp.peek(1)) > 0
    except OSError:  # the buffer was empty and the socket was not read
        return False
    finally:
        sock.deadline = deadline


def loopback_host(text):
    """The host to connect to or listen on if `text` names loopback, else None. No DNS, no I/O.

    Loopback is "localhost" in any letter case (returned as "localhost"), a
    dotted quad 127.a.b.c of decimal numbers 0-255 without leading zeros, or
    "::1" (in a URL, "[::1]"; returned as "::1").
    """
    if text.lower() == "localhost":
        return "localhost"
    if text in ("[::1]", "::1"):
        return "::1"
    if _IPV4.fullmatch(text):  # audit: G18
        octets = [int(part) for part in text.split(".")]
        if octets[0] == 127 and max(octets) <= 255:
            return text
    return None


def _read_ack(response, where):
    """The body of a 200 response: at most MAX_ACK_BYTES and as long as its Content-Length."""
    lengths = response.headers.get_all("Content-Length") or []
    if len(lengths) > 1 or (lengths and not _LENGTH.fullmatch(lengths[0])):
        raise _refusal(UntrustedAck, where, "Content-Length %s is not one decimal number"
                       % ", ".join(clip(value) for value in lengths))
    declared = int(lengths[0]) if lengths else None
    if declared is not None and declared > MAX_ACK_BYTES:
        raise _refusal(UntrustedAck, where, "Content-Length %d exceeds the %d-byte ACK limit"
                       % (declared, MAX_ACK_BYTES))
    body = response.read(MAX_ACK_BYTES + 1)  # one byte more than allowed tells "too big" apart
    if len(body) > MAX_ACK_BYTES:  # audit: G21
        raise _refusal(UntrustedAck, where, "ACK body exceeds the %d-byte limit" % MAX_ACK_BYTES)
    # http.client returns a short body without complaint when the peer closes early.
    if declared is not None and len(body) < declared:
        raise _refusal(NoAnswer, where, "body ended after %d of the %d bytes its Content-Length "
                       "announced" % (len(body), declared))
    return body


def _check_ack(body, event_id, event_digest, where, *, require_digest):
    """Return None if `body` is a JSON object with "ack": true, "id" == event_id and a matching "digest", else raise.

    "digest" may be absent unless `require_digest`; if present it must equal `event_digest`.
    """
    try:
        ack = loads_strict(body)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise _refusal(UntrustedAck, where, "ACK is not JSON with unique keys (%s)" % exc) from exc
    if not isinstance(ack, dict):
        what = "ACK is a JSON %s, not an object" % type(ack).__name__
    elif "ack" not in ack:
        what = 'ACK has no "ack"'
    elif ack["ack"] is not True:  # audit: G21
        what = 'ACK has "ack": %s, not the JSON literal true' % show(ack["ack"])
    elif "id" not in ack:
        what = 'ACK has no "id"'
    elif ack["id"] != event_id:  # audit: G21
        what = "ACK names id %s, not %r" % (clip(ack["id"]), event_id)
    elif "digest" in ack and ack["digest"] != event_digest:
        what = "ACK digest %s is not %s, the digest of the event sent: the sink holds another payload" % (
            clip(ack["digest"]), event_digest)
    elif "digest" not in ack and require_digest:
        what = 'ACK has no "digest" and require_digest is set'
    else:
        return
    raise _refusal(UntrustedAck, where, what)


def _no_answer(exc, timeout, where):
    """NoAnswer for an exchange that ended in `exc` (an OSError or HTTPException) before a complete answer."""
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, socket.timeout):
        what = "timed out after %gs (connect, send and response)" % timeout
    else:
        what = "no complete response (%s)" % clip(reason)
    return _refusal(NoAnswer, where, what)


def _stirred(sock):
    """True if `sock`, idle between requests, is readable: the sink closed it or sent bytes nobody asked for."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])  # Windows has no poll


def _bad_status(response, status, where):
    """UntrustedAck for a status other than 200, naming any redirect target and a body excerpt."""
    what = "status %d" % status
    location = response.headers.get("Location")
    if 300 <= status < 400 and location is not None:
        what += ", redirect to %s refused" % clip(location)
    try:
        excerpt = response.read(QUOTE_CHARS)
    except (OSError, http.client.HTTPException):  # the status alone is enough to refuse
        excerpt = b""
    if excerpt:
        what += ", body starts %s" % clip(excerpt.decode("utf-8", "replace"))
    return _refusal(UntrustedAck, where, what, kind=_status_kind(status))


def _status_kind(status):
    """The failure kind of an answer with `status` (outbox.ops.failures): only a 5xx may pass on its own."""
    if status == 409:  # audit: G22
        return "conflict"
    if 500 <= status <= 599:
        return "server-error"
    return "rejected"


def _refusal(cls, where, what, *, kind=None):
    """A DeliveryError of class `cls` saying where, what went wrong, and that the item stays pending."""
    return cls("%s: %s; not marking it sent" % (where, what), kind=kind)


class _DeadlineSocket(socket.socket):
    """A TCP socket whose blocking calls all end by `deadline` (a time.monotonic() value).

    Each call first sets the socket timeout to the time left, so a peer that
    stalls, or drips one byte at a time, cannot hold it past the deadline. Unlike
    a watchdog thread, nothing can touch the socket after it is closed.
    http.client (3.8-3.13) only connects, sendall()s and reads through makefile(),
    which calls recv_into(); the drip tests fail if that ever changes.
    """

    def __init__(self, family, type_, proto, deadline):
        super().__init__(family, type_, proto)
        self.deadline = deadline

    def _arm(self):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("deadline passed")  # audit: G20
        self.settimeout(left)

    def connect(self, address):
        self._arm()
        return super().connect(address)

    def sendall(self, *args):
        self._arm()  # since 3.5 the timeout bounds the whole sendall, not each chunk
        return super().sendall(*args)

    def recv_into(self, *args):
        self._arm()
        return super().recv_into(*args)


class _DeadlineConnection(http.client.HTTPConnection):
    """An HTTPConnection that connects only to loopback addresses, over a _DeadlineSocket."""

    def __init__(self, host, *, deadline, **kwargs):
        super().__init__(host, **kwargs)
        self.deadline = deadline

    def connect(self):
        """Connect to the first loopback address of host:port that accepts; else raise OSError."""
        # A second line of defence after check_url: whatever a name resolves to,
        # only a loopback address is ever connected to.
        error = OSError("%s resolves to no address" % self.host)
        for family, type_, proto, _, address in socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM):
            if loopback_host(address[0]) is None:  # audit: G18
                error = OSError("%s resolves to %s, which is not loopback" % (self.host, address[0]))
                continue
            sock = _DeadlineSocket(family, type_, proto, self.deadline)
            try:
                sock.connect(address)
                # Headers and body may go out in two sends; do not let Nagle hold the second.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            self.sock = sock
            return
        raise error


class _DeadlineHTTPHandler(urllib.request.HTTPHandler):
    """Opens each connection with deadline = now + the request's timeout."""

    def http_open(self, req):
        return self.do_open(_DeadlineConnection, req, deadline=time.monotonic() + req.timeout)  # audit: G20


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: the 3xx surfaces as an HTTPError and its target is never contacted."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # audit: G19


# Built once at import from named handlers (build_opener's https one loads the system's certificates: 0.4 s
# a process under Wine): none keeps per-request state (each call's deadline comes from the timeout passed to
# open()), and ProxyHandler({}) reads no environment, so one opener serves every call and thread alike.
_OPENER = urllib.request.OpenerDirector()  # audit: G19
for _handler in (urllib.request.ProxyHandler({}), urllib.request.UnknownHandler(), _DeadlineHTTPHandler(),
                 urllib.request.HTTPDefaultErrorHandler(), _RefuseRedirects(), urllib.request.HTTPErrorProcessor()):
    _OPENER.add_handler(_handler)
