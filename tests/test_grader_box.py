"""grader/box.py and its layers (landlock.py, seccomp.py, namespaces.py), from inside real boxed processes.

Each layer: a process that entered the box tries what the layer stops (a
write outside its folder, ptrace, a signal to the test, memfd_create, a look
at other processes) and gets EACCES, EPERM or nothing to see; and the same
process with the layer made unavailable (OUTBOX_KIT_BOX_UNAVAILABLE) says so
in its report and is not stopped. Linux only where a layer needs it.
"""
import json
import os
import socket
import subprocess
import sys
import unittest

from grader import box, landlock, namespaces, network, scenarios, seccomp
from grader.common import Fail
from grader.parent import PROCESSES
from tests.support import DEADLINE, ROOT, TempDirTestCase, python_env

LINUX = sys.platform.startswith("linux")
LANDLOCK = landlock.abi()[0] if LINUX else 0
SECCOMP = seccomp.available()[0]
NAMESPACES = LINUX and namespaces.trial() is None
ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0

# The boxed process: everything it will use imported first (a uid of its own may not read this
# interpreter's prefix), then the box, then the attack in argv[2]; one JSON line per outcome.
SCRIPT = r'''
import ctypes, errno, json, os, signal, socket, sqlite3, subprocess, sys, threading
from grader import box
report = box.enter(sys.argv[1])
print(json.dumps({"report": report}), flush=True)
libc = ctypes.CDLL(None, use_errno=True)

def attempt(name, call):
    try:
        call()
        result = "ok"
    except OSError as exc:
        result = errno.errorcode.get(exc.errno, str(exc.errno))
    print(json.dumps({name: result}), flush=True)

def checked(result, what):
    if result != 0:
        raise OSError(ctypes.get_errno(), what)

def write(path):
    with open(path, "w") as f:
        f.write("x")

exec(sys.argv[2])
'''


class BoxedProcessTestCase(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.root = os.path.join(self.tmp, "worker-tmp")
        self.own = os.path.join(self.tmp, "worker")
        self.other = os.path.join(self.tmp, "classmate")
        for folder in (self.root, self.own, self.other):
            os.makedirs(folder)
        with open(os.path.join(self.other, "worker.py"), "w") as f:
            f.write("secret = 1\n")

    def plan(self, layers=box.LAYERS, uid=None):
        return {"layers": list(layers), "write": self.root, "reads": [self.own], "uid": uid, "uid_off": None}

    def boxed(self, attack, plan=None, unavailable="", pass_fds=()):
        """Run `attack` in a boxed process; {outcome name: "ok" or the errno's name, "report": what enter said}."""
        env = python_env(**{box.UNAVAILABLE: unavailable})
        proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(plan or self.plan()), attack], cwd=ROOT,
                              env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=DEADLINE, pass_fds=pass_fds)
        self.assertEqual(proc.returncode, 0, proc.stderr.decode(errors="replace"))
        found = {}
        for line in proc.stdout.decode().splitlines():
            found.update(json.loads(line))
        return found


@unittest.skipUnless(LANDLOCK, "no Landlock here: %s" % (landlock.abi()[1] if LINUX else "not Linux"))
class LandlockTest(BoxedProcessTestCase):
    ATTACK = ("attempt('inside', lambda: write(os.path.join(%r, 'mine')))\n"
              "attempt('outside', lambda: write(os.path.join(%r, 'planted')))\n"
              "attempt('kit', lambda: write(os.path.join(%r, 'grader', 'planted.pyc')))\n"
              "attempt('classmate', lambda: open(os.path.join(%r, 'worker.py')).read())\n"
              "attempt('own', lambda: os.listdir(%r))\n")

    def attack(self):
        return self.ATTACK % (self.root, self.tmp, ROOT, self.other, self.own)

    def test_the_worker_writes_only_in_its_folder_and_reads_no_classmate(self):
        found = self.boxed(self.attack(), unavailable="seccomp,namespaces")
        self.assertEqual(found["report"]["landlock"], LANDLOCK)
        self.assertEqual((found["inside"], found["own"]), ("ok", "ok"))
        self.assertEqual((found["outside"], found["kit"], found["classmate"]), ("EACCES", "EACCES", "EACCES"))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "planted")))
        self.assertFalse(os.path.exists(os.path.join(ROOT, "grader", "planted.pyc")))

    def test_unavailable_it_is_reported_off_and_stops_nothing(self):
        found = self.boxed(self.attack(), unavailable="landlock,seccomp,namespaces")
        self.assertIs(found["report"]["landlock"], False)
        self.assertIn(box.UNAVAILABLE, found["report"]["off"]["landlock"])
        self.assertEqual((found["outside"], found["classmate"]), ("ok", "ok"))
        os.remove(os.path.join(self.tmp, "planted"))
        if found["kit"] == "ok":
            os.remove(os.path.join(ROOT, "grader", "planted.pyc"))

    def test_isolation_off_applies_nothing(self):
        found = self.boxed(self.attack(), plan=self.plan(layers=()))
        self.assertEqual(found["report"]["off"]["landlock"], "--isolation off")
        self.assertEqual(found["outside"], "ok")
        if found["kit"] == "ok":
            os.remove(os.path.join(ROOT, "grader", "planted.pyc"))


@unittest.skipUnless(SECCOMP, "no seccomp filter here: %s" % (seccomp.available()[1],))
class SeccompTest(BoxedProcessTestCase):
    ATTACK = ("attempt('ptrace', lambda: checked(libc.ptrace(16, %d, 0, 0), 'ptrace'))\n"  # PTRACE_ATTACH the test
              "attempt('kill', lambda: os.kill(%d, 0))\n"
              "attempt('everyone', lambda: os.kill(-1, 0))\n"
              "attempt('memfd', lambda: os.close(os.memfd_create('flood')))\n"
              "attempt('unshare', lambda: checked(libc.unshare(0x10000000), 'unshare'))\n"
              "attempt('itself', lambda: os.kill(os.getpid(), 0))\n"
              "attempt('group', lambda: os.kill(0, 0))\n"
              "attempt('thread', lambda: [t.start() or t.join() for t in [threading.Thread(target=int)]])\n"
              "attempt('subprocess', lambda: subprocess.check_call([sys.executable, '-c', 'pass']))\n"
              "attempt('sqlite', lambda: sqlite3.connect(os.path.join(%r, 'x.db')).execute('CREATE TABLE t(x)'))\n"
              "attempt('loopback', lambda: socket.create_server(('127.0.0.1', 0)).close())\n"
              "attempt('unix', lambda: socket.socket(socket.AF_UNIX).close())\n"
              "attempt('vsock', lambda: socket.socket(40).close())\n"  # AF_VSOCK: a VM's host
              "attempt('pair', lambda: [s.close() for s in socket.socketpair()])\n"
              "attempt('ipv6', lambda: socket.socket(socket.AF_INET6).close())\n")

    def attack(self, ptrace=True):
        attack = self.ATTACK % (os.getpid(), os.getpid(), self.root)
        return attack if ptrace else attack.split("\n", 1)[1]  # unboxed, it would stop this test: not tried

    def test_the_worker_cannot_trace_or_signal_the_grader_nor_escape_its_memory_limit(self):
        found = self.boxed(self.attack(), unavailable="landlock,namespaces")
        self.assertIs(found["report"]["seccomp"], True)
        for name in ("ptrace", "kill", "everyone", "memfd", "unshare", "unix", "vsock"):
            self.assertEqual(found[name], "EPERM", name)
        for name in ("itself", "group", "thread", "subprocess", "sqlite", "loopback", "pair", "ipv6"):
            self.assertEqual(found[name], "ok", name)

    def test_unavailable_it_is_reported_off_and_stops_nothing(self):
        found = self.boxed(self.attack(ptrace=False), unavailable="landlock,seccomp,namespaces")
        self.assertIs(found["report"]["seccomp"], False)
        self.assertIn(box.UNAVAILABLE, found["report"]["off"]["seccomp"])
        self.assertEqual((found["memfd"], found["kill"]), ("ok", "ok"))

    def test_the_filter_refuses_every_other_architecture_and_x32(self):
        program = seccomp.program({1234, -1234})
        self.assertEqual(program[1][0], seccomp.JEQ)
        self.assertEqual(program[1][3], seccomp.AUDIT_ARCH_X86_64)
        self.assertEqual(program[2], (seccomp.RET, 0, 0, seccomp.RET_KILL_PROCESS))
        self.assertEqual(program[4][3], seccomp.X32_SYSCALL_BIT)
        protected = [k for code, jt, jf, k in program if code == seccomp.JEQ and k in (1234, (-1234) & 0xFFFFFFFF)]
        self.assertEqual(len(protected), 2)
        self.assertEqual(program[-1], (seccomp.RET, 0, 0, seccomp.RET_ALLOW))


@unittest.skipUnless(NAMESPACES, "no unprivileged namespaces here")
class NamespacesTest(BoxedProcessTestCase):
    ATTACK = ("print(json.dumps({'pid': os.getpid()}))\n"
              "print(json.dumps({'seen': sorted(int(p) for p in os.listdir('/proc') if p.isdigit())}))\n")

    def test_the_worker_sees_no_process_but_its_own(self):
        found = self.boxed(self.ATTACK, unavailable="landlock,seccomp")
        self.assertIs(found["report"]["namespaces"], True)
        self.assertEqual(found["pid"], 2)
        self.assertEqual(found["seen"], [1, 2])
        self.assertIn("network", found["report"]["off"])

    def test_unavailable_it_is_reported_off(self):
        found = self.boxed(self.ATTACK, unavailable="landlock,seccomp,namespaces")
        self.assertIs(found["report"]["namespaces"], False)
        self.assertNotEqual(found["pid"], 2)
        self.assertIn(os.getpid(), found["seen"])


@unittest.skipUnless(NAMESPACES, "no unprivileged namespaces here")
class NetworkTest(BoxedProcessTestCase):
    ATTACK = ("attempt('host', lambda: socket.create_connection(('127.0.0.1', %d), 2).close())\n"
              "attempt('grader', lambda: socket.create_connection(('127.0.0.1', %d), 2).close())\n"
              "attempt('listen', lambda: socket.create_server(('127.0.0.1', 0)).close())\n"
              "attempt('outside', lambda: socket.create_connection(('192.0.2.1', 80), 2).close())\n")

    def setUp(self):
        super().setUp()
        self.host = socket.create_server(("127.0.0.1", 0))  # on the host's loopback: no worker may reach it
        self.addCleanup(self.host.close)
        self.host.setblocking(False)

    def host_was_reached(self):
        try:
            self.host.accept()[0].close()
            return True
        except BlockingIOError:
            return False

    def test_the_worker_reaches_the_grader_s_sockets_and_nothing_of_the_host(self):
        net = network.Network.start(PROCESSES)
        self.addCleanup(net.close, PROCESSES)
        self.assertIsNone(net.reason)
        ours = net.listen()  # a socket of the grader's, in the worker's namespace
        self.addCleanup(ours.close)
        attack = self.ATTACK % (self.host.getsockname()[1], ours.getsockname()[1])
        found = self.boxed(attack, plan=dict(self.plan(), net=list(net.fds)), unavailable="landlock,seccomp",
                           pass_fds=net.fds)
        self.assertEqual((found["host"], found["grader"], found["listen"]), ("ECONNREFUSED", "ok", "ok"))
        self.assertEqual(found["outside"], "ENETUNREACH")  # no interface but loopback
        self.assertNotIn("network", found["report"]["off"])
        self.assertFalse(self.host_was_reached())
        ours.setblocking(False)
        ours.accept()[0].close()  # the connection the worker made, on the grader's side

    def test_the_grader_connects_as_the_worker_does(self):
        net = network.Network.start(PROCESSES)
        self.addCleanup(net.close, PROCESSES)
        inside = net.listen()
        self.addCleanup(inside.close)
        port = inside.getsockname()[1]
        with net.connect("127.0.0.1", port, 2):
            inside.accept()[0].close()
        with self.assertRaises(OSError):
            net.connect("127.0.0.1", self.host.getsockname()[1], 2).close()  # the host's port is not there
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", port), 2).close()  # nor the worker's from the host
        self.assertFalse(self.host_was_reached())

    def test_a_host_the_worker_names_that_is_not_loopback_is_refused_and_the_holder_goes_on(self):
        net = network.Network.start(PROCESSES)
        self.addCleanup(net.close, PROCESSES)
        for host, port in (("ex\u00e4mple", 80), ("a" * 64, 80), ("x" * 600, 80), ("192.0.2.1", 80),
                           ("127.0.0.1", None), ("127.0.0.1", 70000)):
            with self.assertRaises(OSError):
                net.connect(host, port, 1).close()
        inside = net.listen()  # the holder still answers, each answer to its own request
        self.addCleanup(inside.close)
        with net.connect("localhost", inside.getsockname()[1], 2) as sock:
            self.assertFalse(sock.get_inheritable())
            inside.accept()[0].close()
        self.assertIsNone(net.holder.poll())
        net.close(PROCESSES)
        with self.assertRaises(OSError):  # a holder gone is never replaced by the host's loopback
            net.listen().close()

    def test_the_grader_s_post_to_an_address_the_worker_announced_badly_is_the_worker_s_failure(self):
        net = network.Network.start(PROCESSES)
        self.addCleanup(net.close, PROCESSES)
        for url in ("http://127.0.0.1:99999/events", "http://[::1/events", "http://192.0.2.1:80/events",
                    "http://127.0.0.1/events", "http://ex\u00e4mple:80/events"):
            with self.assertRaises(Fail, msg=url):
                scenarios.post(url, {"id": "x", "sku": "y", "qty": 1}, 1, net)
        self.assertIsNone(net.holder.poll())  # nothing of it reached the holder's protocol

    def test_unavailable_it_is_reported_off_and_the_grader_s_sockets_are_on_the_host(self):
        os.environ[box.UNAVAILABLE] = "namespaces"
        try:
            net = network.for_box(self.plan(), PROCESSES)
        finally:
            del os.environ[box.UNAVAILABLE]
        self.addCleanup(net.close, PROCESSES)
        self.assertEqual((net.fds, net.holder), ((), None))
        self.assertIn(box.UNAVAILABLE, net.reason)
        ours = net.listen()
        self.addCleanup(ours.close)
        attack = self.ATTACK % (self.host.getsockname()[1], ours.getsockname()[1])
        found = self.boxed(attack, plan=dict(self.plan(), net=None, net_off=net.reason),
                           unavailable="landlock,seccomp,namespaces")
        self.assertEqual((found["host"], found["grader"]), ("ok", "ok"))
        self.assertEqual(found["report"]["off"]["network"], net.reason)
        self.assertTrue(self.host_was_reached())


@unittest.skipUnless(ROOT_USER and LINUX, "a uid of its own only when the grader runs as root")
class UidTest(BoxedProcessTestCase):
    ATTACK = ("print(json.dumps({'uid': os.getuid(), 'groups': os.getgroups()}))\n"
              "attempt('inside', lambda: write(os.path.join(%r, 'mine')))\n"
              "attempt('outside', lambda: write(os.path.join(%r, 'planted')))\n")

    def test_the_worker_runs_under_a_uid_of_its_own_owning_its_folder(self):
        uid = box.next_uid()
        box.own(self.root, {"uid": uid})
        os.chmod(self.tmp, 0o711)  # the test's own folder: the worker may pass through, not list
        found = self.boxed(self.ATTACK % (self.root, self.tmp), plan=self.plan(layers=("uid",), uid=uid))
        self.assertEqual((found["report"]["uid"], found["uid"], found["groups"]), (uid, uid, []))
        self.assertEqual((found["inside"], found["outside"]), ("ok", "EACCES"))
        self.assertEqual(os.stat(os.path.join(self.root, "mine")).st_uid, uid)
        self.assertEqual(os.stat(self.root).st_mode & 0o777, 0o700)

    def test_unavailable_the_worker_runs_as_the_grader(self):
        found = self.boxed(self.ATTACK % (self.root, self.tmp), plan=self.plan(layers=("uid",), uid=None),
                           unavailable="uid")
        self.assertEqual(found["uid"], 0)
        self.assertIs(found["report"]["uid"], False)


class PlanTest(TempDirTestCase):
    def test_a_plan_names_the_worker_s_folder_or_only_its_file_beside_classmates(self):
        impl = os.path.join(self.tmp, "alice.py")
        open(impl, "w").close()
        self.assertEqual(box.plan("all", impl, self.tmp)["reads"], [self.tmp])
        self.assertEqual(box.plan("all", impl, self.tmp, shared_folder=True)["reads"], [impl])
        self.assertEqual(box.plan("off", impl, self.tmp)["layers"], [])

    @unittest.skipUnless(ROOT_USER, "uids are given only under root")
    def test_under_root_each_worker_has_a_uid_no_account_has(self):
        import pwd
        given = [box.next_uid() for _ in range(3)]
        self.assertEqual(len(set(given)), 3)
        for uid in given:
            self.assertRaises(KeyError, pwd.getpwuid, uid)
            self.assertLess(uid, 2 ** 32 - 1)

    def test_a_forged_isolation_line_is_shown_as_data_of_known_types(self):
        self.assertEqual(box.shown({"landlock": "7", "seccomp": 1, "uid": True, "off": {"x": ["y"]}}),
                         {"landlock": False, "seccomp": False, "namespaces": False, "uid": False, "off": {"x": "['y']"}})
        self.assertEqual(box.shown("nonsense")["off"], {})

    def test_the_probe_names_a_reason_for_every_layer_off(self):
        offers = box.probe()
        for layer in box.LAYERS:
            self.assertTrue(offers[layer] or offers["off"].get(layer), layer)

    def test_without_namespaces_the_network_is_the_host_s_and_the_plan_says_why(self):
        impl = os.path.join(self.tmp, "alice.py")
        open(impl, "w").close()
        plan = box.plan("off", impl, self.tmp)
        net = network.for_box(plan, PROCESSES)
        self.assertEqual((net.fds, net.reason), ((), "--isolation off"))
        self.assertEqual(box.expected(dict(plan, net=None, net_off=net.reason))["off"]["network"], "--isolation off")


if __name__ == "__main__":
    unittest.main()
