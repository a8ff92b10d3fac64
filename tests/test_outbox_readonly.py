"""outbox.core.readonly: reading a kit DB without writing or creating any file.

ReadOnlyDirectoryTest: read-only monitoring in a directory the operator
cannot write, through real processes. status, evidence, pending and
quarantined, and the sink's status and show, on DBs in a directory chmod'ed
0555 with files 0444: closed cleanly (no -wal), held open by a writer (-wal
and -shm beside them), and a -wal with commits but no -shm (one clear
line). None may create a file anywhere. Root ignores file modes, so as root
the commands run without the capabilities that let root do so (setpriv
drops CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER): the
interpreter under test, bound by the modes like any user.
"""
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import unittest

from outbox import init_store, intake, intake_many, mark_sent, pending
from outbox.ops import operations
from outbox.core import readonly, store
from sink.core import inbox
from tests.support import TempDirTestCase, ev, file_bytes, posix_only, python_env, tree_listing


CAPABILITIES_THAT_IGNORE_MODES = "-dac_override,-dac_read_search,-fowner"


def reader_prefix():
    """(command prefix, None) that runs a process bound by file modes, or (None, the reason there is none)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return [], None
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None, "running as root, which ignores file modes, and no setpriv here to drop that"
    return [setpriv, "--bounding-set=" + CAPABILITIES_THAT_IGNORE_MODES, "--inh-caps=-all"], None


class ReadOnlyMonitoringTestCase(TempDirTestCase):
    """A source DB and a sink DB in a directory of their own, and the read-only commands to run on them."""

    def setUp(self):
        super().setUp()
        prefix, reason = reader_prefix()
        if prefix is None:
            self.skipTest(reason)
        self.prefix = prefix
        self.data = self.path("data")
        os.mkdir(self.data)
        self.source, self.sink = os.path.join(self.data, "source.db"), os.path.join(self.data, "sink.db")
        con = init_store(self.source)
        intake_many(con, [{"id": name, "sku": "snack", "qty": 1} for name in ("a-1", "b-2", "c-3", "d-4")])
        mark_sent(con, "a-1")
        operations.quarantine(con, "c-3", "held for the test")
        con.close()
        con = inbox.init_sink(self.sink)
        inbox.receive(con, {"id": "a-1", "sku": "snack", "qty": 1})
        con.close()
        self.addCleanup(self.writable)

    def read_only(self):
        for name in os.listdir(self.data):
            os.chmod(os.path.join(self.data, name), 0o444)
        os.chmod(self.data, 0o555)

    def writable(self):
        os.chmod(self.data, 0o755)
        for name in os.listdir(self.data):
            os.chmod(os.path.join(self.data, name), 0o644)

    def run_as_reader(self, *args):
        return subprocess.run(self.prefix + [sys.executable] + list(args), cwd=self.data, env=python_env(),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=60)

    def snapshot(self):
        return tree_listing(self.data), {name: file_bytes(os.path.join(self.data, name))
                                         for name in os.listdir(self.data)}

    def every_read(self):
        """(args, expected words on stdout) for every read-only command, sink ones included."""
        return (
            (["-m", "outbox", "status", "--db", self.source], "pending 2, sent 1, quarantined 1"),
            (["-m", "outbox", "status", "--db", self.source, "--json"], '"pending": 2'),
            (["-m", "outbox", "status", "--db", self.source, "--prometheus"], "outbox_pending 2"),
            (["-m", "outbox", "status", "--db", self.source, "--check"], "OUTBOX WARNING - 1 quarantined"),
            (["-m", "outbox", "pending", "--db", self.source], '{"id": "b-2", "sku": "snack", "qty": 1}'),
            (["-m", "outbox", "quarantined", "--db", self.source, "--json"], '"reason": "held for the test"'),
            (["-m", "outbox", "evidence", "a-1", "--db", self.source, "--sink", self.sink],
             "delivered and applied once"),
            (["-m", "sink", "status", "--db", self.sink], "applied 1, duplicates 0, conflicts 0"),
            (["-m", "sink", "show", "--db", self.sink], "deliveries (1)"),
        )

    def assert_every_read_works_and_creates_nothing(self):
        before = self.snapshot()
        for args, words in self.every_read():
            with self.subTest(args=args[1:3]):
                result = self.run_as_reader(*args)
                expected = 1 if "--check" in args else 0  # --check: WARNING, one item is quarantined
                self.assertEqual(result.returncode, expected, result.stderr)
                self.assertIn(words, result.stdout)
                self.assertEqual(result.stderr, "")
        self.assertEqual(self.snapshot(), before)


@posix_only("a directory the reader cannot write (Windows' chmod sets only a file's read-only flag: a folder "
            "stays writable)")
class ReadOnlyDirectoryTest(ReadOnlyMonitoringTestCase):
    def test_the_reader_really_cannot_write_here(self):
        """The premise: were the modes ignored, every test below would prove nothing."""
        self.read_only()
        result = self.run_as_reader("-c", "open('x', 'w')")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("Permission denied", result.stderr)

    def test_closed_cleanly(self):
        self.assertEqual(sorted(os.listdir(self.data)), ["sink.db", "source.db"])
        self.read_only()
        self.assert_every_read_works_and_creates_nothing()

    def test_held_open_by_writers_with_commits_only_in_the_wal(self):
        with contextlib.ExitStack() as stack:
            writers = []
            for path in (self.source, self.sink):
                con = sqlite3.connect(path, isolation_level=None)
                stack.callback(con.close)
                con.execute("PRAGMA wal_autocheckpoint = 0")  # the new commits stay in the -wal
                writers.append(con)
            writers[0].execute("UPDATE outbox SET sent = 1, sent_at = 1.0 WHERE event_id = 'b-2'")
            writers[1].execute("INSERT INTO deliveries (event_id, outcome, digest, received_at) "
                               "VALUES ('a-1', 'duplicate', 'x', 1.0)")
            self.assertTrue(os.path.getsize(self.source + "-wal") > 0)
            self.read_only()
            result = self.run_as_reader("-m", "outbox", "status", "--db", self.source, "--json")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(json.loads(result.stdout)["sent"], 2)  # read through the writer's -wal
            result = self.run_as_reader("-m", "sink", "status", "--db", self.sink)
            self.assertIn("applied 1, duplicates 1", result.stdout)
            before = self.snapshot()
            for args, _ in self.every_read():
                with self.subTest(args=args[1:3]):
                    result = self.run_as_reader(*args)
                    self.assertIn(result.returncode, (0, 1), result.stderr)  # --check: WARNING
                    self.assertEqual(result.stderr, "")
            self.assertEqual(self.snapshot(), before)

    def commit_into_a_wal_and_remove_its_index(self, path, sql):
        """A writer killed with its commit (`sql`) in the -wal, and its -shm then removed by hand; then read-only."""
        program = ("import os, sqlite3, sys; con = sqlite3.connect(sys.argv[1], isolation_level=None); "
                   "con.execute('PRAGMA wal_autocheckpoint = 0'); con.execute(sys.argv[2]); os._exit(0)")
        subprocess.run([sys.executable, "-c", program, path, sql], check=True, timeout=60)
        os.remove(path + "-shm")
        self.read_only()

    def test_a_wal_with_commits_and_no_index_is_one_clear_line(self):
        self.commit_into_a_wal_and_remove_its_index(
            self.source, "UPDATE outbox SET sent = 1, sent_at = 1.0 WHERE event_id = 'b-2'")
        before = self.snapshot()
        for args, status in ((["status", "--db", self.source], 1), (["pending", "--db", self.source], 1),
                             (["status", "--db", self.source, "--check"], 3)):
            result = self.run_as_reader("-m", "outbox", *args)
            self.assertEqual(result.returncode, status, result.stderr)
            text = result.stderr if status == 1 else result.stdout
            self.assertEqual(len(text.strip().splitlines()), 1, text)
            for words in ("without creating a file", "source.db-shm", "is missing",
                          "do not remove the -wal", "python3 -m outbox upgrade --db %s" % self.source):
                self.assertIn(words, text)
        self.assertEqual(self.snapshot(), before)

    def test_a_sink_wal_without_its_index_names_a_one_shot_writer_that_works(self):
        # Issue 29, item 10: it named `python -m sink serve`, a server, not a command that writes once.
        self.commit_into_a_wal_and_remove_its_index(self.sink, "UPDATE inventory SET qty = 5 WHERE sku = 'snack'")
        before = self.snapshot()
        result = self.run_as_reader("-m", "sink", "status", "--db", self.sink)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        for words in ("sink.db-shm", "is missing", "do not remove the -wal", "With no process using the DB"):
            self.assertIn(words, result.stderr)
        self.assertNotIn("serve", result.stderr)
        self.assertEqual(self.snapshot(), before)
        # The command it names, run as it says (by a user who may write there), makes the DB readable.
        command = result.stderr.split("opening it to write once: ", 1)[1].rsplit("; then read it again", 1)[0]
        self.writable()
        subprocess.run(command, shell=True, cwd=self.data, env=python_env(), check=True, timeout=60)
        self.read_only()
        result = self.run_as_reader("-m", "sink", "status", "--db", self.sink)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("snack  5", result.stdout)  # the commit that was in the -wal

    def test_a_command_that_writes_says_what_it_needs_and_changes_nothing(self):
        self.read_only()
        before = self.snapshot()
        for args in (["quarantine", "b-2", "--db", self.source, "--reason", "x"], ["retry", "b-2", "--db", self.source],
                     ["relay", "--db", self.source, "--url", "http://127.0.0.1:9/events", "--once"]):
            with self.subTest(command=args[0]):
                result = self.run_as_reader("-m", "outbox", *args)
                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                self.assertIn("needs write access to the file and to its directory %s" % self.data, result.stderr)
                self.assertNotIn("is not a source DB", result.stderr)
        self.assertEqual(self.snapshot(), before)


class WritableDirectoryTest(ReadOnlyMonitoringTestCase):
    def test_in_a_writable_directory_no_file_is_created_either(self):
        self.assert_every_read_works_and_creates_nothing()


class ReadOnlyConnectionCannotWriteTest(TempDirTestCase):
    """Mutant: open_readonly without `mode=ro`, relying on `query_only` alone."""

    def test_query_only_off_does_not_make_it_writable(self):
        path = self.path("source.db")
        con = init_store(path)
        intake(con, ev("a"))
        con.close()
        before = file_bytes(path)
        reader = readonly.open_readonly(path, application_id=store.APPLICATION_ID,
                                        version=store.SCHEMA_VERSION, kind="source")
        try:
            reader.execute("PRAGMA query_only = OFF")
            self.assertEqual(reader.execute("PRAGMA query_only").fetchone()[0], 0)
            with self.assertRaises(sqlite3.OperationalError) as ctx:
                reader.execute("UPDATE outbox SET sent = 1")
            self.assertIn("readonly", str(ctx.exception).replace("-", "").replace(" ", ""))
        finally:
            reader.close()
        self.assertEqual(file_bytes(path), before)
        check = init_store(path)
        try:
            self.assertEqual([event["id"] for event in pending(check)], ["a"])
        finally:
            check.close()


class PeekKeepsLocksTest(TempDirTestCase):
    """A read-only look at a DB this process holds open keeps that connection's lock on the file.

    POSIX drops every lock a process holds on a file when it closes any descriptor of that file: a header
    read through open() and close() let another process's closing connection take itself for the last one,
    checkpoint and delete the -wal under the open connection ("database disk image is malformed").
    """

    def test_another_process_still_sees_the_connection_after_a_second_init_store(self):
        path = self.path("source.db")
        con = init_store(path)
        try:
            intake(con, ev("a"))
            init_store(path).close()  # its upgrade check peeks at the file read-only first
            code = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=0); "
                    "c.execute('BEGIN IMMEDIATE'); c.execute('ROLLBACK'); c.close()")
            subprocess.run([sys.executable, "-c", code, path], check=True, timeout=60, env=python_env())
            # Had the other process taken itself for the last connection, it would have deleted the -wal.
            self.assertTrue(os.path.exists(path + "-wal"))
            self.assertIs(mark_sent(con, "a"), True)
            self.assertEqual(pending(con), [])
        finally:
            con.close()


if __name__ == "__main__":
    unittest.main()
