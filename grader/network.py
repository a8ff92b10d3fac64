"""The worker's network: a namespace of its own with loopback alone, and the grader's sockets inside it.

Owns the holder: a small process of the grader's, which never imports the
worker, that makes a user and a network namespace, brings their loopback
up, and then makes sockets in it when the grader asks, handing each over a
Unix socket (SCM_RIGHTS). A socket belongs to the namespace it was made in,
wherever its descriptor goes: the grader's servers listen on such sockets,
in the grader's own process, and its own requests to the worker's sink go
out on them. The worker's processes join the namespace before anything else
(box.enter, namespaces.join), so the worker's send_http reaches the servers
of its own checks and no other TCP or UDP peer: not the host's loopback,
not a classmate's servers, no other host (sockets of other families, a
Unix socket by path among them, are seccomp's to refuse). Where namespaces are off (not Linux, refused,
--isolation off), a Network makes the same sockets on the host's loopback.

The holder runs as `python -E -S -B -m grader.network CONTROL_FD UID` (UID -1:
the grader's own); it ends when the grader closes its end of the socket (or
when it is killed with the grader's other children).
"""
import array
import os
import socket
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOOPBACK = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1", "::1": "::1"}  # the hosts connect() takes
START_WITHIN = 10.0  # seconds the holder has to say that its namespace is ready
REPLY_WITHIN = 10.0  # seconds for one answer of the holder's (a socket made; one loopback connect, within 9 s)
LINE = 512  # the most a line of the protocol holds, either way


class Network:
    """Sockets on the worker's loopback: in the holder's namespace if it is up, else (`reason` set) on the host's.

    `fds` are the holder's user and network namespaces (opened here, passed to
    each of the worker's processes); () on the host. `reason` says why there
    is no namespace of the worker's own, or is None.
    """

    def __init__(self, reason="namespaces are off"):
        self.reason = reason
        self.fds = ()
        self.holder = None
        self._sock = None
        self._lock = threading.Lock()  # one request at a time: the checks of a worker run side by side

    @classmethod
    def start(cls, processes, uid=None):
        """A Network in a holder's namespace, started as `processes.popen` (parent.PROCESSES) starts children; if the
        holder cannot make its namespace, a Network on the host's loopback that says why."""
        net = cls(None)  # audit: G70
        ours, theirs = socket.socketpair()
        try:
            net.holder = processes.popen(
                [sys.executable, "-E", "-S", "-B", "-m", "grader.network", str(theirs.fileno()),
                 str(-1 if uid is None else uid)], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, pass_fds=(theirs.fileno(),), start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        net._sock = ours
        ours.settimeout(START_WITHIN)
        try:
            said = _line(ours)
        except OSError as exc:
            said = "off no answer: %s" % exc
        said = said or "off it ended without a word (status %s)" % net.holder.poll()
        if said == "ready":
            try:
                for name in ("user", "net"):
                    net.fds += (os.open("/proc/%d/ns/%s" % (net.holder.pid, name), os.O_RDONLY),)
                return net
            except OSError as exc:
                said = "off its namespaces cannot be opened: %s" % exc
        net.reason = "the worker's network namespace is refused: %s" % (said[4:] if said.startswith("off ") else said)
        net.close(processes)
        return net

    def listen(self):
        """A TCP socket listening on 127.0.0.1, a port of the kernel's choice: where the worker can connect."""
        return listener() if self.reason is not None else self._ask("listen")

    def connect(self, host, port, timeout):
        """A TCP socket connected to (host, port) as the worker's processes see it; OSError if that cannot be.

        `host` is a loopback name or address (LOOPBACK): it may come from the
        worker (its sink's address), and no other goes to the holder.
        """
        if host not in LOOPBACK or not isinstance(port, int) or not 0 < port < 65536:
            raise OSError("not a loopback address: %r, port %r" % (str(host)[:80], port))
        if self.reason is not None:  # on the host's loopback
            return socket.create_connection((LOOPBACK[host], port), timeout)
        sock = self._ask("connect %s %d %g" % (LOOPBACK[host], port, min(timeout, REPLY_WITHIN - 1)))
        sock.settimeout(timeout)
        return sock

    def closed_port(self):
        """A loopback port nothing listens on (made, then closed): a connection to it is refused."""
        sock = self.listen()
        try:
            return sock.getsockname()[1]
        finally:
            sock.close()

    def _ask(self, request):
        with self._lock:
            if self._sock is None:
                raise OSError("the network's holder is gone")
            try:
                self._sock.settimeout(REPLY_WITHIN)
                self._sock.sendall(request.encode("ascii") + b"\n")
                data, fds = receive(self._sock)
            except OSError:
                # No answer in time, or none at all: a late one would be taken for the next request's. The holder
                # ends once its socket closes; each later request is refused.
                self._sock.close()
                self._sock = None
                raise
        for fd in fds:
            os.set_inheritable(fd, False)  # as every socket Python makes: no child of the grader's gets it
        said = data.decode("utf-8", "replace").strip()
        if said == "ok" and len(fds) == 1:
            return socket.socket(fileno=fds[0])
        for fd in fds:
            os.close(fd)
        raise OSError(said[6:] if said.startswith("error ") else "the network's holder said %r" % said[:80])

    def close(self, processes):
        """End the holder (it ends once its socket closes) and close the namespaces' descriptors."""
        for fd in self.fds:
            os.close(fd)
        self.fds = ()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.holder is not None:
            try:
                self.holder.wait(5)
            except subprocess.TimeoutExpired:
                self.holder.kill()
                self.holder.wait()
            processes.forget(self.holder)
            self.holder = None


HOST = Network()  # the host's loopback: for grader code with no worker's namespace to use


def for_box(plan, processes):
    """The Network of a worker boxed as `plan` (box.plan): its own namespace where the box has namespaces and this
    host allows them, else the host's loopback, with the reason."""
    from grader import box
    if "namespaces" not in plan["layers"]:
        return Network("--isolation off")
    if "namespaces" in box.unavailable():
        return Network(box.made_unavailable())
    offered, reason = box.namespaces_offered()
    refused = box.known_refusal()
    if not offered or refused:
        return Network(reason or refused)
    # The worker's processes take their uid only where that layer is on: the holder's must be the same.
    return Network.start(processes, plan["uid"] if "uid" not in box.unavailable() else None)


def listener():
    """A TCP socket listening on 127.0.0.1, a port of the kernel's choice, in this process's network namespace."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
    except BaseException:
        sock.close()
        raise
    return sock


def receive(sock):
    """One message and the descriptors it carries, from a Unix socket: (bytes, [fd])."""
    data, ancillary, _, _ = sock.recvmsg(LINE, socket.CMSG_SPACE(array.array("i", [0]).itemsize))
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    return data, list(fds)


def _line(sock):
    data = b""
    while not data.endswith(b"\n") and len(data) < LINE:
        chunk = sock.recv(LINE - len(data))
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace").strip()


# --------------------------------------------------------------------------
# The holder: its own process, in the namespace it made.
# --------------------------------------------------------------------------


def hold(control, uid):
    """The holder's life: make the namespace, say "ready" (or "off REASON"), then answer until the grader leaves."""
    from grader import namespaces  # only here: the grader's side needs no ctypes
    sock = socket.socket(fileno=control)
    try:
        if uid >= 0:  # root: the worker's own uid, which must own the namespace its processes join
            import ctypes
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: the grader opens its /proc/PID/ns
        namespaces.own_network()  # audit: G70
        reason = namespaces.trial()  # what the worker's processes will do in it: refused here, refused there too
    except OSError as exc:
        reason = str(exc)
    if reason:
        sock.sendall(("off %s\n" % reason[:LINE - 8].replace("\n", " ")).encode("utf-8", "replace"))
        return 0
    sock.sendall(b"ready\n")
    while True:
        request = _line(sock)
        if not request:
            return 0  # the grader closed its end, or is gone
        made = None
        try:
            made = answer(request.split())
            sock.sendmsg([b"ok\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [made.fileno()]))])
        except Exception as exc:  # noqa: B902 (any request's failure is its answer; the holder goes on)
            sock.sendall(("error %s" % exc)[:LINE - 2].encode("utf-8", "replace") + b"\n")
        finally:
            if made is not None:
                made.close()


def answer(words):
    """The socket a request asks for: `listen`, or `connect HOST PORT TIMEOUT`."""
    if words == ["listen"]:
        return listener()
    if len(words) == 4 and words[0] == "connect" and words[1] in LOOPBACK.values():
        return socket.create_connection((words[1], int(words[2])), min(float(words[3]), REPLY_WITHIN - 1))
    raise OSError("not a request: %r" % " ".join(words)[:80])


if __name__ == "__main__":
    sys.exit(hold(int(sys.argv[1]), int(sys.argv[2])))
