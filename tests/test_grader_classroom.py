"""grade.py for a whole class: which workers, the class table and progress, verdicts that do not depend on the
company, and the files of --report DIR read the way their consumers read them.

A mixed class (the reference, the stub, broken workers, a hanging one, one that
does not compile, one that does not import, one that floods) is graded once, then each of its workers alone; the JUnit
file is parsed with xml.etree, the page with html.parser, the JSON reports
checked against docs/report.schema.json.
"""
import csv
import html.parser
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import unittest
import xml.etree.ElementTree as ET

from grader.registry import POINTS
from grader.render.summary import SORT_SCRIPT
from tests.grade_mutants import GRADE, grade
from tests.schema_subset import SchemaError, errors
from tests.support import (ROOT, SLOWER, WINDOWS, TempDirTestCase, python_env, run_on_a_terminal, run_two_at_a_time,
                           wait_until, write_worker)

with open(os.path.join(ROOT, "docs", "report.schema.json"), encoding="utf-8") as _f:
    SCHEMA = json.load(_f)
CHECKS = ["crash-after-ack", "seq-order", "exact-ack", "mark-sent"]  # registry order
# Long enough that a correct worker's steps finish on a loaded 2-core machine (at 2 s, the correct workers of
# this class failed there, with two suites side by side); short enough that the hanging worker ends soon.
STEP_TIMEOUT = 4 * SLOWER
FLAGS = ["--timeout", str(STEP_TIMEOUT), "--lang", "en"] + [arg for name in CHECKS for arg in ("-k", name)]
VOLATILE = ("seconds", "kept")
OFF_LINE = "grade.py: on this system these protections are off: "  # said once on stderr where some are off
# A folder named by a worker's author, escaped in every report. Windows refuses < > " in a name: & and ' remain there.
HOSTILE_NAME = ("&x'y", "&amp;x&#x27;y") if WINDOWS else ('<b>&"x\'y', "&lt;b&gt;&amp;&quot;x&#x27;y")


def verdicts(report):
    """{check: (status, expected, observed)}: what must not depend on the company."""
    return {c["name"]: (c["status"], c["expected"], c["observed"]) for c in report["checks"]}


def steady(report):
    """A worker's report without what changes from run to run (times)."""
    report = {k: v for k, v in report.items() if k not in VOLATILE}
    report["checks"] = [{k: v for k, v in c.items() if k != "seconds"} for c in report["checks"]]
    return report


def write_class(folder):
    """The mixed class: {name: what grading it must find}."""
    write_worker(os.path.join(folder, "alice.py"))
    os.makedirs(os.path.join(folder, "bob"))
    shutil.copy(os.path.join(ROOT, "examples", "worker_stub.py"), os.path.join(folder, "bob", "worker.py"))
    write_worker(os.path.join(folder, "carol.py"), '''
        import sys
        sys.path.insert(0, %r)
        from outbox import init_store, intake, mark_sent, pending, send_http, validate_event
        from sink import init_sink, receive
    ''' % ROOT, kit=False)
    write_worker(os.path.join(folder, "dave.py"), '''
        from outbox import mark_sent as kit_mark_sent

        def mark_sent(con, event_id):
            kit_mark_sent(con, event_id)  # and returns None
    ''')
    write_worker(os.path.join(folder, "erin.py"), '''
        def pending(con, limit=16):
            os._exit(3)
    ''')
    write_worker(os.path.join(folder, "frank.py"), '''
        def init_store(path):
            time.sleep(3600)
    ''')
    write_worker(os.path.join(folder, "grace.py"), "def init_store(:\n", kit=False)
    write_worker(os.path.join(folder, "heidi", "worker.py"), '''
        for _ in range(20000):
            print("hello from the import, " * 20)
    ''')
    write_worker(os.path.join(folder, "ivan.py"), "import no_such_module_anywhere\n")
    return {"alice": [], "bob": CHECKS, "carol": ["crash-after-ack", "exact-ack"], "dave": ["mark-sent"],
            "erin": ["seq-order"], "frank": CHECKS, "grace": CHECKS, "heidi": [], "ivan": CHECKS}


class MixedClassTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = os.path.realpath(tempfile.mkdtemp(prefix="outbox-kit-test-"))
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.folder = os.path.join(cls.tmp, "class")
        cls.failing = write_class(cls.folder)
        cls.reports = os.path.join(cls.tmp, "reports")
        cls.status, out, cls.err = grade("--impl", cls.folder, "--json", "--report", cls.reports, *FLAGS)
        cls.report = json.loads(out)

    def worker(self, name):
        return next(w for w in self.report["workers"] if w["name"] == name)

    def test_every_worker_is_graded_and_only_the_broken_fail(self):
        self.assertEqual(self.status, 1, self.err[-2000:])
        self.assertEqual([w["name"] for w in self.report["workers"]], sorted(self.failing))
        for name, failing in self.failing.items():
            with self.subTest(worker=name):
                checks = self.worker(name)["checks"]
                self.assertEqual([c["name"] for c in checks], CHECKS)
                self.assertEqual([c["name"] for c in checks if not c["ok"]], failing)
                self.assertEqual([c["status"] for c in checks if c["status"] == "error"], [])
        self.assertRegex(verdicts(self.worker("frank"))["mark-sent"][2],
                         r"timed out after %d s \(killed\): your init_store did not return$" % STEP_TIMEOUT)
        self.assertRegex(verdicts(self.worker("grace"))["seq-order"][2], r"^line 1: SyntaxError: ")
        self.assertIn("import failed: ModuleNotFoundError: No module named 'no_such_module_anywhere'",
                      verdicts(self.worker("ivan"))["exact-ack"][2])
        passed = sum(len(CHECKS) - len(failing) for failing in self.failing.values())
        self.assertEqual((self.report["perfect"], self.report["passed"], self.report["total"]),
                         (2, passed, len(CHECKS) * len(self.failing)))

    def test_what_a_worker_prints_at_import_is_counted_once_or_in_each_check(self):
        # heidi prints 9 MB at import: once, in the zygote every step is forked from; without fork (Windows) each
        # step imports the worker itself, import_output is null, and each check's output counts its imports.
        heidi = self.worker("heidi")
        if WINDOWS:
            self.assertIsNone(heidi["import_output"])
            for check in heidi["checks"]:
                self.assertGreater(check["output"]["printed"], 8 * 1024 * 1024, check["name"])
        else:
            self.assertGreater(heidi["import_output"]["printed"], 8 * 1024 * 1024)
            self.assertLess(max(check["output"]["printed"] for check in heidi["checks"]), 1024 * 1024)

    def test_verdicts_do_not_depend_on_the_company(self):
        def alone(name):
            path = os.path.join(self.folder, name + ".py")
            path = path if os.path.exists(path) else os.path.join(self.folder, name, "worker.py")
            status, out, err = grade("--impl", path, "--json", *FLAGS)
            return name, status, json.loads(out)

        for name, status, report in run_two_at_a_time([lambda n=n: alone(n) for n in sorted(self.failing)]):
            with self.subTest(worker=name):
                self.assertEqual(status, 1 if self.failing[name] else 0)
                self.assertEqual(verdicts(report), verdicts(self.worker(name)))
                self.assertEqual(steady(report), steady(self.worker(name)))

    def test_each_workers_json_file_is_its_report(self):
        names = sorted(os.listdir(self.reports))
        self.assertEqual(names, sorted([n + ".json" for n in self.failing]
                                       + ["class.csv", "class.json", "gradescope", "index.html", "junit.xml", "students"]))
        for name in self.failing:
            with open(os.path.join(self.reports, name + ".json"), encoding="utf-8") as f:
                self.assertEqual(json.load(f), self.worker(name))

    def test_reports_follow_the_schema(self):
        self.assertEqual(errors(self.report, SCHEMA), [])
        for worker in self.report["workers"]:
            self.assertEqual(errors(worker, SCHEMA), [], worker["name"])

    def test_class_csv_has_a_row_per_worker_and_a_column_per_check(self):
        with open(os.path.join(self.reports, "class.csv"), encoding="utf-8-sig", newline="") as f:  # a BOM, for Excel
            rows = list(csv.reader(f))
        self.assertEqual(rows[0], ["worker"] + CHECKS + ["points", "max_points", "passed", "total"])
        self.assertEqual([row[0] for row in rows[1:]], sorted(self.failing))
        for row in rows[1:]:
            failing = self.failing[row[0]]
            self.assertEqual(row[1:-4], ["FAIL" if name in failing else "PASS" for name in CHECKS], row[0])
            worker = self.worker(row[0])
            self.assertEqual(row[-4:-2], [str(worker["points"]), str(worker["max_points"])])
            self.assertEqual(row[-2:], [str(len(CHECKS) - len(failing)), str(len(CHECKS))])

    def test_junit_xml_as_a_ci_server_reads_it(self):
        root = ET.parse(os.path.join(self.reports, "junit.xml")).getroot()
        self.assertEqual(root.tag, "testsuites")
        suites = root.findall("testsuite")
        self.assertEqual([s.get("name") for s in suites], sorted(self.failing))
        for suite in suites:
            with self.subTest(worker=suite.get("name")):
                cases = suite.findall("testcase")
                report = self.worker(suite.get("name"))
                self.assertEqual([c.get("name") for c in cases], CHECKS)
                self.assertEqual({c.get("classname") for c in cases}, {suite.get("name")})
                self.assertEqual(int(suite.get("tests")), len(cases))
                self.assertEqual(int(suite.get("failures")), len(suite.findall("testcase/failure")))
                self.assertEqual(int(suite.get("errors")), len(suite.findall("testcase/error")))
                self.assertAlmostEqual(float(suite.get("time")), sum(float(c.get("time")) for c in cases), delta=0.002 * len(cases))
                for case, check in zip(cases, report["checks"]):
                    self.assertAlmostEqual(float(case.get("time")), check["seconds"], delta=0.001)
                    failure = case.find("failure")
                    if check["ok"]:
                        self.assertIsNone(failure)
                    else:
                        message = "expected: %s; observed: %s" % (check["expected"], check["observed"])
                        self.assertEqual((failure.get("message"), failure.text), (message, message))
        self.assertEqual(int(root.get("tests")), sum(int(s.get("tests")) for s in suites))
        self.assertEqual(int(root.get("failures")), sum(len(failing) for failing in self.failing.values()))

    def test_index_html_is_one_self_contained_page(self):
        page = read_page(os.path.join(self.reports, "index.html"))
        self.assertEqual(page.errors, [])
        self.assertEqual(page.external, [])
        # Summary first: a row per worker, failing ones first, then by name; score, passed/total, the first reason.
        summary = page.tables[0]
        self.assertEqual(summary[0], ["worker", "score", "passed", "first reason"])
        order = sorted(self.failing, key=lambda n: (not self.failing[n], n))
        self.assertEqual([row[0] for row in summary[1:]], order)
        for row in summary[1:]:
            worker = self.worker(row[0])
            self.assertEqual(row[1:3], ["%d/%d" % (worker["points"], worker["max_points"]),
                                        "%d/%d" % (worker["passed"], worker["total"])])
            self.assertEqual(bool(row[3]), bool(self.failing[row[0]]), row)
        reasons = {row[0]: row[3] for row in summary[1:]}
        self.assertEqual(reasons["grace"], "does not compile: line 1")
        self.assertEqual(reasons["bob"], "stub: every function raises NotImplementedError")
        self.assertIn("timed out", reasons["frank"])  # the hang is named, whichever check says it first
        self.assertRegex(reasons["dave"], r"^mark-sent \(M1, M2, M3\): ")
        self.assertEqual(page.links[:len(order)], ["students/%s.html" % name for name in order])
        # Then the pass rate of every check.
        rates = page.tables[1]
        self.assertEqual(sorted(row[0] for row in rates[1:]), sorted(CHECKS))
        passes = [sum(1 for failing in self.failing.values() if row[0] not in failing) for row in rates[1:]]
        self.assertEqual(passes, sorted(passes))  # the rule the class missed most comes first
        for row, ok in zip(rates[1:], passes):
            self.assertTrue(row[3].startswith("%d/%d (" % (ok, len(self.failing))), row)
        # Then, collapsed, the grid and each worker's evidence.
        grid = page.tables[2]
        self.assertEqual(grid[0][1:-1], CHECKS)
        self.assertEqual([row[0] for row in grid[1:]], sorted(self.failing))
        for row in grid[1:]:
            self.assertEqual(row[1:-1], ["FAIL" if name in self.failing[row[0]] else "PASS" for name in CHECKS])
        self.assertEqual(sorted(set(page.cell_classes)), ["fail", "pass"])
        evidence = [table for table in page.tables if table and table[0] and table[0][0] == "observation"]
        stories = [w for w in self.report["workers"] if w["evidence"].get("crash-after-ack")]
        self.assertGreaterEqual(len(stories), 2)  # the reference and the others that got past the intake
        self.assertEqual(len(evidence), len(stories))
        self.assertEqual(evidence[0][2][0], "outbox (source)")
        self.assertEqual(evidence[0][0][1:], ["after " + p["phase"] for p in stories[0]["evidence"]["crash-after-ack"]])

    def test_each_student_page_names_only_its_student(self):
        for name in self.failing:
            with self.subTest(student=name):
                path = os.path.join(self.reports, "students", name + ".html")
                page = read_page(path)
                self.assertEqual((page.errors, page.external, page.scripts), ([], [], []))
                with open(path, encoding="utf-8") as f:
                    source = f.read()
                others = [other for other in self.failing if other != name and re.search(r"\b%s\b" % other, source)]
                self.assertEqual(others, [])
                self.assertIn("grade.py: %s" % name, source)
                checks = page.tables[0]
                self.assertEqual([row[0] for row in checks[1:]], CHECKS)
                worker = self.worker(name)
                for row, check in zip(checks[1:], worker["checks"]):
                    self.assertEqual(row[1:4], [check["status"].upper(), "%d/%d" % (check["points"], check["max_points"]),
                                                ", ".join(check["rules"])])
                    self.assertIn(" ".join(("expected: " + check["expected"]).split()), row[4])
                    if not check["ok"]:
                        self.assertIn(" ".join(("observed: " + check["observed"]).split()), row[4])

    def test_points_are_in_every_report(self):
        for worker in self.report["workers"]:
            self.assertEqual(worker["max_points"], sum(POINTS[name] for name in CHECKS))
            self.assertEqual(worker["points"], sum(POINTS[c["name"]] for c in worker["checks"] if c["ok"]))
        self.assertEqual(self.report["points"], sum(w["points"] for w in self.report["workers"]))
        self.assertIsNone(self.report["partial"])


class Page(html.parser.HTMLParser):
    """What a test needs of the report page: well-formed nesting, external references, the tables' text."""

    VOID = {"meta", "br", "hr", "img", "link", "input"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.external, self.tables, self.cell_classes = [], [], [], [], []
        self.links, self.scripts = [], []
        self.cell = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if (tag == "script" and attrs) or any(name.startswith("on") for name in attrs):
            self.errors.append("script: <%s %s>" % (tag, attrs))
        if tag == "script":
            self.scripts.append("")
        for name in ("src", "href", "action"):
            if name in attrs and (":" in attrs[name] or attrs[name].startswith("/")):
                self.external.append((tag, name, attrs[name]))
            elif name in attrs:
                self.links.append(attrs[name])
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []
            if attrs.get("class") in ("pass", "fail", "error"):
                self.cell_classes.append(attrs["class"])
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("</%s> closes <%s>" % (tag, self.stack[-1] if self.stack else ""))
            return
        self.stack.pop()
        if tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append(" ".join(" ".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data):
        if "url(" in data or "@import" in data:
            self.external.append(("style", "url", data))
        if self.stack and self.stack[-1] == "script":
            self.scripts[-1] += data
        if self.cell is not None:
            self.cell.append(data)


def read_page(path):
    with open(path, encoding="utf-8") as f:
        page = Page()
        page.feed(f.read())
        page.close()
    if page.stack:
        page.errors.append("unclosed: %s" % page.stack)
    if [script for script in page.scripts if script != SORT_SCRIPT]:  # the one inline script: sorting, ours
        page.errors.append("a script that is not the sorting one: %r" % page.scripts)
    return page


class ClassCommandLineTest(TempDirTestCase):
    def test_a_directory_gives_its_py_files_and_folders_worker_py_sorted_by_name(self):
        folder = self.path("class")
        for path in ("zed.py", "amy/worker.py", "kim.py", "lee/worker.py"):
            write_worker(os.path.join(folder, path))
        write_worker(os.path.join(folder, "nobody", "notes.py"))  # no worker.py: not a participant's folder
        write_worker(os.path.join(folder, "deep", "er", "worker.py"))  # two levels down: not looked at
        with open(os.path.join(folder, "readme.txt"), "w") as f:
            f.write("not a worker\n")
        alone = write_worker(self.path("solo", "bea.py"))
        status, out, err = grade("--impl", folder, "--impl", alone, "-k", "validate-event", "--lang", "en",
                                 "--timeout", str(10 * SLOWER))  # five fresh imports at once, under Wine too
        self.assertEqual(status, 0, err)
        table = out.splitlines()
        self.assertEqual(table[0].split(), ["worker", "score", "passed", "first", "reason"])
        self.assertEqual([line.split() for line in table[1:6]],
                         [[name, "3/3", "1/1", "-"] for name in ("amy", "bea", "kim", "lee", "zed")])
        # Nothing left out silently: every other entry, with its reason.
        self.assertEqual(table[6:11], ["", "not graded (3):", "  %s: a folder without worker.py" % os.path.join(folder, "deep"),
                                       "  %s: a folder without worker.py" % os.path.join(folder, "nobody"),
                                       "  %s: not a .py file" % os.path.join(folder, "readme.txt")])
        self.assertEqual(table[11:], ["", table[12]])
        self.assertRegex(table[12], r"^class: 5 of 5 workers passed every check; 5 of 5 checks passed; 15 of 15 points; [0-9.]+ s$")
        # Not a terminal: one line per finished worker, in any order (and, where some are off, the protections).
        lines = [line for line in err.splitlines() if not line.startswith(OFF_LINE)]
        self.assertEqual(len(lines), 5, err)
        self.assertEqual(sorted(line.split()[1] for line in lines), ["amy:", "bea:", "kim:", "lee:", "zed:"])
        for line in lines[:-1]:
            self.assertRegex(line, r"^\[[1-4]/5\] [a-z]+: 1/1 passed \([0-9.]+ s\); about [0-9]+ s left$")
        self.assertRegex(lines[-1], r"^\[5/5\] [a-z]+: 1/1 passed \([0-9.]+ s\)$")

    def test_two_workers_of_one_name_in_a_folder_grade_the_first_and_list_the_second(self):
        folder = self.path("class")
        first, second = write_worker(os.path.join(folder, "ann.py")), write_worker(os.path.join(folder, "ann", "worker.py"))
        status, out, err = grade("--impl", folder, "--json", "-k", "validate-event")
        self.assertEqual(status, 0, err)
        report = json.loads(out)
        self.assertEqual([(w["name"], w["impl"]) for w in report["workers"]], [("ann", first)])
        self.assertEqual([(s["path"], s["reason"]["id"], s["reason"]["fields"]["first"]) for s in report["skipped"]],
                         [(second, "skip.duplicate", first)])
        status, out, err = grade("--impl", folder, "-k", "validate-event", "--lang", "en")
        self.assertEqual(status, 0, err)
        self.assertIn("not graded (1):\n  %s: a second worker named ann, not graded: the first is %s;" % (second, first), out)

    def test_two_files_of_one_name_on_the_command_line_are_a_usage_error(self):
        first = write_worker(self.path("a", "ann.py"))
        second = write_worker(self.path("b", "ann", "worker.py"))
        for args in (["--impl", first, "--impl", first], ["--impl", first, "--impl", second]):
            with self.subTest(args=args):
                status, out, err = grade(*args)
                self.assertEqual((status, out), (2, ""))
                self.assertIn("grade.py: error: two workers named ann: %s and %s;" % (first, args[3]), err)

    def test_one_worker_that_fails_makes_the_class_fail(self):
        folder = self.path("class")
        write_worker(os.path.join(folder, "good.py"))
        shutil.copy(os.path.join(ROOT, "examples", "worker_stub.py"), os.path.join(folder, "stub.py"))
        status, out, err = grade("--impl", folder, "-k", "validate-event", "--lang", "en")
        self.assertEqual(status, 1)
        self.assertRegex(out, r"\nstub +0/3 +0/1 +stub: every function raises NotImplementedError\n")
        os.remove(os.path.join(folder, "stub.py"))
        status, out, err = grade("--impl", folder, "--impl", write_worker(self.path("other", "fine.py")), "-k", "validate-event")
        self.assertEqual(status, 0, out + err)

    def test_a_terminal_gets_one_live_line(self):
        folder = self.path("class")
        for name in ("one.py", "two.py", "three.py"):
            write_worker(os.path.join(folder, name))
        status, out, seen = run_on_a_terminal([sys.executable, GRADE, "--impl", folder, "-k", "validate-event", "--lang", "en"],
                                              env=python_env(), timeout=120)
        self.assertEqual(status, 0)
        text = seen.decode("utf-8")
        self.assertEqual(text.count("\n"), 1, text)
        self.assertTrue(text.endswith("\n"))
        updates = [part.replace("\x1b[K", "") for part in text.strip().split("\r") if part]
        done = []
        for update in updates:  # one per finished worker, and one a second while none finishes
            self.assertRegex(update, r"^grading: [0-3] of 3 workers done, [0-9]+ s(, about [0-9]+ s left)?$")
            done.append(int(update.split()[1]))
        self.assertEqual(done, sorted(done))
        self.assertEqual(set(done) - {0}, {1, 2, 3})
        self.assertEqual(done[-1], 3)
        self.assertIn(b"3 of 3 workers passed every check", out)

    def test_one_worker_can_write_the_reports_too(self):
        reports = self.path("reports")
        status, out, err = grade("-k", "validate-event", "-k", "crash-after-ack", "--report", reports, "--lang", "en")
        self.assertEqual(status, 0, err)
        self.assertIn("grade: 2 passed, 0 failed", out)
        self.assertEqual(sorted(os.listdir(reports)), ["class.csv", "class.json", "gradescope", "index.html", "junit.xml",
                                                       "students", "worker_reference.json"])
        root = ET.parse(os.path.join(reports, "junit.xml")).getroot()
        self.assertEqual([s.get("name") for s in root.findall("testsuite")], ["worker_reference"])
        page = read_page(os.path.join(reports, "index.html"))
        self.assertEqual((page.errors, page.external), ([], []))

    def test_what_a_worker_controls_is_escaped_in_every_report(self):
        folder = self.path("class")
        name, escaped = HOSTILE_NAME
        write_worker(os.path.join(folder, name, "worker.py"), '''
            def validate_event(event):
                raise RuntimeError("\\x1b[31m<script>alert(1)</script>\\x00 & \\ud800 done")
        ''')
        write_worker(os.path.join(folder, "=cmd()", "worker.py"))
        reports = self.path("reports")
        status, out, err = grade("--impl", folder, "-k", "validate-event", "--report", reports, "--lang", "en")
        self.assertEqual(status, 1, err)
        with open(os.path.join(reports, "index.html"), encoding="utf-8") as f:
            source = f.read()
        self.assertNotIn("<script>alert", source)
        self.assertNotIn(name, source)
        self.assertIn(escaped, source)
        page = read_page(os.path.join(reports, "index.html"))
        self.assertEqual((page.errors, page.external), ([], []))
        self.assertIn(name, [row[0] for row in page.tables[0]])
        with open(os.path.join(reports, "students", name + ".html"), encoding="utf-8") as f:
            source = f.read()
        self.assertNotIn("<script", source)
        self.assertIn(escaped, source)
        root = ET.parse(os.path.join(reports, "junit.xml")).getroot()  # parses: no control character left raw
        suites = {s.get("name"): s for s in root.findall("testsuite")}
        self.assertEqual(sorted(suites), [name, "=cmd()"])
        message = suites[name].find("testcase/failure").get("message")
        # Control characters escaped as on the terminal (issue 23: text is data); the lone surrogate, which
        # cannot cross from the worker's process as it is, arrives as U+FFFD.
        self.assertIn("\\x1b[31m<script>alert(1)</script>\\x00 & \ufffd done", message)
        with open(os.path.join(reports, "class.csv"), encoding="utf-8-sig", newline="") as f:
            self.assertEqual([row[0] for row in csv.reader(f)][1:], [name, "'=cmd()"])
        with open(os.path.join(reports, name + ".json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["name"], name)


class SchemaValidatorTest(unittest.TestCase):
    """The validator the report tests rely on must be able to say no."""

    def test_it_finds_what_breaks_the_schema(self):
        message = {"id": "as-expected", "fields": {}}
        check = {"name": "seq-order", "status": "pass", "ok": True, "expected": "x", "observed": "y", "seconds": 0.1,
                 "expected_message": message, "observed_message": message, "output": {"printed": 0, "dropped": 0},
                 "rules": ["P1"], "points": 4, "max_points": 4}
        report = {"schema": 2, "version": "4.0.0", "name": "w", "impl": "/w.py", "passed": 1, "failed": 0, "errors": 0,
                  "seconds": 1.0, "checks": [check], "evidence": {}, "kept": None, "seed": 24, "protections_off": [],
                  "limits": {"memory_mib": 1024, "file_mib": 64, "cpu_seconds": 12},
                  "import_output": {"printed": 0, "dropped": 0},
                  "isolation": {"landlock": 7, "seccomp": True, "namespaces": False, "uid": False,
                                "off": {"namespaces": "refused"}},
                  "total": 1, "points": 4, "max_points": 4, "sha256": "0" * 64, "reason": None}
        self.assertEqual(errors(report, SCHEMA), [])
        broken = (
            (dict(report, passed=-1), "$.passed"),
            (dict(report, schema=1), "$.schema"),
            (dict(report, sha256="abc"), "$.sha256"),
            (dict(report, reason="a string"), "$.reason"),
            (dict(report, extra=True), "$.extra: not allowed"),
            (dict(report, isolation=dict(report["isolation"], landlock="7")), "$.isolation.landlock"),
            (dict(report, checks=[dict(check, status="skipped")]), "$.checks[0].status"),
            (dict(report, checks=[dict(check, ok="yes")]), "$.checks[0].ok"),
            ({k: v for k, v in report.items() if k != "limits"}, "'limits' is missing"),
        )
        for instance, where in broken:
            with self.subTest(where=where):
                found = errors(instance, SCHEMA["$defs"]["worker"], SCHEMA)
                self.assertTrue(any(where in e for e in found), found)
                self.assertNotEqual(errors(instance, SCHEMA), [])
        with self.assertRaises(SchemaError):
            errors({}, {"type": "object", "oneOf": []})


class TasksTest(unittest.TestCase):
    """grader.classroom.Tasks: after a stop no check starts, and stop() returns only once the running ones ended."""

    class Worker:
        def __init__(self):
            self.started, self.release, self.calls = threading.Event(), threading.Event(), []

        def run(self, check, lang):
            self.calls.append(check)
            self.started.set()
            if not self.release.wait(60):
                raise AssertionError("never released")
            return {"name": check}

    def test_stop_waits_for_a_running_check_and_none_starts_after_it(self):
        from grader.classroom import Tasks
        tasks, one, results, stopped = Tasks(), self.Worker(), [], threading.Event()
        running = threading.Thread(target=lambda: results.append(tasks.run(one.run, "first", "en")))
        running.start()
        self.addCleanup(running.join, 60)
        self.addCleanup(one.release.set)
        self.assertTrue(one.started.wait(60))
        stopper = threading.Thread(target=lambda: (tasks.stop(), stopped.set()))
        stopper.start()
        self.addCleanup(stopper.join, 60)
        wait_until(lambda: tasks.stopped, what="stop() to begin")
        self.assertFalse(stopped.wait(0.2), "stop() returned while a check was still running")
        self.assertEqual(tasks.running, 1)
        one.release.set()
        self.assertTrue(stopped.wait(60))
        self.assertEqual(results, [{"name": "first"}])
        self.assertIsNone(tasks.run(one.run, "second", "en"))
        self.assertEqual(one.calls, ["first"])

    def test_an_interrupt_while_stop_waits_is_raised_once_nothing_runs(self):
        # A Ctrl-C during the cleanup must not end the wait: the running check still holds its folders.
        if not hasattr(signal, "SIGUSR1"):
            self.skipTest("a signal to interrupt the wait with (POSIX)")
        from grader.classroom import Tasks

        class Interrupt(Exception):
            pass

        caught = []

        def interrupt(signum, frame):
            caught.append(signum)
            raise Interrupt()

        self.addCleanup(signal.signal, signal.SIGUSR1, signal.signal(signal.SIGUSR1, interrupt))
        tasks, one = Tasks(), self.Worker()
        running = threading.Thread(target=tasks.run, args=(one.run, "first", "en"))
        running.start()
        self.addCleanup(running.join, 60)
        self.addCleanup(one.release.set)
        self.assertTrue(one.started.wait(60))

        def interrupt_then_release():
            wait_until(lambda: tasks.stopped, what="stop() to begin")
            os.kill(os.getpid(), signal.SIGUSR1)
            wait_until(lambda: caught, what="the interrupt to reach stop()")
            one.release.set()

        helper = threading.Thread(target=interrupt_then_release)
        helper.start()
        self.addCleanup(helper.join, 60)
        with self.assertRaises(Interrupt):
            tasks.stop()
        self.assertEqual((caught, tasks.running), ([signal.SIGUSR1], 0))


if __name__ == "__main__":
    unittest.main()
