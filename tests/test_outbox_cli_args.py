"""Exit statuses as the README's tables give them, walked command by command through real processes.

Every command of both CLIs (read from their own parsers, so a new command
without cases fails here) gets bad arguments: exit 2, one line, no
traceback, no file created. Then refusals (exit 1) and input no command may
answer with a traceback: deep JSON, bytes that are not UTF-8.
"""
import os
import subprocess
import sys
import unittest

from outbox import init_store, intake
from tests.support import ROOT, TempDirTestCase, posix_only, python_env, tree_listing
from tests.test_docs import kit_commands


def run(package, *args):
    argv = [sys.executable, "-m", package] + [a if isinstance(a, bytes) else a.encode("utf-8") for a in args]
    return subprocess.run(argv, cwd=ROOT, env=python_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=60, errors="replace")


class LongNumberTest(unittest.TestCase):
    """Issue 29, item 10: an event the command line reads with a 5000-digit integer: our words, on every Python."""

    def test_a_long_integer_is_never_made_an_int_and_the_event_rule_names_the_field(self):
        from outbox import InvalidEvent, validate_event
        from outbox.cli.args import json_int
        from outbox.core.event import loads_strict
        self.assertEqual(loads_strict(b'{"qty": %s}' % (b"9" * 100), parse_int=json_int)["qty"], int("9" * 100))
        for digits in (b"9" * 101, b"-" + b"9" * 5000, b"1" + b"0" * 100000):
            value = loads_strict(b'{"id": "a", "sku": "b", "qty": %s}' % digits, parse_int=json_int)
            with self.assertRaises(InvalidEvent) as ctx:
                validate_event(value)
            self.assertEqual(str(ctx.exception), "qty must be an int from 1 to 1000000, got a number of %d digits "
                             "(LongNumber)" % len(digits.lstrip(b"-")))
        with self.assertRaises(InvalidEvent) as ctx:
            validate_event(loads_strict(b'{"id": %s, "sku": "b", "qty": 1}' % (b"7" * 5000), parse_int=json_int))
        self.assertIn("id must be a str", str(ctx.exception))


class BadArgumentsTest(TempDirTestCase):
    def cases(self, db, url):
        """{"package command": [argument lists that must exit 2]}."""
        long_reason = "x" * 501
        return {
            "outbox intake": [["--db", db], ["--db", db, "--id", "a", "--sku", "s", "--qty", "x"],
                              ["--db", db, "--id", "a", "--sku", "s", "--qty", "1", "--durability", "fast"]],
            "outbox pending": [["--db", db, "--limit", "0"], ["--db", db, "--limit", "17"],
                               ["--db", db, "--limit", "x"], ["--db", db, "--limit", "\u0663"], []],
            "outbox dispatch": [["--db", db, "--url", url, "--timeout", "0"],
                                ["--db", db, "--url", url, "--timeout", "-5"],
                                ["--db", db, "--url", url, "--timeout", "nan"],
                                ["--db", db, "--url", url, "--timeout", "99999"],
                                ["--db", db, "--url", url, "--limit", "0"],
                                ["--db", db, "--url", "http://example.com/events"],
                                ["--db", db, "--url", "ftp://127.0.0.1/events"], ["--db", db]],
            "outbox status": [["--db", db, "--json", "--prometheus"], ["--db", db, "--check", "--json"],
                              ["--db", db, "--check", "--max-age", "5"], ["--db", db, "--max-age", "5m"],
                              ["--db", db, "--max-quarantined", "1"],
                              ["--db", db, "--check", "--max-quarantined", "-1"]],
            "outbox evidence": [["--db", db], ["a", "--db", db, "--max-attempts", "0"],
                                ["a", "--db", db, "--json", "--prometheus"]],
            "outbox quarantined": [["--db", db, "--prometheus"], []],
            "outbox quarantine": [["a", "--db", db], ["a", "--db", db, "--reason", ""],
                                  ["a", "--db", db, "--reason", "two\nlines"],
                                  ["a", "--db", db, "--reason", long_reason]],
            "outbox requeue": [["--db", db], ["a", "b", "--db", db]],
            "outbox retry": [["--db", db], ["a", "b", "--db", db]],
            "outbox relay": [["--db", db, "--url", url, "--max-attempts", "0"],
                             ["--db", db, "--url", url, "--give-up-after", "10"],
                             ["--db", db, "--url", url, "--base-delay", "-1"],
                             ["--db", db, "--url", url, "--max-delay", "nan"],
                             ["--db", db, "--url", url, "--timeout", "0"],
                             ["--db", db, "--url", url, "--limit", "17"],
                             ["--db", db, "--url", "http://127.1/events"],
                             ["--db", db, "--url", url, "--durability", "x"], ["--db", db]],
            "outbox purge": [["--db", db, "--sent-before", "7w"], ["--db", db]],
            "outbox upgrade": [[], ["--db", db, "--force"]],
            "sink serve": [["--db", db, "--port", "70000"], ["--db", db, "--timeout", "0"]],
            "sink show": [[], ["--db", db, "--json"]],
            "sink status": [[], ["--db", db, "--json", "--prometheus"]],
        }

    def test_every_command_exits_2_on_bad_arguments_and_creates_nothing(self):
        db, url = self.path("new.db"), "http://127.0.0.1:9/events"
        cases = self.cases(db, url)
        commands = {" ".join(name.split()[2:]) for name in kit_commands()}
        self.assertEqual(sorted(commands - set(cases)), [], "commands without bad-argument cases")
        for command, argument_lists in sorted(cases.items()):
            package, name = command.split()
            for args in argument_lists:
                with self.subTest(command=command, args=args):
                    result = run(package, name, *args)
                    if command == "outbox status" and "--check" in args:
                        # A Nagios plugin's bad argument: UNKNOWN (3), one line on stdout (issue 29).
                        self.assertEqual(result.returncode, 3, result.stdout + result.stderr)
                        self.assertEqual((len(result.stdout.splitlines()), result.stderr), (1, ""))
                        self.assertTrue(result.stdout.startswith("OUTBOX UNKNOWN - "), result.stdout)
                        continue
                    self.assertEqual(result.returncode, 2, result.stderr)
                    self.assertEqual(result.stdout, "")
                    self.assertNotIn("Traceback", result.stderr)
                    self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                    self.assertTrue(result.stderr.startswith("%s: error: " % package), result.stderr)
        self.assertEqual(tree_listing(self.tmp), [])


class RefusalsTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        self.db = self.path("source.db")
        con = init_store(self.db)
        intake(con, {"id": "a-1", "sku": "s", "qty": 1})
        con.close()

    def assert_refused(self, package, *args, words=""):
        result = run(package, *args)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertIn(words, result.stderr)
        return result

    def test_deeply_nested_json_is_one_line(self):
        # 30,000 levels (one argument may hold 128 KiB); Python's own limit is near 1,000.
        for deep in ("[" * 30000, '{"a":' * 20000, "[" * 30000 + "]" * 30000):
            self.assert_refused("outbox", "requeue", "a-1", "--db", self.db, "--event", deep, words="--event must be")

    def test_refusals_exit_1(self):
        missing = self.path("missing.db")
        for package, args, words in (
            ("outbox", ["intake", "--db", self.db, "--id", "a-1", "--sku", "s", "--qty", "2"], "taken in before"),
            ("outbox", ["intake", "--db", self.db, "--id", "bad id", "--sku", "s", "--qty", "1"], "id must be"),
            ("outbox", ["pending", "--db", missing], "no source DB"),
            ("outbox", ["dispatch", "--db", self.db, "--url", "http://127.0.0.1:9/events", "--timeout", "2"],
             "not marking it sent"),
            ("outbox", ["status", "--db", self.tmp], "no source DB"),
            ("outbox", ["quarantined", "--db", missing], "no source DB"),
            ("outbox", ["retry", "ghost", "--db", self.db], "no outbox row"),
            ("outbox", ["relay", "--db", missing, "--url", "http://127.0.0.1:9/events"], "no source DB"),
            ("outbox", ["relay", "--db", self.db, "--url", "http://127.0.0.1:9/events", "--metrics-file",
                        self.path("no", "dir", "m.prom")], "--metrics-file"),
            ("sink", ["status", "--db", self.db], "not a sink DB"),
            ("sink", ["show", "--db", missing], "no sink DB"),
        ):
            with self.subTest(args=args[:1]):
                self.assert_refused(package, *args, words=words)
        self.assertFalse(os.path.exists(missing))

    @posix_only("arguments that are bytes, not UTF-8 (Windows' command line is Unicode text: such bytes cannot reach "
                "a process there)")
    def test_bytes_that_are_not_utf_8_are_no_traceback(self):
        for args in ([b"intake", b"--db", self.db.encode(), b"--id", b"\xff\xfe", b"--sku", b"s", b"--qty", b"1"],
                     [b"quarantine", b"a-1", b"--db", self.db.encode(), b"--reason", b"\xff"],
                     [b"evidence", b"\xff", b"--db", self.db.encode()],
                     [b"requeue", b"a-1", b"--db", self.db.encode(), b"--event", b"\xff"],
                     [b"status", b"--db", self.path("\udcff.db").encode("utf-8", "surrogateescape")]):
            with self.subTest(args=args[:1]):
                result = run("outbox", *args)
                self.assertIn(result.returncode, (1, 2), result.stderr)
                self.assertNotIn("Traceback", result.stderr)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)


if __name__ == "__main__":
    unittest.main()
