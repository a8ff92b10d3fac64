"""`python3 outbox-kit.pyz outbox|sink|grade ARGS`: the __main__ of the one file `make zipapp` builds.

Owns the choice of command and nothing else: `outbox` and `sink` run their
command lines straight from the archive (pure Python imports from a zip);
`grade` first copies the kit out of the archive into a temporary directory,
since the grader starts its children as `python3 grade.py --role ...` from a
real file and loads the reference worker from its path. That directory is
removed when the grade ends. Installed with pip, the same commands are
`outbox`, `outbox-sink` and `outbox-grade` (backend/kitbuild.py). Not a
module of the kit's packages: it is only ever the archive's __main__.py.
"""
import os
import shutil
import sys
import tempfile
import zipfile

COMMANDS = ("outbox", "sink", "grade")
USAGE = "usage: python3 outbox-kit.pyz {outbox,sink,grade} [ARGS...]   (each command's --help says more)"
EXIT_USAGE = 2


def main(argv=None):
    """Run the command `argv[0]` with the rest of `argv` (default sys.argv[1:]); return its exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in COMMANDS:
        if argv and argv[0] in ("-h", "--help"):
            print(USAGE)
            return 0
        print(USAGE, file=sys.stderr)
        if argv:
            print("outbox-kit.pyz: error: unknown command %r; choose from %s" % (argv[0], ", ".join(COMMANDS)),
                  file=sys.stderr)
        return EXIT_USAGE
    command, rest = argv[0], argv[1:]
    sys.argv = ["outbox-kit.pyz " + command] + rest
    if command == "outbox":
        from outbox.cli.main import main as run
        return run(rest)
    if command == "sink":
        from sink.cli import main as run
        return run(rest)
    return _grade(rest)


def _grade(rest):
    archive = sys.path[0]
    if not zipfile.is_zipfile(archive):  # not from the archive (a test, a checkout): grade.py is a real file
        import grade
        return grade.main()
    unpacked = tempfile.mkdtemp(prefix="outbox-kit-")
    try:
        with zipfile.ZipFile(archive) as kit:
            kit.extractall(unpacked)
        sys.path.insert(0, unpacked)  # the grader and the kit from real files, ahead of the archive
        import grade
        return grade.main()
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
