"""seccomp: the system calls a boxed worker's processes are refused, as a BPF filter built with `struct`.

Owns the filter and its installation (ctypes). A refused call fails with
EPERM, as an ordinary error the worker sees; it never kills. Only x86_64's
system call numbers are here: elsewhere the layer is off, with that reason.
Never imports the worker.
"""
import ctypes
import errno
import os
import platform
import struct
import sys

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
# The calls no worker needs: other processes' memory and tracing (ptrace, process_vm_*, pidfd_getfd, kcmp),
# memory outside the address-space limit (memfd_create, userfaultfd), the kernel's keyring, BPF, perf and
# io_uring (whose operations no filter sees), namespaces, mounts and roots, signals by other routes
# (pidfd_send_signal, rt_*sigqueueinfo), and what changes the host (modules, reboot, swap, clocks, names).
DENIED = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438, "kcmp": 312,
    "memfd_create": 319, "userfaultfd": 323, "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321,
    "perf_event_open": 298, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "open_by_handle_at": 304, "name_to_handle_at": 303, "pidfd_send_signal": 424,
    "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "kexec_load": 246, "kexec_file_load": 320,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "reboot": 169, "swapon": 167, "swapoff": 168,
    "acct": 163, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
    "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173, "quotactl": 179, "lookup_dcookie": 212,
    "fanotify_init": 300, "syslog": 103, "vhangup": 153,
}
CLONE, CLONE3 = 56, 435
# socket(): only the families of the worker's own loopback, and netlink (glibc's getaddrinfo asks the routes).
# Not AF_UNIX by path, which the network namespace does not cover (a host's docker.sock, D-Bus, a resolver),
# nor AF_VSOCK or packet sockets. socketpair() is a call of its own and stays allowed.
SOCKET, SOCKET_FAMILIES = 41, (2, 10, 16)  # AF_INET, AF_INET6, AF_NETLINK
SIGNALS = {"kill": 62, "tkill": 200, "tgkill": 234}  # first argument: the process (or group, negative) signalled
NEW_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
NR, ARCH, ARG0_LOW = 0, 4, 16  # offsets in struct seccomp_data (little-endian: an argument's low half first)
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SYS_SECCOMP, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 317, 1, 1


def available():
    """(True, None) where this kit can install its filter; (False, reason) where not."""
    if not sys.platform.startswith("linux"):
        return False, "not Linux"
    if platform.machine() != "x86_64":
        return False, "no system call table for %s in this kit" % platform.machine()
    try:
        with open("/proc/sys/kernel/seccomp/actions_avail") as f:
            actions = f.read().split()
    except OSError:
        return False, "the kernel has no seccomp filters (/proc/sys/kernel/seccomp)"
    if "errno" not in actions:
        return False, "the kernel's seccomp cannot answer EPERM"
    return True, None


def program(protected):
    """The filter's instructions: (code, jt, jf, k), jumps resolved.

    `protected`: the pids (and, negated, the process groups) no kill, tkill
    or tgkill may reach; -1 (every process) is refused too.
    """
    deny, enosys, allow = "deny", "enosys", "allow"
    code = [(LD_W_ABS, 0, 0, ARCH), (JEQ, "nr", "kill", AUDIT_ARCH_X86_64), ("kill",), (RET, 0, 0, RET_KILL_PROCESS),
            ("nr",), (LD_W_ABS, 0, 0, NR), (JGE, deny, 0, X32_SYSCALL_BIT)]
    code += [(JEQ, deny, 0, number) for number in sorted(DENIED.values())]
    # clone3's flags are out of reach of a filter: ENOSYS, and glibc falls back to clone.
    code += [(JEQ, "clone", 0, CLONE), (JEQ, enosys, 0, CLONE3), (JEQ, "socket", 0, SOCKET)]
    code += [(JEQ, "signal", 0, number) for number in sorted(SIGNALS.values())]
    code += [(RET, 0, 0, RET_ALLOW), ("clone",), (LD_W_ABS, 0, 0, ARG0_LOW), (JSET, deny, 0, NEW_NAMESPACES),
             (RET, 0, 0, RET_ALLOW), ("socket",), (LD_W_ABS, 0, 0, ARG0_LOW)]
    code += [(JEQ, allow, 0, family) for family in SOCKET_FAMILIES]
    code += [(RET, 0, 0, RET_ERRNO | errno.EPERM), ("signal",), (LD_W_ABS, 0, 0, ARG0_LOW), (JEQ, deny, 0, 0xFFFFFFFF)]
    code += [(JEQ, deny, 0, value & 0xFFFFFFFF) for value in sorted(set(protected))]
    code += [(RET, 0, 0, RET_ALLOW), (deny,), (RET, 0, 0, RET_ERRNO | errno.EPERM),
             (enosys,), (RET, 0, 0, RET_ERRNO | errno.ENOSYS), (allow,), (RET, 0, 0, RET_ALLOW)]
    labels, index = {}, 0
    for item in code:
        if len(item) == 1:
            labels[item[0]] = index
        else:
            index += 1
    resolved = []
    for item in (i for i in code if len(i) == 4):
        here = len(resolved) + 1
        jt, jf = (labels[j] - here if isinstance(j, str) else j for j in item[1:3])
        if not (0 <= jt <= 255 and 0 <= jf <= 255):
            raise ValueError("seccomp filter: a jump too long for BPF")
        resolved.append((item[0], jt, jf, item[3]))
    return resolved


def install(protected):
    """Install the filter on this process and all its threads (then on every process it forks); OSError if refused."""
    instructions = program(protected)
    data = b"".join(struct.pack("=HBBI", *i) for i in instructions)
    buffer = ctypes.create_string_buffer(data, len(data))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Program(len(instructions), ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(ctypes.c_long(SYS_SECCOMP), ctypes.c_uint(SECCOMP_SET_MODE_FILTER),
                    ctypes.c_uint(SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(prog)) == 0:
        return
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


def ancestors():
    """This process's ancestors' pids and their process groups (negated), as this process sees them."""
    found, pid = set(), os.getppid()
    while pid > 1:
        found.add(pid)
        try:
            found.add(-os.getpgid(pid))
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    if pid == 1:
        found.add(1)
    own = os.getpgid(0)
    if own > 0:  # 0 in a PID namespace whose group leader is outside it
        found.add(-own)
    return found
