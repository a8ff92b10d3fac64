"""grade.py's command line: choose the checks, run them in parallel, print the report, pick the exit status.

Exit status: 0 every check passed, 1 some check failed, 2 usage error,
3 grader error (the grader's own fault: an exception in its code, no writable
temporary directory), 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP. Never imports the
worker: grade.py sends `--role` children straight to child.py.
"""
import argparse
import concurrent.futures
import functools
import json
import os
import re
import signal
import sys
import time
import traceback
import unicodedata

from . import __version__
from .common import Fail, describe, msg
from .messages import LANGS, choose_lang, render, term, terms, text
from .parent import PROCESSES, ROOT, Grader, GraderError
from .registry import CHECKS, NAMES

REFERENCE = os.path.join(ROOT, "examples", "worker_reference.py")
DEFAULT_TIMEOUT = 10.0
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_GRADER_ERROR = 0, 1, 2, 3


class Stopped(BaseException):
    """A signal asked the grader to stop; exits with 128 + its number, after every finally has run."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def stop_on_signal(signum, frame):
    # SIGTERM and SIGHUP (a closed terminal) unwind like Ctrl-C, so every finally
    # below runs: children are killed, temporary DBs removed.
    raise Stopped(signum)


def run_check(grader, check, lang):
    started = time.monotonic()
    status, error = "pass", None
    try:
        expected, observed = check.run(grader.for_check(check))
    except Fail as fail:
        status, expected, observed = "fail", fail.expected, fail.observed
    except Exception as exc:  # a bug in the grader itself: a readable line, its own status, the traceback on --debug
        status, error = "error", traceback.format_exc()
        expected, observed = msg("check.runs", name=check.name), msg("check.grader-error", error=describe(exc))
    return {"name": check.name, "status": status, "ok": status == "pass",
            "expected": render(expected, "en"), "observed": render(observed, "en"),
            "expected_message": expected, "observed_message": observed,
            "text": (render(expected, lang), render(observed, lang)),
            "seconds": round(time.monotonic() - started, 3), "traceback": error}


def evidence_table(evidence, lang):
    lines = []
    rows = (
        ("evidence.order", lambda p: text(lang, "present" if p["order"] else "absent")),
        ("evidence.outbox", lambda p: term(lang, p["outbox"])),
        ("evidence.inbox", lambda p: text(lang, "present" if p["inbox"] else "absent")),
        ("evidence.deliveries", lambda p: terms(lang, p["deliveries"])),
        ("evidence.ack", lambda p: text(lang, "evidence.not-sent") if p["ack"] is None
         else ", ".join(json.dumps(a) for a in p["ack"]) or text(lang, "evidence.none")),
        ("evidence.inventory", lambda p: str(p["inventory"])),
    )
    for name in ("crash-after-ack", "dropped-response"):
        phases = evidence.get(name)
        if not phases:
            continue
        lines.append("")
        lines.append(text(lang, "evidence.title", name=name))
        table = [[text(lang, "evidence.observation")] + [text(lang, "evidence.after", phase=p["phase"]) for p in phases]]
        table += [[text(lang, label)] + [show(p) for p in phases] for label, show in rows]
        widths = [max(display_width(r[i]) for r in table) for i in range(len(table[0]))]
        for r in table:
            lines.append("  " + "  ".join(cell + " " * (w - display_width(cell)) for cell, w in zip(r, widths)).rstrip())
    return lines


def display_width(cell):
    """Columns `cell` takes in a terminal: wide (East Asian) characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in cell)


NO_BREAK_BEFORE = "、。，．・：；？！）」』】〕ー々ぁぃぅぇぉっゃゅょゎァィゥェォッャュョヮ"
NO_BREAK_AFTER = "（「『【〔"


def wrap(text, width):
    """`text` as lines of at most `width` terminal columns (a wide character takes two).

    Breaks at spaces, and next to wide characters (Japanese has no spaces),
    except before closing punctuation and small kana or after an opening
    bracket; never inside an ASCII word, a hyphenated name included. A piece
    that cannot be broken and is wider than `width` overflows its line.
    """
    lines = []
    for paragraph in text.split("\n"):
        line = []  # the pieces of the line being filled
        for piece in re.findall(r"[^\s\u3000-\u9fff\uff00-\uffef]+\s*|\S\s*|\s+", paragraph):
            line.append(piece)
            if display_width("".join(line).rstrip()) > width:
                cut = next((i for i in range(len(line) - 1, 0, -1) if line[i][0] not in NO_BREAK_BEFORE
                            and line[i - 1].rstrip()[-1:] not in NO_BREAK_AFTER), 0)
                if cut:
                    lines.append("".join(line[:cut]).rstrip())
                    line = line[cut:]
        lines.append("".join(line).rstrip())
    return lines


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


def json_evidence(evidence):
    """The evidence with each phase's label in English next to its message: JSON types throughout."""
    return {name: [dict(p, phase=render(p["phase"], "en"), phase_message=p["phase"]) for p in phases]
            for name, phases in evidence.items()}


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
    options.add_argument("--impl", default=REFERENCE, metavar="PATH", help=t("cli.help.impl"))
    options.add_argument("-k", dest="only", action="append", metavar="NAME", help=t("cli.help.only", names=", ".join(NAMES)))
    options.add_argument("--json", action="store_true", help=t("cli.help.json"))
    options.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS", help=t("cli.help.timeout"))
    options.add_argument("--jobs", type=int, default=4, help=t("cli.help.jobs"))
    options.add_argument("--keep", action="store_true", help=t("cli.help.keep"))
    options.add_argument("--list", action="store_true", help=t("cli.help.list"))
    options.add_argument("--quiz", action="store_true", help=t("cli.help.quiz"))
    options.add_argument("--lang", choices=LANGS, default=lang, help=t("cli.help.lang", langs=", ".join(LANGS)))
    options.add_argument("--debug", action="store_true", help=t("cli.help.debug"))
    options.add_argument("--version", action="version", version="grade.py %s" % __version__, help=t("cli.help.version"))
    args = parser.parse_args(argv)
    if args.quiz:
        # The quiz runs the kit's own reference, always: nothing here chooses what it runs.
        for option, given in (("--impl", args.impl != REFERENCE), ("-k", args.only), ("--list", args.list)):
            if given:
                parser.error(t("usage.quiz-with", option=option))
    for name in args.only or ():
        if name not in NAMES:
            parser.error(t("usage.unknown-check", name=name, names=", ".join(NAMES)))
    if not 0 < args.timeout <= 3600:  # also refuses nan and inf
        parser.error(t("usage.timeout", value="%g" % args.timeout))
    if args.jobs < 1:
        parser.error(t("usage.jobs", value=args.jobs))
    args.impl = os.path.abspath(args.impl)
    if not os.path.isfile(args.impl):
        parser.error(t("usage.no-impl", path=args.impl))
    why = not_a_module(args.impl)
    if why is not None:
        parser.error(t("usage.not-module", path=args.impl, why=render(why, lang)))
    return args


def not_a_module(path):
    """None if `path` is Python source that compiles (compiled only, never run here), else a message why not."""
    if not path.endswith(".py"):
        return msg("usage.not-py")
    try:
        with open(path, "rb") as f:
            source = f.read().decode("utf-8")
    except UnicodeDecodeError:
        return msg("usage.not-text")
    try:
        compile(source, path, "exec")
    except (SyntaxError, ValueError) as exc:
        return msg("usage.syntax", line=getattr(exc, "lineno", None) or "?", error=describe(exc))
    return None


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


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    lang = language(argv)
    args = parse_args(argv, lang)
    try:
        if args.quiz:
            from . import quiz  # only --quiz loads the quiz and runs its scenarios
            return quiz.main(args)
        return grade(args)
    except BrokenPipeError:
        raise
    except GraderError as exc:
        print(text(args.lang, "cli.grader-error", error=render(exc.args[0], args.lang)), file=sys.stderr)
        return EXIT_GRADER_ERROR
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        print(text(args.lang, "cli.grader-error", error=describe(exc)), file=sys.stderr)
        return EXIT_GRADER_ERROR


def grade(args):
    lang = args.lang
    if args.list:
        for check in CHECKS:
            print(check.name)
        return EXIT_OK
    signal.signal(signal.SIGTERM, stop_on_signal)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, stop_on_signal)
    selected = [c for c in CHECKS if not args.only or c.name in args.only]
    grader = Grader(args.impl, args.timeout, args.keep)
    started = time.monotonic()
    results = []
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
    try:
        futures = [pool.submit(run_check, grader, check, lang) for check in selected]
        if not args.json:
            print(text(lang, "report.grading", impl=os.path.relpath(args.impl)))
        for future in futures:
            result = future.result()
            results.append(result)
            if not args.json:
                expected, observed = result.pop("text")
                print(text(lang, "report.expected", verdict=text(lang, "verdict." + result["status"]),
                           name=result["name"], expected=expected))
                print(text(lang, "report.observed", blank="", observed=observed))
                if result["traceback"] and args.debug:
                    print(result["traceback"], file=sys.stderr)
                sys.stdout.flush()
            else:
                result.pop("text")
    except KeyboardInterrupt:
        print(text(lang, "cli.interrupted"), file=sys.stderr)
        return 130
    except Stopped as stop:
        print(text(lang, "cli.interrupted"), file=sys.stderr)
        return 128 + stop.signum
    finally:
        PROCESSES.kill_all()
        pool.shutdown(wait=True)
        grader.close()
    passed = sum(1 for r in results if r["status"] == "pass")
    failed = sum(1 for r in results if r["status"] == "fail")
    errors = sum(1 for r in results if r["status"] == "error")
    seconds = time.monotonic() - started
    if args.json:
        if not args.debug:
            for r in results:
                del r["traceback"]
        report = {"version": __version__, "impl": args.impl, "passed": passed, "failed": failed, "errors": errors,
                  "seconds": round(seconds, 3), "checks": results, "evidence": json_evidence(grader.evidence),
                  "kept": grader.tmp if args.keep else None}
        print(json.dumps(report, indent=2))
    else:
        for line in evidence_table(grader.evidence, lang):
            print(line)
        print("")
        if args.keep:
            print(text(lang, "report.kept", path=grader.tmp))
        print(text(lang, "report.seconds", seconds="%.1f" % seconds))
        if errors:
            print(text(lang, "report.hint-debug"))
            print(text(lang, "report.totals-errors", passed=passed, failed=failed, errors=errors))
        else:
            print(text(lang, "report.totals", passed=passed, failed=failed))
    if errors:
        return EXIT_GRADER_ERROR
    return EXIT_OK if failed == 0 else EXIT_FAILED
