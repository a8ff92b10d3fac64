"""The HTTP sender: POST one event to a loopback sink and verify its ACK.

The only module that opens an HTTP connection. It talks to loopback only,
never follows a redirect or a proxy, and returns True only on a verified ACK.
Its loopback rule (`loopback_host`) is the kit's one: the sink's --host uses it too.
"""
import http.client
import re
import socket
import time
import urllib.error
import urllib.request

from .errors import NoAnswer, UntrustedAck
from .event import canonical, digest, loads_strict, validate_event

MAX_ACK_BYTES = 4096
MAX_TIMEOUT = 3600.0  # seconds; more is a mistake, and near-infinite values overflow the socket layer
EXCERPT_CHARS = 120  # longest body excerpt or value quoted in an error message

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
        raise ValueError("%s; got %s, not a str" % (_RULE, _show(url)))
    # Printable ASCII only, checked first: it also makes lower() below plain ASCII.
    bad = _UNSAFE_CHAR.search(url)
    if bad:
        raise ValueError("%s; %r at position %d is whitespace, a control character or not ASCII"
                         % (_RULE, bad.group(), bad.start()))
    match = _URL.fullmatch(url)
    if match is None:
        raise ValueError("%s; cannot parse %s" % (_RULE, _show(url)))
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
                         % (MAX_TIMEOUT, _show(timeout)))
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
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, socket.timeout):
            what = "timed out after %gs (connect, send and response)" % timeout
        else:
            what = "no complete response (%s)" % _clip(reason)
        raise _refusal(NoAnswer, where, what) from exc  # audit: G22
    _check_ack(body, event["id"], digest(event), where, require_digest=require_digest)  # audit: G21
    return True


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
                       % ", ".join(_clip(value) for value in lengths))
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
        what = 'ACK has "ack": %s, not the JSON literal true' % _show(ack["ack"])
    elif "id" not in ack:
        what = 'ACK has no "id"'
    elif ack["id"] != event_id:  # audit: G21
        what = "ACK names id %s, not %r" % (_clip(ack["id"]), event_id)
    elif "digest" in ack and ack["digest"] != event_digest:
        what = "ACK digest %s is not %s, the digest of the event sent: the sink holds another payload" % (
            _clip(ack["digest"]), event_digest)
    elif "digest" not in ack and require_digest:
        what = 'ACK has no "digest" and require_digest is set'
    else:
        return
    raise _refusal(UntrustedAck, where, what)


def _bad_status(response, status, where):
    """UntrustedAck for a status other than 200, naming any redirect target and a body excerpt."""
    what = "status %d" % status
    location = response.headers.get("Location")
    if 300 <= status < 400 and location is not None:
        what += ", redirect to %s refused" % _clip(location)
    try:
        excerpt = response.read(EXCERPT_CHARS)
    except (OSError, http.client.HTTPException):  # the status alone is enough to refuse
        excerpt = b""
    if excerpt:
        what += ", body starts %s" % _clip(excerpt.decode("utf-8", "replace"))
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


def _clip(value):
    """repr(value), cut to EXCERPT_CHARS."""
    text = repr(value)
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS - 3] + "..."


def _show(value):
    """repr(value), cut, with its type: "True (bool)"."""
    return "%s (%s)" % (_clip(value), type(value).__name__)


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


# Built once at import: no handler here keeps per-request state (each call's
# deadline comes from the timeout passed to open()), and ProxyHandler({}) reads
# no environment, so one opener serves every call and thread alike.
_OPENER = urllib.request.build_opener(
    urllib.request.ProxyHandler({}), _RefuseRedirects(), _DeadlineHTTPHandler()  # audit: G19
)
