"""The checks the parent runs: stories across real processes that crash, and servers of the grader's own.

Each scenario takes a CheckContext, starts children through it, observes the
DBs read-only, and returns (expected, observed) messages or raises Fail. It
never touches the worker: only the children do (worker_side/), making the calls this side asks for.
"""
import concurrent.futures
import contextlib
import http.client
import json
import os
import urllib.parse

from . import own_work
from .common import INTAKE_CRASH, PUBLISHER_CRASH, SINK_CRASH, SNACK, Fail, describe, expect, msg, wrong_class
from .corpus import acks as ack_corpus
from .corpus import checks as corpus_checks
from .parent import (
    AnswerSink, FakeSink, TrickleSink, ack_body, acks, delivery_error, need_ok, observe_sink, observe_source, payload_event,
)


def who(role, **fields):
    return msg("who." + role, **fields)


def seen_source(state):
    """What the grader read of snack-7 in a source DB, in words (never the dict it was read into)."""
    if "error" in state:
        return state["error"]
    return msg("atomic.rows", order=msg("present" if state["order"] else "absent"), outbox=state["outbox"])


def seen_sink(state):
    """What the grader read of snack-7 in a sink DB, in words."""
    if "error" in state:
        return state["error"]
    return msg("receive.rows", inbox=msg("present" if state["inbox"] else "absent"), deliveries=state["deliveries"],
               inventory=state["inventory"])


def phase(run, n):
    """The evidence table's name for what publisher #n did: its exit status, its error, or its timeout."""
    error = run.first("error")
    if run.timed_out is not None:
        return msg("phase.publisher-timed-out", n=n, seconds="%g" % run.timed_out)
    if error:
        return msg("phase.publisher-error", n=n, error=error["type"])
    return msg("phase.publisher-exit", n=n, status=run.status)


def scenario_crash_after_ack(g):
    work = g.workdir()
    source, sink_db = os.path.join(work, "source.db"), os.path.join(work, "sink.db")
    story = g.story(source, sink_db)
    need_ok(g.run(who("intake"), "intake", "--db", source, "--events", json.dumps([SNACK])))
    row = story.observe(msg("phase.intake"))
    expect(row["order"] and row["outbox"] == "pending", msg("crash.taken-in"), seen_source(row))
    with g.sink(sink_db) as sink:
        first = g.run(who("publisher-n", n=1), "publish", "--db", source, "--url", sink.url, "--crash-after-ack")
        row = story.observe(phase(first, 1), ack=acks(first))
        expect(first.status == PUBLISHER_CRASH, msg("crash.dies", status=PUBLISHER_CRASH), first.summary())
        expect(row["outbox"] == "pending", msg("crash.still-pending"), msg("outbox.is", outbox=row["outbox"]))
        expect(row["inventory"] == 7 and row["deliveries"] == ["applied"], msg("crash.applied-once"),
               msg("inventory-deliveries", inventory=row["inventory"], deliveries=row["deliveries"]))
        second = g.run(who("publisher-n", n=2), "publish", "--db", source, "--url", sink.url)
        row = story.observe(phase(second, 2), ack=acks(second))
        need_ok(second)
    expect(row["deliveries"] == ["applied", "duplicate"], msg("crash.two-deliveries"),
           msg("deliveries.are", deliveries=row["deliveries"]))
    expect(row["inventory"] == 7, msg("crash.still-7"), msg("inventory.is", inventory=row["inventory"]))
    expect(row["outbox"] == "sent", msg("crash.sent"), msg("outbox.is", outbox=row["outbox"]))
    return msg("crash-after-ack.passed", status=PUBLISHER_CRASH), msg(
        "deliveries-inventory-outbox", deliveries=row["deliveries"], inventory=row["inventory"], outbox=row["outbox"])


def scenario_dropped_response(g):
    work = g.workdir()
    source, sink_db = os.path.join(work, "source.db"), os.path.join(work, "sink.db")
    story = g.story(source, sink_db)
    need_ok(g.run(who("intake"), "intake", "--db", source, "--events", json.dumps([SNACK])))
    story.observe(msg("phase.intake"))
    with g.sink(sink_db, fault="drop-after-commit") as sink:
        first = g.run(who("publisher-n", n=1), "publish", "--db", source, "--url", sink.url)
        row = story.observe(phase(first, 1), ack=acks(first))
        error = delivery_error(first, msg("dropped.fails"))
        expect(row["outbox"] == "pending", msg("dropped.pending"), msg("outbox.is", outbox=row["outbox"]))
        expect(row["inventory"] == 7, msg("dropped.committed"), msg("inventory.is", inventory=row["inventory"]))
        second = g.run(who("publisher-n", n=2), "publish", "--db", source, "--url", sink.url)
        row = story.observe(phase(second, 2), ack=acks(second))
        need_ok(second)
    expect(row["deliveries"] == ["applied", "duplicate"], msg("dropped.duplicate"),
           msg("deliveries.are", deliveries=row["deliveries"]))
    expect(row["inventory"] == 7 and row["outbox"] == "sent", msg("dropped.sent"),
           msg("inventory-outbox", inventory=row["inventory"], outbox=row["outbox"]))
    return msg("dropped-response.passed"), msg("dropped.observed", error=error["message"], deliveries=row["deliveries"],
                                               inventory=row["inventory"], outbox=row["outbox"])


JSON_HEADERS = [("Content-Type", "application/json")]
UNTRUSTED = (
    ("wrong-id", lambda event_id: (200, JSON_HEADERS, ack_body("someone-else"))),
    ("oversized", lambda event_id: (200, JSON_HEADERS, ack_body(event_id, pad="x" * 5000))),
    ("ack-string", lambda event_id: (200, JSON_HEADERS, json.dumps({"ack": "true", "id": event_id}).encode())),
)


def padded_ack(event_id, size):
    """A perfect ACK of exactly `size` bytes: the ACK's fields and a "pad" of spaces."""
    body = ack_body(event_id, pad="")
    return ack_body(event_id, pad=" " * (size - len(body)))


# What send_http itself must make of an answer: (case, answer, True if it is a verified ACK).
ACK_CASES = (
    ("perfect", lambda event_id: (200, JSON_HEADERS, ack_body(event_id)), True),
    ("ack-4096", lambda event_id: (200, JSON_HEADERS, padded_ack(event_id, 4096)), True),
    ("ack-4097", lambda event_id: (200, JSON_HEADERS, padded_ack(event_id, 4097)), False),
    ("status-201", lambda event_id: (201, JSON_HEADERS, ack_body(event_id)), False),
    ("no-id", lambda event_id: (200, JSON_HEADERS, json.dumps({"ack": True}).encode()), False),
    ("not-object", lambda event_id: (200, JSON_HEADERS, json.dumps([{"ack": True, "id": event_id}]).encode()), False),
)


def scenario_untrusted_ack(g):
    work = g.workdir()
    # The trap answers with a perfect ACK for snack-7: only not asking it keeps the item pending.
    with contextlib.ExitStack() as stack:
        trap = stack.enter_context(FakeSink(lambda event_id: (200, [], ack_body(SNACK["id"])), g.net))
        cases = list(UNTRUSTED)
        # 302: the redirect that a default urllib opener follows, even for a POST (as a GET).
        cases.append(("redirect", lambda event_id: (302, [("Location", trap.url())], b"")))
        fakes = [(name, stack.enter_context(FakeSink(answer, g.net))) for name, answer in cases]
        acks = [(name, stack.enter_context(FakeSink(answer, g.net)), verified) for name, answer, verified in ACK_CASES]
        # The ACK corpus: one sink that answers each case's event id with that case's bytes.
        corpus = ack_corpus.cases(g.seed)
        answering = stack.enter_context(AnswerSink({c.args[0]["id"]: ack_corpus.raw_answer(c.extra) for c in corpus},
                                                     g.net))
        # Each publisher has a source DB of its own, and the senders only their fake sinks: all run side by side.
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(fakes) + 1 + ACK_PARTS) as pool:
            sent = pool.submit(g.run, who("sender"), "send", "--send-timeout", "2",
                               "--urls", json.dumps([fake.url() for _, fake, _ in acks]))
            answered = [pool.submit(g.run, who("sender"), "send", "--corpus", "acks", "--url", answering.url(),
                                    "--part", str(part), "--parts", str(ACK_PARTS)) for part in range(ACK_PARTS)]
            runs = [pool.submit(untrusted_publisher, g, work, name, fake) for name, fake in fakes]
            reasons = dict(run.result() for run in runs)
            judge_acks(sent.result(), acks)
            answered = [run.result() for run in answered]
            outcomes = {line["n"]: line["outcome"] for run in answered for line in run.all("outcome")}
            unfinished = next((run.summary() for run in answered if run.status != 0), None)
            corpus_checks.judge_acks(outcomes, g.seed, unfinished)
        expect(not trap.hits, msg("untrusted.trap-empty"), msg("trap.saw", hits=repr(trap.hits)))
    return msg("untrusted-ack.passed"), msg("untrusted.observed", **reasons)


ACK_PARTS = 4  # senders of the ACK corpus, side by side: each case is a round trip, slow on a loaded machine


def untrusted_publisher(g, work, name, fake):
    """Publish snack-7 to a fake sink that answers with case `name`: a DeliveryError, and snack-7 pending.

    Returns (the case's field in untrusted.observed, the reason the publisher gave).
    """
    source = os.path.join(work, name + ".db")
    run = g.run(who("publisher-case", case=msg("case." + name)), "publish", "--db", source,
                "--url", fake.url(), "--events", json.dumps([SNACK]))
    error = delivery_error(run, msg("untrusted.fails", case=msg("case." + name)))
    state = observe_source(source, SNACK["id"])
    expect(state.get("outbox") == "pending", msg("untrusted.pending", case=msg("case." + name)),
           seen_source(state))
    return name.replace("-", "_"), reason(error)


def reason(error):
    """`Type: message` of a publisher's error, without the kit's "POST <url> for 'snack-7': " prefix if it has one.

    The class named once (describe() already starts with it), and nothing cut from a message of another shape.
    """
    text = error["message"]
    prefix = error["type"] + ": "
    body = text[len(prefix):] if text.startswith(prefix) else text
    kit = "POST %s for %r: " % (body.split(" ", 2)[1], SNACK["id"]) if body.startswith("POST ") and " " in body[5:] else None
    if kit and body.startswith(kit):
        body = body[len(kit):]
    return prefix + body


def judge_acks(run, acks):
    """send_http returned exactly True for each verified ACK, and raised a DeliveryError for every other answer."""
    lines = run.all("sent")
    expect(len(lines) == len(acks), msg("untrusted.sender"), run.summary())
    for (name, _, verified), line in zip(acks, lines):
        case = msg("case." + name)
        if verified:
            expect(line["type"] is None, msg("untrusted.true", case=case), msg("untrusted.raised", error=line["message"]))
            expect(line["result"] is True, msg("untrusted.true", case=case), msg("call.gave", value=line["shown"]))
        else:
            expected = msg("untrusted.raises", case=case)
            expect(line["type"] is not None, expected, msg("call.gave", value=line["shown"]))
            expect("DeliveryError" in line["mro"], expected, wrong_class("DeliveryError", line["type"], line["mro"], line["message"]))


def scenario_proxy_ignored(g):
    source = os.path.join(g.workdir(), "source.db")
    with FakeSink(net=g.net) as trap, FakeSink(lambda event_id: (200, JSON_HEADERS, ack_body(event_id)), g.net) as sink:
        env = g.env(HTTP_PROXY=trap.url(""), http_proxy=trap.url(""))
        run = g.run(who("publisher"), "publish", "--db", source, "--url", sink.url(), "--events", json.dumps([SNACK]), env=env)
        expect(not trap.hits, msg("proxy.trap-empty"), msg("trap.saw", hits=repr(trap.hits)))
        need_ok(run)
        expect(len(sink.hits) == 1, msg("proxy.direct"), msg("sink.saw", hits=repr(sink.hits)))
    state = observe_source(source, SNACK["id"])
    expect(state.get("outbox") == "sent", msg("proxy.sent"), seen_source(state))
    return msg("proxy-ignored.passed"), msg("proxy.observed")


def post(url, event, timeout, net):
    """The grader's own POST to a sink on the worker's loopback (`net`); returns (status, body text) or raises Fail.

    `url` is the address the worker's sink announced: one that is no URL, or
    no loopback port, is the worker's failure like a refused connection.
    """
    conn = None
    try:
        parts = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        conn.sock = net.connect(parts.hostname, parts.port, timeout)  # as the worker's processes connect
        conn.request("POST", "/events", body=json.dumps(event).encode(), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read(4096).decode("utf-8", "replace")
    except (OSError, ValueError, http.client.HTTPException) as exc:  # ValueError: urlsplit's, a port's
        raise Fail(msg("post.answer"), msg("plain", text=describe(exc)))
    finally:
        if conn is not None:
            conn.close()


def scenario_conflict(g):
    work = g.workdir()
    source, sink_db = os.path.join(work, "source.db"), os.path.join(work, "sink.db")
    other = dict(SNACK, qty=9)
    with g.sink(sink_db) as sink:
        status, body = post(sink.url, SNACK, g.timeout, g.net)
        expect(status == 200, msg("conflict.first-200"), msg("status-body", status=status, body=body))
        run = g.run(who("publisher"), "publish", "--db", source, "--url", sink.url, "--events", json.dumps([other]))
        delivery_error(run, msg("conflict.publish-fails"))
        status, body = post(sink.url, other, g.timeout, g.net)
    expect(status == 409, msg("conflict.409"), msg("status-body", status=status, body=body))
    snk = observe_sink(sink_db, SNACK["id"], SNACK["sku"])
    expect(snk.get("inventory") == 7, msg("conflict.inventory"), seen_sink(snk))
    src = observe_source(source, SNACK["id"])
    expect("error" not in src, msg("db.readable"), src.get("error"))
    expect(src["outbox"] == "pending" and payload_event(src["payload"]).get("qty") == 9, msg("conflict.outbox-untouched"),
           seen_source(src))
    return msg("conflict.passed"), msg("conflict.observed", body=body.strip()[:80], deliveries=snk.get("deliveries"))


SEND_TIMEOUT = 1  # the timeout the grader passes to send_http against the trickling sink
SEND_GRACE = 2.0  # seconds past that timeout a send may still take (process and machine noise)


def scenario_send_timeout(g):
    with TrickleSink(g.net) as trickle:
        run = g.run(who("sender"), "send", "--url", trickle.url(), "--send-timeout", str(SEND_TIMEOUT))
        bound = SEND_TIMEOUT + SEND_GRACE
        expected = msg("timeout.bounded", timeout=SEND_TIMEOUT, bound="%g" % bound, trickle="%g" % trickle.seconds())
        sent = run.first("sent")
        expect(sent is not None, expected, run.summary())
        expect(sent["type"] is not None, expected, msg("timeout.returned", result=repr(sent["result"]),
                                                       seconds="%g" % sent["seconds"]))
        expect("DeliveryError" in sent["mro"], expected, wrong_class("DeliveryError", sent["type"], sent["mro"], sent["message"]))
        expect(sent["seconds"] <= bound, expected, msg("timeout.took", seconds="%g" % sent["seconds"], error=sent["message"]))
    return expected, msg("timeout.observed", seconds="%g" % sent["seconds"], error=sent["type"])


def scenario_own_work(g):
    def kit_modules():
        run = g.run(who("check", name=g.name), "kit")
        line = run.first("kit")
        return line["modules"] if line else []  # an import that fails loads no kit: the other checks say why
    return own_work.judge(g, kit_modules)


def scenario_intake_atomic(g):
    source = os.path.join(g.workdir(), "source.db")
    run = g.run(who("intake"), "intake", "--db", source, "--events", json.dumps([SNACK]), "--crash-after-first-commit")
    expect(run.status == INTAKE_CRASH, msg("atomic.intake-dies", status=INTAKE_CRASH), run.summary())
    state = observe_source(source, SNACK["id"])
    expect("error" not in state, msg("db.readable"), state.get("error"))
    expect(state["order"] and state["outbox"] == "pending", msg("atomic.both"),
           msg("atomic.rows", order=msg("present" if state["order"] else "absent"), outbox=state["outbox"]))
    return msg("intake-atomic.passed"), msg("atomic.observed")


def scenario_receive_atomic(g):
    work = g.workdir()
    faults = (("crash-before-commit", False), ("crash-after-commit", True))
    # The two faults touch separate files: run them side by side.
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(faults)) as pool:
        before, after = pool.map(lambda fault: receive_crash(g, work, *fault), faults)
    return msg("receive-atomic.passed"), msg("receive.observed", before=before, after=after)


def receive_crash(g, work, fault, whole):
    """The sink dies at `fault`; `whole`: whether the receipt was committed by then. Then a restart delivers it.

    Returns the sink's deliveries of snack-7 at the end.
    """
    source, sink_db = os.path.join(work, fault + "-source.db"), os.path.join(work, fault + "-sink.db")
    need_ok(g.run(who("intake"), "intake", "--db", source, "--events", json.dumps([SNACK])))
    with g.sink(sink_db, fault=fault) as sink:
        run = g.run(who("publisher"), "publish", "--db", source, "--url", sink.url)
        verdict = run.first("verdict")
        if verdict and not verdict["ok"]:
            # The publisher named a worker function that broke a rule: that is the cause, not the sink's exit status.
            raise Fail(verdict["expected"], verdict["observed"])
        status = sink.wait_exit(g.timeout)
    expect(status == SINK_CRASH, msg("receive.sink-exits", fault=fault, status=SINK_CRASH), msg("status.is", status=status))
    expect(run.status == 1, msg("receive.no-ack", fault=fault), run.summary())
    snk = observe_sink(sink_db, SNACK["id"], SNACK["sku"])
    expect("error" not in snk, msg("db.readable"), snk.get("error"))
    want = {"inbox": whole, "deliveries": ["applied"] if whole else [], "inventory": 7 if whole else 0}
    expect(snk == want, msg("receive.whole" if whole else "receive.nothing", fault=fault),
           msg("receive.rows", inbox=msg("present" if snk["inbox"] else "absent"), deliveries=snk["deliveries"],
               inventory=snk["inventory"]))
    with g.sink(sink_db) as sink:
        need_ok(g.run(who("publisher-restarted"), "publish", "--db", source, "--url", sink.url))
    snk = observe_sink(sink_db, SNACK["id"], SNACK["sku"])
    expect(snk.get("inventory") == 7, msg("receive.restarted", fault=fault), seen_sink(snk))
    return snk["deliveries"]


def in_process(function):
    """A scenario that runs the check of checks.py named `function` (a string) in one step."""
    def scenario(g):
        run = g.run(who("check", name=g.name), "check", "--check", function,
                    "--db", os.path.join(g.workdir(), "source.db"))
        verdict = run.first("verdict")
        if run.status == 0 and verdict and verdict["ok"]:
            return verdict["expected"], verdict["observed"]
        if verdict and not verdict["ok"]:
            raise Fail(verdict["expected"], verdict["observed"])
        error = run.first("error")
        if error and error.get("function") and run.timed_out is None:
            # A worker function raised on one of this check's cases: name it, the call, and the rule, first.
            raise Fail(msg("check.raised", function=error["function"], call=error.get("call") or error["function"],
                           rule=msg("proves." + g.name)), run.summary())
        raise Fail(msg("check.runs", name=g.name), run.summary())
    scenario.child_function = function  # tests/test_grader_registry.py finds each in checks.py
    return scenario
