"""The corpus of the ACK rule: every answer the rule (docs/participants.md, "the ACK") tells apart from a verified ACK.

`cases(seed)` gives Cases whose args are (event,), each event with an id of its own, and whose extra is
the answer a fake sink gives to that id: {"status", "reason", "headers", "body" (bytes as latin-1 text),
"framing": "length" (a Content-Length), "close" (none: the body ends when the connection closes), or
"cut" (a Content-Length the body never reaches)}. No chunked answers: the rule does not ask a worker to
decode them (a worker may read HTTP/1.1 by hand), and no sink of the kit sends one. `raw_answer(answer)` makes its bytes;
`reference_outcome(event, answer)` is the rule, written from its text: exactly True only for status 200
with a whole body of at most 4,096 bytes (announced or not) that is UTF-8 JSON of an object whose "ack" is
the literal true and whose "id" is the str sent, equal as it is (no case folding, no trimming, no number);
a DeliveryError for anything else. Byte timings are the send-timeout check's (a corpus of them would cost
seconds); this module only formats and compares.
"""
import json

from . import numbered, raises, returns, rng

MAX_ACK = 4096
SEEDED = 40
JSON = [["Content-Type", "application/json"]]


def answer(body, status=200, reason="OK", headers=None, framing="length"):
    if isinstance(body, (dict, list)) or body is None:
        body = json.dumps(body)
    if isinstance(body, bytes):
        body = body.decode("latin-1")
    return {"status": status, "reason": reason, "headers": JSON if headers is None else headers, "body": body,
            "framing": framing}


def padded(event_id, size, framing="length"):
    """A perfect ACK of exactly `size` bytes: the ACK's fields and a "pad" of spaces."""
    head = json.dumps({"ack": True, "id": event_id, "pad": ""})
    return answer(json.dumps({"ack": True, "id": event_id, "pad": " " * (size - len(head))}), framing=framing)


def raw_answer(ans):
    """The bytes a fake sink writes for `ans`, then closes the connection."""
    body = ans["body"].encode("latin-1")
    lines = ["HTTP/1.1 %d %s" % (ans["status"], ans["reason"])] + ["%s: %s" % (k, v) for k, v in ans["headers"]]
    lines.append("Connection: close")
    if ans["framing"] == "length":
        lines.append("Content-Length: %d" % len(body))
    elif ans["framing"] == "cut":
        lines.append("Content-Length: %d" % (len(body) + 50))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def reference_outcome(event, ans):
    """What the rule makes of `ans` as the answer to `event`: returns(True) or raises("DeliveryError")."""
    refused = raises("DeliveryError")
    body = ans["body"].encode("latin-1")
    if ans["status"] != 200 or ans["framing"] == "cut" or len(body) > MAX_ACK:
        return refused
    try:
        ack = json.loads(body.decode("utf-8"))
    except ValueError:
        return refused
    if not isinstance(ack, dict) or ack.get("ack", None) is not True or "id" not in ack:
        return refused
    if not isinstance(ack["id"], str) or ack["id"] != event["id"]:
        return refused
    return returns(True)


def ack(event_id, **fields):
    return dict({"ack": True, "id": event_id}, **fields)


def boundary():
    """[(cls, event id -> answer)] for every class, the edges first."""
    out = []
    add = lambda cls, make: out.append((cls, make))  # noqa: E731
    add("perfect", lambda i: answer(ack(i)))
    add("perfect", lambda i: answer(ack(i, result="applied", note="ok")))
    add("perfect", lambda i: answer({"id": i, "ack": True}))
    add("perfect", lambda i: answer(" \n" + json.dumps(ack(i), indent=2) + "\n"))
    add("perfect", lambda i: answer('{"ack":true,"id":"%s"}' % "".join("\\u%04x" % ord(c) for c in i)))
    add("headers", lambda i: answer(ack(i), headers=[]))
    add("headers", lambda i: answer(ack(i), headers=[["Content-Type", "application/json; charset=utf-8"]]))
    add("headers", lambda i: answer(ack(i), headers=JSON + [["X-Extra", "1"], ["Server", "fake"]]))
    add("headers", lambda i: answer(ack(i), reason="Fine"))
    for size in (MAX_ACK, MAX_ACK - 1, MAX_ACK + 1, MAX_ACK + 2, 2 * MAX_ACK, 70000):
        add("body-size", lambda i, size=size: padded(i, size))
    for size in (MAX_ACK + 1, MAX_ACK, 70000, MAX_ACK + 1000, MAX_ACK - 1, MAX_ACK + 2, 1):
        add("body-size-unannounced", lambda i, size=size: padded(i, size, "close"))
    add("body-cut", lambda i: answer(ack(i), framing="cut"))
    add("body-cut", lambda i: answer(json.dumps(ack(i))[:10], framing="cut"))
    add("body-cut", lambda i: answer("", framing="cut"))
    for status in (201, 202, 203, 204, 206, 226, 299, 300, 304, 400, 404, 409, 415, 422, 500, 502, 503, 599):
        add("status", lambda i, status=status: answer(ack(i), status=status, reason="Other"))
    for value in (1, 1.0, "true", "True", "yes", [True], {"value": True}, None, False, 0, 2, -1, "1", [], {}):
        add("ack-value", lambda i, value=value: answer(ack(i, ack=value)))
    add("ack-value", lambda i: answer({"id": i}))
    add("ack-value", lambda i: answer({"Ack": True, "id": i}))
    add("ack-value", lambda i: answer({"ACK": True, "id": i}))
    add("ack-value", lambda i: answer('{"ack":True,"id":"%s"}' % i))
    for make in (str.upper, lambda s: " " + s, lambda s: s + " ", lambda s: s + "\n", lambda s: s[:-1],
                 lambda s: s + "0", lambda s: s.replace("-", "_"), lambda s: s.replace("a", "\u0430"),
                 lambda s: s.replace("k", "\u212a"), lambda s: s.casefold().replace("c", "C"),
                 lambda s: "", lambda s: s.replace("0", "\uff10")):
        add("id-match", lambda i, make=make: answer(ack(make(i))))
    for value in (None, True, ["id"], {"id": "x"}):
        add("id-match", lambda i, value=value: answer(ack(i, id=value)))
    add("id-match", lambda i: answer({"ack": True}))
    add("id-match", lambda i: answer({"ack": True, "ID": i}))
    add("id-match", lambda i: answer(ack("someone-else")))
    return out


# Numeric ids: "1042" sent, 1042 or "01042" answered, where a loose comparison would take them.
NUMERIC = (lambda s: int(s), lambda s: float(s), lambda s: "0" + s, lambda s: s + ".0", lambda s: " " + s,
           lambda s: "\uff11" + s[1:], lambda s: "\u0661" + s[1:], lambda s: [s], lambda s: s)


def numeric_boundary():
    return [("numeric-id", lambda i, make=make: answer(ack(make(i)))) for make in NUMERIC]


def not_json():
    out = []
    for body in ("", "ok", "true", "null", "1", '"ack"', "<html>ack</html>", "{", '{"ack": true, "id": ',
                 "ack=true&id=x", "{'ack': True}", "\x00"):
        out.append(("not-json", lambda i, body=body: answer(body)))
    for make in (lambda i: [ack(i)], lambda i: [True, i], lambda i: "ack"):
        out.append(("not-object", lambda i, make=make: answer(json.dumps(make(i)))))
    for raw in (b'{"ack": true, "id": "%s", "x": "\xff"}', b'{"ack": true, "id": "%s\xc3"}',
                b'\xfe\xff{"ack": true, "id": "%s"}'):
        out.append(("not-utf8", lambda i, raw=raw: answer(raw.replace(b"%s", i.encode()))))
    return out


def seeded(seed):
    """SEEDED answers: sizes around the cap in every framing, random statuses, random damage to the id."""
    r = rng(seed, "acks")
    out = []
    for n in range(SEEDED):
        kind = n % 3
        if kind == 0:
            size, framing = r.randint(MAX_ACK - 8, MAX_ACK + 8), r.choice(("length", "close"))
            out.append(("body-size" if framing == "length" else "body-size-unannounced",
                        lambda i, size=size, framing=framing: padded(i, size, framing)))
        elif kind == 1:
            status = r.choice((r.randint(201, 299), r.randint(300, 599), 200))
            out.append(("status" if status != 200 else "perfect",
                        lambda i, status=status: answer(ack(i), status=status, reason="Some")))
        else:
            at, char = r.randint(0, 6), r.choice("aA0_-. \u00e9")
            out.append(("id-match", lambda i, at=at, char=char: answer(ack(i[:at] + char + i[at + 1:]))))
    return out


def cases(seed):
    """[Case] whose args are ({"id": a str of its own, "sku": "ack", "qty": 1},), extra the answer."""
    made = []
    for k, (cls, make) in enumerate(boundary() + not_json() + seeded(seed)):
        event_id = "ack-%03d" % k
        made.append((cls, ({"id": event_id, "sku": "ack", "qty": 1},), make(event_id)))
    for k, (cls, make) in enumerate(numeric_boundary()):
        event_id = "1%03d" % k
        made.append((cls, ({"id": event_id, "sku": "ack", "qty": 1},), make(event_id)))
    return numbered(made, ())


CLASSES = ("perfect", "headers", "body-size", "body-size-unannounced", "body-cut", "status", "ack-value", "id-match",
           "numeric-id", "not-json", "not-object", "not-utf8")
