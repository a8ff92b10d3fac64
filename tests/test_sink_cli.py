"""`python -m sink` as a real process: serve, signals, show, and one-line errors with exit statuses."""

import argparse
import os
import signal
import socket
import subprocess

from outbox.core import store
from outbox.cli.args import loopback_host_arg
from outbox.core.sender import check_url
from sink import cli, faults, init_sink, receive
from tests.support import (
    DEADLINE, EVENT, PYTHON, Child, TempDirTestCase, body_of, free_loopback_socket, post, python_env, request_bytes,
    snapshot, wait_until,
)


class CliTestCase(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.db_path = self.path("sink.db")

    def run_sink(self, *args):
        """Run `python -m sink ARGS` to its end; return (status, stdout, stderr)."""
        done = subprocess.run(
            [PYTHON, "-m", "sink"] + list(args),
            cwd=self.tmp,
            env=python_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
            timeout=DEADLINE,
        )
        return done.returncode, done.stdout, done.stderr

    def serve(self, *extra):
        child = Child(["serve", "--db", self.db_path, "--port", "0"] + list(extra), self.tmp)
        self.addCleanup(child.close)
        return child

    def assert_one_line_error(self, status, stdout, stderr, expected_status):
        self.assertEqual(status, expected_status, stderr)
        self.assertEqual(stdout, "")
        self.assertNotIn("Traceback", stderr)
        self.assertEqual(len(stderr.splitlines()), 1, stderr)
        self.assertTrue(stderr.startswith("sink: error: "), stderr)

    def read_bytes(self, path):
        with open(path, "rb") as f:
            return f.read()


class ServeTest(CliTestCase):
    def test_prints_its_url_serves_and_exits_0_on_sigterm(self):
        child = self.serve()
        port = child.port()
        status, _, answer = post(port, body_of(EVENT))
        self.assertEqual((status, answer["result"]), (200, "applied"))
        child.signal(signal.SIGTERM)
        self.assertEqual(child.wait(), 0)
        self.assertNotIn("Traceback", child.stderr())
        self.assertEqual(dict(snapshot(self.db_path)["inventory"]), {"apple": 3})

    def test_ctrl_c_exits_0(self):
        child = self.serve()
        status, _, _ = post(child.port(), None, path="/health", method="GET", content_type=None)
        self.assertEqual(status, 200)
        child.signal(signal.SIGINT)
        self.assertEqual(child.wait(), 0)
        self.assertNotIn("Traceback", child.stderr())

    def test_sigterm_finishes_the_request_in_hand(self):
        child = self.serve("--timeout", "5")
        port = child.port()
        event = body_of(EVENT)
        head = request_bytes(["Content-Type: application/json", "Content-Length: %d" % len(event)])
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as in_hand:
            in_hand.sendall(head + event[:10])
            # Connections are accepted in arrival order: once this one is answered,
            # the server has taken the one above into a handler thread.
            status, _, _ = post(port, None, path="/health", method="GET", content_type=None)
            self.assertEqual(status, 200)
            child.signal(signal.SIGTERM)
            wait_until(lambda: "stopping" in child.stderr_so_far(), what="the server to take the signal")
            in_hand.sendall(event[10:])
            chunks = []
            while True:
                chunk = in_hand.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        answer = b"".join(chunks)
        self.assertTrue(answer.startswith(b"HTTP/1.0 200 "), answer)
        self.assertIn(b'"result": "applied"', answer)
        self.assertEqual(child.wait(), 0)
        self.assertEqual(dict(snapshot(self.db_path)["inventory"]), {"apple": 3})

    def test_localhost_is_accepted(self):
        child = self.serve("--host", "localhost")
        status, _, _ = post(child.port(), None, path="/health", method="GET", content_type=None)
        self.assertEqual(status, 200)
        child.signal(signal.SIGTERM)
        self.assertEqual(child.wait(), 0)

    def test_refuses_a_source_db_unchanged(self):
        source = self.path("source.db")
        store.init_store(source).close()
        before = self.read_bytes(source)
        self.assert_one_line_error(*self.run_sink("serve", "--db", source, "--port", "0"), expected_status=1)
        self.assertEqual(self.read_bytes(source), before)

    def test_unusable_db_path_and_busy_port_exit_1(self):
        status, stdout, stderr = self.run_sink("serve", "--db", self.path("no/such/dir/sink.db"), "--port", "0")
        self.assert_one_line_error(status, stdout, stderr, 1)
        taken = free_loopback_socket()
        self.addCleanup(taken.close)
        status, stdout, stderr = self.run_sink("serve", "--db", self.db_path, "--port", str(taken.getsockname()[1]))
        self.assert_one_line_error(status, stdout, stderr, 1)


# `python -m sink serve` itself, with one piece of the kit replaced by a failing
# one in this child only: no test hook in the kit. A failure that no `except
# Exception` catches ends a thread, as a bug or a foreign callable's sys.exit() would.
STORE_DIES = """
import sys
from sink import cli
from sink.core import inbox
def receive_that_exits(con, event):
    sys.exit(3)  # a foreign receive that gives up: SystemExit on the store thread
inbox.receive = receive_that_exits
sys.exit(cli.main(sys.argv[1:]))
"""
READER_DIES = """
import sys
from sink import cli, framing
class ReaderBug(BaseException):
    pass
feed = framing.Reader.feed
def feed_with_a_bug(self, data):
    if data.startswith(b"BUG"):
        raise ReaderBug("a bug in the reader")
    return feed(self, data)
framing.Reader.feed = feed_with_a_bug
sys.exit(cli.main(sys.argv[1:]))
"""


class FailLoudTest(CliTestCase):
    """A thread of `serve` that dies: its traceback on stderr, and exit 70 at once, with no signal."""

    def serve_program(self, program):
        child = Child(["serve", "--db", self.db_path, "--port", "0"], self.tmp, program=program)
        self.addCleanup(child.close)
        return child, child.port()

    def assert_died_loudly(self, child, why):
        self.assertEqual(child.wait(), cli.EXIT_THREAD_DIED)
        lines = child.stderr().splitlines()
        last = "sink: error: %s; exiting with status %d" % (why, cli.EXIT_THREAD_DIED)
        self.assertIn(last, lines)
        # The traceback comes first (another thread's last log line may still land after the exit line).
        self.assertLess(lines.index("Traceback (most recent call last):"), lines.index(last), lines)

    def test_the_store_thread_dies(self):
        child, port = self.serve_program(STORE_DIES)
        try:
            status, _, _ = post(port, body_of(EVENT))
            self.assertEqual(status, 503)
        except ConnectionError:
            pass  # or the process was already gone: it exits at once
        self.assert_died_loudly(child, "the store thread died: SystemExit: 3")
        self.assertIn("SystemExit: 3", child.stderr())

    def test_the_reader_thread_dies(self):
        child, port = self.serve_program(READER_DIES)
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
            sock.sendall(b"BUG")
        self.assert_died_loudly(child, "the reader thread died: ReaderBug: a bug in the reader")


class ImportTest(CliTestCase):
    def test_the_sink_s_command_line_loads_no_operator_code(self):
        """Issue 22: `python -m sink` shares outbox.cli.args, which must not drag in outbox.ops or the publisher's CLI."""
        done = subprocess.run(
            [PYTHON, "-c", "import sys, sink.cli; print(' '.join(sorted(sys.modules)))"],
            cwd=self.tmp, env=python_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, universal_newlines=True, timeout=DEADLINE,
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        loaded = done.stdout.split()
        self.assertIn("outbox.cli.args", loaded)  # the probe sees what sink.cli imports at all
        self.assertEqual([name for name in loaded if name == "outbox.ops" or name.startswith("outbox.ops.")], [])
        self.assertEqual([name for name in loaded if name.startswith("outbox.cli.")
                          and name not in ("outbox.cli.args", "outbox.cli.stopping")], [])


class UsageTest(CliTestCase):
    def test_bad_arguments_exit_2_with_one_line(self):
        db = self.db_path
        cases = [
            [],
            ["frobnicate"],
            ["serve"],
            ["serve", "--db", db, "--fault", "explode"],
            ["serve", "--db", db, "--port", "70000"],
            ["serve", "--db", db, "--port", "-1"],
            ["serve", "--db", db, "--port", "http"],
            # Were the host check ever to let this through, bind() fails: no packet leaves.
            ["serve", "--db", db, "--host", "8.8.8.8"],
            ["serve", "--db", db, "--timeout", "0"],
            ["serve", "--db", db, "--timeout", "nan"],
            ["serve", "--db", db, "--fault", "drop-after-commit", "--fault-count", "0"],
            ["serve", "--db", db, "--verbose-please"],
            ["show"],
        ]
        for args in cases:
            with self.subTest(args=args):
                self.assert_one_line_error(*self.run_sink(*args), expected_status=2)
        self.assertEqual(os.listdir(self.tmp), [])  # no DB was created on the way

    def test_host_must_be_a_loopback_literal(self):
        # Checked on the argument parser's type function alone: a name or a
        # wildcard must never reach bind() or the resolver from a test. The
        # rule is the sender's, so the sink listens where a URL may point.
        for host in ("0.0.0.0", "::", "example.com", "10.0.0.1", "127.0.0.1.", "", "::ffff:8.8.8.8",
                     "127.000.0.1", "127.0.0.256", "127.1", "0::1", "[::]"):
            with self.subTest(host=host), self.assertRaises(argparse.ArgumentTypeError):
                loopback_host_arg(host)
        for host, bound in (("127.0.0.1", "127.0.0.1"), ("127.1.2.3", "127.1.2.3"), ("localhost", "localhost"),
                            ("LOCALHOST", "localhost"), ("::1", "::1"), ("[::1]", "::1")):
            self.assertEqual(loopback_host_arg(host), bound)
            self.assertIsNotNone(check_url("http://%s:1/events" % ("[::1]" if bound == "::1" else host)))

    def test_help_documents_commands_faults_exit_status_and_defaults(self):
        status, top, _ = self.run_sink("--help")
        self.assertEqual(status, 0)
        for word in ("serve", "show", "exit status", str(faults.CRASH_EXIT)):
            self.assertIn(word, top)
        status, serve_help, _ = self.run_sink("serve", "--help")
        self.assertEqual(status, 0)
        for word in faults.NAMES + (str(faults.CRASH_EXIT), "8765", "127.0.0.1", "10.0", "loopback", "GET /metrics",
                                    str(cli.EXIT_THREAD_DIED)):
            self.assertIn(word, serve_help)
        status, show_help, _ = self.run_sink("show", "--help")
        self.assertEqual(status, 0)
        self.assertIn("--db", show_help)


class ShowTest(CliTestCase):
    def test_prints_inventory_and_deliveries(self):
        con = init_sink(self.db_path)
        receive(con, {"id": "e1", "sku": "apple", "qty": 3})
        receive(con, {"id": "e2", "sku": "pear", "qty": 5})
        receive(con, {"id": "e1", "sku": "apple", "qty": 3})
        try:
            receive(con, {"id": "e1", "sku": "apple", "qty": 9})
        except Exception as exc:
            self.assertEqual(type(exc).__name__, "Conflict")
        con.close()
        before = self.read_bytes(self.db_path)
        status, stdout, stderr = self.run_sink("show", "--db", self.db_path)
        self.assertEqual((status, stderr), (0, ""))
        rows = [line.split() for line in stdout.splitlines()]
        self.assertIn(["apple", "3"], rows)
        self.assertIn(["pear", "5"], rows)
        outcomes = [(row[0], row[2], row[3]) for row in rows if len(row) == 5 and row[0].isdigit()]
        self.assertEqual(
            outcomes,
            [("1", "applied", "e1"), ("2", "applied", "e2"), ("3", "duplicate", "e1"), ("4", "conflict", "e1")],
        )
        self.assertEqual(self.read_bytes(self.db_path), before)

    def test_a_reader_that_leaves_early_is_no_error(self):
        # `sink show | head`: the reader closes the pipe with most of the output unread (issue 29, item 10).
        con = init_sink(self.db_path, durability="process")
        try:
            for n in range(3000):  # some 250 KB of output: far more than a pipe holds
                receive(con, {"id": "e-%d" % n, "sku": "sku-%d" % n, "qty": 1})
        finally:
            con.close()
        for command in ("show", "status"):
            # stderr to a file: communicate() would read the closed stdout too (on Windows, in a thread that fails).
            with open(self.path(command + ".stderr"), "w+b") as err:
                with subprocess.Popen([PYTHON, "-m", "sink", command, "--db", self.db_path], cwd=self.tmp,
                                      env=python_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=err) as child:
                    self.assertTrue(child.stdout.readline())  # the first line, as head -1 would read it
                    child.stdout.close()  # the reader leaves
                    child.wait(DEADLINE)
                err.seek(0)
                stderr = err.read()
            self.assertEqual((child.returncode, stderr), (0, b""), command)

    def test_missing_file_is_an_error_and_not_created(self):
        missing = self.path("missing.db")
        self.assert_one_line_error(*self.run_sink("show", "--db", missing), expected_status=1)
        self.assertEqual(os.listdir(self.tmp), [])

    def test_foreign_files_are_errors_and_left_unchanged(self):
        source = self.path("source.db")
        con = store.init_store(source)
        store.intake(con, {"id": "o1", "sku": "apple", "qty": 3})
        con.close()
        garbage = self.path("garbage.db")
        with open(garbage, "wb") as f:
            f.write(b"not a database\n" * 50)
        empty = self.path("empty.db")
        open(empty, "wb").close()
        for path in (source, garbage, empty):
            with self.subTest(path=os.path.basename(path)):
                before = self.read_bytes(path)
                self.assert_one_line_error(*self.run_sink("show", "--db", path), expected_status=1)
                self.assertEqual(self.read_bytes(path), before)
