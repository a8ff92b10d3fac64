"""outbox.export.textfile: the relay's --metrics-file is replaced whole; a reader never sees a half-written one."""
import json
import os
import threading
import unittest

from outbox import init_store, intake
from tests.support import LoopbackServer, TempDirTestCase, echo_ack, parse_prometheus, posix_only, reply, run_cli


def outbox(*args):
    return run_cli("outbox", *args)


class MetricsFileTest(TempDirTestCase):
    def test_rewritten_whole_each_round_and_parsed_at_any_moment(self):
        db, metrics = self.path("source.db"), self.path("relay.prom")
        con = init_store(db)
        con.execute("PRAGMA synchronous = OFF")  # this test's intake only
        for i in range(60):
            intake(con, {"id": "e-%02d" % i, "sku": "s", "qty": 1})
        con.close()
        seen, stop = [], threading.Event()

        def watch():
            while not stop.is_set():
                try:
                    with open(metrics, encoding="utf-8") as f:
                        seen.append(f.read())
                except OSError:
                    pass  # not written yet

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        refuse = {"e-05": 1, "e-20": 2}

        def handle(handler, body):
            event = json.loads(body.decode())
            if refuse.get(event["id"], 0):
                refuse[event["id"]] -= 1
                reply(handler, 503, "{}")
            else:
                reply(handler, 200, json.dumps({"ack": True, "id": event["id"]}))

        try:
            with LoopbackServer(handle) as sink:
                result = outbox("relay", "--db", db, "--url", sink.url(), "--once", "--limit", "1", "--base-delay",
                                "0", "--metrics-file", metrics)
        finally:
            stop.set()
            watcher.join(10)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("relay: marked 60 sent", result.stdout)
        samples = parse_prometheus(open_text(metrics))
        self.assertEqual(samples[("outbox_relay_sent_total", ())], 60)
        self.assertEqual(samples[("outbox_relay_attempts_total", ())], 63)
        self.assertEqual(samples[("outbox_relay_failures_total", (("kind", "server-error"),))], 3)
        self.assertEqual(samples[("outbox_relay_failures_total", (("kind", "conflict"),))], 0)
        self.assertGreater(samples[("outbox_relay_last_success_timestamp_seconds", ())], 1e9)
        text = open_text(metrics)
        for name, kind in (("outbox_relay_sent_total", "counter"), ("outbox_relay_attempts_total", "counter"),
                           ("outbox_relay_failures_total", "counter"),
                           ("outbox_relay_last_success_timestamp_seconds", "gauge")):
            self.assertIn("# TYPE %s %s\n" % (name, kind), text)
        self.assertGreater(len(seen), 1)
        for text in seen:
            parse_prometheus(text)  # never a half-written file
        self.assertEqual(sorted(os.listdir(self.tmp)), ["relay.prom", "source.db"])  # no temporary file left

    @posix_only("file modes (Windows keeps only a read-only flag: os.stat gives 0o666 for any writable file)")
    def test_the_file_is_readable_by_everyone(self):
        db, metrics = self.path("source.db"), self.path("relay.prom")
        con = init_store(db)
        intake(con, {"id": "e-1", "sku": "s", "qty": 1})
        con.close()
        with LoopbackServer(echo_ack) as sink:
            result = outbox("relay", "--db", db, "--url", sink.url(), "--once", "--metrics-file", metrics)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(os.stat(metrics).st_mode & 0o777, 0o644)  # a collector often runs as another user


def open_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


if __name__ == "__main__":
    unittest.main()
