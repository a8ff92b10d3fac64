"""sink.framing.Reader without sockets: chunk splits, every refusal of docs/api.md's table, seeded random streams.

The reader is driven the way the server drives it (feed, eof, expire with a
clock passed in), so every rule is checked here in microseconds; the server
tests only check that bytes and outcomes travel between sockets and it.
The random streams come from a fixed seed, printed, so `make test` is the
same run every time; OUTBOX_FRAMING_SEED=N (and OUTBOX_FRAMING_STREAMS=M)
run the streams of another seed; `make torture` runs many more, with a
printed seed.
"""
import os
import random
import re
import time
import unittest

from sink import framing, server
from sink.framing import MAX_BODY, NEED_MORE, STATUS, Refused, Request, Unanswered
from tests.support import fuzz_seed, read_doc
from tests.torture import framing_fuzz

SEED = 17  # fixed, so `make test` is the same run every time
STREAMS = 10000
DEADLINE_AT = 100.0  # the readers' deadline, on the test's own clock
CT = b"Content-Type: application/json"
BODY = b'{"id": "e1", "sku": "apple", "qty": 3}'


def reader():
    return framing.Reader(server.ALLOWED, DEADLINE_AT, 10.0)


def request(*lines, body=b"", line=b"POST /events HTTP/1.1", host=True):
    head = [line] + ([b"Host: 127.0.0.1"] if host else []) + list(lines)
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def post(body=BODY, *extra):
    return request(CT, b"Content-Length: %d" % len(body), *extra, body=body)


def readme_statuses():
    """The statuses in docs/api.md's table "What the sink answers"."""
    text = read_doc("docs/api.md")
    section = text.split("### What the sink answers", 1)[1].split("\n## ", 1)[0]
    return {int(status) for status in re.findall(r"^\| (\d{3}) \|", section, re.M)}


class SplitTest(unittest.TestCase):
    """A valid request is the same request however its bytes are cut, and NEED_MORE until its last byte."""

    def valid(self):
        return framing_fuzz.valid_requests(random.Random(SEED)) + [post(b" " * (MAX_BODY - len(BODY)) + BODY)]

    def at_once(self, data):
        outcome = reader().feed(data)
        self.assertIsInstance(outcome, Request, data[:80])
        return framing_fuzz.shape(outcome)

    def test_every_prefix_needs_more_and_one_byte_at_a_time_gives_the_same_request(self):
        for data in self.valid():
            with self.subTest(data=data[:40]):
                expected = self.at_once(data)
                r = reader()
                for i in range(len(data) - 1):
                    self.assertIs(r.feed(data[i:i + 1]), NEED_MORE, "after %d bytes" % (i + 1))
                self.assertEqual(framing_fuzz.shape(r.feed(data[-1:])), expected)

    def test_every_cut_in_two_and_three_gives_the_same_request(self):
        for data in self.valid():
            expected = self.at_once(data)
            with self.subTest(data=data[:40]):
                step = max(1, len(data) // 150)  # every cut of the short ones; a sample of the 4 KiB body
                for i in range(1, len(data), step):
                    self.assertEqual(self.cut(data, [i]), expected, "cut at %d" % i)
                    for j in range(i + 1, len(data), 7 * step):
                        self.assertEqual(self.cut(data, [i, j]), expected, "cut at %d and %d" % (i, j))

    def cut(self, data, at):
        r = reader()
        bounds = [0] + at + [len(data)]
        for start, end in zip(bounds, bounds[1:-1]):
            self.assertIs(r.feed(data[start:end]), NEED_MORE)
        return framing_fuzz.shape(r.feed(data[bounds[-2]:]))

    def test_bytes_after_the_body_are_not_the_request(self):
        self.assertEqual(self.at_once(post() + b"GET /health HTTP/1.1\r\n\r\n"), self.at_once(post()))


# (name, bytes, how the stream ends, expected status or "no answer", a word of the message)
REFUSALS = [
    # 400: the framing rules, one case each, in the README's order
    ("not METHOD SP target SP version", request(line=b"POST  /events HTTP/1.1"), "feed", 400, "METHOD SP"),
    ("HTTP/0.9", b"GET /health\r\n", "feed", 400, "HTTP/0.9"),
    ("a line ending in a bare LF", b"POST /events HTTP/1.1\nHost: x\r\n\r\n", "feed", 400, "CRLF"),
    ("a header line ending in a bare LF", b"GET /health HTTP/1.1\r\nHost: x\nX: y\r\n\r\n", "feed", 400, "bare LF"),
    ("whitespace before a colon", request(b"Content-Length : 5", CT, body=b"12345"), "feed", 400, "token"),
    ("a folded line", request(CT, b"Content-Length:", b" 5", body=b"12345"), "feed", 400, "obs-fold"),
    ("no colon", request(CT, b"Content-Length 5", body=b"12345"), "feed", 400, "no colon"),
    ("a control character", request(CT, b"X-Note: a\x00b", b"Content-Length: 0"), "feed", 400, "control"),
    ("HTTP/1.1 without Host", request(CT, b"Content-Length: 0", host=False), "feed", 400, "Host"),
    ("two Hosts", request(b"Host: y", CT, b"Content-Length: 0"), "feed", 400, "Host"),
    ("Transfer-Encoding", request(CT, b"Transfer-Encoding: chunked", body=b"0\r\n\r\n"), "feed", 400,
     "Transfer-Encoding"),
    ("Content-Length twice", request(CT, b"Content-Length: 1", b"Content-Length: 1", body=b"1"), "feed", 400,
     "once"),
    ("Content-Length not decimal", request(CT, b"Content-Length: 0x10"), "feed", 400, "decimal"),
    ("a body cut short by the client", post()[:-5], "eof", 400, "body incomplete"),
    ("a head cut short by the client", post()[:30], "eof", 400, "head incomplete"),
    ("a body still arriving at the deadline", post()[:-5], "expire", 400, "deadline"),
    # the other statuses of the table the reader decides
    ("another path", request(line=b"GET /events/ HTTP/1.1"), "feed", 404, "GET /metrics"),
    ("another method", request(line=b"HEAD /health HTTP/1.1"), "feed", 405, "use GET"),
    ("no Content-Length", request(CT, body=BODY), "feed", 411, "Content-Length"),
    ("a body over the limit", request(CT, b"Content-Length: %d" % (MAX_BODY + 1)), "feed", 413, str(MAX_BODY)),
    ("a long request line", b"GET /" + b"a" * framing.MAX_REQUEST_LINE, "feed", 414, "request line"),
    ("not JSON", request(b"Content-Type: text/plain", b"Content-Length: 2", body=b"{}"), "feed", 415,
     "Content-Type"),
    ("a long head", b"GET /health HTTP/1.1\r\n" + b"X: y\r\n" * 3000, "feed", 431, "head"),
    ("too many header lines", request(*[b"X: y"] * 70, line=b"GET /health HTTP/1.1"), "feed", 431, "header lines"),
    ("another version", b"GET /health HTTP/2.0\r\n\r\n", "feed", 505, "HTTP/2.0"),
    # no answer: nothing sent, or a head still incomplete at the deadline
    ("nothing at all", b"", "eof", "no answer", None),
    ("a head still arriving at the deadline", b"POST /events HTTP/1.1\r\nHo", "expire", "no answer", "within"),
]


class RefusalTest(unittest.TestCase):
    def end(self, data, how):
        r = reader()
        outcome = r.feed(data) if data else NEED_MORE
        if how == "eof":
            self.assertIs(outcome, NEED_MORE)
            return r.eof()
        if how == "expire":
            self.assertIs(outcome, NEED_MORE)
            self.assertIs(r.expire(DEADLINE_AT - 0.001), NEED_MORE)
            return r.expire(DEADLINE_AT)
        return outcome

    def test_each_refusal_of_the_readme_is_reached_with_its_status_and_message(self):
        for name, data, how, expected, word in REFUSALS:
            with self.subTest(name):
                outcome = self.end(data, how)
                if expected == "no answer":
                    self.assertIsInstance(outcome, Unanswered)
                    self.assertEqual(outcome.reason is None, word is None)
                    if word is not None:
                        self.assertIn(word, outcome.reason)
                    continue
                self.assertIsInstance(outcome, Refused)
                self.assertEqual(outcome.status(), expected)
                self.assertIn(word, outcome.message)

    def test_the_table_is_covered_the_reader_and_what_comes_after_it_share_it(self):
        reached = {expected for _, _, _, expected, _ in REFUSALS if expected != "no answer"}
        after = {STATUS[kind] for kind in framing_fuzz.AFTER_READER}  # 409, 500, 503: receive, or a dead thread
        self.assertEqual(reached | after | {200}, readme_statuses())
        self.assertEqual(reached & after, set())
        self.assertEqual({STATUS[kind] for kind in STATUS}, reached | after)

    def test_a_final_outcome_never_changes(self):
        r = reader()
        refusal = r.feed(b"GET /nowhere HTTP/1.0\r\n\r\n")
        self.assertIsInstance(refusal, Refused)
        self.assertIs(r.feed(b"more"), refusal)
        self.assertIs(r.eof(), refusal)
        self.assertIs(r.expire(DEADLINE_AT + 1), refusal)

    def test_a_head_refused_late_still_has_its_head_for_the_answer(self):
        r = reader()
        self.assertEqual(r.feed(request(line=b"HEAD /health HTTP/1.1")).status(), 405)
        self.assertEqual(r.head.method, "HEAD")  # the answer to HEAD carries no body


class ContinueTest(unittest.TestCase):
    def test_an_http_1_1_client_that_expects_100_continue_is_told_once_before_its_body(self):
        data = post(BODY, b"Expect: 100-Continue")
        head, body = data[:-len(BODY)], data[-len(BODY):]
        r = reader()
        self.assertFalse(r.wants_continue)
        self.assertIs(r.feed(head[:-1]), NEED_MORE)
        self.assertFalse(r.wants_continue)  # the head is not complete yet
        self.assertIs(r.feed(head[-1:]), NEED_MORE)
        self.assertTrue(r.wants_continue)
        r.continue_sent()
        self.assertFalse(r.wants_continue)
        self.assertIsInstance(r.feed(body), Request)

    def test_no_100_continue_for_http_1_0_a_body_already_started_or_a_refused_head(self):
        http10 = request(CT, b"Content-Length: 5", b"Expect: 100-continue", line=b"POST /events HTTP/1.0", host=False)
        started = post(BODY, b"Expect: 100-continue")[:-5]
        refused = request(b"Content-Type: text/plain", b"Content-Length: 5", b"Expect: 100-continue")
        for data in (http10, started, refused):
            with self.subTest(data=data[:60]):
                r = reader()
                r.feed(data)
                self.assertFalse(r.wants_continue)


class RandomStreamTest(unittest.TestCase):
    def test_seeded_random_streams_end_only_in_outcomes_the_reader_may_give(self):
        seed = fuzz_seed("OUTBOX_FRAMING_SEED", SEED)
        streams = int(os.environ.get("OUTBOX_FRAMING_STREAMS") or STREAMS)
        violations, seen = framing_fuzz.run(seed, streams)
        self.assertEqual(violations, [])
        # The streams reach requests and a spread of refusals, not one rule over and over.
        self.assertGreater(seen.get("request", 0), streams // 20, seen)
        self.assertGreaterEqual(len([key for key in seen if isinstance(key, int)]), 8, seen)


if __name__ == "__main__":
    unittest.main()


class CostTest(unittest.TestCase):
    """What a client can make the reader spend stays in proportion to the bytes it sends."""

    @staticmethod
    def clock_step():
        """The largest of three steps time.process_time() is seen to take: its real resolution, which the reported one
        can hide (Windows' GetProcessTimes reports 1e-07 s and moves by 10-16 ms)."""
        steps = []
        last = time.process_time()
        while len(steps) < 3:
            now = time.process_time()
            if now != last:
                steps.append(now - last)
                last = now
        return max(steps)

    def per_byte(self, pad):
        """CPU seconds per byte for a GET head with `pad` bytes of one field, fed one byte at a time (best of 3).

        Each of the 3 feeds the head to fresh readers until it spent at least 50 steps of the clock, so that a
        coarse clock still measures it to 2%; where the clock is fine, once is enough.
        """
        data = request(b"X-Pad: " + b"a" * pad, line=b"GET /health HTTP/1.1")
        measurable = 50 * self.clock_step()
        best = None
        for _ in range(3):
            heads, spent = 0, 0.0
            start = time.process_time()
            while spent < measurable:
                one = reader()
                for i in range(len(data)):
                    one.feed(data[i:i + 1])
                self.assertIsInstance(one.outcome, Request)
                heads += 1
                spent = time.process_time() - start
            best = spent / heads if best is None else min(best, spent / heads)
        return best / len(data)

    def test_a_head_sent_one_byte_at_a_time_costs_time_linear_in_its_size(self):
        # A ratio of CPU times in one process, not a wall-clock bound: the machine's load moves both alike.
        # Rescanning the whole head on every read made the 10x longer head cost about 10x more per byte.
        small, large = self.per_byte(1500), self.per_byte(15000)
        self.assertLess(large, 3 * small, "per byte: %.2g s for a 15 KB head, %.2g s for 1.5 KB" % (large, small))
