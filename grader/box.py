"""The box each worker's processes run in: Landlock, seccomp, namespaces, and a uid of its own under root.

Both sides use it. The grader's side: plan() (what a worker's children are
asked to enter, handed to them in the environment), own() (a folder of the
worker's, for its uid) and probe() (what this host offers, nothing applied).
The worker's side: enter(), in the process about to import the worker (after
the fork, before the import), which applies every layer asked for and
available and returns what the report shows; narrow(), a step's box inside its
zygote's. Each layer that is off says why. Never imports the worker.
"""
import json
import os
import stat
import sys
import threading

from . import landlock, namespaces, seccomp, text

ENV = "OUTBOX_KIT_BOX"  # the plan, as JSON, in the environment of the grader's children
UNAVAILABLE = "OUTBOX_KIT_BOX_UNAVAILABLE"  # layers to treat as missing here (comma-separated): the fallbacks' tests
# "1": run as on a POSIX system without Linux's own calls (macOS, by construction): no layer of the box, no
# subreaper, no /proc, no waitid (contain.py). The tests' way to run what macOS runs.
NO_LINUX = "OUTBOX_KIT_NO_LINUX"
LAYERS = ("landlock", "seccomp", "namespaces", "uid")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KIT_FILES = (os.path.join("outbox", "__init__.py"), os.path.join("sink", "__init__.py"))
UID_FIRST, UID_SPAN = 10 ** 7, 1000  # a worker's uid: UID_FIRST + the grader's pid * UID_SPAN + its number
_uids = {"next": 0}
_uids_lock = threading.Lock()


# --------------------------------------------------------------------------
# The grader's side.
# --------------------------------------------------------------------------


def plan(isolation, impl, tmp, shared_folder=False):
    """What the worker `impl`'s processes are asked to enter (a dict of JSON types).

    `isolation` "all" or "off"; `tmp` the worker's own temporary root (every
    folder its steps write in); `shared_folder` when other workers of this
    run sit beside it: then it may read its own file, not its folder. When
    the grader runs as root a worker gets a uid of its own, and `tmp` is its.
    """
    wanted = list(LAYERS) if isolation == "all" else []
    reads = [impl] if shared_folder else [os.path.dirname(impl)]
    # A worker in a copy of the kit (examples/ of a checkout, as the reference is) reads that copy: the folder
    # whole, as Python lists it to find the packages (Landlock cannot allow a listing without what is under it).
    beside = os.path.dirname(os.path.dirname(impl))
    if os.path.basename(os.path.dirname(impl)) == "examples" and all(
            os.path.isfile(os.path.join(beside, name)) for name in KIT_FILES):
        reads.append(beside)
    uid, uid_off = None, None
    if "uid" in wanted and hasattr(os, "geteuid") and os.geteuid() == 0:
        # tmp's parent too: under a TMPDIR of mode 0700 (a test's, say) a uid of its own could not reach tmp.
        uid_off = unreadable([impl, ROOT, sys.prefix, os.path.realpath(sys.executable), os.path.dirname(tmp)])
        uid = None if uid_off else next_uid()
    box = {"layers": wanted, "write": tmp, "reads": reads, "uid": uid, "uid_off": uid_off}
    own(tmp, box)
    return box


def next_uid():
    """A uid no account has, one per worker of this grader process, none another grader's at the same time."""
    import pwd
    with _uids_lock:
        while True:
            uid = UID_FIRST + os.getpid() * UID_SPAN + _uids["next"] % UID_SPAN
            _uids["next"] += 1
            try:
                pwd.getpwuid(uid)
            except KeyError:
                return uid


def unreadable(paths):
    """Why a uid of no group could not run the worker (a path it cannot reach), or None."""
    for path in (os.path.abspath(p) for p in paths):
        folder, needs = path, stat.S_IROTH | (stat.S_IXOTH if os.path.isdir(path) else 0)
        while True:
            try:
                mode = os.stat(folder).st_mode
            except OSError as exc:
                return "%s cannot be read: %s" % (path, exc)
            if mode & needs != needs:
                return "%s cannot be read by another user (%s is mode %o)" % (path, folder, stat.S_IMODE(mode))
            if os.path.dirname(folder) == folder:
                break
            folder, needs = os.path.dirname(folder), stat.S_IXOTH
    return None


def own(folder, box):
    """Make `folder` the worker's: its uid's, mode 0700 (a no-op when it has no uid of its own)."""
    if box["uid"] is not None:
        os.chown(folder, box["uid"], box["uid"])
        os.chmod(folder, 0o700)


def env(box):
    """The environment that hands `box` to a child; with what an earlier worker's trial of the namespaces found."""
    return {ENV: json.dumps(dict(box, tried=_tried.get("namespaces")), separators=(",", ":"))}


_tried = {}  # in the grader: "namespaces" -> True, or the reason they are refused, as the first worker found


def learn(isolation):
    """Keep what the first worker's box found of the namespaces, so that later workers need not try them again.

    Called with the first box line of each zygote, which it writes before the worker is imported.
    """
    if "namespaces" not in _tried and isinstance(isolation, dict):
        if isolation.get("namespaces") is True:
            _tried["namespaces"] = True
        elif isinstance((isolation.get("off") or {}).get("namespaces"), str) and UNAVAILABLE not in str(
                isolation["off"]["namespaces"]) and isolation["off"]["namespaces"] != "--isolation off":
            _tried["namespaces"] = isolation["off"]["namespaces"]


def known_refusal():
    """The reason an earlier worker of this grader found the namespaces refused, or None."""
    tried = _tried.get("namespaces")
    return tried if isinstance(tried, str) else None


def probe():
    """What this host offers, each layer with its reason when off; nothing is applied."""
    offers = {"landlock": False, "seccomp": False, "namespaces": False, "uid": False, "off": {}}
    missing = unavailable()
    for layer in LAYERS:
        if layer in missing:
            offers["off"][layer] = made_unavailable()
            continue
        if layer == "landlock":
            version, reason = landlock.abi()
            offers[layer] = version or False
        elif layer == "seccomp":
            offers[layer], reason = seccomp.available()
        elif layer == "namespaces":
            offers[layer], reason = namespaces_offered()
        else:
            root = hasattr(os, "geteuid") and os.geteuid() == 0
            offers[layer], reason = root, None if root else "grade.py does not run as root: the workers run as its user"
        if reason:
            offers["off"][layer] = reason
    return offers


def namespaces_offered():
    if not sys.platform.startswith("linux"):
        return False, "not Linux"
    for path, refused in (("/proc/sys/user/max_user_namespaces", "0"),
                          ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
                          ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1")):
        try:
            with open(path) as f:
                if f.read().strip() == refused:
                    return False, "unprivileged user namespaces are refused here (%s is %s)" % (path, refused)
        except OSError:
            pass
    return True, None


def expected(box):
    """What a worker's processes would enter under `box`, as enter() reports it: for a worker never started."""
    offers = probe()
    report = {"landlock": offers["landlock"] if "landlock" in box["layers"] else False,
              "seccomp": offers["seccomp"] and "seccomp" in box["layers"],
              "namespaces": offers["namespaces"] and "namespaces" in box["layers"],
              "uid": box["uid"] if box["uid"] is not None else False, "off": offers["off"]}
    for layer in LAYERS:
        if layer not in box["layers"]:
            report["off"][layer] = "--isolation off"
    if "uid" in box["layers"] and box["uid_off"]:
        report["off"]["uid"] = box["uid_off"]
    if "net" in box and not box["net"]:
        report["off"]["network"] = box["net_off"]
    elif "net" not in box and not report["namespaces"]:  # no process started: none made it
        report["off"]["network"] = report["off"].get("namespaces") or "namespaces are off"
    return report


def shown(isolation):
    """`isolation` as a report holds it: the known keys, each of its type (the line came through a pipe)."""
    def number(value):
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else False
    isolation = isolation if isinstance(isolation, dict) else {}
    off = isolation.get("off")
    return {"landlock": number(isolation.get("landlock")), "seccomp": isolation.get("seccomp") is True,
            "namespaces": isolation.get("namespaces") is True, "uid": number(isolation.get("uid")),
            "off": {text.shown(k)[:40]: text.shown(v)[:300] for k, v in sorted(off.items(), key=str)[:10]}
            if isinstance(off, dict) else {}}


def made_unavailable():
    """The reason a layer in unavailable() is off: the variable that made it so."""
    return "made unavailable by %s" % (NO_LINUX if os.environ.get(NO_LINUX) == "1" else UNAVAILABLE)


def unavailable():
    if os.environ.get(NO_LINUX) == "1":
        return set(LAYERS)
    return {name.strip() for name in os.environ.get(UNAVAILABLE, "").split(",") if name.strip()}


# --------------------------------------------------------------------------
# The worker's side.
# --------------------------------------------------------------------------


def enter(text):
    """Apply the plan `text` (ENV's value) to this process, the one about to import the worker.

    Order: the uid (root only), the namespaces (this call then returns in a
    new process, pid 2 of its PID namespace), Landlock, seccomp, then the
    capabilities the user namespace gave are dropped. Returns what was
    applied: {"landlock": ABI or false, "seccomp": bool, "namespaces": bool,
    "uid": uid or false, "off": {layer: reason}}. Without a plan (a child run
    by hand), nothing is applied.
    """
    report = {"landlock": False, "seccomp": False, "namespaces": False, "uid": False, "off": {}}  # audit: G70
    if not text:
        report["off"]["all"] = "no box asked for"
        return report
    box = json.loads(text)
    offers = probe()
    off = report["off"]
    off.update(offers["off"])

    def wanted(layer):
        if layer not in box["layers"]:
            off[layer] = "--isolation off"
            return False
        return layer not in off

    if wanted("uid"):
        if box["uid"] is None:
            off["uid"] = box["uid_off"]
        else:
            become(box["uid"])
            report["uid"] = box["uid"]
    if wanted("namespaces") and box.get("net"):
        namespaces.join(box["net"])  # the holder's network first: the worker's namespaces are made inside it
    elif box.get("net"):
        raise OSError("the plan gives a network namespace and no namespaces")  # the grader's servers are in it
    if wanted("namespaces"):
        tried = box.get("tried")
        reason = namespaces.trial() if tried is None else None if tried is True else str(tried)
        if reason:
            off["namespaces"] = reason
        else:
            namespaces.enter()
            report["namespaces"] = True
    if wanted("landlock"):
        report["landlock"] = attempt(off, "landlock", lambda: restrict(box, offers["landlock"]), offers["landlock"])
    ENTERED.update(landlock=report["landlock"], tmp=os.environ.get("TMPDIR") or box["write"])
    if wanted("seccomp"):
        report["seccomp"] = attempt(off, "seccomp", lambda: seccomp.install(seccomp.ancestors()), True)
    if report["namespaces"] or box.get("net"):  # joined, it has every capability in the holder's user namespace
        attempt(off, "capabilities", namespaces.drop_capabilities, True)
    if not box.get("net"):
        off["network"] = box.get("net_off") or off.get("namespaces") or "namespaces are off"
    return report


def attempt(off, layer, apply, value):
    try:
        landlock.no_new_privs()
        apply()
        return value
    except OSError as exc:
        off[layer] = "refused: %s" % exc
        return False


def become(uid):
    """Run as `uid` (and its own gid, no other group) from here on, this process and all it starts."""
    import ctypes
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: its own /proc/self stays its own


def restrict(box, version):
    """Landlock: write only under the worker's temporary root, read what Python, the kit and the worker need."""
    readable = sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, ROOT,
                       os.path.dirname(os.path.realpath(sys.executable)), os.path.dirname(os.__file__)})
    readable += box["reads"] + SYSTEM_READS
    landlock.restrict(version, [box["write"], "/dev/null"], readable)


def narrow(folder):
    """A step's box inside its zygote's: from here on this process writes only under `folder` (Landlock only).

    And in the zygote's TMPDIR, where SQLite puts its temporary files: it
    reads TMPDIR once, when the zygote starts it.
    """
    if ENTERED.get("landlock"):  # audit: G70
        landlock.restrict(ENTERED["landlock"], [folder, ENTERED["tmp"], "/dev/null"], [], writes_only=True)


ENTERED = {}  # in the worker's process: the Landlock ABI enter() applied, and the TMPDIR it had


# What the interpreter and its libraries read outside its prefix: shared libraries, the loader's cache, the
# time zone, name resolution for "localhost", random bytes, and /proc (the supervisor lists its children there).
SYSTEM_READS = ["/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/share/zoneinfo", "/etc/ld.so.cache",
                "/etc/localtime", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/resolv.conf",
                "/etc/gai.conf", "/dev/urandom", "/dev/random", "/dev/zero", "/proc"]
