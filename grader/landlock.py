"""Landlock: the files a boxed worker's processes may read and write, through ctypes (Linux 5.13+).

Owns the three landlock_* system calls and the access rights of each ABI.
Never imports the worker; grader/box.py decides which paths go in.
A domain once entered cannot be left, only narrowed: each step may narrow its
zygote's box to its own folder (narrow()).
"""
import ctypes
import os
import platform
import struct
import sys

# The unified system call table (asm-generic, used by x86_64 too from 5.13 on): the same numbers on both.
SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446), "arm64": (444, 445, 446)}
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3 and 5
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6: no signal, no abstract socket, out of the box

READ = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the only rights a rule on a file may hold


def handled_fs(abi):
    """Every file-system right this ABI knows: all of them are denied except where a rule allows."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _numbers():
    return SYSCALLS.get(platform.machine())


def abi():
    """(ABI version, None) where Landlock is on; (0, reason) where it is not."""
    if not sys.platform.startswith("linux"):
        return 0, "not Linux"
    numbers = _numbers()
    if numbers is None:
        return 0, "no Landlock system call numbers for %s in this kit" % platform.machine()
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(ctypes.c_long(numbers[0]), None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    if version < 0:
        return 0, "the kernel refuses it: %s" % os.strerror(ctypes.get_errno())
    return int(version), None


def no_new_privs():
    """PR_SET_NO_NEW_PRIVS: no exec here gains privileges (setuid files); Landlock and seccomp need it."""
    if _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")


def restrict(version, writable, readable, writes_only=False):
    """Enter a new Landlock domain: everything under `writable` allowed, `readable` read only, nothing else.

    `writes_only`: this domain handles only the rights that change files, so
    that inside an earlier one it narrows where a process writes, not what it
    reads. Paths that do not exist are left out. OSError if the kernel refuses.
    """
    create, add_rule, restrict_self = _numbers()
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    handled = handled_fs(version) & ~(READ | IOCTL_DEV) if writes_only else handled_fs(version)
    attr = struct.pack("=Q", handled)
    if version >= 4:
        attr += struct.pack("=Q", 0)  # TCP left alone: the ports of the grader's servers are not known yet
    if version >= 6:
        attr += struct.pack("=Q", 0 if writes_only else SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = libc.syscall(ctypes.c_long(create), buffer, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for paths, rights in ((readable, READ), (writable, handled)):
            for path in paths:
                _allow(libc, add_rule, ruleset, path, rights)
        no_new_privs()
        if libc.syscall(ctypes.c_long(restrict_self), ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _allow(libc, add_rule, ruleset, path, rights):
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_PATH", 0) | os.O_CLOEXEC)
    except OSError:
        return  # not on this system (/lib64, say): nothing to allow
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
        if libc.syscall(ctypes.c_long(add_rule), ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), rule,
                        ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_add_rule %s" % path)
    finally:
        os.close(fd)
