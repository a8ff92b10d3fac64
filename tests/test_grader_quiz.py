"""`grade.py --quiz`: the kit's own run, then questions that quote it, answered from stdin.

Real grade.py processes answer the whole quiz right (with --json) and wrong
(as text), refuse bad input, and re-ask at a terminal (a real pty). Each
quoted observation is shown to come from the run: the values a question
quotes are the ones the same run's JSON evidence holds, and they change when
the evidence they are read from changes. No answer pattern wins: the options
are shuffled from a seed, and over the bank the right option is the longest
(or the shortest) no more often than chance, in each language.
"""
import copy
import json
import os
import re
import select
import shutil
import signal
import string
import subprocess
import sys
import time
import unittest

from tests import grade_mutants
from tests.grade_mutants import GRADE, TIME_BOUND
from tests.support import (
    READER_DOCS, ROOT, WINDOWS, TempDirTestCase, japanese, posix_only, python_env, read_doc, text_of, wait_until,
)

if not WINDOWS:
    import pty  # the prompt at a real terminal: POSIX only, and so are the cases that use it

sys.path.insert(0, ROOT)
from grader import messages, quiz  # noqa: E402
from grader.quiz_questions import LETTERS, QUESTIONS, QUIZ_TEXT  # noqa: E402
from grader.wrap import display_width  # noqa: E402

SEED = 2026
ANSWERS = [LETTERS[order.index("a")] for order in quiz.orders(SEED, QUESTIONS)]  # the right letters, as shown
RIGHT = "".join(answer + "\n" for answer in ANSWERS)
WRONG = "".join(next(c for c in "abcd" if c != answer) + "\n" for answer in ANSWERS)


def run_quiz(answers, *args, env=None, seed=SEED):
    """grade.py --quiz --seed SEED with `answers` piped on stdin; (status, stdout, stderr) as text."""
    environ = {k: v for k, v in python_env().items() if not k.startswith("LC_") and k != "LANG"}
    environ.update(env or {})
    seeded = ["--seed", str(seed)] if seed is not None else []
    proc = subprocess.run([sys.executable, GRADE, "--quiz"] + seeded + list(args), cwd=ROOT, env=environ,
                          timeout=TIME_BOUND, input=answers.encode("utf-8"), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    return proc.returncode, text_of(proc.stdout), text_of(proc.stderr)


def expected_observations(report):
    """What each placeholder must quote, read by this test from the report's own evidence and checks."""
    evidence = report["evidence"]
    want = {}
    for scenario, prefix in (("crash-after-ack", "crash"), ("dropped-response", "drop")):
        phases = evidence[scenario]
        for name, phase in ((prefix, phases[1]), (prefix + "_final", phases[2])):
            want[name + "_exit"] = phase["phase_message"]["fields"].get("status")
            want[name + "_error"] = phase["phase_message"]["fields"].get("error")
            want[name + "_ack"] = "true" if phase["ack"] == [True] else "none" if phase["ack"] == [] else phase["ack"]
            want[name + "_outbox"] = phase["outbox"]
            want[name + "_inbox"] = {True: "present", False: "absent"}[phase["inbox"]]
            want[name + "_deliveries"] = phase["deliveries"]
            want[name + "_inventory"] = phase["inventory"]
    checks = {check["name"]: check["observed_message"]["fields"] for check in report["checks"]}
    want["drop_message"] = checks["dropped-response"]["error"]
    want["conflict_body"] = checks["conflict"]["body"]
    want["conflict_deliveries"] = checks["conflict"]["deliveries"]
    for name in ("first_calls", "flags", "resumed"):
        want["stop_" + name] = ", ".join(checks["stop-on-first-failure"][name])
    outage, refused = report["relay"]["outage"], report["relay"]["refused"]
    want.update(outage_failures=outage["failures"], outage_waits=", ".join("%.3f" % w for w in outage["waits"]),
                outage_bounds=", ".join("%g" % b for b in outage["bounds"]), outage_base=outage["base"],
                outage_cap=outage["cap"], refused_count=refused["refusals"], refused_kind=refused["kind"],
                refused_max=refused["max_attempts"])
    return want


class QuizTableTest(unittest.TestCase):
    def test_twelve_to_sixteen_questions_in_both_languages_under_the_same_ids(self):
        self.assertTrue(12 <= len(QUESTIONS) <= 16, len(QUESTIONS))
        self.assertEqual(len({q.id for q in QUESTIONS}), len(QUESTIONS))
        self.assertEqual(sorted(QUIZ_TEXT), sorted(messages.LANGS))
        self.assertEqual(set(QUIZ_TEXT["en"]), set(QUIZ_TEXT["ja"]))
        for lang in messages.LANGS:
            table = messages.MESSAGES[lang]
            for message_id, template in QUIZ_TEXT[lang].items():
                self.assertEqual(table[message_id], template)  # in the message tables, whose completeness test covers them
        for question in QUESTIONS:
            with self.subTest(question=question.id):
                counts = {len(text.options) for text in question.texts.values()}
                self.assertEqual(counts, {4})

    def test_the_right_option_is_neither_the_longest_nor_the_shortest_more_often_than_chance(self):
        # Picking the longest (or the shortest) option every time scores at most what guessing scores.
        for lang in messages.LANGS:
            longest = shortest = 0
            for question in QUESTIONS:
                widths = [display_width(choice) for choice, _ in question.texts[lang].options]
                longest += widths[0] == max(widths)  # a tie counts against the bank
                shortest += widths[0] == min(widths)
            chance = len(QUESTIONS) / 4
            with self.subTest(lang=lang):
                self.assertLessEqual(longest, chance, "the right option is the longest in %d questions" % longest)
                self.assertLessEqual(shortest, chance, "the right option is the shortest in %d questions" % shortest)

    def test_every_option_has_feedback_of_its_own(self):
        for lang in messages.LANGS:
            for question in QUESTIONS:
                whys = [why for _, why in question.texts[lang].options]
                with self.subTest(lang=lang, question=question.id):
                    self.assertEqual(len(set(whys)), len(whys))
                    self.assertTrue(all(len(why) > 20 for why in whys))

    def test_the_seed_decides_the_order_and_the_right_letter_moves(self):
        self.assertEqual(quiz.orders(SEED, QUESTIONS), quiz.orders(SEED, QUESTIONS))
        self.assertNotEqual(quiz.orders(SEED, QUESTIONS), quiz.orders(SEED + 1, QUESTIONS))
        for order in quiz.orders(SEED, QUESTIONS):
            self.assertEqual(sorted(order), list("abcd"))
        # Over many seeds, the right option stands under every letter about as often.
        counts = {letter: 0 for letter in "abcd"}
        for seed in range(200):
            for order in quiz.orders(seed, QUESTIONS):
                counts[LETTERS[order.index("a")]] += 1
        total = 200 * len(QUESTIONS)
        for letter, count in counts.items():
            self.assertGreater(count, total / 4 * 0.8, (letter, counts))

    def test_answers_are_read_as_people_type_them(self):
        self.assertEqual(quiz.normalised("\uff42\n"), "b")  # a full-width b, as a Japanese IME types it
        self.assertEqual(quiz.normalised("\u3000\uff23\u3000\n"), "c")  # ideographic spaces around a full-width C
        self.assertEqual(quiz.normalised("  D \r\n"), "d")

    def test_every_question_quotes_the_run(self):
        known = set(quiz.observations(*sample_run()))
        for question in QUESTIONS:
            with self.subTest(question=question.id):
                names = quiz.placeholders(question)
                self.assertLessEqual(names, known)
                for text in question.texts.values():
                    self.assertTrue(re_placeholder(text.observed), "the observed line of %s quotes nothing" % question.id)

    def test_a_quoted_list_is_joined_in_the_language_it_is_shown_in(self):
        english, japanese = (quiz.observations(*sample_run(), lang=lang) for lang in ("en", "ja"))
        for name in ("outage_waits", "outage_bounds"):
            with self.subTest(name=name):
                self.assertIn(", ", english[name])
                self.assertNotIn(", ", japanese[name])
                self.assertEqual(japanese[name].split("\u3001"), english[name].split(", "))

    def test_the_quoted_values_change_with_the_evidence(self):
        evidence, observed, relays = sample_run()
        before = rendered(quiz.observations(evidence, observed, relays))
        changed = copy.deepcopy(evidence)
        changed["crash-after-ack"][1]["phase"]["fields"]["status"] = 74
        changed["crash-after-ack"][1]["outbox"] = "sent"
        changed["crash-after-ack"][2]["inventory"] = 14
        changed["dropped-response"][1]["deliveries"] = []
        changed["dropped-response"][1]["inbox"] = False
        other = copy.deepcopy(observed)
        other["dropped-response"]["fields"]["error"] = "NoAnswer: POST http://127.0.0.1:1/events: another run"
        other["stop-on-first-failure"]["fields"]["resumed"] = ["B", "C", "D"]
        other_relays = copy.deepcopy(relays)
        other_relays["outage"]["waits"] = [0.5, 0.25, 0.125, 0.0625]
        other_relays["refused"]["refusals"] = 5
        after = rendered(quiz.observations(changed, other, other_relays))
        touched_names = {"crash_exit", "crash_outbox", "crash_final_inventory", "drop_deliveries", "drop_inbox",
                         "drop_message", "stop_resumed", "outage_waits", "refused_count"}
        for lang in messages.LANGS:
            for question in QUESTIONS:
                touched = quiz.placeholders(question) & touched_names
                with self.subTest(lang=lang, question=question.id):
                    self.assertEqual(before[lang][question.id] != after[lang][question.id], bool(touched))
            self.assertIn("74", after[lang]["ack-is-not-the-mark"])
            self.assertIn("14", after[lang]["two-deliveries-one-application"])
            self.assertIn("another run", after[lang]["resend-never-delete"])
            self.assertIn("B, C, D", after[lang]["stop-on-first-failure"])
            self.assertIn("0.500, 0.250, 0.125, 0.062", after[lang]["retry-wait-cap-and-jitter"])
            self.assertIn("5", after[lang]["quarantine-is-not-success"])
        self.assertIn("the source's outbox says sent", after["en"]["ack-is-not-the-mark"])
        self.assertIn("受付DBのoutboxは完了", after["ja"]["ack-is-not-the-mark"])

    def test_every_section_the_explanations_point_at_exists(self):
        docs = {}
        for name in READER_DOCS + ("docs/lab.md",):
            for path in (name, japanese(name)):
                docs[path] = set(re.findall(r"(?m)^#{1,6} (.+)$", read_doc(path)))
        pointers = 0
        for question in QUESTIONS:
            en, ja = question.texts["en"].options[0][1], question.texts["ja"].options[0][1]  # the right one's why
            for doc, section in re.findall(r'See (README|docs/\w+\.md), "([^"]+)"', en):
                pointers += 1
                self.assertIn(section, docs["README.md" if doc == "README" else doc], question.id)
            for doc, section in re.findall(r"(README\.ja\.md|docs/\w+\.ja\.md)の「([^」]+)」", ja):
                pointers += 1
                self.assertTrue(any(section in heading for heading in docs[doc]), (question.id, section))
        self.assertGreaterEqual(pointers, 2 * len(QUESTIONS) - 6)


def re_placeholder(template):
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def sample_run():
    """Evidence and observed messages shaped as the grader records them (values as a run of the kit gives them)."""
    def phase(message_id, **fields):
        return {"id": message_id, "fields": fields}

    def row(name, outbox, inbox, deliveries, ack, inventory):
        return {"phase": name, "order": True, "outbox": outbox, "inbox": inbox, "deliveries": deliveries, "ack": ack,
                "inventory": inventory}

    evidence = {
        "crash-after-ack": [row(phase("phase.intake"), "pending", False, [], None, 0),
                            row(phase("phase.publisher-exit", n=1, status=73), "pending", True, ["applied"], [True], 7),
                            row(phase("phase.publisher-exit", n=2, status=0), "sent", True, ["applied", "duplicate"], [True], 7)],
        "dropped-response": [row(phase("phase.intake"), "pending", False, [], None, 0),
                             row(phase("phase.publisher-error", n=1, error="NoAnswer"), "pending", True, ["applied"], [], 7),
                             row(phase("phase.publisher-exit", n=2, status=0), "sent", True, ["applied", "duplicate"], [True], 7)],
    }
    observed = {"crash-after-ack": phase("deliveries-inventory-outbox", deliveries=["applied", "duplicate"], inventory=7,
                                         outbox="sent"),
                "dropped-response": phase("dropped.observed", error="NoAnswer: POST http://127.0.0.1:9/events: no answer",
                                          deliveries=["applied", "duplicate"], inventory=7, outbox="sent"),
                "conflict": phase("conflict.observed", body='{"ack": false, "id": "snack-7", "error": "conflict"}',
                                  deliveries=["applied", "conflict", "conflict"]),
                "stop-on-first-failure": phase("stop.observed", first_calls=["A", "B"], flags=["A=1", "B=0", "C=0"],
                                               resumed=["B", "C"])}
    relays = {"outage": {"failures": 4, "kinds": {"no-answer": 4}, "waits": [0.01, 0.03, 0.05, 0.09],
                         "bounds": [0.02, 0.04, 0.08, 0.1], "base": 0.02, "cap": 0.1, "sent": 1, "alert": None,
                         "lines": []},
              "refused": {"refusals": 3, "kind": "conflict", "max_attempts": 3, "alert": "ALERT: ...",
                          "outbox": "pending", "lines": []}}
    return evidence, observed, relays


def rendered(fields):
    """{lang: {question id: its observed line, question, choices and explanation, rendered with `fields`}}."""
    out = {}
    for lang in messages.LANGS:
        out[lang] = {}
        for question in QUESTIONS:
            prefix = "quiz.%s." % question.id
            ids = [message_id for message_id in QUIZ_TEXT[lang] if message_id.startswith(prefix)]
            out[lang][question.id] = "\n".join(messages.text(lang, message_id, **fields) for message_id in sorted(ids))
    return out


class QuizRunTest(TempDirTestCase):
    def test_every_answer_right_with_json_quotes_this_runs_evidence(self):
        full_width = "".join("\u3000" + chr(ord(c) - ord("a") + 0xff41) + "\n" for c in RIGHT.split())  # as an IME types
        status, out, err = run_quiz(full_width, "--json", "--lang", "ja")
        self.assertEqual(status, 0, err)
        report = json.loads(out)  # stdout is the JSON alone: no question, prompt or table around it
        self.assertEqual((report["score"], report["count"], report["seed"]), (len(QUESTIONS), len(QUESTIONS), SEED))
        self.assertEqual([tuple(q["order"]) for q in report["questions"]], quiz.orders(SEED, QUESTIONS))
        self.assertEqual(sorted(c["name"] for c in report["checks"]), sorted(quiz.SCENARIOS))
        outage, refused = report["relay"]["outage"], report["relay"]["refused"]
        self.assertEqual((outage["failures"], outage["sent"], outage["alert"]), (4, 1, None))
        self.assertEqual(outage["kinds"], {"no-answer": 4})
        self.assertEqual((refused["refusals"], refused["kind"], refused["outbox"]), (3, "conflict", "pending"))
        self.assertTrue(refused["alert"].startswith("ALERT: head item 'snack-7'"), refused["alert"])
        self.assertTrue(report["impl"].endswith(os.path.join("examples", "worker_reference.py")))
        self.assertEqual([q["id"] for q in report["questions"]], [q.id for q in QUESTIONS])
        self.assertEqual(sorted(report["evidence"]), ["crash-after-ack", "dropped-response"])
        want = expected_observations(report)
        self.assertIn("127.0.0.1:", want["drop_message"])  # a port this run's sink happened to get
        for result, question in zip(report["questions"], QUESTIONS):
            with self.subTest(question=question.id):
                answer = ANSWERS[QUESTIONS.index(question)]
                self.assertEqual((result["given"], result["answer"], result["right"]), (answer, answer, True))
                self.assertEqual(result["feedback"], result["explanation"])
                self.assertEqual(result["explanation"], messages.text(
                    "en", "quiz.%s.why.a" % question.id, **result["observed_message"]["fields"]))
                fields = result["observed_message"]["fields"]
                self.assertEqual(result["observed_message"]["id"], "quiz.%s.observed" % question.id)
                self.assertTrue(fields)
                for name, value in fields.items():
                    self.assertEqual(value, want[name], name)
                # Language-neutral: the English text, rendered from those same fields.
                self.assertEqual(result["observed"], messages.render(result["observed_message"], "en"))
                for value in fields.values():
                    if isinstance(value, (int, str)) and not isinstance(value, bool):
                        self.assertIn(str(value), result["observed"] + result["explanation"])
                self.assertEqual(sorted(result["choices"]), list("abcd"))
        self.assertNotRegex(out, "[\u3040-\u30ff\u4e00-\u9fff]")  # --lang ja, yet the JSON is language-neutral
        self.assertEqual(err, "")

    def test_every_answer_wrong_as_text(self):
        status, out, err = run_quiz(WRONG, env={"COLUMNS": "400"})
        self.assertEqual(status, 1, err)
        self.assertEqual(err, "")
        self.assertIn("Evidence for snack-7, crash-after-ack", out)
        self.assertIn("Evidence for snack-7, dropped-response", out)
        verdicts = re.findall(r"(?m)^Wrong: the answer is ([a-d])\. ", out)
        self.assertEqual(verdicts, ANSWERS)
        self.assertEqual(re.findall(r"(?m)^Why ([a-d]): ", out), ANSWERS)
        self.assertNotIn("Right.", out)
        self.assertEqual(len(re.findall(r"(?m)^Question \d+ of %d$" % len(QUESTIONS), out)), len(QUESTIONS))
        self.assertEqual(re.findall(r"(?m)^answer \(a-[cd]\): ([a-d])$", out), WRONG.split())
        self.assertTrue(out.endswith("\nquiz score: 0 of %d\n" % len(QUESTIONS)), out[-200:])
        # The table and the questions of this run say the same thing about publisher #1.
        table = out.split("Evidence for snack-7, crash-after-ack", 1)[1].split("\n\n", 1)[0]
        status_in_table = re.search(r"after publisher #1 \(exit (\d+)\)", table).group(1)
        self.assertIn("publisher #1 exited %s right after it saw the ACK" % status_in_table, out)

    def test_an_answer_that_is_not_a_choice_is_a_clear_error_when_piped(self):
        status, out, err = run_quiz("b\nx\n")
        self.assertEqual(status, 2, out)
        self.assertEqual(err, "grade.py: --quiz: answer 2 is 'x', not one of a, b, c or d (one answer a line)\n")
        self.assertNotIn("quiz score", out)

    def test_stdin_ending_early_is_a_clear_error(self):
        status, out, err = run_quiz("b\nc\na\n", "--lang", "ja")
        self.assertEqual(status, 2, out)
        self.assertEqual(err, "grade.py: --quiz: 3問に答えたところで標準入力が終わりました（全%d問。"
                              "答えは1行に1つ: a、b、……）。\n" % len(QUESTIONS))

    def test_the_quiz_never_grades_another_worker(self):
        stub = os.path.join(ROOT, "examples", "worker_stub.py")
        for args, option in ((["--impl", stub], "--impl"), (["-k", "mark-sent"], "-k"), (["--list"], "--list")):
            with self.subTest(option=option):
                status, out, err = run_quiz("", *args)
                self.assertEqual((status, out), (2, ""))
                self.assertEqual(err, "grade.py: error: --quiz runs the kit's own reference scenarios and cannot be "
                                      "combined with %s\n" % option)

    def test_a_kit_whose_own_scenario_fails_has_nothing_to_quiz_about(self):
        # A copy of the whole kit, grader included, whose dispatch marks sent before sending.
        # (the first mutant of the kit's own dispatch: MUTANTS[0] is own-work's copied reference)
        mutant = [m for m in grade_mutants.MUTANTS if m.check == "crash-after-ack"][0]
        grade_mutants.make_mutant(self.tmp, mutant.mistake, mutant.edits, mutant.path)
        shutil.copytree(os.path.join(ROOT, "grader"), self.path("grader"), copy_function=shutil.copy,
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(GRADE, self.path("grade.py"))
        environ = {k: v for k, v in python_env().items() if not k.startswith("LC_") and k != "LANG"}
        environ.pop("PYTHONPATH")
        proc = subprocess.run([sys.executable, self.path("grade.py"), "--quiz"], cwd=self.tmp, env=environ,
                              timeout=TIME_BOUND, input=RIGHT.encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        err = text_of(proc.stderr)
        self.assertEqual(proc.returncode, 3, err)
        self.assertRegex(err, r"\Agrade\.py: --quiz: the kit's own crash-after-ack did not pass on this machine, so "
                              r"there is no evidence to ask about: expected [^\n]+; observed [^\n]+\n\Z")
        self.assertNotIn("Question 1", text_of(proc.stdout))

    @posix_only("a pseudo-terminal (pty)")
    def test_a_non_choice_is_asked_again_at_a_terminal(self):
        controller, terminal = pty.openpty()
        self.addCleanup(os.close, controller)
        environ = {k: v for k, v in python_env().items() if not k.startswith("LC_") and k != "LANG"}
        proc = subprocess.Popen([sys.executable, GRADE, "--quiz", "--seed", str(SEED)], cwd=ROOT, env=environ, stdin=terminal,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(terminal)
        try:
            os.write(controller, ("x\n" + RIGHT).encode())
            out, err = proc.communicate(timeout=TIME_BOUND)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        out = out.decode("utf-8")
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("\n'x' is not a choice; answer a, b, c or d\n", out)
        self.assertEqual(out.count("Right."), len(QUESTIONS))
        self.assertTrue(out.endswith("\nquiz score: %d of %d\n" % (len(QUESTIONS), len(QUESTIONS))), out[-200:])

    @posix_only("SIGTERM (Windows has none: send_signal there is TerminateProcess, which runs no handler)")
    def test_sigterm_while_the_reference_runs_stops_it_and_removes_its_folder(self):
        # The quiz's grader lives in a Deferred block, its reference run in a Completions one (grader/stopping.py).
        tmp = self.path("tmp")
        os.mkdir(tmp)
        proc = subprocess.Popen([sys.executable, GRADE, "--quiz"], cwd=ROOT, env=python_env(TMPDIR=tmp),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                universal_newlines=True)
        try:
            wait_until(lambda: os.listdir(tmp) or proc.poll() is not None, what="the quiz's folder")
            self.assertTrue(os.listdir(tmp), "the quiz made no folder")
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=TIME_BOUND)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        self.assertIn(messages.text("en", "cli.interrupted"), err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(os.listdir(tmp), [])

    def interrupt_at_the_prompt(self, *before):
        """Start the quiz at a real terminal (`before`: the interpreter's arguments ahead of grade.py), Ctrl-C at its
        first prompt: (exit status, stderr)."""
        controller, terminal = pty.openpty()
        self.addCleanup(os.close, controller)
        environ = {k: v for k, v in python_env().items() if not k.startswith("LC_") and k != "LANG"}
        proc = subprocess.Popen([sys.executable] + list(before) + [GRADE, "--quiz"], cwd=ROOT, env=environ,
                                stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(terminal)
        try:
            seen, deadline = b"", time.monotonic() + TIME_BOUND
            while b"answer (a-d): " not in seen and time.monotonic() < deadline:
                ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
                chunk = os.read(proc.stdout.fileno(), 65536) if ready else b""
                if ready and not chunk:
                    break
                seen += chunk
            self.assertIn(b"answer (a-d): ", seen)
            proc.send_signal(signal.SIGINT)  # what Ctrl-C at the terminal sends
            out, err = proc.communicate(timeout=TIME_BOUND)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        return proc.returncode, err.decode("utf-8")

    @posix_only("a pseudo-terminal (pty) and SIGINT sent to one process")
    def test_ctrl_c_at_the_prompt_ends_on_a_line_of_its_own(self):
        status, err = self.interrupt_at_the_prompt()
        self.assertEqual(status, 128 + signal.SIGINT)
        self.assertEqual(err, "\n" + messages.text("en", "cli.interrupted") + "\n")

    @posix_only("a pseudo-terminal (pty) and pthread_sigmask")
    def test_ctrl_c_that_the_kernel_hands_to_another_thread_still_ends_the_prompt(self):
        # The main thread blocks SIGINT, so the kernel delivers it to a spare thread: the same as one that lands
        # just before the prompt's read() starts. Python's handler then runs only once the main thread's wait
        # returns; a plain readline() would block until the next line (CI saw this race once, on 3.8).
        wrapper = self.path("blocked.py")
        with open(wrapper, "w") as f:
            f.write("import runpy, signal, sys, threading\n"
                    "threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
                    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"
                    "sys.argv = sys.argv[1:]\n"
                    "runpy.run_path(sys.argv[0], run_name='__main__')\n")
        status, err = self.interrupt_at_the_prompt(wrapper)
        self.assertEqual(status, 128 + signal.SIGINT, err)
        self.assertEqual(err, "\n" + messages.text("en", "cli.interrupted") + "\n")

    def test_without_a_seed_the_json_records_the_one_chosen(self):
        status, out, err = run_quiz(RIGHT, "--json", seed=None)
        report = json.loads(out)
        self.assertIsInstance(report["seed"], int)
        self.assertEqual([tuple(q["order"]) for q in report["questions"]], quiz.orders(report["seed"], QUESTIONS))
        right = [LETTERS[order.index("a")] for order in quiz.orders(report["seed"], QUESTIONS)]
        self.assertEqual([q["answer"] for q in report["questions"]], right)
        self.assertEqual(status, 0 if right == ANSWERS else 1, err)


if __name__ == "__main__":
    unittest.main()
