"""Namespaces: a boxed worker's own user, PID, IPC, mount and network namespaces, unprivileged, through ctypes.

Owns unshare(), setns(), the id maps, the /proc the worker sees and the
loopback of its network. The network namespace is made by a holder process
of the grader's (network.py), so that the grader can make sockets in it;
the worker's processes join it (join) before they make their own user, PID,
IPC and mount namespaces inside it (enter). Never imports the worker.
"""
import contextlib
import ctypes
import os
import socket
import struct
import signal
import sys
import time

from . import contain

try:
    import fcntl
except ImportError:  # not POSIX (Windows): no namespaces there, and box.plan says so
    fcntl = None

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x08000000, 0x10000000, 0x20000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
IFREQ = "16sH22x"  # struct ifreq: the interface's name, then its flags (40 bytes on Linux)
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
NAMES = ("user", "pid", "ipc", "mount")


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, "%s: %s" % (what, os.strerror(number)))


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _user_and_pid():
    """This process in a user namespace of its own (its uid and gid mapped to themselves), its children in a PID one."""
    uid, gid = os.geteuid(), os.getegid()
    libc = _libc()
    _check(libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", "%d %d 1" % (uid, uid))
    _write("/proc/self/gid_map", "%d %d 1" % (gid, gid))
    _check(libc.unshare(CLONE_NEWPID | CLONE_NEWIPC), "unshare(CLONE_NEWPID | CLONE_NEWIPC)")


def own_network():
    """This process (the holder) in a user and a network namespace of its own, with its loopback up and nothing else."""
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc().unshare(CLONE_NEWUSER | CLONE_NEWNET), "unshare(CLONE_NEWUSER | CLONE_NEWNET)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", "%d %d 1" % (uid, uid))
    _write("/proc/self/gid_map", "%d %d 1" % (gid, gid))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        flags = struct.unpack(IFREQ, fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0)))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))


def join(fds):
    """Enter the holder's user and network namespaces by the descriptors the grader passed (user, net); close them.

    Before enter() and trial(): the worker's own namespaces are then made
    inside the holder's user namespace, and share its network.
    """
    libc = _libc()
    try:
        _check(libc.setns(fds[0], CLONE_NEWUSER), "setns(CLONE_NEWUSER)")  # audit: G70
        _check(libc.setns(fds[1], CLONE_NEWNET), "setns(CLONE_NEWNET)")
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _own_proc():
    """In the new PID namespace: a mount namespace whose /proc shows only its processes."""
    libc = _libc()
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    _check(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")


def _in_child(body):
    """Run `body()` in a forked process; the OSError it raised as text, or None if it returned."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            body()
            os._exit(0)
        except BaseException as exc:  # the reason goes to the parent, whatever it is
            with contextlib.suppress(OSError):
                os.write(write, str(exc).encode("utf-8", "replace")[:300])
            os._exit(1)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        reason = f.read(400)
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return None
    return reason.decode("utf-8", "replace") or "the trial process ended with status %d" % status


def trial():
    """Whether all of it works here, tried in throwaway processes (nothing in this one changes): None or the reason."""
    def first():
        _user_and_pid()
        reason = _in_child(_own_proc)
        if reason:
            raise OSError(reason)
    return _in_child(first)


def enter():
    """Enter the namespaces; returns in the worker's process, inside them. Call trial() first.

    The calling process stays outside as the supervisor of the PID
    namespace's first process (an init of ours, pid 1, that reaps), which
    forks the worker's process (pid 2): two small processes that pass SIGTERM
    on and end as the worker's process did. When pid 1 ends, the kernel ends
    every process left in the namespace.
    """
    _user_and_pid()
    status_r, status_w = os.pipe()
    init = _fork()
    if init != 0:
        os.close(status_w)
        status = _wait(init)
        with os.fdopen(status_r, "rb") as f:
            told = f.read(32)
        contain.exit_as(int(told) if told.strip().lstrip(b"-").isdigit() else status)
    os.close(status_r)
    try:
        _own_proc()
    except OSError:
        os._exit(1)
    worker = _fork()
    if worker != 0:
        status = _wait(worker)
        os.write(status_w, str(status).encode())
        os._exit(0)
    os.close(status_w)


def _fork():
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    return os.fork()


def _wait(child):
    """Wait for `child`, passing SIGTERM on to it and reaping every orphan meanwhile; its status (-N: signal N)."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))  # only a flag: the loop passes it on
    while True:
        if stop:
            del stop[:]
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)
        status = contain.reap_orphans(child)
        if status is not None:
            return status
        time.sleep(contain.POLL)


def drop_capabilities():
    """Give up the capabilities the new user namespace granted (none of them reach outside it)."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    _check(_libc().capset(header, data), "capset")
