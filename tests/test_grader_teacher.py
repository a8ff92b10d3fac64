"""The teacher's report (issue 28) on generated classes: entries not graded, the folder --report owns, points,
Gradescope and GitHub Classroom, a run stopped halfway, --resume, and shards merged into one run's reports.

Every class here is graded for real with grade.py in a subprocess, on the
fast validate-event check (and the reference's own workers), except the
class of thirty, built by --merge from two workers graded on every check;
reports are read the way their consumers read them (json, csv, html.parser).
"""
import csv
import json
import os
import re
import signal
import subprocess
import sys
import unittest

from grader.registry import NAMES, POINTS
from grader.results import first_reason
from tests.grade_mutants import GRADE, grade
from tests.support import ROOT, SLOWER, TempDirTestCase, posix_only, python_env, wait_until, write_worker
from tests.test_grader_classroom import read_page

FAST = ["-k", "validate-event", "--lang", "en", "--timeout", str(20 * SLOWER)]
DEADLINE = 120  # seconds a stopped run may take to end


def write_small_class(folder):
    """Four workers: two correct, the stub, one that fails validate-event; {name: passes}."""
    write_worker(os.path.join(folder, "ann.py"))
    write_worker(os.path.join(folder, "ben", "worker.py"))
    with open(os.path.join(ROOT, "examples", "worker_stub.py"), encoding="utf-8") as f:
        stub = f.read()
    write_worker(os.path.join(folder, "cat.py"), stub, kit=False)
    write_worker(os.path.join(folder, "dan.py"), '''
        def validate_event(event):
            return event
    ''')
    return {"ann": True, "ben": True, "cat": False, "dan": False}


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def without_times(value):
    """A report with every "seconds" (and "execution_time") left out: what may differ between two runs."""
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in ("seconds", "execution_time")}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def listing(folder):
    return sorted(os.path.relpath(os.path.join(top, name), folder) for top, _, files in os.walk(folder) for name in files)


class TeacherReportTest(TempDirTestCase):
    def test_entries_not_graded_are_listed_in_the_table_the_json_and_the_page(self):
        folder = self.path("class")
        write_small_class(folder)
        os.makedirs(os.path.join(folder, "eve"))
        write_worker(os.path.join(folder, "eve", "solution.py"))  # no worker.py
        wanted = {"eve": "skip.no-worker"}
        try:
            os.symlink(os.path.join(folder, "gone.py"), os.path.join(folder, "fay.py"))  # a link to nothing
        except (OSError, NotImplementedError):  # Windows without the right to make links
            pass
        if os.path.lexists(os.path.join(folder, "fay.py")):  # Wine 8's symlink() returns and makes no link
            wanted["fay.py"] = "skip.dangling"
        if hasattr(os, "mkfifo"):
            os.mkfifo(os.path.join(folder, "gus.py"))
            wanted["gus.py"] = "skip.not-file"
        status, out, err = grade("--impl", folder, "--json", "--report", self.path("r"), *FAST)
        self.assertEqual(status, 1, err)
        report = json.loads(out)
        skipped = {os.path.basename(s["path"].rstrip(os.sep)): s["reason"]["id"] for s in report["skipped"]}
        self.assertEqual(skipped, wanted)
        self.assertEqual(sorted(w["name"] for w in report["workers"]), ["ann", "ben", "cat", "dan"])
        status, out, err = grade("--impl", folder, "--report", self.path("r"), *FAST)
        self.assertIn("not graded (%d):" % len(wanted), out)
        self.assertRegex(out, r"\n  .*%s: a folder without worker\.py\n" % re.escape(os.path.join(folder, "eve")))
        page = read_page(self.path("r", "index.html"))
        self.assertEqual(page.errors, [])
        table = next(t for t in page.tables if t and t[0] == ["entry", "why"])
        self.assertEqual(sorted(os.path.basename(row[0]) for row in table[1:]), sorted(wanted))

    def test_the_summary_says_who_failed_and_why_first(self):
        folder = self.path("class")
        passes = write_small_class(folder)
        status, out, err = grade("--impl", folder, "--report", self.path("r"), *FAST)
        self.assertEqual(status, 1, err)
        page = read_page(self.path("r", "index.html"))
        rows = page.tables[0][1:]
        self.assertEqual([row[0] for row in rows], ["cat", "dan", "ann", "ben"])  # failing first, then by name
        self.assertEqual([row[1] for row in rows], ["0/3", "0/3", "3/3", "3/3"])
        self.assertEqual(rows[0][3], "stub: every function raises NotImplementedError")
        self.assertRegex(rows[1][3], r"^validate-event \(V1, V2, V3, V4, V5\): it returned the very dict")
        self.assertEqual([row[3] for row in rows[2:]], ["", ""])
        self.assertEqual(page.tables[1][1][:4], ["validate-event", "V1, V2, V3, V4, V5", "3", "2/4 (50%)"])
        umask = os.umask(0o022)
        os.umask(umask)
        for name in ("index.html", "ann.json", os.path.join("students", "ann.html")):  # readable as open() makes files
            self.assertEqual(os.stat(self.path("r", name)).st_mode & 0o777, 0o666 & ~umask, name)
        # The terminal says the same, one line per worker; -v adds every failed check under it.
        lines = out.splitlines()
        self.assertRegex(lines[3], r"^cat +0/3 +0/1 +stub: every function raises NotImplementedError$")
        status, verbose, err = grade("--impl", folder, "-v", *FAST)
        self.assertRegex(verbose, r"\ncat .*\n    validate-event: the validate-event check: validate_event raised "
                                  r"NotImplementedError")
        self.assertEqual(sorted(passes), [row[0] for row in sorted(rows)])

    def test_thirty_students_stay_under_300_kb(self):
        # Two workers graded for real on every check (one passes all, one fails validate-event), then a class
        # of thirty built from their reports by --merge, the renderer's own path: 30 x 24 cells, not 30 x 3.
        graded, shard = self.path("graded"), self.path("shard")
        write_worker(self.path("two", "good.py"))
        write_worker(self.path("two", "bad.py"), "def validate_event(event):\n    return event\n")
        status, out, err = grade("--impl", self.path("two"), "--report", graded, "--allow-kit-imports", "--timeout",
                             str(20 * SLOWER))
        self.assertEqual(status, 1, err)
        reports = {name: read_json(os.path.join(graded, name + ".json")) for name in ("good", "bad")}
        self.assertEqual(len(reports["good"]["checks"]), len(NAMES))
        os.makedirs(shard)
        for n in range(30):
            name = "student%02d" % n
            with open(os.path.join(shard, name + ".json"), "w", encoding="utf-8") as f:
                json.dump(dict(reports["good" if n % 3 else "bad"], name=name), f)
        status, out, err = grade("--merge", shard, "--report", self.path("r"), "--lang", "ja")
        self.assertEqual(status, 1, err)
        self.assertLess(os.path.getsize(self.path("r", "index.html")), 300 * 1024)
        page = read_page(self.path("r", "index.html"))
        self.assertEqual(page.errors, [])
        self.assertEqual(len(page.tables[0]), 31)
        with open(self.path("r", "students", "student00.html"), encoding="utf-8") as f:
            source = f.read()
        self.assertIn('<html lang="ja">', source)
        self.assertIn("student00 さんの採点結果", source)
        self.assertNotIn("student01", source)

    def test_points_file_overrides_and_unknown_names_exit_2(self):
        points = self.path("points.json")
        with open(points, "w", encoding="utf-8") as f:
            json.dump({"validate-event": 40}, f)
        status, out, err = grade("--points", points, "--json", *FAST)
        self.assertEqual(status, 0, err)
        report = json.loads(out)
        self.assertEqual((report["points"], report["max_points"], report["checks"][0]["points"]), (40, 40, 40))
        status, out, err = grade("--points", points, "--list")
        self.assertIn("validate-event          40 points", out)
        with open(points, "w", encoding="utf-8") as f:
            json.dump({"validate-event": 4, "no-such-check": 1, "crash-after-acks": 2}, f)
        status, out, err = grade("--points", points, *FAST)
        self.assertEqual((status, out), (2, ""))
        self.assertIn("no check named crash-after-acks, no-such-check", err)
        for bad in ('{"validate-event": true}', '{"validate-event": -1}', "[1]", "{"):
            with open(points, "w", encoding="utf-8") as f:
                f.write(bad)
            with self.subTest(bad=bad):
                status, out, err = grade("--points", points, *FAST)
                self.assertEqual(status, 2, err)
                self.assertIn("--points %s" % points, err)
                self.assertNotIn("Traceback", err)

    def test_the_report_folder_refuses_foreign_files_and_removes_stale_reports(self):
        folder = self.path("class")
        write_small_class(folder)
        reports = self.path("r")
        status, out, err = grade("--impl", folder, "--report", reports, *FAST)
        self.assertEqual(status, 1, err)
        os.remove(os.path.join(folder, "dan.py"))
        os.remove(os.path.join(folder, "cat.py"))
        status, out, err = grade("--impl", folder, "--report", reports, *FAST)
        self.assertEqual(status, 0, err)
        self.assertNotIn("dan.json", os.listdir(reports))  # stale: removed
        self.assertNotIn("cat.html", os.listdir(os.path.join(reports, "students")))
        self.assertEqual(read_json(os.path.join(reports, "class.json"))["workers"], ["ann", "ben"])
        with open(os.path.join(reports, "notes.txt"), "w", encoding="utf-8") as f:
            f.write("the teacher's own notes\n")
        with open(os.path.join(reports, "students", "extra.html"), "w", encoding="utf-8") as f:
            f.write("<p>not grade.py's</p>\n")
        before = listing(reports)
        status, out, err = grade("--impl", folder, "--report", reports, *FAST)
        self.assertEqual((status, out), (2, ""))
        self.assertIn("holds files grade.py did not write: notes.txt, %s" % os.path.join("students", "extra.html"), err)
        self.assertEqual(listing(reports), before)  # refused: nothing changed
        status, out, err = grade("--impl", folder, "--report", reports, "--force", *FAST)
        self.assertEqual(status, 0, err)
        with open(os.path.join(reports, "notes.txt"), encoding="utf-8") as f:
            self.assertEqual(f.read(), "the teacher's own notes\n")  # --force leaves them untouched

    def test_gradescope_results_json_has_the_autograder_shape(self):
        out_path = self.path("results", "results.json")
        status, out, err = grade("--impl", os.path.join(ROOT, "examples", "worker_stub.py"), "--gradescope", out_path,
                                 "-k", "validate-event", "-k", "mark-sent", "--lang", "en")
        self.assertEqual(status, 1, err)
        results = read_json(out_path)
        self.assertEqual(sorted(results), ["execution_time", "output", "score", "tests", "visibility"])
        self.assertEqual(results["score"], 0)
        self.assertEqual(results["output"], "stub: every function raises NotImplementedError")
        self.assertEqual([t["name"] for t in results["tests"]], ["validate-event", "mark-sent"])  # the registry's order
        for test in results["tests"]:
            self.assertEqual(sorted(test), ["max_score", "name", "output", "score", "status", "visibility"])
            self.assertEqual((test["score"], test["max_score"], test["status"]), (0, POINTS[test["name"]], "failed"))
            self.assertIn(test["visibility"], ("hidden", "after_due_date", "after_published", "visible"))
            self.assertRegex(test["output"], r"^expected: .*\nobserved: ")
        status, out, err = grade("--impl", self.path("results"), "--gradescope", out_path)
        self.assertEqual(status, 2)
        status, out, err = grade("--gradescope", out_path, "-k", "validate-event")
        self.assertEqual(status, 0, err)
        self.assertEqual(read_json(out_path)["score"], POINTS["validate-event"])

    def test_the_github_classroom_example_names_real_checks_from_one_run(self):
        autograding = read_json(os.path.join(ROOT, "examples", "classroom", "autograding.json"))
        tests = autograding["tests"]
        runs = [t["run"] for t in tests if "grade.py" in t["run"]]
        self.assertEqual(len(runs), 1)  # one grade.py run per student ...
        named = [t["name"] for t in tests[1:]]
        self.assertEqual(named, list(NAMES))  # ... and every check read from it, with its points
        self.assertEqual({t["name"]: t["points"] for t in tests[1:]}, POINTS)
        for test in tests[1:]:
            self.assertIn("'%s'" % test["name"], test["run"])
        # The reader's command, run on one run's --json, says pass or fail per check.
        status, out, err = grade("--impl", os.path.join(ROOT, "examples", "worker_stub.py"), "--json", "-k", "validate-event")
        with open(self.path("grade.json"), "w", encoding="utf-8") as f:
            f.write(out)
        check = next(t for t in tests if t["name"] == "validate-event")
        command = re.fullmatch(r'python3 -c "(.*)"', check["run"]).group(1)
        result = subprocess.run([sys.executable, "-c", command], cwd=self.tmp, timeout=60)
        self.assertEqual(result.returncode, 1)

    @posix_only("a signal sent to grade.py (SIGTERM) stops the run: on Windows os.kill is TerminateProcess, no handler "
                "runs and nothing is written")
    def test_a_stopped_run_leaves_the_finished_reports_marked_partial_and_resume_grades_only_the_rest(self):
        folder = self.path("class")
        write_small_class(folder)
        write_worker(os.path.join(folder, "zed.py"), '''
            def validate_event(event):
                time.sleep(3600)
        ''')
        reports = self.path("r")
        proc = subprocess.Popen([sys.executable, GRADE, "--impl", folder, "--report", reports, "--jobs", "2"] + FAST,
                                env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wanted = {"ann.json", "ben.json", "cat.json", "dan.json"}
            wait_until(lambda: proc.poll() is not None or wanted <= set(os.listdir(reports) if os.path.isdir(reports) else ()),
                       what="the four quick workers' reports")
            self.assertIsNone(proc.poll())
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=DEADLINE)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        self.assertEqual(read_json(os.path.join(reports, "class.json"))["partial"], {"done": 4, "of": 5})
        self.assertNotIn("zed.json", os.listdir(reports))
        page = read_page(os.path.join(reports, "index.html"))
        self.assertEqual(page.errors, [])
        with open(os.path.join(reports, "index.html"), encoding="utf-8") as f:
            self.assertIn("partial: 4 of 5 workers graded", f.read())
        # --resume: only the missing one is graded (and a changed submission), the others kept as they were.
        write_worker(os.path.join(folder, "zed.py"))
        with open(os.path.join(folder, "dan.py"), "a", encoding="utf-8") as f:
            f.write("# changed\n")
        kept = read_json(os.path.join(reports, "ann.json"))
        status, out, err = grade("--impl", folder, "--report", reports, "--resume", *FAST)
        self.assertEqual(status, 1, err)
        self.assertIn("resumed: 3 workers already graded in %s" % reports, err)
        graded = sorted(line.split()[1] for line in err.splitlines() if line.startswith("["))
        self.assertEqual(graded, ["dan:", "zed:"])
        self.assertEqual(read_json(os.path.join(reports, "ann.json")), kept)
        self.assertIsNone(read_json(os.path.join(reports, "class.json"))["partial"])

    def test_two_shards_merged_equal_one_run(self):
        folder = self.path("class")
        write_small_class(folder)
        for n in range(4):
            write_worker(os.path.join(folder, "w%d.py" % n))
        os.makedirs(os.path.join(folder, "empty-folder"))
        status, out, err = grade("--impl", folder, "--report", self.path("whole"), *FAST)
        self.assertEqual(status, 1, err)
        names = set()
        for k in (1, 2):
            status, out, err = grade("--impl", folder, "--report", self.path("shard%d" % k), "--shard", "%d/2" % k, *FAST)
            self.assertIn(status, (0, 1), err)
            shard = {n[:-5] for n in os.listdir(self.path("shard%d" % k)) if n.endswith(".json") and n != "class.json"}
            self.assertTrue(shard, "shard %d is empty" % k)
            self.assertFalse(shard & names)
            names |= shard
        self.assertEqual(len(names), 8)
        status, out, err = grade("--merge", self.path("shard1"), self.path("shard2"), "--report", self.path("merged"),
                                 "--lang", "en")
        self.assertEqual(status, 1, err)
        self.assertEqual(listing(self.path("merged")), listing(self.path("whole")))
        for relpath in listing(self.path("whole")):
            with self.subTest(file=relpath):
                with open(self.path("whole", relpath), encoding="utf-8") as f:
                    whole = f.read()
                with open(self.path("merged", relpath), encoding="utf-8") as f:
                    merged = f.read()
                if relpath.endswith(".json"):
                    self.assertEqual(without_times(json.loads(merged)), without_times(json.loads(whole)))
                else:
                    times = r'time="[0-9.]+"|[0-9.]+ s\b|[0-9.]+ s</p>'
                    self.assertEqual(re.sub(times, "T", merged), re.sub(times, "T", whole))
        with open(self.path("merged", "class.csv"), encoding="utf-8-sig", newline="") as f:
            self.assertEqual(len(list(csv.reader(f))), 9)
        status, out, err = grade("--merge", self.path("class"), "--report", self.path("m2"))
        self.assertEqual(status, 2)
        self.assertIn("no worker report", err)


def check(name, observed, status="fail", **fields):
    message = {"id": observed, "fields": fields}
    return {"name": name, "status": status, "observed": "%s %s" % (observed, fields), "observed_message": message,
            "rules": ["X1"]}


class FirstReasonTest(unittest.TestCase):
    """results.first_reason on result data alone: one cause behind every failure is named once."""

    def reason(self, *checks):
        return first_reason({"checks": list(checks)})

    def test_each_cause(self):
        passed = check("a", "as-expected", status="pass")
        self.assertIsNone(self.reason(passed))
        self.assertEqual(self.reason(check("a", "usage.syntax", line=3), check("b", "usage.syntax", line=3)),
                         {"id": "reason.compile", "fields": {"line": 3}})
        stub = [dict(check(n, "run.raised-in"), observed="f raised NotImplementedError: f") for n in "ab"]
        self.assertEqual(self.reason(*stub)["id"], "reason.stub")
        hung = [check(n, "run.timed-out", seconds="10") for n in "ab"]
        self.assertEqual(self.reason(*hung), {"id": "reason.all-timed-out", "fields": {"seconds": "10"}})
        missing = [check("a", "impl.missing", names="intake, pending"), check("b", "impl.missing", names="mark_sent")]
        self.assertEqual(self.reason(*missing), {"id": "reason.missing", "fields": {"names": "intake, mark_sent, pending"}})
        # Several causes, or some checks passed: the first failed check, its rules and what was observed.
        first = self.reason(passed, check("b", "plain", text="x"), check("c", "usage.syntax", line=1))
        self.assertEqual((first["id"], first["fields"]["name"], first["fields"]["rules"]), ("reason.check", "b", ["X1"]))
        self.assertEqual(self.reason(check("a", "impl.missing", names="intake"))["id"], "reason.check")
