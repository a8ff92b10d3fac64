"""The judge against workers whose values, names, exceptions and files are odd: none of them voids the class.

Each is graded in a class beside the reference and the stub: bytes in the
sink DB, exceptions whose str() is an escape sequence, raises or recurses,
names with escape, zero-width and formula characters or 255 bytes long, a
1,500-level folder tree. Every report file is written, every worker ends
with its own verdict, the other verdicts are their single-run ones, no
worker string reaches a terminal, CSV or HTML unescaped, and the grader's
temporary folders are gone afterwards.
"""
import csv
import json
import os
import shutil
import sqlite3
import textwrap

from tests.support import ROOT, SLOWER, WINDOWS, TempDirTestCase, python_env
from tests.grade_mutants import grade
from tests.test_judge_hostile import class_reports

REFERENCE = os.path.join(ROOT, "examples", "worker_reference.py")
STUB = os.path.join(ROOT, "examples", "worker_stub.py")
# The kit itself (the class runs with --allow-kit-imports), but every delivery's outcome stored as bytes.
BYTES = textwrap.dedent('''
    import sys
    sys.path.insert(0, %r)
    from outbox import validate_event, init_store, intake, pending, mark_sent, dispatch, send_http
    from sink import init_sink, receive as _receive
    def receive(con, event):
        result = _receive(con, event)
        con.execute("PRAGMA ignore_check_constraints = ON")
        con.execute("UPDATE deliveries SET outcome = CAST(outcome AS BLOB)")
        return result
''' % ROOT)
# The kit, but every outbox payload padded to 2 MiB: more than the grader reads of one value (VALUE_BYTES).
HUGE = textwrap.dedent('''
    import sys
    sys.path.insert(0, %r)
    from outbox import validate_event, init_store, intake as _intake, pending, mark_sent, dispatch, send_http
    from sink import init_sink, receive
    def intake(con, event):
        result = _intake(con, event)
        con.execute("UPDATE outbox SET payload = payload || substr(hex(zeroblob(1048576)), 1, 2097152)")
        con.commit()
        return result
''' % ROOT)
# The kit, but each receive also logs 20,000 more deliveries of its event: more rows than the grader reads (MAX_ROWS).
MANY = textwrap.dedent('''
    import sys
    sys.path.insert(0, %r)
    from outbox import validate_event, init_store, intake, pending, mark_sent, dispatch, send_http
    from sink import init_sink, receive as _receive
    def receive(con, event):
        result = _receive(con, event)
        con.execute("INSERT INTO deliveries (event_id, outcome, digest, received_at) "
                    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) "
                    "SELECT ?, 'duplicate', '', 0 FROM n", (event["id"],))
        con.commit()
        return result
''' % ROOT)
# Exceptions a report cannot take as they are: an escape sequence that repaints the screen, 100,000
# characters, an attribute the grader once read, a __str__ that raises and a __repr__ that recurses.
ODD = textwrap.dedent('''
    class Repaint(ValueError):
        grader_function = "mark_sent"
        function = "receive"
        def __str__(self):
            return "\\x1b[2J\\x1b[8m\\u202eall PASS\\u200b\\x00\\x07" + "x" * 100000
    class Broken(ValueError):
        def __str__(self):
            raise RuntimeError("no str for you")
        def __repr__(self):
            return repr(self)
    calls = []
    def validate_event(event):
        calls.append(event)
        raise (Repaint if len(calls) % 2 else Broken)()
    def _none(*args, **kwargs):
        raise Broken()
    init_store = intake = pending = mark_sent = dispatch = send_http = init_sink = receive = _none
''')
# Leaves a 1,500-level folder tree, one it cannot list, in its working folder (the grader's temporary one).
DEEP = textwrap.dedent('''
    import os
    def validate_event(event):
        path = "."
        for _ in range(1500):
            path = os.path.join(path, "d")
            os.mkdir(path)
        os.chmod("d", 0o300)
        raise NotImplementedError("a deep tree left behind")
    def _none(*args, **kwargs):
        raise NotImplementedError("nothing here")
    init_store = intake = pending = mark_sent = dispatch = send_http = init_sink = receive = _none
''')
LONG = "x" * 252  # with ".py", the 255 bytes a file name may have
# Windows refuses the control characters 0-31 (ESC among them) in a file name: there the name clears the screen
# with the one-character CSI (U+009B, a C1 control), as a terminal that reads C1 controls takes it.
CLEAR_SCREEN = "e\x9b2Jvil" if WINDOWS else "e\x1b[2Jvil"
NAMES = {"bob": STUB, "bob\u200b": STUB, CLEAR_SCREEN: STUB, "=cmd": STUB, LONG: STUB}
UNSEEN = ("\x1b", "\x9b", "\u200b", "\u202e", "\x00", "\x07")


class OddValuesClassTest(TempDirTestCase):
    def test_odd_values_names_exceptions_and_trees_void_nothing(self):
        folder, reports, tmp = self.path("class"), self.path("reports"), self.path("tmp")
        for path in (folder, tmp):
            os.makedirs(path)
        for name, source in NAMES.items():
            shutil.copy(source, os.path.join(folder, name + ".py"))
        for name, body in (("bytes_outcome", BYTES), ("odd_exceptions", ODD), ("deep_tree", DEEP), ("huge_payload", HUGE),
                           ("many_rows", MANY)):
            with open(os.path.join(folder, name + ".py"), "w", encoding="utf-8") as f:
                f.write(body)
        checks = ["validate-event", "crash-after-ack"]
        status, out, err = grade("--impl", REFERENCE, "--impl", STUB, "--impl", folder, "--report", reports,
                                 "--allow-kit-imports", "--timeout", str(10 * SLOWER), *[a for c in checks for a in ("-k", c)],
                                 env=python_env(TMPDIR=tmp))
        self.assertEqual(status, 1, err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(os.listdir(tmp), [])  # every temporary folder removed, the deep tree's too
        by_name = class_reports(self, reports)
        self.assertEqual(sorted(by_name), sorted(["worker_reference", "worker_stub", "bytes_outcome",
                                                  "odd_exceptions", "deep_tree", "huge_payload", "many_rows"]
                                                 + list(NAMES)))
        verdicts = {name: {c["name"]: c["status"] for c in r["checks"]} for name, r in by_name.items()}
        self.assertEqual(verdicts["worker_reference"], dict.fromkeys(checks, "pass"))
        for name in ["worker_stub", "odd_exceptions", "deep_tree"] + list(NAMES):
            self.assertEqual(verdicts[name], dict.fromkeys(checks, "fail"), name)
        for name in ("bytes_outcome", "huge_payload", "many_rows"):  # a failure says what each check observed
            self.assertEqual(verdicts[name], {"validate-event": "pass", "crash-after-ack": "fail"},
                             "%s: %s" % (name, [(c["name"], c["observed"][:300]) for c in by_name[name]["checks"]]))
        many = [c for c in by_name["many_rows"]["checks"] if c["name"] == "crash-after-ack"][0]
        self.assertIn("more than 10000 rows or 16777216 bytes, which the grader does not read", many["observed"])
        if hasattr(sqlite3.Connection, "setlimit"):  # 3.11+: the grader refuses the value instead of reading it
            huge = [c for c in by_name["huge_payload"]["checks"] if c["name"] == "crash-after-ack"][0]
            self.assertIn("holds a value over 1048576 bytes, which the grader does not read", huge["observed"])
        deliveries = [p["deliveries"] for p in by_name["bytes_outcome"]["evidence"]["crash-after-ack"]]
        self.assertIn(["b'applied'"], deliveries)
        odd = [c for c in by_name["odd_exceptions"]["checks"] if c["name"] == "validate-event"][0]
        self.assertIn("\\x1b[2J", odd["observed"])
        self.assertLess(len(json.dumps(odd)), 20000)  # 100,000 characters of str() cut, not carried whole
        # The terminal, and every report file as a reader opens it (JSON keeps the names as data, \u-escaped).
        for name, text in [("stdout", out), ("stderr", err)] + [(n, self.read(reports, n)) for n in self.files(reports)]:
            for char in UNSEEN:
                self.assertNotIn(char, text, name)
        self.assertIn("bob\\u200b", out)  # told apart from bob
        with open(os.path.join(reports, "class.csv"), encoding="utf-8-sig", newline="") as f:
            first_cells = [row[0] for row in csv.reader(f)]
        self.assertIn("'=cmd", first_cells)
        self.assertNotIn("=cmd", first_cells)

    def files(self, folder):
        """Every file in `folder`, its subfolders (students/, gradescope/) included, relative to it."""
        return [os.path.relpath(os.path.join(top, name), folder) for top, _, names in os.walk(folder) for name in names]

    def read(self, folder, name):
        with open(os.path.join(folder, name), encoding="utf-8-sig") as f:  # class.csv starts with a BOM
            return f.read()
