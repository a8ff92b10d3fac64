"""The sink under an idle-socket attack, at its connection cap, when told to stop, at its request deadline, and
against a head of spaces: wall-clock bounds, with generous margins.

The attack tests start a real `python -m sink serve` child with RLIMIT_NOFILE
256 and open 1,000 idle sockets to it, then time an honest `send_http` and
read the child's CPU time from /proc. They need POSIX `resource` and Linux
/proc, and skip cleanly elsewhere. Bounds are generous for a loaded 2-core CI
machine but far from what the failure looks like: before the connection cap,
the honest request waited out a 10 s request timeout and the accept loop spun
at ~0.9 s of CPU per second.
"""

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

from outbox import send_http
from sink import framing, server as sink_server
from tests.support import DEADLINE, PYTHON, cpu_seconds, posix_only, python_env, wait_until
from tests.support import (
    EVENT, Child, ServerTestCase, body_of, exchange, post, read_to_eof, request_bytes, stock, trickle,
)

STOP_TIMEOUT = 2.0  # the request timeout of the bounded-stop tests: stop() must return within it + 1 s
DEADLINE_TIMEOUT = 1.0  # the request timeout of RequestDeadlineTest
DEADLINE_MARGIN = 4.0  # seconds past it that a loaded 2-core machine may add; the client's DEADLINE is 10 s

try:
    import resource
except ImportError:  # not POSIX
    resource = None

SINK_NOFILE = 256  # the sink's open-file limit: far fewer descriptors than attackers
ATTACKERS = 1000
HONEST_WITHIN = 1.0  # seconds for the honest send_http, as issue 9 asks
ATTACK_WINDOW = 5.0  # seconds the attack is held while the sink's CPU time is measured
# Issue 9's budget is 0.5 s of CPU per 10 s of attack, here over the window.
# Accepting (and, at the cap, closing) 1,000 connections costs a one-off
# ~0.03 s on the 2-core CI machine; a spinning accept loop costs ~ATTACK_WINDOW.
CPU_BUDGET = 0.5 * ATTACK_WINDOW / 10.0

# Runs the sink CLI with a low open-file limit, as `prlimit --nofile=256` would.
LIMITED_SINK = """
import resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (%d, hard))
from sink.cli import main
sys.exit(main(sys.argv[1:]))
""" % SINK_NOFILE


def closed_without_answer(sock):
    """True when the peer closed `sock` without sending a byte (a reset counts: unread bytes cause one)."""
    try:
        return read_to_eof(sock) == b""
    except ConnectionResetError:
        return True


def need_attack_descriptors(test):
    """Skip `test` where the attack cannot run; raise this process's open-file limit for the attackers' sockets."""
    if resource is None or not os.path.exists("/proc/self/stat"):
        test.skipTest("needs POSIX resource limits and Linux /proc")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = ATTACKERS + 64
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            test.skipTest("the open-file hard limit %d is below the %d this test needs" % (hard, want))
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        test.addCleanup(resource.setrlimit, resource.RLIMIT_NOFILE, (soft, hard))


@posix_only("an open-file limit for the sink (resource.RLIMIT_NOFILE) and its CPU time from /proc")
class IdleSocketAttackTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        need_attack_descriptors(self)

    def attack(self, *options):
        child = self.child("serve", "--db", self.db_path, "--port", "0", *options, program=LIMITED_SINK)
        port = child.port()
        url = "http://127.0.0.1:%d/events" % port
        pid = child.proc.pid
        attackers = []
        self.addCleanup(lambda: [sock.close() for sock in attackers])
        cpu_before = cpu_seconds(pid)
        started = time.monotonic()
        for _ in range(ATTACKERS):
            attackers.append(socket.create_connection(("127.0.0.1", port), timeout=DEADLINE))
        # Three honest clients in turn, judged by the median: one descheduled
        # moment on a loaded CI machine is not the server making them wait
        # (before the cap and the eviction, every one of them waited 9 s).
        honest_times = []
        for _ in range(3):
            sending = time.monotonic()
            self.assertIs(send_http(url, EVENT, timeout=5), True)
            honest_times.append(time.monotonic() - sending)
        honest = sorted(honest_times)[1]
        # Hold the attack for the rest of the window, watching the child the whole time.
        wait_until(lambda: time.monotonic() - started >= ATTACK_WINDOW, timeout=ATTACK_WINDOW + 1, what="the window")
        cpu = cpu_seconds(pid) - cpu_before
        window = time.monotonic() - started
        for sock in attackers:
            sock.close()
        child.signal(signal.SIGTERM)
        self.assertEqual(child.wait(), 0, child.stderr_so_far())
        sys.stderr.write(
            "\n  %s: honest ACK in %.3fs (median of 3), sink CPU %.3fs over %.1fs of attack (budget %.2fs)\n"
            % (" ".join(options) or "default cap", honest, cpu, window, CPU_BUDGET)
        )
        self.assertLess(honest, HONEST_WITHIN)
        self.assertLess(cpu, CPU_BUDGET)
        self.assertEqual(stock(self.db_path), {"apple": 3})

    def test_honest_client_is_served_past_1000_idle_sockets_at_the_default_cap(self):
        self.attack()

    def test_honest_client_is_served_when_the_cap_is_above_the_open_file_limit(self):
        # Here accept itself fails with EMFILE: the sink must free a slot, not spin.
        self.attack("--max-connections", str(ATTACKERS * 2))


@posix_only("an open-file limit for the sink (resource.RLIMIT_NOFILE), its stderr pipe shrunk by fcntl "
            "F_SETPIPE_SZ, and SIGTERM sent to it")
class UnreadLogTest(ServerTestCase):
    """Issue 29: the idle attack with the sink's stderr a pipe nobody reads, shrunk to one page so it fills at once."""

    def setUp(self):
        super().setUp()
        need_attack_descriptors(self)

    def test_a_sink_whose_stderr_nobody_reads_keeps_answering_and_stops_on_sigterm(self):
        fcntl = __import__("fcntl")
        set_pipe_size = getattr(fcntl, "F_SETPIPE_SZ", 1031)  # the Linux value, named from Python 3.10 on
        proc = subprocess.Popen(
            [PYTHON, "-c", LIMITED_SINK, "serve", "--db", self.db_path, "--port", "0", "--timeout", "2"],
            cwd=self.tmp, env=python_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, universal_newlines=True)
        self.addCleanup(proc.wait, DEADLINE)
        self.addCleanup(proc.stderr.close)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        fcntl.fcntl(proc.stderr.fileno(), set_pipe_size, 4096)  # no one reads it from here until the end
        port = int(proc.stdout.readline().rsplit(":", 1)[1])
        url = "http://127.0.0.1:%d/events" % port
        attackers = []
        self.addCleanup(lambda: [sock.close() for sock in attackers])
        for _ in range(ATTACKERS):  # each one closed to make room was a line: far more than the pipe holds
            attackers.append(socket.create_connection(("127.0.0.1", port), timeout=DEADLINE))
        for n in range(100):  # and one line per request on top
            self.assertIs(send_http(url, dict(EVENT, id="unread-%d" % n), timeout=5), True)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(DEADLINE)
        taken = time.monotonic() - started
        self.assertEqual(code, 0)
        # The request timeout + 1 s (stop), + 1 s for the log's last lines (sink.cli.LOG_DRAIN), + a loaded machine.
        self.assertLess(taken, 2 + 1 + 1 + DEADLINE_MARGIN)
        written = proc.stderr.read()  # what fitted in the pipe; the rest was dropped, never waited for
        self.assertIn("closed without an answer to make room", written)


# A sink whose open-file limit leaves room for exactly one client, and whose
# receive waits for a line on stdin: with that client's request in hand there is
# nothing to close when accept fails with EMFILE.
NO_ROOM_SINK = """
import os, resource, signal, sys
from sink import make_server, receive
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])  # before any thread starts: only sigwait takes it
def held_receive(con, event):
    print("receiving", flush=True)
    sys.stdin.readline()
    return receive(con, event)
server = make_server(sys.argv[1], timeout=10, receive=held_receive, max_connections=100).start()
open_fds = len(os.listdir("/proc/self/fd")) - 1  # listdir's own descriptor is gone again
resource.setrlimit(resource.RLIMIT_NOFILE, (open_fds + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
print(server.url(), flush=True)
signal.sigwait([signal.SIGTERM])
server.stop()
"""
NO_ROOM_WINDOW = 2.0  # seconds of EMFILE with nothing to close; a spin would burn ~all of it


@posix_only("an open-file limit (resource.RLIMIT_NOFILE) counted from /proc/self/fd, and SIGTERM taken by "
            "signal.sigwait")
class NothingToCloseTest(ServerTestCase):
    def test_accept_rests_when_out_of_descriptors_with_every_slot_in_hand(self):
        if resource is None or not os.path.exists("/proc/self/fd"):
            self.skipTest("needs POSIX resource limits and Linux /proc")
        proc = subprocess.Popen(
            [PYTHON, "-c", NO_ROOM_SINK, self.db_path],
            cwd=self.tmp, env=python_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, universal_newlines=True,
        )
        lines = queue.Queue()
        pump = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True)
        pump.start()
        self.addCleanup(proc.stdout.close)
        self.addCleanup(pump.join, DEADLINE)
        self.addCleanup(proc.wait, DEADLINE)
        self.addCleanup(proc.kill)
        self.addCleanup(proc.stdin.close)
        port = int(lines.get(timeout=DEADLINE).rsplit(":", 1)[1])
        in_hand = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        self.addCleanup(in_hand.close)
        in_hand.sendall(request_bytes(
            ["Content-Type: application/json", "Content-Length: %d" % len(body_of(EVENT))], body_of(EVENT)
        ))
        self.assertEqual(lines.get(timeout=DEADLINE), "receiving\n")  # in hand: no client is waiting now
        later = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)  # accept fails: EMFILE
        self.addCleanup(later.close)
        later.sendall(request_bytes([], method="GET", target="/health"))
        started, cpu_before = time.monotonic(), cpu_seconds(proc.pid)
        wait_until(lambda: time.monotonic() - started >= NO_ROOM_WINDOW, timeout=NO_ROOM_WINDOW + 1, what="the window")
        cpu = cpu_seconds(proc.pid) - cpu_before
        proc.stdin.write("release\n")  # receive goes on; its answer frees the descriptor
        proc.stdin.flush()
        answer = read_to_eof(in_hand)
        self.assertTrue(answer.startswith(b"HTTP/1.0 200 "), answer)
        self.assertTrue(read_to_eof(later).startswith(b"HTTP/1.0 200 "))
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(DEADLINE), 0)
        sys.stderr.write("\n  EMFILE with nothing to close: sink CPU %.3fs over %.1fs\n" % (cpu, NO_ROOM_WINDOW))
        self.assertLess(cpu, 0.5 * NO_ROOM_WINDOW / 10.0)


class ConnectionCapTest(ServerTestCase):
    def test_at_the_cap_the_longest_waiting_connection_makes_room(self):
        port = self.port(max_connections=4, timeout=DEADLINE)
        idle = []
        for _ in range(4):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=DEADLINE))
            self.addCleanup(idle[-1].close)
        idle[1].sendall(b"POST /events HTTP/1.1\r\nHost: x\r\n")  # trickling, but not the oldest
        started = time.monotonic()
        status, _, body = post(port, body_of(EVENT))
        self.assertEqual((status, body["result"]), (200, "applied"))
        self.assertLess(time.monotonic() - started, DEADLINE / 2)  # not by the request timeout
        self.assertEqual(read_to_eof(idle[0]), b"")  # the oldest was closed, with no answer
        for sock in idle[1:]:  # the others are still held
            sock.setblocking(False)
            with self.assertRaises(BlockingIOError):
                sock.recv(1)

    def test_max_connections_must_be_a_positive_int(self):
        from sink import make_server

        for value in (0, -1, True, 1.5, "64"):
            with self.subTest(value=value):
                with self.assertRaises(ValueError):
                    make_server(self.db_path, max_connections=value)


class PromptStopTest(ServerTestCase):
    def test_sigterm_with_100_idle_connections_exits_within_2s(self):
        # A cap above 100, so all of them are held when the signal comes.
        child = Child(["serve", "--db", self.db_path, "--port", "0", "--timeout", "30", "--max-connections", "128"], self.tmp)
        self.addCleanup(child.close)
        port = child.port()
        idle = []
        self.addCleanup(lambda: [sock.close() for sock in idle])
        for _ in range(100):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=DEADLINE))
        idle[0].sendall(b"POST /events HTTP/1.1\r\nHost: x\r\nContent-")  # a head still arriving is idle too
        status, _, _ = post(port, None, path="/health", method="GET", content_type=None)
        self.assertEqual(status, 200)  # so every idle connection above has been accepted
        started = time.monotonic()
        child.signal(signal.SIGTERM)
        self.assertEqual(child.wait(), 0)
        self.assertLess(time.monotonic() - started, 2.0)
        for sock in idle:
            self.assertTrue(closed_without_answer(sock))

    def test_stop_closes_idle_connections_at_once_in_process(self):
        server = self.start(timeout=30)
        port = server.server_address[1]
        idle = [socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) for _ in range(20)]
        self.addCleanup(lambda: [sock.close() for sock in idle])
        status, _, _ = post(port, None, path="/health", method="GET", content_type=None)
        self.assertEqual(status, 200)
        started = time.monotonic()
        server.stop()
        self.assertLess(time.monotonic() - started, 2.0)
        for sock in idle:
            self.assertEqual(read_to_eof(sock), b"")


    def test_stop_with_a_half_sent_body_in_hand_returns_within_the_timeout_plus_1s(self):
        server = self.start(timeout=STOP_TIMEOUT)
        port = server.server_address[1]
        event = body_of(EVENT)
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as half:
            half.sendall(request_bytes(["Content-Type: application/json", "Content-Length: %d" % len(event)])
                         + event[:5])
            # Accepted in arrival order: once this is answered, the half-sent request is in the reader's hands.
            status, _, _ = post(port, None, path="/health", method="GET", content_type=None)
            self.assertEqual(status, 200)
            started = time.monotonic()
            server.stop()
            took = time.monotonic() - started
            answer = read_to_eof(half)
        sys.stderr.write("\n  stop() with a half-sent body in hand: %.2fs (timeout %gs)\n" % (took, STOP_TIMEOUT))
        self.assertLess(took, STOP_TIMEOUT + 1.0)
        self.assertTrue(answer.startswith(b"HTTP/1.0 400 "), answer[:60])
        self.assertIn(b"body incomplete: 5 of", answer)

    def test_stop_abandons_a_receive_that_never_returns_within_the_timeout_plus_1s(self):
        entered, release = threading.Event(), threading.Event()

        def stuck_receive(con, event):
            entered.set()
            release.wait(DEADLINE * 3)  # "never" within this test: released at its end
            return "applied"

        lines = []
        server = sink_server.make_server(self.db_path, timeout=STOP_TIMEOUT, receive=stuck_receive,
                                         log=lines.append).start()
        self.addCleanup(release.set)
        port = server.server_address[1]
        answers = queue.Queue()

        def client():
            try:
                answers.put(post(port, body_of(EVENT))[0])
            except Exception as exc:  # the connection shut without an answer: that is the expected end
                answers.put(exc)

        posting = threading.Thread(target=client)
        posting.start()
        self.addCleanup(posting.join, DEADLINE)
        self.assertTrue(entered.wait(DEADLINE))
        started = time.monotonic()
        server.stop()
        took = time.monotonic() - started
        answer = answers.get(timeout=DEADLINE)
        sys.stderr.write("\n  stop() with a receive that never returns: %.2fs (timeout %gs)\n" % (took, STOP_TIMEOUT))
        self.assertLess(took, STOP_TIMEOUT + 1.0)
        self.assertIsInstance(answer, ConnectionError)  # shut at the stop deadline, not answered, not left waiting
        self.assertTrue([line for line in lines if line.startswith("stop: ") and "abandoned" in line], lines)
        self.assertIsNone(server.failure)


class RequestDeadlineTest(ServerTestCase):
    """The request deadline on the clock: a request still arriving ends at the server's timeout, not long after.

    tests/test_sink_server.py proves without a clock that it is the request
    deadline that ends these requests; here, how soon. A server that missed
    its deadline would hold them until the client's DEADLINE.
    """

    def test_a_trickling_client_is_closed_soon_after_the_timeout(self):
        port = self.port(timeout=DEADLINE_TIMEOUT)
        started = time.monotonic()
        self.assertTrue(trickle(port))
        self.assertLess(time.monotonic() - started, DEADLINE_TIMEOUT + DEADLINE_MARGIN)

    def test_a_body_shorter_than_declared_is_answered_soon_after_the_timeout(self):
        port = self.port(timeout=DEADLINE_TIMEOUT)
        event = body_of(EVENT)
        data = request_bytes(["Content-Type: application/json", "Content-Length: %d" % (len(event) + 10)], event)
        started = time.monotonic()
        status, _, answer, _ = exchange(port, data, half_close=False)
        self.assertLess(time.monotonic() - started, DEADLINE_TIMEOUT + DEADLINE_MARGIN)
        self.assertEqual(status, 400)
        self.assertIn("within the %gs request deadline" % DEADLINE_TIMEOUT, answer["error"])


class HeadOfSpacesTest(ServerTestCase):
    def test_a_head_full_of_spaces_costs_time_in_its_length_not_its_square(self):
        # A header value with 16,000 inner spaces once cost the reader 0.5 s of CPU
        # (a pattern that trimmed spaces itself backtracked); 20 of them would take 10 s.
        line = b"X-Spaces: a" + b" " * 16000 + b"b"
        data = b"GET /health HTTP/1.1\r\nHost: x\r\n" + line + b"\r\n\r\n"
        started = time.monotonic()
        for _ in range(20):
            outcome = framing.Reader(sink_server.ALLOWED, float("inf"), 10.0).feed(data)
            self.assertIsInstance(outcome, framing.Request)
        self.assertLess(time.monotonic() - started, 1.0)
