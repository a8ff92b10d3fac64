"""grade.py's command line: the workers and checks, the run, the report on stdout and in --report DIR, the exit status.

Exit status: 0 every check of every worker passed, 1 some check failed, 2
usage error, 3 grader error (the grader's own fault: an exception in its
code, no writable temporary directory), 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP.
Never imports the worker: grade.py sends `--role` children straight to
contain.py and worker_side/.
"""
import argparse
import functools
import hashlib
import json
import os
import re
import sys
import time
import traceback

from . import __version__, box, contain, own_work, results
from .capture import KEEP
from .classroom import Progress, UsageError, find_class, grade_all, run_check  # noqa: F401 (run_check: the API)
from .common import describe
from .corpus import DEFAULT_SEED
from .messages import LANGS, MESSAGES, choose_lang, render, text
from .parent import ROOT, GraderError, default_limits
from .registry import CHECKS, NAMES, POINTS
from .render import evidence, gradescope, jsonfile, terminal
from .wrap import display_width
from .report import ReportFolder, atomic_write, load_shard, survey
from .stopping import Stopped, default_on_signals, stop_on_signals
from .results import json_evidence  # noqa: F401 (the quiz's and tests')
from .text import shown
from .wrap import columns, wrap  # noqa: F401 (the help's, the report's and tests')

REFERENCE = own_work.REFERENCE  # the reference worker, in the tree or (installed) beside the grader
DEFAULT_TIMEOUT = 10.0
DEFAULT_JOBS = 8  # steps mostly wait on fsync and on each other, not on a core


def default_jobs(windows=contain.WINDOWS, cores=None):
    """--jobs when not given: DEFAULT_JOBS, or on Windows twice the cores (at most DEFAULT_JOBS).

    A step there is a fresh interpreter, not a fork, and its start is CPU:
    under Wine on 2 cores, 8 at once made url-rule's check take 17 s (and
    once run past its 10 s bound), where 4 at once took it 6 s, with the
    whole run as long (34 s against 32 s).
    """
    if not windows:
        return DEFAULT_JOBS
    return max(1, min(DEFAULT_JOBS, 2 * (cores or os.cpu_count() or 1)))


MAX_POINTS = 1000  # per check, in --points FILE
MAX_SHARDS = 10000
CLASS_FILES_EVERY = 5.0  # seconds between two rewrites of the class files while a class runs
MEMORY_RANGE = (128, 1024 * 1024)  # MiB: less cannot start Python with the kit; more is no limit
FILE_RANGE = (1, 1024 * 1024)
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_GRADER_ERROR = 0, 1, 2, 3


def evidence_table(raw, lang):
    lines = []
    for title, table in evidence.tables(json_evidence(raw), lang):
        lines.append("")
        lines.append(title)
        widths = [max(display_width(r[i]) for r in table) for i in range(len(table[0]))]
        for r in table:
            lines.append("  " + "  ".join(cell + " " * (w - display_width(cell)) for cell, w in zip(r, widths)).rstrip())
    return lines


def size(count, lang):
    """A byte count for people, in `lang`: 512 bytes, 64.0 KiB, 2.0 GiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return "%.1f %s" % (count / scale, unit)
    return text(lang, "size.bytes", count=count)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help in the reader's language, wrapped by terminal columns (a kanji takes two)."""

    def __init__(self, prog, lang="en", **kwargs):
        super().__init__(prog, **kwargs)
        self.usage_prefix = text(lang, "cli.usage")

    def add_usage(self, usage, actions, groups, prefix=None):
        # argparse lays the usage out by len(); a blank prefix of the same width keeps its lines aligned.
        super().add_usage(usage, actions, groups, " " * display_width(self.usage_prefix))

    def format_help(self):
        blank = " " * display_width(self.usage_prefix)
        help_text = super().format_help()
        return self.usage_prefix + help_text[len(blank):] if help_text.startswith(blank) else help_text

    def _split_lines(self, text, width):
        return wrap(" ".join(text.split()), width)

    def _fill_text(self, text, width, indent):
        return "\n".join(indent + line for line in wrap(" ".join(text.split()), width - len(indent)))


# argparse's own complaints, as it words them on Python 3.8-3.13, and the message saying each in the reader's language.
ARGPARSE_ERRORS = (
    (r"unrecognized arguments: (?P<args>.*)", "argparse.unrecognized"),
    (r"expected one argument", "argparse.expected-one"),
    (r"invalid choice: (?P<value>.*?) \(choose from (?P<choices>.*)\)", "argparse.invalid-choice"),
    (r"invalid (?P<type>\w+) value: (?P<value>.*)", "argparse.invalid-value"),
    (r"ambiguous option: (?P<option>\S+) could match (?P<matches>.*)", "argparse.ambiguous"),
    (r"ignored explicit argument (?P<value>.*)", "argparse.ignored"),
    (r"the following arguments are required: (?P<args>.*)", "argparse.required"),
)


def argparse_message(message, lang):
    """One of argparse's English messages in `lang` (as it is, if argparse words it in a way not listed here)."""
    argument = re.fullmatch(r"argument (?P<argument>\S+): (?P<problem>.*)", message, re.S)
    if argument:
        return text(lang, "argparse.argument", argument=argument.group("argument"),
                    problem=argparse_message(argument.group("problem"), lang))
    for pattern, message_id in ARGPARSE_ERRORS:
        found = re.fullmatch(pattern, message, re.S)
        if found:
            return text(lang, message_id, **found.groupdict())
    return message



class Parser(argparse.ArgumentParser):
    def __init__(self, lang, **kwargs):
        super().__init__(formatter_class=functools.partial(HelpFormatter, lang=lang), add_help=False, **kwargs)
        self.lang = lang

    def error(self, message):
        """One line on stderr, exit 2, as argparse does, and never a traceback; in the reader's language."""
        self.exit(EXIT_USAGE, text(self.lang, "cli.usage-error", prog=self.prog, message=argparse_message(message, self.lang)) + "\n")


def parse_args(argv, lang):
    t = lambda message_id, **fields: text(lang, message_id, **fields)  # noqa: E731
    parser = Parser(lang, prog="grade.py", description=t("cli.description"))
    options = parser.add_argument_group(t("cli.options"))
    options.add_argument("-h", "--help", action="help", help=t("cli.help.help"))
    options.add_argument("--impl", action="append", metavar="PATH",
                         help=t("cli.help.impl", reference=os.path.relpath(REFERENCE, ROOT)))
    options.add_argument("-k", dest="only", action="append", metavar="NAME", help=t("cli.help.only", names=", ".join(NAMES)))
    options.add_argument("--json", action="store_true", help=t("cli.help.json"))
    options.add_argument("--report", metavar="DIR", help=t("cli.help.report"))
    options.add_argument("--force", action="store_true", help=t("cli.help.force"))
    options.add_argument("--resume", action="store_true", help=t("cli.help.resume"))
    options.add_argument("--shard", metavar="K/N", help=t("cli.help.shard"))
    options.add_argument("--merge", nargs="+", metavar="DIR", help=t("cli.help.merge"))
    options.add_argument("--points", metavar="FILE", help=t("cli.help.points"))
    options.add_argument("--gradescope", metavar="PATH", help=t("cli.help.gradescope"))
    options.add_argument("-v", "--verbose", action="store_true", help=t("cli.help.verbose"))
    options.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS", help=t("cli.help.timeout"))
    options.add_argument("--seed", type=int, default=DEFAULT_SEED, metavar="N", help=t("cli.help.seed"))
    options.add_argument("--jobs", type=int, default=default_jobs(), help=t("cli.help.jobs"))
    options.add_argument("--memory", type=int, default=contain.DEFAULT_MEMORY_MIB, metavar="MiB", help=t("cli.help.memory"))
    options.add_argument("--file-size", type=int, default=contain.DEFAULT_FILE_MIB, metavar="MiB", help=t("cli.help.file-size"))
    options.add_argument("--keep", action="store_true", help=t("cli.help.keep"))
    options.add_argument("--allow-kit-imports", action="store_true", help=t("cli.help.allow-kit-imports"))
    options.add_argument("--isolation", choices=("all", "off"), default="all", help=t("cli.help.isolation"))
    options.add_argument("--list", action="store_true", help=t("cli.help.list"))
    options.add_argument("--quiz", action="store_true", help=t("cli.help.quiz"))
    options.add_argument("--lang", choices=LANGS, default=lang, help=t("cli.help.lang", langs=", ".join(LANGS)))
    options.add_argument("--debug", action="store_true", help=t("cli.help.debug"))
    options.add_argument("--version", action="version", version="grade.py %s" % __version__, help=t("cli.help.version"))
    args = parser.parse_args(argv)
    # The quiz orders its options by --seed only when it is given; otherwise each quiz draws a new order.
    given_seed = any(arg == "--seed" or arg.startswith("--seed=") for arg in argv)
    args.quiz_seed = args.seed if given_seed else None
    if args.quiz:
        # The quiz runs the kit's own reference, always: nothing here chooses what it runs.
        for option, given in (("--impl", args.impl), ("-k", args.only), ("--list", args.list), ("--report", args.report)):
            if given:
                parser.error(t("usage.quiz-with", option=option))
    for name in args.only or ():
        if name not in NAMES:
            parser.error(t("usage.unknown-check", name=name, names=", ".join(NAMES)))
    if not 0 < args.timeout <= 3600:  # also refuses nan and inf
        parser.error(t("usage.timeout", value="%g" % args.timeout))
    if args.jobs < 1:
        parser.error(t("usage.jobs", value=args.jobs))
    for flag, value, (low, high) in (("--memory", args.memory, MEMORY_RANGE), ("--file-size", args.file_size, FILE_RANGE)):
        if not low <= value <= high:
            parser.error(t("usage.mib", flag=flag, low=low, high=high, value=value))
    if args.merge is not None and (args.report is None or args.impl or args.only or args.resume or args.shard):
        parser.error(t("usage.merge"))
    if args.resume and args.report is None:
        parser.error(t("usage.resume"))
    args.shard = parse_shard(args.shard, parser, t)
    args.points_of = read_points(args.points, parser, t)
    try:
        args.workers, args.skipped = find_class(args.impl or [REFERENCE]) if args.merge is None else ([], [])
    except UsageError as exc:
        parser.error(render(exc.args[0], lang))
    if args.shard is not None:
        args.workers = [w for w in args.workers if shard_of(w.name, args.shard[1]) == args.shard[0]]
    if args.gradescope is not None and len(args.workers) != 1:
        parser.error(t("usage.gradescope", count=len(args.workers)))
    for path in args.merge or ():
        if not os.path.isdir(path) or not load_shard(path)[0]:
            parser.error(t("usage.merge-empty", path=path, version=__version__))
    if args.report is not None:
        args.report = os.path.abspath(args.report)
        try:
            os.makedirs(args.report, exist_ok=True)
        except OSError as exc:
            parser.error(t("usage.report", path=args.report, error=describe(exc)))
        if not os.access(args.report, os.W_OK):
            parser.error(t("usage.report", path=args.report, error=t("usage.not-writable")))
        foreign = survey(args.report)[1]
        if foreign and not args.force:
            parser.error(t("usage.foreign", path=args.report, files=", ".join(foreign[:20])
                           + (" ..." if len(foreign) > 20 else "")))
    return args


def parse_shard(value, parser, t):
    """--shard K/N as (K, N), 1 <= K <= N; None without it."""
    if value is None:
        return None
    found = re.fullmatch(r"([1-9][0-9]*)/([1-9][0-9]*)", value)
    if not found or not int(found.group(1)) <= int(found.group(2)) <= MAX_SHARDS:
        parser.error(t("usage.shard", value=value))
    return int(found.group(1)), int(found.group(2))


def shard_of(name, count):
    """The shard (1 to `count`) of a worker: a hash of its name alone, so a new student moves no one else."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return int(digest[:16], 16) % count + 1


def read_points(path, parser, t):
    """The points per check: the registry's defaults, with --points FILE's JSON object over them."""
    points = dict(POINTS)
    if path is None:
        return points
    try:
        with open(path, encoding="utf-8") as f:
            given = json.load(f)
    except OSError as exc:
        parser.error(t("usage.points-file", path=path, error=describe(exc)))
    except ValueError as exc:
        parser.error(t("usage.points-file", path=path, error=describe(exc)))
    if not isinstance(given, dict):
        parser.error(t("usage.points-json", path=path))
    unknown = sorted(name for name in given if name not in NAMES)
    if unknown:
        parser.error(t("usage.points-unknown", path=path, names=", ".join(unknown), known=", ".join(NAMES)))
    for name, value in given.items():
        if type(value) is not int or not 0 <= value <= MAX_POINTS:
            parser.error(t("usage.points-value", path=path, name=name, value=json.dumps(value)))
    points.update(given)
    return points


def language(argv):
    """The --lang given, if any and known, else the environment's: needed before the parser exists."""
    for i, arg in enumerate(argv):
        if arg.startswith("--lang="):
            value = arg.split("=", 1)[1]
        elif arg == "--lang" and i + 1 < len(argv):
            value = argv[i + 1]
        else:
            continue
        if value in LANGS:
            return value
    return choose_lang()


def readable_anywhere(stream):
    """Write what `stream`'s encoding lacks as escapes, not a UnicodeEncodeError: Japanese into a cp1252 pipe
    (Windows, whose pipes and files take the ANSI code page) would end the run before its report."""
    if hasattr(stream, "reconfigure") and getattr(stream, "errors", None) in ("strict", "surrogateescape"):
        stream.reconfigure(errors="backslashreplace")


def relative(path):
    """`path` from the current folder, or whole where there is no way from it (another drive, on Windows)."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if os.name == "nt":  # `grade.py | more` left early: a BrokenPipeError there too (the kit's CLIs share it)
        from outbox.cli.args import stdout_pipe_as_on_posix
        stdout_pipe_as_on_posix()
    readable_anywhere(sys.stdout)
    lang = language(argv)
    args = parse_args(argv, lang)
    try:
        if args.quiz:
            from . import quiz  # only --quiz loads the quiz and runs its scenarios
            return quiz.main(args)
        status = grade(args)
        # Out before the interpreter's exit: a SIGTERM there finds no handler, and a buffered stdout is lost
        # with the process (PyPy flushed it after its last lock; seen in CI).
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        raise
    except (KeyboardInterrupt, Stopped) as stop:  # one after the checks ended, while the report is written or shown
        print(text(args.lang, "cli.interrupted"), file=sys.stderr)
        return 128 + stop.signum if isinstance(stop, Stopped) else 130
    except GraderError as exc:  # audit: G58
        print(text(args.lang, "cli.grader-error", error=render(exc.args[0], args.lang)), file=sys.stderr)
        return EXIT_GRADER_ERROR
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        print(text(args.lang, "cli.grader-error", error=describe(exc)), file=sys.stderr)
        return EXIT_GRADER_ERROR
    finally:
        default_on_signals()


class InOrder:
    """Shows one worker's results in the registry's order, each as soon as those before it are in."""

    def __init__(self, show):
        self.show = show
        self.ready = {}
        self.shown = 0

    def add(self, graded, results):
        for result in results:
            self.ready[result["name"]] = result
        while self.shown < len(graded.checks) and graded.checks[self.shown].name in self.ready:
            self.show(self.ready[graded.checks[self.shown].name])
            self.shown += 1


def grade(args):
    lang = args.lang
    if args.list:
        for check in CHECKS:
            print(text(lang, "list.line", name=check.name, points=args.points_of[check.name]))
        return EXIT_OK
    if args.merge is not None:
        return merge(args)
    stop_on_signals()
    selected = [c for c in CHECKS if not args.only or c.name in args.only]
    names = [c.name for c in selected]
    args.limits = default_limits(args.timeout, args.memory, args.file_size)
    off = contain.protect_host()
    if off:
        print(text(lang, "cli.protections-off", off=", ".join(text(lang, "protection." + name) for name in off)),
              file=sys.stderr)
    single = len(args.workers) == 1 and not args.skipped and args.shard is None  # a shard is a class's part
    started = time.monotonic()
    run = ClassRun(args, names, started)
    to_grade = [w for w in args.workers if w.name not in run.finished]
    on_results = on_tick = None
    if single and not args.json:
        print(text(lang, "report.grading", impl=shown(relative(args.workers[0].path))))
        on_results = InOrder(lambda result: show_result(result, args)).add
    elif not single:
        if run.finished:
            print(text(lang, "progress.resumed", count=len(run.finished), path=args.report), file=sys.stderr)
        run.progress = Progress(len(to_grade), lang)
        on_tick = run.progress.tick
    try:
        graded = grade_all(to_grade, selected, args, lang, on_results=on_results, on_worker=run.worker_done,
                           on_tick=on_tick)
    except (KeyboardInterrupt, Stopped) as stop:
        run.write_class(time.monotonic() - started)  # what finished, marked partial
        print(text(lang, "cli.interrupted"), file=sys.stderr)
        return 128 + stop.signum if isinstance(stop, Stopped) else 130
    seconds = time.monotonic() - started
    result = run.write_class(seconds)
    if args.gradescope is not None:
        atomic_write(os.path.abspath(args.gradescope), gradescope.results_json(result["workers"][0]))
    if args.json:
        print(jsonfile.dumps(result["workers"][0] if single else result), end="")
    elif single:
        show_totals(graded[0] if graded else None, result["workers"][0], args, seconds)
    else:
        for line in terminal.class_table(result, lang, verbose=args.verbose):
            print(line)
        for one in graded if args.keep else ():
            print(text(lang, "report.kept-for", name=shown(one.worker.name), path=one.grader.tmp))
        for check in (c for w in result["workers"] for c in w["checks"] if c.get("traceback") and args.debug):
            print(check["traceback"], file=sys.stderr)
    return exit_status(result)


def exit_status(result):
    statuses = [c["status"] for w in result["workers"] for c in w["checks"]]
    if "error" in statuses:  # audit: G58
        return EXIT_GRADER_ERROR
    return EXIT_OK if "fail" not in statuses else EXIT_FAILED


class ClassRun:
    """The workers' results as they finish, their files in --report DIR written then, the class files kept current."""

    def __init__(self, args, names, started):
        self.args, self.names, self.started = args, names, started
        self.progress = None
        self.finished = {}
        self.folder = ReportFolder(args.report, args.lang, names) if args.report is not None else None
        self.written = time.monotonic()
        if self.folder is not None:
            if args.resume:
                self.finished = self.resumed(self.folder.resumable())
            self.folder.clear(keep=self.finished)

    def resumed(self, found):
        """The reports in DIR this run can keep: same grader version (checked by the folder), same submission
        bytes, same checks; their points follow this run's --points."""
        kept = {}
        for worker in self.args.workers:
            old = found.get(worker.name)
            if old and old.get("sha256") == results.digest(worker.path) \
                    and [c["name"] for c in old["checks"]] == self.names:
                kept[worker.name] = results.rescored(old, self.args.points_of)
        return kept

    def worker_done(self, one):
        result = results.worker_result(one, self.args.points_of, debug=self.args.debug)
        self.finished[one.worker.name] = result
        if self.folder is not None:
            self.folder.write_worker(result)
            if time.monotonic() - self.written > CLASS_FILES_EVERY:
                self.write_class(time.monotonic() - self.started)
        if self.progress is not None:
            self.progress.worker_done(one)

    def write_class(self, seconds):
        """The class result of what has finished; its files in DIR. Partial while workers are missing."""
        result = results.class_result(self.finished.values(), self.args.skipped, len(self.args.workers), seconds)
        if self.folder is not None:
            self.folder.write_class(result)
            self.written = time.monotonic()
        return result


def merge(args):
    """--merge DIR... --report OUT: every report rebuilt from the shards' JSON alone; grades nothing."""
    workers, skipped, expected, seconds = {}, {}, 0, 0.0
    for path in args.merge:
        found, whole = load_shard(path)
        workers.update((name, results.rescored(w, args.points_of) if args.points else w) for name, w in found.items())
        whole = whole or {}
        for entry in whole.get("skipped") or ():
            skipped[entry["path"]] = entry
        expected += (whole.get("partial") or {}).get("of", len(found))
        seconds += whole.get("seconds", 0.0)
    names = [name for name in NAMES if any(c["name"] == name for w in workers.values() for c in w["checks"])]
    folder = ReportFolder(args.report, args.lang, names)
    folder.clear()
    for name in sorted(workers):
        folder.write_worker(workers[name])
    result = results.class_result(workers.values(), [skipped[p] for p in sorted(skipped)], max(expected, len(workers)),
                                  seconds)
    folder.write_class(result)
    if args.json:
        print(jsonfile.dumps(result), end="")
    else:
        for line in terminal.class_table(result, args.lang, verbose=args.verbose):
            print(line)
    return exit_status(result)


def show_result(result, args):
    lang = args.lang
    expected, observed = (render(result[key + "_message"], lang) for key in ("expected", "observed"))  # lang: here, at the edge
    verdict = text(lang, "verdict." + result["status"])
    say(text(lang, "report.expected", verdict=verdict, name=result["name"], expected=expected),
        text(lang, "report.expected", verdict=verdict, name=result["name"], expected=""))
    say(text(lang, "report.observed", blank="", observed=observed), text(lang, "report.observed", blank="", observed=""))
    if result["output"]["dropped"]:
        print(text(lang, "report.output", blank="", printed=size(result["output"]["printed"], lang),
                   dropped=size(result["output"]["dropped"], lang), kept=size(KEEP, lang)))
    for frame in result["worker"]["traceback"]:
        print(text(lang, "report.frame", blank="", file=shown(frame["file"]), line=frame["line"],
                   function=shown(frame["function"]), code=shown(frame["code"])))
    for line in result["worker"]["printed"]:
        print(text(lang, "report.printed", blank="", line=shown(line)))
    if result["traceback"] and args.debug:
        print(result["traceback"], file=sys.stderr)
    sys.stdout.flush()


def say(line, prefix):
    """Print a report line; at a terminal, wrapped to its width, each further line indented under the text after `prefix`.

    Piped or redirected, a line stays whole: scripts and grep read one check's expectation a line.
    """
    if not sys.stdout.isatty():
        print(line)
        return
    hang = display_width(prefix)
    width = max(columns(sys.stdout) - 1 - hang, 20)
    for i, piece in enumerate(wrap(line[len(prefix):], width)):
        print((prefix if i == 0 else " " * hang) + piece)


def show_isolation(one, lang):
    """The one line on the box the worker ran in (a class's is in each worker's JSON report)."""
    isolation = one.grader.isolation()
    on = [text(lang, "isolation." + layer, abi=isolation["landlock"], uid=isolation["uid"])
          for layer in box.LAYERS if isolation[layer]]
    if on and "network" not in isolation["off"]:
        on.append(text(lang, "isolation.network"))  # its own network namespace: loopback alone (network.py)
    on = on or [text(lang, "isolation.none")]
    off = [text(lang, "isolation.layer." + layer) for layer in sorted(isolation["off"])
           if "isolation.layer." + layer in MESSAGES["en"]]
    comma = text(lang, "isolation.comma")
    print(text(lang, "report.isolation-off" if off else "report.isolation", on=comma.join(on), off=comma.join(off)))


def show_totals(one, result, args, seconds):
    """The single worker's evidence tables and totals (`one` None when its report was resumed, not graded)."""
    lang = args.lang
    counts = {"pass": result["passed"], "fail": result["failed"], "error": result["errors"]}
    for line in evidence_table(one.grader.evidence, lang) if one is not None else ():
        print(line)
    print("")
    if args.keep and one is not None:
        print(text(lang, "report.kept", path=one.grader.tmp))
    if one is not None:
        show_isolation(one, lang)
    print(text(lang, "report.points", points=result["points"], max_points=result["max_points"]))
    print(text(lang, "report.seconds", seconds="%.1f" % seconds))
    print(text(lang, "report.seed", seed=result.get("seed")))
    if counts["error"]:  # the totals stay the last line: scripts and the docs read them there
        print(text(lang, "report.hint-debug"))
        print(text(lang, "report.totals-errors", passed=counts["pass"], failed=counts["fail"], errors=counts["error"]))
    else:
        print(text(lang, "report.totals", passed=counts["pass"], failed=counts["fail"]))
