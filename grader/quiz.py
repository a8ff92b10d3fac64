"""`grade.py --quiz`: run the kit's own scenarios and two short relay runs, then ask what their evidence proves.

Owns the quiz's flow: the reference run (always examples/worker_reference.py,
never a participant's worker, and the kit's own relay), the observations its
questions quote, the order of each question's options (shuffled from one
seed, so that --seed N gives the same quiz again), one question at a time,
the answers from stdin, the score and the exit status. The questions are in
quiz_questions.py; every text comes from the message tables.
"""
import concurrent.futures
import json
import os
import random
import signal
import string
import subprocess
import sys
import time
import unicodedata

from . import __version__
from .cli import (
    EXIT_FAILED, EXIT_GRADER_ERROR, EXIT_OK, EXIT_USAGE, REFERENCE, evidence_table, json_evidence,
)
from .classroom import TICK, Tasks
from .common import Fail
from .messages import MESSAGES, render, text
from .parent import PROCESSES, ROOT, Grader
from .quiz_questions import LETTERS, QUESTIONS
from .stopping import Completions, Deferred, Stopped, stop_on_signals, wait_readable
from .registry import CHECKS
from .text import shown
from .wrap import columns, wrap

SCENARIOS = ("crash-after-ack", "dropped-response", "conflict", "stop-on-first-failure")
MAX_WIDTH = 100  # columns, however wide the terminal
SEEDS = 1 << 32  # a seed chosen for a run is below this
RELAY_TIMEOUT = 30  # seconds for both relay runs (about 0.5 s idle; each has its own 10 s deadline)
MAX_RELAY_OUTPUT = 64 * 1024  # bytes read of what the relay runs print


class BadInput(Exception):
    """The answers on stdin cannot go on (not a choice when piped, or stdin ended): a message, then exit 2."""


class ReferenceFailed(Exception):
    """The kit's own scenario did not pass here, so there is no evidence to ask about: exit 3."""


def main(args):
    """The whole quiz for parsed grade.py arguments (--lang, --json, --seed as quiz_seed, --timeout, --keep); returns the exit status."""
    stop_on_signals()
    lang = args.lang
    seed = args.quiz_seed if args.quiz_seed is not None else random.SystemRandom().randrange(SEEDS)
    interactive = sys.stdin is not None and sys.stdin.isatty()
    # With --json, stdout holds the JSON alone; a person at a terminal still sees the questions, on stderr.
    out = sys.stdout if not args.json else sys.stderr if interactive else None
    answers = Answers(sys.stdin, interactive, out)
    try:
        say(out, text(lang, "quiz.running"))
        started = time.monotonic()
        with Deferred() as block:  # from its folder's making to its removal, no stop cuts the grader's life short
            grader = Grader(REFERENCE, args.timeout, args.keep)
            try:
                with block.unwinding_allowed():  # the relay runs wait on children: a stop unwinds them at once
                    observed = run_reference(grader, lang)
                    relays = run_relays(grader.tmp, lang)
            finally:
                grader.close()
        seconds = time.monotonic() - started
        # What the questions quote, in the words of the quiz's language and in English (the JSON's, language-neutral).
        fields = {language: observations(grader.evidence, observed, relays, language) for language in {lang, "en"}}
        for line in evidence_table(grader.evidence, lang):
            say(out, line, wrapped=False)  # a table keeps its columns; a narrow terminal folds it as it must
        say(out, "")
        say(out, text(lang, "quiz.ran", seconds="%.1f" % seconds, count=len(QUESTIONS), seed=seed))
        if args.keep:
            say(out, text(lang, "report.kept", path=grader.tmp))
        results = ask(QUESTIONS, orders(seed, QUESTIONS), fields, lang, out, answers)
    except ReferenceFailed as exc:
        print(exc.args[0], file=sys.stderr)
        return EXIT_GRADER_ERROR
    except BadInput as exc:
        print(exc.args[0], file=sys.stderr)
        return EXIT_USAGE
    except (KeyboardInterrupt, Stopped) as stop:  # Ctrl-C, SIGTERM, SIGHUP: 128 + the signal, as grade.py
        if answers.waiting and interactive:
            print(file=sys.stderr)  # the terminal shows ^C after the prompt: the message gets a line of its own
        print(text(lang, "cli.interrupted"), file=sys.stderr)
        return 128 + getattr(stop, "signum", signal.SIGINT)
    score = sum(1 for r in results if r["right"])
    say(out, "")
    say(out, text(lang, "quiz.score", score=score, count=len(QUESTIONS)))
    if args.json:
        report = {"version": __version__, "impl": REFERENCE, "seed": seed, "score": score, "count": len(QUESTIONS),
                  "seconds": round(seconds, 3), "questions": results,
                  "checks": [{"name": name, "observed": render(message, "en"), "observed_message": message}
                             for name, message in observed.items()],
                  "relay": relays,
                  "evidence": json_evidence(grader.evidence), "kept": grader.tmp if args.keep else None}
        print(json.dumps(report, indent=2))
    return EXIT_OK if score == len(QUESTIONS) else EXIT_FAILED


def run_reference(grader, lang):
    """Run the scenarios from the registry, side by side, on the kit's own worker: {name: observed message}."""
    checks = [check for check in CHECKS if check.name in SCENARIOS]
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(checks))
    tasks = Tasks()  # the caller removes the folders once this returns: no check may still be running then
    with Completions() as done:  # a stop signal is raised by done.wait, never inside the pool's locks
        try:
            futures = [(check.name, done.watch(pool.submit(tasks.run, check.run, grader.for_check(check))))
                       for check in checks]
            left = len(futures)
            while left:
                left -= len(done.wait(TICK))
            observed = {}
            for name, future in futures:
                try:
                    observed[name] = future.result()[1]  # (expected, observed): what the quiz quotes
                except Fail as fail:
                    raise ReferenceFailed(text(lang, "quiz.reference-failed", name=name, expected=fail.expected,
                                               observed=fail.observed))
            return observed
        finally:
            try:
                PROCESSES.kill_all()  # nothing should be left; after an interrupt, the children go too
                tasks.stop()
            finally:
                pool.shutdown(wait=True)


def run_relays(tmp, lang):
    """The kit's relay across a sink outage, then against a head item the sink refuses: {"outage": .., "refused": ..}.

    They run in a child process (grader/quiz_relay.py), bounded in time and output: this process never imports
    the kit.
    """
    work = os.path.join(tmp, "quiz-relay")
    os.mkdir(work)
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(PYTHONPATH=ROOT, PYTHONDONTWRITEBYTECODE="1")
    # A session of its own, known to PROCESSES: the grader's sweep of stray children spares it, kill_all ends it.
    proc = PROCESSES.popen([sys.executable, "-m", "grader.quiz_relay", work], cwd=ROOT, env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           start_new_session=True)
    try:
        out, err = proc.communicate(timeout=RELAY_TIMEOUT)
    except subprocess.TimeoutExpired:
        out = err = None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        PROCESSES.forget(proc)
    if out is None or proc.returncode != 0:
        why = "timed out after %d s" % RELAY_TIMEOUT if out is None else shown(
            err[-MAX_RELAY_OUTPUT:].decode("utf-8", "replace").strip() or "exit %d" % proc.returncode)
        raise ReferenceFailed(text(lang, "quiz.reference-failed", name="relay", expected=text(lang, "quiz.relay-expected"),
                                   observed=why))
    try:
        return json.loads(out[:MAX_RELAY_OUTPUT].decode("utf-8"))
    except ValueError as exc:  # cut short or not JSON: no figures to quote
        raise ReferenceFailed(text(lang, "quiz.reference-failed", name="relay", expected=text(lang, "quiz.relay-expected"),
                                   observed=shown(exc)))


def observations(evidence, observed, relays, lang="en"):
    """Every value a question may quote, each read from this run: {placeholder: value}.

    `evidence` is the run's evidence tables ({scenario: [phase rows]}, as the
    grader recorded them: after intake, after publisher #1, after publisher
    #2); `observed` the scenarios' observed messages, which hold the error
    publisher #1 of dropped-response saw, the conflict's answer and the calls
    of stop-on-first-failure; `relays` what the two relay runs returned.
    Values stay program values (pending, applied, ...): each language words
    them through {name:term}. A list of values (the ACKs, the relay's waits
    and their bounds) is joined with `lang`'s separator (", " or 「、」).
    """
    fields = {}
    separator = MESSAGES[lang]["quiz.separator"]
    for scenario, prefix in (("crash-after-ack", "crash"), ("dropped-response", "drop")):
        rows = evidence[scenario]
        for name, row in ((prefix, rows[1]), (prefix + "_final", rows[-1])):
            phase = row["phase"]["fields"]
            fields[name + "_exit"] = phase.get("status")
            fields[name + "_error"] = phase.get("error")
            fields[name + "_ack"] = separator.join(json.dumps(a) for a in row["ack"]) or MESSAGES[lang]["term.none"]
            fields[name + "_outbox"] = row["outbox"]
            fields[name + "_inbox"] = "present" if row["inbox"] else "absent"
            fields[name + "_deliveries"] = list(row["deliveries"])
            fields[name + "_inventory"] = row["inventory"]
    fields["drop_message"] = observed["dropped-response"]["fields"]["error"]
    conflict = observed["conflict"]["fields"]
    fields["conflict_body"] = conflict["body"]
    fields["conflict_deliveries"] = list(conflict["deliveries"])
    stop = observed["stop-on-first-failure"]["fields"]
    for name in ("first_calls", "flags", "resumed"):
        fields["stop_" + name] = separator.join(str(value) for value in stop[name])
    outage, refused = relays["outage"], relays["refused"]
    fields["outage_failures"] = outage["failures"]
    fields["outage_waits"] = separator.join("%.3f" % wait for wait in outage["waits"])
    fields["outage_bounds"] = separator.join("%g" % bound for bound in outage["bounds"])
    fields["outage_base"], fields["outage_cap"] = outage["base"], outage["cap"]
    fields["refused_count"] = refused["refusals"]
    fields["refused_kind"] = refused["kind"]
    fields["refused_max"] = refused["max_attempts"]
    return fields


def placeholders(question):
    """The names a question's texts quote, in every language."""
    names = set()
    for language in question.texts.values():
        templates = (language.observed, language.question) + tuple(t for option in language.options for t in option)
        for template in templates:
            names |= {name for _, name, _, _ in string.Formatter().parse(template) if name}
    return names


def orders(seed, questions):
    """For each question, its options in the order shown: a permutation of its bank letters, drawn from `seed`."""
    rng = random.Random(seed)
    shown = []
    for question in questions:
        bank = list(LETTERS[:len(question.texts["en"].options)])
        rng.shuffle(bank)
        shown.append(tuple(bank))
    return shown


def ask(questions, shown_orders, fields, lang, out, answers):
    """Ask each question in turn; [{id, order, texts in English, the observation's message, answer, given, right}].

    In the bank the right option is always the first ("a"); `shown_orders`
    says which bank option stands under each letter shown. `fields` holds
    observations() in `lang` and in English: the questions shown quote the
    first, the results (English, for --json) the second.
    """
    results = []
    for n, (question, order) in enumerate(zip(questions, shown_orders), 1):
        prefix = "quiz.%s." % question.id
        letters = LETTERS[:len(order)]
        names = sorted(placeholders(question))
        quoted = {name: fields["en"][name] for name in names}
        shown_fields = {name: fields[lang][name] for name in names}
        observed = {"id": prefix + "observed", "fields": quoted}
        shown_observed = {"id": prefix + "observed", "fields": shown_fields}
        answer = letters[order.index("a")]

        def option(language, kind, letter):  # the bank's text of kind "choice" or "why" for a letter shown
            values = quoted if language == "en" else shown_fields
            return text(language, "%s%s.%s" % (prefix, kind, order[letters.index(letter)]), **values)

        say(out, "")
        say(out, text(lang, "quiz.heading", n=n, count=len(questions)))
        say(out, text(lang, "quiz.observed", observed=render(shown_observed, lang)))
        say(out, text(lang, prefix + "question", **shown_fields))
        for letter in letters:
            say(out, "%s) %s" % (letter, option(lang, "choice", letter)), indent="  ", hang="     ")
        given = answers.next(n, letters, text(lang, "quiz.prompt", letters="%s-%s" % (letters[0], letters[-1])),
                             lambda value: text(lang, "quiz.not-a-choice", given=value, letters=choices_text(lang, letters)),
                             lambda value: text(lang, "quiz.piped-not-a-choice", n=n, given=value,
                                                letters=choices_text(lang, letters)),
                             text(lang, "quiz.ended", given=n - 1, count=len(questions)))
        right = given == answer
        if right:
            say(out, text(lang, "quiz.right", explanation=option(lang, "why", answer)))
        else:
            say(out, text(lang, "quiz.wrong", answer=answer, feedback=option(lang, "why", given)))
            say(out, text(lang, "quiz.why-right", answer=answer, explanation=option(lang, "why", answer)))
        results.append({
            "id": question.id, "order": list(order), "observed": render(observed, "en"), "observed_message": observed,
            "question": text("en", prefix + "question", **quoted),
            "choices": {letter: option("en", "choice", letter) for letter in letters},
            "answer": answer, "given": given, "right": right,
            "feedback": option("en", "why", given),
            "explanation": option("en", "why", answer),
        })
    return results


def choices_text(lang, letters):
    """"a, b, c or d" in `lang`."""
    return text(lang, "quiz.letters-or", letters=MESSAGES[lang]["quiz.separator"].join(letters[:-1]), last=letters[-1])


def normalised(line):
    """An answer as people type it: NFKC (a full-width ｂ or space, as a Japanese IME gives), trimmed, lower case."""
    return unicodedata.normalize("NFKC", line).strip().lower()


class Answers:
    """Answers from stdin, one a line. At a terminal a non-choice is asked again; piped, it is BadInput."""

    def __init__(self, stream, interactive, out):
        self.stream, self.interactive, self.out = stream, interactive, out
        self.prompt_to = out if out is not None else (sys.stderr if interactive else None)
        self.waiting = False  # a prompt is shown and its line not yet read

    def next(self, n, letters, prompt, again, refused, ended):
        while True:
            self.waiting = True  # before the prompt shows: a Ctrl-C as soon as it does finds it set
            if self.prompt_to is not None:
                self.prompt_to.write(prompt)
                self.prompt_to.flush()
            if self.stream is not None:
                wait_readable(self.stream)  # Ctrl-C ends the wait, whenever it comes (grader/stopping.py)
            line = self.stream.readline() if self.stream is not None else ""
            self.waiting = False
            if not line:
                if self.prompt_to is not None:
                    self.prompt_to.write("\n")
                raise BadInput(ended)
            given = normalised(line)
            if self.prompt_to is not None and not (self.interactive and self.prompt_to.isatty()):
                # No terminal echoed the answer where the prompt went (stdin piped, or the prompt going to a
                # pipe or a log): the transcript shows it after its prompt.
                self.prompt_to.write(line.strip() + "\n")
            if len(given) == 1 and given in letters:
                return given
            if not self.interactive:
                raise BadInput(refused(line.strip()))
            say(self.prompt_to, again(line.strip()))


def say(out, line, indent="", hang=None, wrapped=True):
    """Print `line` on `out` (nothing if None), wrapped to the width of `out`'s terminal in display columns."""
    if out is None:
        return
    if not line or not wrapped:
        print(line, file=out)
        return
    width = min(columns(out), MAX_WIDTH) - 1
    hang = indent if hang is None else hang
    for i, piece in enumerate(wrap(line, width - max(len(indent), len(hang)))):
        print((indent if i == 0 else hang) + piece, file=out)
    out.flush()
