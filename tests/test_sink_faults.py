"""sink.faults: the opt-in faults around receive, through a real server.

drop-after-commit closes the connection after the receipt is committed; the
crash faults end a real `python -m sink serve` child with CRASH_EXIT inside
or after the transaction.
"""
import http.client
import signal
import subprocess
import textwrap
import unittest

from outbox.core.event import digest
from sink import faults
from tests.support import (
    DEADLINE, EVENT, PYTHON, ROOT, ServerTestCase, body_of, exchange, outcomes, post, python_env, request_bytes, snapshot,
    stock, wait_until,
)


EVENT_DIGEST = digest(EVENT)


class ImportTest(unittest.TestCase):
    def test_the_server_module_loads_the_fault_code_only_for_a_fault(self):
        """Issue 22: the claim beside server.py's import, exactly: sink.server alone does not load sink.faults."""
        code = "import sys, sink.server; print('sink.faults' in sys.modules, 'sink.server' in sys.modules)"
        done = subprocess.run([PYTHON, "-c", code], cwd=ROOT, env=python_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=DEADLINE)
        self.assertEqual(done.stdout.split(), ["False", "True"], done.stderr)


class DropAfterCommitTest(ServerTestCase):
    def test_connection_closes_without_answer_after_the_receipt_is_committed(self):
        port = self.port(fault=faults.DROP_AFTER_COMMIT)
        # An invalid event does not reach receive, so it does not use up the fault.
        status, _, _ = post(port, body_of(dict(EVENT, qty=0)))
        self.assertEqual(status, 400)
        with self.assertRaises((http.client.BadStatusLine, ConnectionError)):
            post(port, body_of(EVENT))
        self.assertEqual(stock(self.db_path), {"apple": 3})
        self.assertEqual(outcomes(self.db_path), ["applied"])
        status, _, answer = post(port, body_of(EVENT))
        self.assertEqual((status, answer), (200, {"ack": True, "id": "e1", "result": "duplicate", "digest": EVENT_DIGEST}))
        self.assertEqual(stock(self.db_path), {"apple": 3})

    def test_the_fault_is_one_line_in_the_log_when_it_fires(self):
        lines = []
        port = self.port(fault=faults.DROP_AFTER_COMMIT, log=lines.append)
        with self.assertRaises((http.client.BadStatusLine, ConnectionError)):
            post(port, body_of(EVENT))
        post(port, body_of(EVENT))
        fired = wait_until(lambda: [line for line in lines if line.startswith("fault ")], what="the fault's line")
        self.assertEqual(fired, ["fault drop-after-commit fired on event 'e1' (1 of 1): receive runs, "
                                 "then the connection closes without an answer"])

    def test_raw_client_reads_nothing_and_fault_count_is_honoured(self):
        port = self.port(fault=faults.DROP_AFTER_COMMIT, fault_count=2)
        event = body_of(EVENT)
        data = request_bytes(["Content-Type: application/json", "Content-Length: %d" % len(event)], event)
        for _ in range(2):
            status, _, _, raw = exchange(port, data, half_close=False)
            self.assertEqual(raw, b"")
        status, _, answer, _ = exchange(port, data)
        self.assertEqual((status, answer["result"]), (200, "duplicate"))
        self.assertEqual(outcomes(self.db_path), ["applied", "duplicate", "duplicate"])


class CrashTest(ServerTestCase):
    """The crash faults end a real server process with CRASH_EXIT inside or after the transaction."""

    def crash(self, fault):
        child = self.child("serve", "--db", self.db_path, "--port", "0", "--timeout", "5", "--fault", fault)
        port = child.port()
        with self.assertRaises((http.client.BadStatusLine, ConnectionError)):
            post(port, body_of(EVENT))
        self.assertEqual(child.wait(), faults.CRASH_EXIT)
        self.assertNotIn("Traceback", child.stderr())
        # Its line is the last the process wrote.
        self.assertIn("fault %s fired on event 'e1' (1 of 1)" % fault, child.stderr().splitlines()[-1])

    def restart_and_post(self):
        child = self.child("serve", "--db", self.db_path, "--port", "0", "--timeout", "5")
        status, _, answer = post(child.port(), body_of(EVENT))
        child.signal(signal.SIGTERM)
        self.assertEqual(child.wait(), 0)
        return status, answer

    def test_crash_before_commit_keeps_nothing(self):
        self.crash(faults.CRASH_BEFORE_COMMIT)
        self.assertEqual(snapshot(self.db_path), {"inbox": [], "inventory": [], "deliveries": []})
        status, answer = self.restart_and_post()
        self.assertEqual((status, answer["result"]), (200, "applied"))
        self.assertEqual(stock(self.db_path), {"apple": 3})
        self.assertEqual(outcomes(self.db_path), ["applied"])

    def test_crash_after_commit_keeps_the_whole_receipt(self):
        self.crash(faults.CRASH_AFTER_COMMIT)
        after_crash = snapshot(self.db_path)
        self.assertEqual([row[0] for row in after_crash["inbox"]], ["e1"])
        self.assertEqual(after_crash["inventory"], [("apple", 3)])
        self.assertEqual([row[1:3] for row in after_crash["deliveries"]], [("e1", "applied")])
        status, answer = self.restart_and_post()
        self.assertEqual((status, answer["result"]), (200, "duplicate"))
        self.assertEqual(stock(self.db_path), {"apple": 3})
        self.assertEqual(outcomes(self.db_path), ["applied", "duplicate"])

    def test_crash_after_commit_exposes_a_receive_that_commits_twice(self):
        # A foreign, non-atomic receive: the inbox row and the inventory in two transactions.
        program = textwrap.dedent("""
            import sys, threading
            from outbox.core import db
            from sink import make_server
            def split_receive(con, event):
                with db.transaction(con):
                    con.execute(
                        "INSERT INTO inbox (event_id, digest, payload, applied_at) VALUES (?, 'd', 'p', 0)",
                        (event["id"],),
                    )
                with db.transaction(con):
                    con.execute("INSERT INTO inventory (sku, qty) VALUES (?, ?)", (event["sku"], event["qty"]))
                return "applied"
            server = make_server(sys.argv[1], timeout=5, fault="crash-after-commit", receive=split_receive).start()
            print(server.url(), flush=True)
            threading.Event().wait(%r)
            """ % DEADLINE)
        child = self.child(self.db_path, program=program)
        with self.assertRaises((http.client.BadStatusLine, ConnectionError)):
            post(child.port(), body_of(EVENT))
        self.assertEqual(child.wait(), faults.CRASH_EXIT)
        after_crash = snapshot(self.db_path)
        self.assertEqual([row[0] for row in after_crash["inbox"]], ["e1"])
        self.assertEqual(after_crash["inventory"], [])


if __name__ == "__main__":
    unittest.main()
