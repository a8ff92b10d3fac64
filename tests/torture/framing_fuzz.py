"""A seeded fuzz of sink.framing.Reader, without sockets: random byte streams in random chunks.

Owns the stream generator (valid requests, byte-level mutations of them,
and plain noise) and the checks one stream must pass: no call raises, every
call returns NEED_MORE or a final outcome (Request, Refused, Unanswered),
a final outcome never changes, a refusal is one the reader may give (never
the statuses decided after it), a Request is one the routes serve with the
body its head declared, and cutting the stream into other chunks changes
nothing but, at most, which rule a refusal names first. `make test` runs a
fixed seed (tests/test_sink_framing.py); `make torture` a long run with a printed
seed.
"""
import json
import random

from sink import framing, server
from sink.framing import NEED_MORE, Refused, Request, Unanswered

# Statuses decided after the reader (by receive, or by a thread that died): never a framing refusal.
AFTER_READER = ("conflict", "internal", "unavailable")
_NOISE = b"\r\n \t:;,/0123456789HTPOSGE.-\x00\x7f\xff"  # bytes that matter to a parser, to splice in


def valid_requests(rng):
    """Requests the reader must accept, as bytes: POST, GET, HTTP/1.0 and 1.1, odd but lawful shapes."""
    event = {"id": "f%d" % rng.randrange(10 ** 6), "sku": rng.choice(["apple", "pear"]), "qty": rng.randint(1, 99)}
    body = json.dumps(event).encode("ascii")
    pretty = json.dumps(event, indent=1).encode("ascii")  # a body with bare LFs: the head's rules are not its rules

    def post(version, extra=(), data=body, content_type="application/json"):
        lines = ["POST /events %s" % version] + (["Host: 127.0.0.1"] if version == "HTTP/1.1" else [])
        lines += ["Content-Type: " + content_type, "Content-Length: %d" % len(data)] + list(extra)
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data

    return [
        post("HTTP/1.1"),
        post("HTTP/1.0"),
        post("HTTP/1.1", data=pretty),
        post("HTTP/1.1", ["Expect: 100-continue", "X-Note:\tspaced out  "]),
        post("HTTP/1.1", content_type='Application/JSON; charset="UTF-8"'),
        b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /metrics HTTP/1.0\r\n\r\n",
    ]


def mutate(rng, data):
    """One to three byte-level changes to `data`."""
    data = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(7)
        i = rng.randrange(len(data) + 1)
        if kind == 0 and data:  # a bit flipped
            data[min(i, len(data) - 1)] ^= 1 << rng.randrange(8)
        elif kind == 1:  # a byte that matters to a parser, spliced in
            data[i:i] = bytes([rng.choice(_NOISE)])
        elif kind == 2:  # a run dropped
            del data[i:i + rng.randint(1, 8)]
        elif kind == 3:  # a run repeated
            data[i:i] = data[i:i + rng.randint(1, 40)]
        elif kind == 4:  # cut anywhere
            del data[i:]
        elif kind == 5:  # a long run, past a limit
            data[i:i] = bytes([rng.choice(b"aX \r\n")]) * rng.choice([100, 8300, 16500])
        else:  # a line break turned into something else
            at = data.find(b"\r\n", i)
            if at != -1:
                data[at:at + 2] = rng.choice([b"\n", b"\r", b"\r\n ", b"\r\n\r\n", b""])
    return bytes(data)


def stream(rng):
    """A byte stream for one connection: a valid request, a mutated one, or noise."""
    roll = rng.random()
    base = rng.choice(valid_requests(rng))
    if roll < 0.1:
        return base
    if roll < 0.9:
        return mutate(rng, base)
    return bytes(rng.randrange(256) for _ in range(rng.randrange(200)))


def chunks(rng, data):
    """`data` cut into pieces of random sizes, mostly small."""
    pieces, i = [], 0
    while i < len(data):
        # At most about 40 pieces: a long stream one byte at a time only costs time (tests/test_sink_framing.py does it).
        size = max(len(data) // 40, rng.choice([1, 1, 2, 3, 7, 16, 64, 1000, len(data)]))
        pieces.append(data[i:i + size])
        i += size
    return pieces


def shape(outcome):
    """What two outcomes must share to be the same: the request itself, or only the kind of ending."""
    if isinstance(outcome, Request):
        head = outcome.head
        return ("request", head.method, head.target, head.version, tuple(head.fields), outcome.body)
    if isinstance(outcome, Refused):
        return ("refused",)
    if isinstance(outcome, Unanswered):
        return ("unanswered",)
    return ("need more",)


def new_reader(deadline=100.0):
    return framing.Reader(server.ALLOWED, deadline, 10.0)


def read_in_chunks(rng, data, *, end):
    """Feed `data` in random chunks, with looks at the clock before the deadline; then `end` it. Returns the outcome."""
    reader = new_reader()
    final = None
    for piece in chunks(rng, data):
        outcomes = [reader.feed(piece)]
        if rng.random() < 0.2:
            outcomes.append(reader.expire(rng.uniform(0.0, 99.9)))  # before the deadline: nothing ends
        for outcome in outcomes:
            check_one(outcome)
            if final is not None and outcome is not final:
                raise AssertionError("a final outcome changed: %r became %r" % (final, outcome))
            if outcome is not NEED_MORE:
                final = outcome
    last = reader.eof() if end == "eof" else reader.expire(100.0)
    check_one(last)
    if final is not None and last is not final:
        raise AssertionError("a final outcome changed at the end: %r became %r" % (final, last))
    if last is NEED_MORE:
        raise AssertionError("still NEED_MORE after %s" % end)
    return last


def check_one(outcome):
    """One call's outcome must be one the reader may give."""
    if outcome is NEED_MORE or isinstance(outcome, Unanswered):
        return
    if isinstance(outcome, Refused):
        if outcome.kind not in framing.STATUS or outcome.kind in AFTER_READER:
            raise AssertionError("refusal %r (%s) is not the reader's to give" % (outcome.kind, outcome.message))
        return
    if not isinstance(outcome, Request):
        raise AssertionError("not an outcome: %r" % (outcome,))
    head = outcome.head
    if server.ALLOWED.get(head.target) != head.method:
        raise AssertionError("a Request for %s %s, which no route serves" % (head.method, head.target))
    declared = head.get_all("Content-Length")
    if head.method == "POST" and (len(declared) != 1 or int(declared[0]) != len(outcome.body)):
        raise AssertionError("a body of %d bytes for Content-Length %r" % (len(outcome.body), declared))


def check_stream(rng, data):
    """Every check above for one stream; its outcome, or AssertionError naming the rule broken."""
    end = rng.choice(["eof", "expire"])
    whole = new_reader()
    if data:
        whole.feed(data)
    at_once = whole.eof() if end == "eof" else whole.expire(100.0)
    check_one(at_once)
    in_chunks = read_in_chunks(rng, data, end=end)
    if shape(in_chunks) != shape(at_once):
        raise AssertionError("in chunks %r, at once %r" % (in_chunks, at_once))
    return at_once


def run(seed, streams):
    """Check `streams` streams from `seed`; return (violations, {outcome kind or status: count})."""
    rng = random.Random(seed)
    violations, seen = [], {}
    for n in range(streams):
        data = stream(rng)
        try:
            outcome = check_stream(rng, data)
        except Exception as exc:  # every failure is a finding: name the stream that caused it
            violations.append("seed %d, stream %d: %s: %s; stream %r" % (seed, n, type(exc).__name__, exc, data[:200]))
            if len(violations) >= 10:
                break
            continue
        key = int(outcome.status()) if isinstance(outcome, Refused) else shape(outcome)[0]
        seen[key] = seen.get(key, 0) + 1
    return violations, seen
