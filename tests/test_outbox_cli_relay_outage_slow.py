"""The outage story, through real processes: the sink down for 10 s under the relay's default flags, then back.

`python -m outbox relay --once` starts while nothing listens on the sink's
port, says once that the sink is unreachable, keeps retrying, and, once
`python -m sink serve` is up on that port, says once that it is back,
delivers everything and exits 0, with no alert. About 15-25 s of wall time:
the 10 s outage, then at most one backoff wait (--max-delay, 10 s by default).
"""
import json
import queue
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import unittest

from outbox import init_store, intake_many
from tests.support import ROOT, Child, TempDirTestCase, parse_prometheus, python_env

OUTAGE = 10.0  # seconds the sink is down, as the story says
ITEMS = 20
RESUME_BOUND = 10.0 + 15.0  # --max-delay's default, plus a margin for a loaded 2-core machine
RUN_BOUND = 90.0  # the whole relay run, at most


class OutageStoryTest(TempDirTestCase):
    def test_the_relay_rides_out_a_10_s_outage_under_its_default_flags(self):
        source, sink_db, metrics = self.path("source.db"), self.path("sink.db"), self.path("relay.prom")
        con = init_store(source)
        intake_many(con, [{"id": "order-%02d" % i, "sku": "snack", "qty": 1} for i in range(ITEMS)])
        con.close()
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()  # the sink's port, with nothing listening on it: the outage

        relay = subprocess.Popen(
            [sys.executable, "-m", "outbox", "relay", "--db", source, "--url", "http://127.0.0.1:%d/events" % port,
             "--once", "--metrics-file", metrics],
            cwd=ROOT, env=python_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True)
        self.addCleanup(self.end, relay)
        lines = queue.Queue()
        reader = threading.Thread(target=lambda: [lines.put(line) for line in relay.stderr], daemon=True)
        reader.start()
        started = time.monotonic()
        first = lines.get(timeout=RUN_BOUND)
        self.assertIn("relay: sink unreachable since", first)
        self.assertIn("retrying every <= 10 s", first)
        self.assertIsNone(relay.poll(), "the relay gave up during the outage")

        time.sleep(max(0.0, started + OUTAGE - time.monotonic()))  # the outage itself, not a synchronisation
        self.assertIsNone(relay.poll(), "the relay gave up during the outage")
        sink = Child(["serve", "--db", sink_db, "--port", str(port)], self.tmp)
        self.addCleanup(sink.close)
        self.assertEqual(sink.port(), port)
        back_at = time.monotonic()

        relay.wait(timeout=RUN_BOUND)
        finished = time.monotonic()
        reader.join(10)
        out = relay.stdout.read()  # a line or two: the pipe held them while the relay ran
        stderr = [first] + list(iter_queue(lines))
        self.assertEqual(relay.returncode, 0, "".join(stderr))
        self.assertEqual(out, "relay: marked %d sent\n" % ITEMS)
        text = "".join(stderr)
        self.assertNotIn("ALERT", text)
        self.assertNotIn("Traceback", text)
        self.assertEqual(text.count("sink unreachable since"), 1, text)
        self.assertEqual(text.count("sink back after"), 1, text)
        self.assertLess(finished - back_at, RESUME_BOUND, text)

        con = sqlite3.connect(source)
        try:
            self.assertEqual(con.execute("SELECT count(*) FROM outbox WHERE sent = 1").fetchone()[0], ITEMS)
            kinds = con.execute("SELECT DISTINCT permanent_failures FROM outbox").fetchall()
        finally:
            con.close()
        self.assertEqual(kinds, [(0,)])  # the outage counted toward no alert
        samples = parse_prometheus(read(metrics))
        self.assertEqual(samples[("outbox_relay_sent_total", ())], ITEMS)
        self.assertGreaterEqual(samples[("outbox_relay_failures_total", (("kind", "no-answer"),))], 2)
        status = subprocess.run([sys.executable, "-m", "sink", "status", "--db", sink_db, "--json"], cwd=ROOT,
                                env=python_env(), stdout=subprocess.PIPE, universal_newlines=True, timeout=60)
        self.assertEqual(json.loads(status.stdout)["inventory"], {"snack": ITEMS})
        sink.signal(signal.SIGTERM)
        self.assertEqual(sink.wait(), 0)
        print("\noutage story: %.1f s in all, delivery resumed %.1f s after the sink was back"
              % (finished - started, finished - back_at), file=sys.stderr)

    @staticmethod
    def end(proc):
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()


def iter_queue(lines):
    while True:
        try:
            yield lines.get_nowait()
        except queue.Empty:
            return


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


if __name__ == "__main__":
    unittest.main()
