"""The sink's request reader: strict HTTP/1.0-1.1 framing as an I/O-free object, and the statuses of refusals.

Owns what a request head must look like, how long a body is, which status
each refusal gets, and `Reader`, which turns the bytes of one connection into
one outcome. It never touches a socket, a thread or a clock: whoever owns the
socket hands it bytes (`feed`), the end of the stream (`eof`) and the time
(`expire`), in the manner of h11. Anything a lenient parser and a proxy could
read two ways is refused (400), so no second reader can find a different
request in the same bytes.
"""

import collections
import re
from http import HTTPStatus

MAX_BODY = 4096  # bytes; an event is well under 200
MAX_REQUEST_LINE = 8192  # bytes up to the first CRLF; more is 414
MAX_HEAD = 16384  # bytes up to the blank line; more is 431
MAX_HEADERS = 64  # header lines; more is 431

# The one table from a refusal to its status. Every answer but 200 goes through it.  # audit: G27
STATUS = {
    "invalid": HTTPStatus.BAD_REQUEST,  # untrusted framing, bad JSON, an invalid event
    "no-length": HTTPStatus.LENGTH_REQUIRED,
    "too-large": HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
    "uri-too-long": HTTPStatus.REQUEST_URI_TOO_LONG,
    "wrong-type": HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
    "head-too-large": HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
    "no-such-path": HTTPStatus.NOT_FOUND,
    "wrong-method": HTTPStatus.METHOD_NOT_ALLOWED,
    "conflict": HTTPStatus.CONFLICT,
    "version": HTTPStatus.HTTP_VERSION_NOT_SUPPORTED,
    "internal": HTTPStatus.INTERNAL_SERVER_ERROR,
    "unavailable": HTTPStatus.SERVICE_UNAVAILABLE,  # a thread of the server died: see SinkServer.failure
}

_TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
# Exactly METHOD SP target SP HTTP/1.0|1.1: one space each, no tabs, no extra words.
_REQUEST_LINE = re.compile(rb"(" + _TOKEN + rb") ([\x21-\x7e]+) HTTP/1\.[01]")
_OTHER_VERSION = re.compile(rb"(" + _TOKEN + rb") ([\x21-\x7e]+) HTTP/[0-9]\.[0-9]")
# A field line: the name ends at the colon, with no whitespace in between. The
# value's surrounding spaces and tabs are stripped after the match: a pattern
# that trims them itself backtracks over every run of inner spaces (0.5 s of
# CPU for one 16 KiB head).
_FIELD = re.compile(rb"(" + _TOKEN + rb"):(.*)")
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")  # any control character but HTAB
_BARE_LF = re.compile(rb"(?<!\r)\n")
_DIGITS = re.compile(r"[0-9]+")


class Refused(Exception):
    """A request that gets no 200; `kind` is a key of STATUS, `detail` what the log says beyond the message."""

    def __init__(self, kind, message, *, event_id=None, allow=None, detail=None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.event_id = event_id
        self.allow = allow
        self.detail = detail

    def status(self):
        return STATUS[self.kind]

    def body(self):
        if self.event_id is None:
            return {"ack": False, "error": self.message}
        return {"ack": False, "id": self.event_id, "error": self.message}


class Head:
    """A request head that passed every rule: method, target and version as sent, and its fields."""

    def __init__(self, method, target, version, fields):
        self.method = method
        self.target = target
        self.version = version
        self.fields = fields  # [(lower-case name, value)] in order, values latin-1 text

    def get_all(self, name):
        """Every value of header `name` (any case), in order; [] when absent."""
        name = name.lower()
        return [value for field, value in self.fields if field == name]

    def request_line(self):
        return "%s %s %s" % (self.method, self.target, self.version)


class _NeedMore:
    def __repr__(self):
        return "NEED_MORE"


# The outcome while a request may still complete: feed it more bytes, or wait for its deadline.
NEED_MORE = _NeedMore()

Request = collections.namedtuple("Request", "head body")
Request.__doc__ = """A complete request that passed every framing rule: its Head, and its body (b"" unless POST)."""


class Unanswered:
    """The outcome for a connection that is closed without a byte of answer.

    `reason` is the line worth logging, or None for a client that closed
    having sent nothing at all (a port probe, a pool warming up).
    """

    def __init__(self, reason):
        self.reason = reason

    def __repr__(self):
        return "Unanswered(%r)" % (self.reason,)


class Reader:
    """One connection's request, from bytes to one outcome; no socket, thread or clock inside.

    `routes` maps each path to the one method it serves; `deadline` is when
    the whole request must be in, on the caller's clock, and `timeout` the
    seconds that gave it (for messages only). Each of `feed(data)`, `eof()`
    and `expire(now)` returns NEED_MORE while the request may still complete,
    else the final outcome: a Request, a Refused (to be answered with its
    status) or an Unanswered (to be closed without a byte). Once final, the
    outcome never changes: later calls return it again. None of them raises.
    `head` is the Head once it has been parsed (a refused request may have
    one: a HEAD request's answer has no body).
    """

    def __init__(self, routes, deadline, timeout):
        self.routes = routes
        self.deadline = deadline
        self.timeout = timeout
        self.outcome = NEED_MORE
        self.head = None
        self._buffer = bytearray()
        self._body_at = 0  # where the body starts in _buffer, once the head is complete
        # _buffer[:_scanned] is checked: no bare LF, no blank line, and its request line (if any) valid.
        self._scanned = 0
        self._line_checked = False
        self._length = 0  # the body length the head declared
        self._expects_continue = False
        self._continue_sent = False

    @property
    def wants_continue(self):
        """True while an HTTP/1.1 client that sent `Expect: 100-continue` waits for `100 Continue` before its body."""
        return (self.outcome is NEED_MORE and self._expects_continue and not self._continue_sent  # audit: G29
                and len(self._buffer) == self._body_at)

    @property
    def received(self):
        """How many bytes the client has sent on this Reader so far (0: nothing at all)."""
        return len(self._buffer)

    def may_keep(self):
        """True if the connection may carry another request after this one's answer (see keep-alive rules below).

        Only a complete Request (never a refusal: its bytes may not be where the
        client thinks) of an HTTP/1.1 client that asked for it with exactly
        ``Connection: keep-alive``, that sent nothing beyond its body (no
        pipelining: the next request is read from a fresh Reader, never from
        what this one buffered).
        """
        if not isinstance(self.outcome, Request) or self.head.version != "HTTP/1.1":
            return False
        asked = [value.lower() for value in self.head.get_all("Connection")] == ["keep-alive"]
        return asked and len(self._buffer) == self._body_at + self._length  # audit: G27

    def continue_sent(self):
        """Say that `100 Continue` went out (or was tried): wants_continue is False from now on."""
        self._continue_sent = True

    def feed(self, data):
        """Take the next bytes the client sent (not empty: the end of the stream is `eof()`)."""
        if self.outcome is NEED_MORE and data:
            self._buffer += data
            try:
                self.outcome = self._parse()
            except Refused as refusal:
                self.outcome = refusal
        return self.outcome

    def eof(self):
        """The client closed its side (or half-closed it) before the request was complete."""
        if self.outcome is not NEED_MORE:
            return self.outcome
        if self.head is not None:
            self.outcome = Refused(
                "invalid", "body incomplete: %d of %d bytes (Content-Length) before the client closed"
                % (len(self._buffer) - self._body_at, self._length))
        elif self._buffer:
            self.outcome = Refused("invalid", "request head incomplete: the client closed before the blank line")
        else:
            self.outcome = Unanswered(None)
        return self.outcome

    def expire(self, now):
        """The time is `now`: at or past the deadline, a request still arriving ends here."""
        if self.outcome is not NEED_MORE or now < self.deadline:
            return self.outcome
        if self.head is not None:
            self.outcome = Refused(
                "invalid", "body incomplete: %d of %d bytes (Content-Length) within the %gs request deadline"
                % (len(self._buffer) - self._body_at, self._length, self.timeout))
        else:
            # A head that never completed gets no answer: an idle or trickling client is not owed one.
            self.outcome = Unanswered("no complete request within %gs" % self.timeout)
        return self.outcome

    def _parse(self):
        """NEED_MORE, or the Request in the buffer; Refused names the first rule broken."""
        if self.head is None:
            end = self._scan_head()
            if end == -1:
                return NEED_MORE
            self.head = parse_head(bytes(self._buffer[:end]))  # audit: G27
            self._body_at = end
            self._check_route(self.head)
        if len(self._buffer) - self._body_at < self._length:
            return NEED_MORE
        return Request(self.head, bytes(self._buffer[self._body_at:self._body_at + self._length]))

    def _scan_head(self):
        """The index just past the blank line that ends the head, or -1 while it is not in; Refused at the first rule broken.

        Each call looks only at the bytes that came since the last one (plus
        the three before them, where a blank line or a CRLF may have been cut),
        so a head sent one byte at a time costs time linear in its size, not
        quadratic (a 16 KiB head byte by byte cost 1.3 s of CPU when each read
        rescanned it all). Only the head is held to the head's rules: a body
        may hold a bare LF.
        """
        buffer = self._buffer
        blank = buffer.find(b"\r\n\r\n", max(0, self._scanned - 3))
        limit = len(buffer) if blank == -1 else blank + 4
        if not self._line_checked:
            line_end = buffer.find(b"\n", self._scanned, limit)
            if line_end != -1:
                check_request_line(buffer[:line_end + 1])  # audit: G27
                self._line_checked = True
            elif limit > MAX_REQUEST_LINE:  # no line end yet: only its length can be wrong
                raise Refused("uri-too-long", "request line longer than %d bytes" % MAX_REQUEST_LINE)
        if self._line_checked and _BARE_LF.search(buffer, self._scanned, limit):
            raise Refused("invalid", "header lines must end with CRLF, found a bare LF")  # audit: G27
        self._scanned = limit
        if limit > MAX_HEAD:
            raise Refused("head-too-large", "request head longer than %d bytes" % MAX_HEAD)
        return limit if blank != -1 else -1

    def _check_route(self, head):
        allowed = self.routes.get(head.target)
        if allowed is None:  # audit: G28
            raise Refused(
                "no-such-path", "no such path %r: the sink serves only %s" % (head.target, routes_text(self.routes)))
        if head.method != allowed:  # audit: G28
            raise Refused(
                "wrong-method", "method %s is not allowed on %s; use %s" % (head.method, head.target, allowed),
                allow=allowed,
            )
        if head.method != "POST" and (head.get_all("Transfer-Encoding") or any(
                value.strip().strip("0") for value in head.get_all("Content-Length"))):
            # Read as no body, its bytes would be the next request on a kept connection: refused, not ignored.
            raise Refused("invalid", "a %s request has no body" % head.method)  # audit: G27
        if head.method == "POST":
            self._length = body_length(head)
            check_json_type(head)
            # An HTTP/1.0 client's Expect is ignored, as RFC 9110 asks: 1.0 has no 100 Continue.
            self._expects_continue = head.version == "HTTP/1.1" and [
                value.lower() for value in head.get_all("Expect")] == ["100-continue"]


def routes_text(routes):
    """'POST /events, GET /health and GET /metrics': the routes of `routes`, for messages and help texts."""
    names = ["%s %s" % (method, path) for path, method in routes.items()]
    return names[0] if len(names) == 1 else "%s and %s" % (", ".join(names[:-1]), names[-1])


def check_request_line(line):
    """Refuse a request line that can never be valid (HTTP/0.9, HTTP/2.0, a bare LF, too long).

    `line` is the bytes up to and including the first LF. Checked as soon as
    that LF arrives, so such a request is answered at once rather than when
    the deadline ends.
    """
    end = len(line) - 1
    if end > MAX_REQUEST_LINE:
        raise Refused("uri-too-long", "request line longer than %d bytes" % MAX_REQUEST_LINE)
    if end == 0 or line[end - 1:end] != b"\r":
        raise Refused("invalid", "request line must end with CRLF")
    _parse_request_line(bytes(line[:end - 1]))


def parse_head(data):
    """The `Head` in `data` (bytes up to and including the blank line), or Refused naming the broken rule."""
    lines = data[:-4].split(b"\r\n")
    method, target, version = _parse_request_line(lines[0])
    if len(lines) - 1 > MAX_HEADERS:
        raise Refused("head-too-large", "more than %d header lines" % MAX_HEADERS)
    fields = []
    for line in lines[1:]:
        shown = line[:40].decode("latin-1")
        if line[:1] in (b" ", b"\t"):
            raise Refused("invalid", "folded header line %r: obs-fold is not accepted" % shown)
        if _CONTROL.search(line):
            raise Refused("invalid", "control character in header line %r" % shown)
        match = _FIELD.fullmatch(line)
        if match is None:
            if b":" not in line:
                raise Refused("invalid", "header line %r has no colon" % shown)
            raise Refused("invalid", "header line %r: the name must be a token right before the colon" % shown)
        fields.append((match.group(1).decode("ascii").lower(), match.group(2).strip(b" \t").decode("latin-1")))
    head = Head(method, target, version, fields)
    hosts = head.get_all("Host")
    if version == "HTTP/1.1" and len(hosts) != 1:
        raise Refused("invalid", "HTTP/1.1 needs exactly one Host header, got %d" % len(hosts))
    if len(hosts) > 1:
        raise Refused("invalid", "Host must appear at most once, got %d" % len(hosts))
    return head


def body_length(head):
    """The body length `head` declares for an event: one Content-Length up to MAX_BODY, no Transfer-Encoding."""
    encodings = head.get_all("Transfer-Encoding")
    if encodings:
        raise Refused(
            "invalid", "Transfer-Encoding is not accepted (got %s); send one Content-Length" % ", ".join(encodings)
        )
    lengths = head.get_all("Content-Length")
    if not lengths:
        raise Refused("no-length", "Content-Length is required")
    if len(lengths) > 1:
        raise Refused("invalid", "Content-Length must appear once, got %d: %s" % (len(lengths), ", ".join(lengths)))
    text = lengths[0]
    if not _DIGITS.fullmatch(text):
        raise Refused("invalid", "Content-Length must be a decimal number of bytes, got %r" % text)
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(MAX_BODY)) or int(digits) > MAX_BODY:
        raise Refused("too-large", "Content-Length %s exceeds the limit of %d bytes" % (text, MAX_BODY))
    return int(digits)


def check_json_type(head):
    """Refuse unless Content-Type is application/json once, with no charset but UTF-8."""
    values = head.get_all("Content-Type")
    if len(values) != 1:
        raise Refused("wrong-type", "Content-Type must be application/json once, got %s" % (values or "none"))
    media, *params = values[0].split(";")
    if media.strip().lower() != "application/json":
        raise Refused("wrong-type", "Content-Type must be application/json, got %r" % values[0])
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
            raise Refused("wrong-type", "Content-Type charset must be utf-8, got %r" % values[0])


def _parse_request_line(line):
    """(method, target, version) of an exact request line, else Refused (505 for another HTTP version)."""
    match = _REQUEST_LINE.fullmatch(line)
    if match is not None:
        method, target = match.group(1).decode("ascii"), match.group(2).decode("ascii")
        return method, target, line[-8:].decode("ascii")
    shown = line[:80].decode("latin-1")
    if _OTHER_VERSION.fullmatch(line):
        raise Refused("version", "HTTP version %s is not served; use HTTP/1.0 or HTTP/1.1" % shown.rsplit(" ", 1)[-1])
    if len(line.split()) == 2 and b"HTTP/" not in line:
        raise Refused("invalid", "request line %r has no HTTP version: HTTP/0.9 is not served" % shown)
    raise Refused("invalid", "request line %r is not exactly METHOD SP target SP HTTP/1.0 or HTTP/1.1" % shown)
