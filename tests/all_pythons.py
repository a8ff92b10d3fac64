"""Run the suite and the grader under every CPython found here, and PyPy 3 if it is: `make test-all`.

Finds interpreters named python3.X (or python2.X) or pypy3 on PATH and every
$(pyenv root)/versions/*/bin/python, one per real file. An interpreter at or
above the floor (3.8) must pass `tests/run.py` and `grade.py`; one below it
must refuse all four entry points (run.py, grade.py, python -m outbox,
python -m sink) with exit 2 and one line on stderr naming the minimum. Prints
one line per interpreter as it finishes and exits 1 if any failed. Runs from
any current directory; the suite and the grader are started from a temporary
one to prove that they do too.

CI passes --need-pypy (Debian's pypy3 is installed where none is found: the
PyPy leg runs or fails, never passes unrun) and --share (the CPythons between
the oldest and the newest each run a share of the suite, to stay under 30
minutes on 2 cores; see shares()).
"""
import argparse
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FLOOR = (3, 8)
RUN_TIMEOUT = 600  # seconds for one interpreter's suite or grader run, far above the usual minute
PROBE_TIMEOUT = 30
# Parseable by any Python from 2.7 on: the probe must answer even below the floor.
PROBE = (
    "import platform, sys\n"
    "try:\n"
    "    import sqlite3\n"
    "    lib = sqlite3.sqlite_version\n"
    "except Exception:\n"
    "    lib = 'none'\n"
    "sys.stdout.write('%s %s %s\\n' % (platform.python_implementation(), sys.version.split()[0], lib))\n"
)
COUNTS = re.compile(r"(\d+) passed, (\d+) failed\s*$")


def pyenv_root():
    root = os.environ.get("PYENV_ROOT")
    if root:
        return root
    if shutil.which("pyenv"):
        try:
            out = subprocess.run(["pyenv", "root"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 universal_newlines=True, timeout=PROBE_TIMEOUT).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out:
            return out
    return os.path.expanduser("~/.pyenv")


def find_interpreters():
    """Paths of candidate interpreters, one per real file, in a stable order."""
    shims = os.path.realpath(os.path.join(pyenv_root(), "shims"))
    candidates = []
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not directory or os.path.realpath(directory) == shims:
            continue  # a shim runs whichever version pyenv selects, not the one its name says
        names = glob.glob(os.path.join(directory, "python[23].*")) + glob.glob(os.path.join(directory, "pypy3"))
        for path in sorted(names):
            if re.match(r"python[23]\.\d+$|pypy3$", os.path.basename(path)) and os.access(path, os.X_OK):
                candidates.append(path)
    candidates.extend(sorted(glob.glob(os.path.join(pyenv_root(), "versions", "*", "bin", "python"))))
    seen = set()
    found = []
    for path in candidates:
        real = os.path.realpath(path)
        if real not in seen and os.path.isfile(real):
            seen.add(real)
            found.append(path)
    return found


def real_executable(name):
    """The real file behind interpreter `name` (a path or a name on PATH), or None.

    Asked of the interpreter itself: a pyenv shim is a script that runs
    whichever version pyenv selects, so its own path says nothing.
    """
    try:
        out = subprocess.run([name, "-c", "import sys; print(sys.executable)"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, universal_newlines=True, timeout=PROBE_TIMEOUT).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return os.path.realpath(out) if out else None


def probe(python):
    """(implementation, version tuple, version text, sqlite version) or None if it does not run."""
    try:
        out = subprocess.run([python, "-c", PROBE], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True, timeout=PROBE_TIMEOUT).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    if len(out) != 3:
        return None
    numbers = tuple(int(part) for part in re.findall(r"\d+", out[1])[:2])
    return out[0], numbers, out[1], out[2]


def below_floor_env(env):
    """`env` for an interpreter below the floor: without the options only a newer Python understands.

    A lab host may set PYTHONWARNINGS=error::ResourceWarning for the suite;
    Python 2.7 knows no ResourceWarning and says so on stderr before any of
    our code runs. What the entry points print is what is tested, not that.
    """
    env = dict(env)
    for name in ("PYTHONWARNINGS", "PYTHONDEVMODE", "PYTHONPATH"):
        env.pop(name, None)
    return env


def run(cmd, cwd, *, below_floor=False):
    """(exit status, stdout, stderr) of `cmd`, bounded by RUN_TIMEOUT."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")  # an old interpreter leaves no .pyc in the checkout
    env["OUTBOX_KIT_MATRIX"] = "1"  # tests that run the system's python3, not this one, ran in make test already
    if below_floor:
        env = below_floor_env(env)
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        return None, exc.stdout or "", "timed out after %ds" % RUN_TIMEOUT
    return proc.returncode, proc.stdout, proc.stderr


def counts(text):
    """(passed, failed) from the last line that reads 'N passed, N failed', or None."""
    for line in reversed(text.splitlines()):
        match = COUNTS.search(line)
        if match:
            return int(match.group(1)), int(match.group(2))
    return None


def suite_modules():
    """Every test module, in tests/run.py's order (*_slow first, then largest file first)."""
    paths = glob.glob(os.path.join(HERE, "test_*.py"))
    paths.sort(key=lambda path: (not path[:-3].endswith("_slow"), -os.path.getsize(path), path))
    return ["tests." + os.path.basename(path)[:-3] for path in paths]


def check_supported(python, cwd, modules=()):
    """(ok, summary, detail): the suite (or `modules` of it) and the grader both exit 0 with nothing failed."""
    parts, problems = [], []
    for label, cmd in (("tests", [python, os.path.join(HERE, "run.py")] + list(modules)),
                       ("grade", [python, os.path.join(ROOT, "grade.py")])):
        status, out, err = run(cmd, cwd)
        found = counts(out) or counts(err)
        parts.append("%s %s" % (label, "%d passed, %d failed" % found if found else "no count"))
        if status != 0 or not found or found[1] or not found[0]:
            problems.append("%s exit %s:\n%s" % (label, status, why_failed(out, err)))
    return not problems, "; ".join(parts), "\n".join(problems)


def why_failed(out, err, blocks=3, lines_each=40):
    """The failed checks and tail of stdout (the verdict lines), then the first unittest failures.

    unittest writes each failure to stderr as a block that starts with
    "FAIL:" or "ERROR:" under a line of "="; a log cut to the last lines of
    stderr would show only the passing modules' dots.
    """
    out_lines = out.splitlines()
    shown = []
    for at, line in enumerate(out_lines):  # grade.py: a failed check and its expected/observed lines
        if line.startswith("FAIL ") and len(shown) < 40:
            shown += out_lines[at:at + 4]
    shown += out_lines[-20:]
    found = 0
    lines = err.splitlines()
    for at, line in enumerate(lines):
        if found < blocks and line.startswith(("FAIL: ", "ERROR: ")):
            found += 1
            block = []
            for follow in lines[at:at + lines_each]:
                if block and follow.startswith(("=" * 20, "-" * 20 + "-")) and len(block) > 2:
                    break
                block.append(follow)
            shown += [""] + block
    if not found:
        shown += err.splitlines()[-10:]
    return "\n".join(shown)


def check_refused(python, cwd):
    """(ok, summary, detail): every entry point prints one line naming the floor and exits 2."""
    floor = "%d.%d" % FLOOR
    entry_points = (
        ("tests/run.py", [python, os.path.join(HERE, "run.py")], cwd),
        ("grade.py", [python, os.path.join(ROOT, "grade.py")], cwd),
        ("-m outbox", [python, "-m", "outbox", "status", "--db", "none.db"], ROOT),
        ("-m sink", [python, "-m", "sink", "show", "--db", "none.db"], ROOT),
    )
    problems = []
    for label, cmd, where in entry_points:
        status, out, err = run(cmd, where, below_floor=True)
        lines = err.splitlines()
        if status != 2 or len(lines) != 1 or floor not in lines[0] or out:
            problems.append("%s: exit %s, stderr %r" % (label, status, "\n".join(lines[-3:])))
    summary = "below the floor: %d of 4 entry points refuse with one line and exit 2" % (4 - len(problems))
    return not problems, summary, "\n".join(problems)


def check(python, info, share=None):
    """(ok, line, detail) of one interpreter; `share` (i, n): its suite is every n-th module from the i-th."""
    started = time.monotonic()
    if info is None:
        return None, "%s: does not run; skipped" % python, ""
    implementation, version, version_text, sqlite_version = info
    if implementation not in ("CPython", "PyPy"):
        return None, "%s: %s %s is neither CPython nor PyPy; skipped" % (python, implementation, version_text), ""
    cwd = tempfile.mkdtemp(prefix="outbox-kit-matrix-")
    try:
        if version < FLOOR:
            ok, summary, detail = check_refused(python, cwd)
        elif share is None:
            ok, summary, detail = check_supported(python, cwd)
        else:
            modules = suite_modules()[share[0]::share[1]]
            ok, summary, detail = check_supported(python, cwd, modules)
            summary = summary.replace("tests ", "tests (share %d of %d: %d modules) " % (
                share[0] + 1, share[1], len(modules)), 1)
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    line = "%-4s Python %-8s SQLite %-7s %s (%.0fs) %s" % (
        "PASS" if ok else "FAIL", version_text, sqlite_version, summary, time.monotonic() - started, python)
    return ok, line, detail


def one_per_version(pythons, infos, done):
    """`pythons` without a second build of a version (implementation, major.minor) checked or in `done`.

    `infos`: each python's probe(); `done`: the probes of those checked already (left out with --skip).

    Two builds of one version run the same suite to the same end; a second
    one costs CI a suite's minutes. What a system build alone exercises (the
    grader's uid layer, which needs an interpreter other users can reach) has
    a test of its own that finds such a build (test_grader_box_slow).
    """
    seen = {(info[0], info[1]) for info in done if info is not None}
    kept = []
    for python in pythons:
        info = infos[python]
        key = None if info is None else (info[0], info[1])
        if key is not None and key in seen:
            print("skip %s: %s %d.%d is checked already (--every-build checks it too)" % ((python, info[0]) + info[1]))
            continue
        seen.add(key)
        kept.append(python)
    return kept


def shares(pythons, infos):
    """{python: (i, n)} for the CPythons between the oldest and the newest checked here (--share).

    Those in between each run every n-th module of the suite, so that each
    module runs on one of them; the oldest and the newest CPython, and PyPy,
    run the whole suite. A version's own behaviour sits between its
    neighbours' (3.9 between 3.8 and 3.11, 3.12 before 3.13's removals), and
    CI must stay under 30 minutes on 2 cores: seven whole suites do not.
    """
    cpythons = sorted((infos[p][1], p) for p in pythons
                      if infos[p] is not None and infos[p][0] == "CPython" and infos[p][1] >= FLOOR)
    between = [python for _, python in cpythons[1:-1]]
    return {python: (at, len(between)) for at, python in enumerate(between)}


def ensure_pypy():
    """Install Debian's pypy3 where no pypy3 is on PATH (--need-pypy): CI's PyPy leg must run, never pass unrun."""
    if shutil.which("pypy3"):
        return None
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("apt-get"):
        return "no pypy3 here, and no root apt-get to install it: apt-get install pypy3"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "pypy3"]):
        try:
            done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  universal_newlines=True, errors="replace", timeout=RUN_TIMEOUT)
        except (OSError, subprocess.SubprocessError) as exc:
            return "%s: %s" % (" ".join(cmd), exc)
        if done.returncode != 0:
            return "%s failed (can the package registry be reached?): %s" % (
                " ".join(cmd), done.stdout.strip().splitlines()[-1:])
    return None if shutil.which("pypy3") else "pypy3 is installed, and there is still no pypy3 on PATH"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1, choices=(1, 2),
                        help="interpreters checked at once (default: %(default)s; each suite run uses 2 workers)")
    parser.add_argument("--list", action="store_true", help="list the interpreters found and stop")
    parser.add_argument("--skip", action="append", default=[], metavar="PYTHON",
                        help="leave out this interpreter (a path or a name on PATH), e.g. the one `make test` "
                        "already ran; repeatable")
    parser.add_argument("--every-build", action="store_true",
                        help="check every build found, not one per version (Debian's python3.11 beside pyenv's 3.11)")
    parser.add_argument("--share", action="store_true",
                        help="the CPythons between the oldest and the newest each run a share of the suite's "
                        "modules (each module on one of them) and grade.py in full (CI: 30 minutes)")
    parser.add_argument("--need-pypy", action="store_true",
                        help="install Debian's pypy3 with apt-get if none is on PATH; fail if that cannot be done")
    parser.add_argument("pythons", nargs="*", help="interpreters to check instead of every one found")
    args = parser.parse_args(argv)
    if args.need_pypy:
        problem = ensure_pypy()
        if problem:
            print("all_pythons: --need-pypy: %s" % problem, file=sys.stderr)
            return 1
    pythons = args.pythons or find_interpreters()
    skipped = {}
    for name in args.skip:
        real = real_executable(name)
        if real is None:
            parser.error("--skip %s: no such interpreter" % name)
        skipped[real] = name
    for python in [p for p in pythons if os.path.realpath(p) in skipped]:
        print("skip %s: left out with --skip" % python)
        pythons.remove(python)
    infos = {python: probe(python) for python in pythons}
    if not args.every_build:
        pythons = one_per_version(pythons, infos, [probe(name) for name in skipped.values()])
    if args.list:
        print("\n".join(pythons))
        return 0
    if not pythons:
        print("all_pythons: no interpreter found", file=sys.stderr)
        return 1
    started = time.monotonic()
    # Oldest first, so the report reads as a ladder; those that do not run go last.
    pythons.sort(key=lambda python: (infos[python] is None, infos[python][1] if infos[python] else ()))
    shared = shares(pythons, infos) if args.share else {}
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for ok, line, detail in pool.map(check, pythons, [infos[python] for python in pythons],
                                         [shared.get(python) for python in pythons]):
            print(line, flush=True)
            if ok is False and detail:
                print("    " + detail.replace("\n", "\n    "), flush=True)
            results.append(ok)
    checked = [ok for ok in results if ok is not None]
    failed = checked.count(False)
    print("%d interpreters checked in %.0fs: %d passed, %d failed"
          % (len(checked), time.monotonic() - started, len(checked) - failed, failed))
    return 0 if checked and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
