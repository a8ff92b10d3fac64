"""The README says what the code does: checks, commands, flags and examples all exist and run.

The commands and flags are enumerated from the CLIs' own argparse parsers
(and from `grade.py --help`, since nothing imports the grader), so a new
command or flag without help text or a README line fails here.
"""
import argparse
import glob
import importlib
import os
import re
import shlex
import subprocess
import sys
import unittest

from tests.support import READER_DOCS, ROOT, TempDirTestCase, japanese, python_env, read_doc, read_docs

README = read_docs()  # the front door and every reader's page: what the docs say, wherever it stands
FRONT_DOOR = read_doc("README.md")
GLOSSARY = os.path.join(ROOT, "docs", "glossary.ja.md")
# Every Japanese text a reader meets, besides the glossary itself: held to the glossary's terms.
JAPANESE_TEXTS = ("README.ja.md", "docs/*.ja.md", "grader/messages_ja.py", "grader/quiz_questions.py",
                  "examples/worker_stub_ja.py")
CLI_PACKAGES = ("outbox", "sink")
PARSER_BUILDERS = ("build_parser", "_build_parser")
EXTERNAL_TOOLS = ("curl", "cd")  # commands in the README's sh blocks that are not the kit's


def run(*args, env=None, cwd=ROOT):
    return subprocess.run([sys.executable] + list(args), cwd=cwd, env=env or python_env(), timeout=60,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)


def kit_commands():
    """{"python3 -m outbox intake": (subparser, [long flags]), ...} from every outbox/cli/*.py and sink/cli*.py."""
    commands = {}
    for package in CLI_PACKAGES:
        paths = glob.glob(os.path.join(ROOT, package, "cli*.py")) + glob.glob(os.path.join(ROOT, package, "cli", "*.py"))
        for path in sorted(paths):
            module = importlib.import_module(os.path.relpath(path, ROOT)[:-3].replace(os.sep, "."))
            builders = [getattr(module, name) for name in PARSER_BUILDERS if hasattr(module, name)]
            for build in builders:
                parser = build()
                for action in parser._actions:
                    if isinstance(action, argparse._SubParsersAction):
                        for name, sub in action.choices.items():
                            commands["python3 -m %s %s" % (package, name)] = sub
    return commands


def options_of(parser):
    """The options of `parser` (argparse actions with option strings), without -h/--help."""
    return [action for action in parser._actions
            if action.option_strings and not isinstance(action, argparse._HelpAction)]


def longest(action):
    return max(action.option_strings, key=len)


def grade_options():
    """The grader's options, read from the usage of `grade.py --help`."""
    result = run("grade.py", "--help")
    assert result.returncode == 0, result.stderr
    usage = result.stdout.split("\n\n")[0]
    return sorted(set(re.findall(r"\[(-{1,2}[a-z][a-z0-9-]*)", usage)) - {"-h", "--help"})


def readme_rows():
    """The README's table rows, as lines."""
    return [line for line in README.splitlines() if line.startswith("|")]


def shell_lines(text):
    """Commands from the ```sh blocks: comments dropped, continuation lines joined."""
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def headings(text):
    """Heading levels in order, outside code blocks: the section structure."""
    levels, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            levels.append(len(line.split(" ")[0]))
    return levels


def glossary():
    """[(concept, [the lab's terms], [variants not to use])] from docs/glossary.ja.md's table."""
    with open(GLOSSARY, encoding="utf-8") as f:
        rows = [line for line in f.read().splitlines() if line.startswith("| ") and "`" in line]
    entries = []
    for row in rows:
        concept, terms, variants = [cell.strip() for cell in row.strip("|").split(" | ")]
        entries.append((concept, re.findall(r"`([^`]+)`", terms), re.findall(r"`([^`]+)`", variants)))
    return entries


def japanese_texts():
    """{repository-relative path, / between folders: text} of every file JAPANESE_TEXTS names, the glossary left out."""
    texts = {}
    for pattern in JAPANESE_TEXTS:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            if os.path.abspath(path) != GLOSSARY:
                with open(path, encoding="utf-8") as f:
                    texts[os.path.relpath(path, ROOT).replace(os.sep, "/")] = f.read()
    return texts


def variants_used(text, terms, variants):
    """(variant, line number) for each place `text` uses a variant, except inside one of the lab's `terms`."""
    covered = set()
    for term in terms:
        for found in re.finditer(re.escape(term), text):
            covered.update(range(found.start(), found.end()))
    return [(variant, text.count("\n", 0, found.start()) + 1)
            for variant in variants for found in re.finditer(re.escape(variant), text)
            if not set(range(found.start(), found.end())) <= covered]


class GlossaryTest(unittest.TestCase):
    def test_the_japanese_texts_use_the_labs_terms(self):
        entries = glossary()
        self.assertGreaterEqual(len(entries), 10)
        texts = japanese_texts()
        self.assertIn("grader/messages_ja.py", texts)
        self.assertIn("docs/lab.ja.md", texts)
        found = ["%s:%d: %s (use %s)" % (path, line, variant, " / ".join(terms))
                 for concept, terms, variants in entries for path, text in texts.items()
                 for variant, line in variants_used(text, terms, variants)]
        self.assertEqual(found, [])

    def test_every_term_of_the_glossary_is_in_use(self):
        everything = "\n".join(japanese_texts().values())
        for concept, terms, variants in glossary():
            with self.subTest(concept=concept):
                self.assertTrue(terms and variants)
                self.assertTrue(any(term in everything for term in terms), terms)

    def test_a_variant_is_found_and_a_term_that_contains_it_is_not(self):
        self.assertEqual(variants_used("未完了の項目を行列から外します", ["キュー", "待ち行列"], ["行列"]), [("行列", 1)])
        self.assertEqual(variants_used("待ち行列から外します", ["キュー", "待ち行列"], ["行列"]), [])
        self.assertEqual(variants_used("一\n「このリクエストは成功しましたか」", ["このリクエストは成功しましたか"],
                                       ["リクエストは成功しましたか"]), [])
        self.assertEqual(variants_used("「リクエストは成功しましたか」", ["このリクエストは成功しましたか"],
                                       ["リクエストは成功しましたか"]), [("リクエストは成功しましたか", 1)])


class LabTest(unittest.TestCase):
    def test_the_japanese_lab_has_the_same_sections(self):
        with open(os.path.join(ROOT, "docs", "lab.md"), encoding="utf-8") as f:
            english = f.read()
        with open(os.path.join(ROOT, "docs", "lab.ja.md"), encoding="utf-8") as f:
            japanese = f.read()
        self.assertEqual(headings(japanese), headings(english))
        self.assertEqual(re.findall(r"^```(\w*)", japanese, re.M), re.findall(r"^```(\w*)", english, re.M))
        for text in (english, japanese):
            self.assertIn("python3 grade.py --quiz", text)
            self.assertIn("https://docs.python.org/", text)
            self.assertIn("https://www.sqlite.org/atomiccommit.html", text)


class ReadmeTest(TempDirTestCase):
    def test_first_command_is_the_grader_and_the_test_command_is_make_test(self):
        commands = re.findall(r"```sh\n(.*?)```", FRONT_DOOR, re.S)
        self.assertTrue(commands[0].strip().startswith("python3 grade.py"), commands[0])
        self.assertIn("make test", commands[0])
        with open(os.path.join(ROOT, ".ci", "run")) as f:
            ci = f.read()
        self.assertLess(ci.index("make test"), ci.index("grade.py"))

    def test_every_check_is_documented(self):
        names = [line.split()[0] for line in run("grade.py", "--list").stdout.splitlines()]
        self.assertGreaterEqual(len(names), 12)
        for name in names:
            self.assertIn("| `%s` |" % name, README)

    def test_every_cli_command_and_flag_has_help_text(self):
        commands = kit_commands()
        self.assertGreaterEqual(len(commands), 6, sorted(commands))
        for command, parser in commands.items():
            self.assertTrue(parser.description or parser.format_usage(), command)
            for action in options_of(parser):
                self.assertTrue(action.help and action.help != argparse.SUPPRESS,
                                "%s %s has no --help text" % (command, longest(action)))
            package, name = command.split()[2:]
            result = run("-m", package, name, "--help")
            self.assertEqual(result.returncode, 0, result.stderr)
            for action in options_of(parser):
                self.assertIn(longest(action), result.stdout, command)

    def test_every_cli_command_and_flag_has_a_line_in_the_readme(self):
        """Each command has one table row naming it and every one of its flags."""
        rows = readme_rows()
        wanted = {command: [longest(action) for action in options_of(parser)]
                  for command, parser in kit_commands().items()}
        wanted["python3 grade.py"] = grade_options()
        self.assertIn("--impl", wanted["python3 grade.py"])
        for command, flags in wanted.items():
            row = [line for line in rows if "`%s`" % command in line]
            self.assertEqual(len(row), 1, "README needs one table row for `%s`" % command)
            missing = [flag for flag in flags if "`%s" % flag not in row[0]]
            self.assertEqual(missing, [], "README's row for `%s` does not name %s" % (command, missing))

    def test_shell_examples_use_commands_that_exist(self):
        commands = kit_commands()
        grade_flags = grade_options()
        with open(os.path.join(ROOT, "Makefile")) as f:
            targets = re.findall(r"^([a-z][a-z-]*):", f.read(), re.M)
        lines = shell_lines(README)
        self.assertGreater(len(lines), 5)
        for line in lines:
            words = shlex.split(line)
            flags = [word.split("=")[0] for word in words if word.startswith("-")]
            self.assertNotEqual(words[0], "python", "the docs say python3 (Debian has no `python`): " + line)
            if words[:2] == ["python3", "-m"]:
                command = " ".join(words[:4])
                self.assertIn(command, sorted(commands), line)
                known = [option for action in options_of(commands[command]) for option in action.option_strings]
                self.assertEqual([flag for flag in flags[1:] if flag not in known], [], line)
            elif words[:2] == ["python3", "grade.py"]:
                self.assertEqual([flag for flag in flags if flag not in grade_flags], [], line)
            elif words[0] == "python3":
                self.assertTrue(os.path.isfile(os.path.join(ROOT, words[1])), line)
            elif words[0] == "make":
                self.assertIn(words[1], targets, line)
            else:
                self.assertIn(words[0], EXTERNAL_TOOLS, line)

    def test_the_python_examples_run_as_written(self):
        examples = re.findall(r"```python\n(.*?)```", README, re.S)
        self.assertGreaterEqual(len(examples), 1)
        for example in examples:
            expected = re.findall(r"print\(.*\)\s*#\s*(\S+)", example)
            for attempt in range(2):  # the same answer on a second run: no state left behind
                cwd = self.path("cwd-%d" % attempt)
                os.mkdir(cwd)
                result = run("-W", "error::ResourceWarning", "-c", example, cwd=cwd)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.stderr, "")
                self.assertEqual([line.strip() for line in result.stdout.splitlines()],
                                 [value.rstrip(":") for value in expected])
                self.assertEqual(os.listdir(cwd), [], "the example wrote into its current directory")

    def test_each_reader_doc_has_a_japanese_counterpart_with_the_same_sections(self):
        for path in READER_DOCS:
            with self.subTest(path=path):
                english, ja = read_doc(path), read_doc(japanese(path))
                self.assertEqual(headings(ja), headings(english))
                self.assertEqual(re.findall(r"^```(\w*)", ja, re.M), re.findall(r"^```(\w*)", english, re.M))
                self.assertEqual(len([line for line in english.splitlines() if line.startswith("|")]),
                                 len([line for line in ja.splitlines() if line.startswith("|")]))

    def test_the_front_door_stays_a_front_door(self):
        for path in ("README.md", "README.ja.md"):
            self.assertLessEqual(len(read_doc(path).splitlines()), 200, path)
        for path in READER_DOCS[1:]:
            self.assertIn("(%s)" % path, FRONT_DOOR, "README.md's table of readers does not send anyone to " + path)


if __name__ == "__main__":
    unittest.main()
