"""The reports: --json for one worker or a class, and the files of --report DIR (JSON, CSV, JUnit XML, HTML).

A worker's --json report is built here once, for stdout and for DIR/<name>.json
alike; its shape is docs/report.schema.json (SCHEMA). Everything a worker
controls (its name, the messages that quote its errors, the values read from
its DBs) is escaped for the format it goes into. Never runs anything.
"""
import csv
import html
import io
import json
import os
import re
import xml.etree.ElementTree as ET

from . import __version__
from .messages import render, term, terms, text
from .text import shown
from .wrap import display_width

SCHEMA = 1  # docs/report.schema.json: "schema" in every report; raised when a field changes or goes


def json_evidence(evidence):
    """The evidence with each phase's label in English next to its message: JSON types throughout."""
    return {name: [dict(p, phase=render(p["phase"], "en"), phase_message=p["phase"]) for p in phases]
            for name, phases in evidence.items()}


def worker_report(graded, debug=False):
    """One worker's --json report (a dict of JSON types), the same on stdout and in DIR/<name>.json."""
    checks = []
    for result in graded.results:
        check = {key: value for key, value in result.items() if key != "text"}
        if not debug:
            del check["traceback"]
        checks.append(check)
    counts = graded.counts()
    grader = graded.grader
    return {"version": __version__, "impl": graded.worker.path, "passed": counts["pass"], "failed": counts["fail"],
            "errors": counts["error"], "seconds": round(graded.seconds, 3), "checks": checks,
            "evidence": json_evidence(grader.evidence), "kept": grader.tmp if grader.keep else None,
            "schema": SCHEMA, "name": graded.worker.name, "seed": grader.seed, "limits": dict(grader.limits._asdict()),  # audit: G61
            "protections_off": list(grader.protections_off), "import_output": grader.zygote.output(),
            "isolation": grader.isolation()}


def class_report(graded, reports, seconds):
    """The --json report of a class: each worker's report, and the totals."""
    return {"schema": SCHEMA, "version": __version__, "workers": [reports[one.worker.name] for one in graded],
            "perfect": perfect(graded),
            "passed": sum(one.counts()["pass"] for one in graded), "total": sum(len(one.checks) for one in graded),
            "seconds": round(seconds, 3)}  # audit: G61


def dumps(report):
    return json.dumps(report, indent=2)


EVIDENCE_ROWS = (
    ("evidence.order", lambda p, lang: text(lang, "present" if p["order"] else "absent")),
    ("evidence.outbox", lambda p, lang: term(lang, p["outbox"])),
    ("evidence.inbox", lambda p, lang: text(lang, "present" if p["inbox"] else "absent")),
    ("evidence.deliveries", lambda p, lang: terms(lang, p["deliveries"])),
    ("evidence.ack", lambda p, lang: text(lang, "evidence.not-sent") if p["ack"] is None
     else ", ".join(text(lang, "evidence.ack-seen", value=json.dumps(a)) for a in p["ack"]) or text(lang, "evidence.none")),
    ("evidence.inventory", lambda p, lang: str(p["inventory"])),
)
EVIDENCE_CHECKS = ("crash-after-ack", "dropped-response")


def evidence_tables(evidence, lang, with_names=False):
    """[(title, rows)] for each story the grader observed; rows of cells, the first the header.

    With `with_names`, [(title, rows, the check's name)]: a page heads each table with the name alone.
    """
    tables = []
    for name in EVIDENCE_CHECKS:
        phases = evidence.get(name)
        if not phases:
            continue
        rows = [[text(lang, "evidence.observation")] + [text(lang, "evidence.after", phase=p["phase"]) for p in phases]]
        rows += [[text(lang, label)] + [show(p, lang) for p in phases] for label, show in EVIDENCE_ROWS]
        tables.append((text(lang, "evidence.title", name=name), rows, name))
    return [(title, rows) for title, rows, _ in tables] if not with_names else tables


def class_table(graded, lang, seconds):
    """The class table: one line per worker (passed/total, the failed checks; ! marks a grader error), then the totals."""
    header = [text(lang, "class.worker"), text(lang, "class.passed"), text(lang, "class.failed")]
    rows = [header]
    for one in graded:
        failed = [r["name"] + ("!" if r["status"] == "error" else "") for r in one.results if not r["ok"]]
        rows.append([printable(one.worker.name), "%d/%d" % (one.counts()["pass"], len(one.checks)), ", ".join(failed) or "-"])
    widths = [max(display_width(row[i]) for row in rows) for i in range(2)]
    lines = ["  ".join([pad(row[0], widths[0]), pad(row[1], widths[1]), row[2]]).rstrip() for row in rows]
    lines.append("")
    lines.append(text(lang, "class.totals", perfect=perfect(graded), workers=len(graded),
                      passed=sum(one.counts()["pass"] for one in graded), total=sum(len(one.checks) for one in graded),
                      seconds="%.1f" % seconds))
    if any(one.counts()["error"] for one in graded):
        lines.append(text(lang, "class.errors"))
    return lines


def perfect(graded):
    """How many workers passed every check."""
    return sum(1 for one in graded if all(r["ok"] for r in one.results))


def pad(cell, width):
    return cell + " " * (width - display_width(cell))


def printable(name):
    """A worker's name for a terminal: its control characters (a file name may hold any) shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)  # audit: G60


def write_reports(folder, graded, checks, reports, lang, seconds):
    """DIR/<name>.json for each worker, DIR/class.csv, DIR/junit.xml and DIR/index.html.

    index.html, the page people read, is in `lang`; the JSON, CSV and JUnit files are language-neutral.
    """
    for one in graded:
        write(os.path.join(folder, one.worker.name + ".json"), dumps(reports[one.worker.name]) + "\n")
    write(os.path.join(folder, "class.csv"), class_csv(graded, checks))
    write(os.path.join(folder, "junit.xml"), junit_xml(graded))
    write(os.path.join(folder, "index.html"), index_html(graded, checks, lang, seconds))


def write(path, content):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(content)


VERDICT = {"pass": "PASS", "fail": "FAIL", "error": "ERROR"}
FORMULA = ("=", "+", "-", "@", "\t", "\r")  # a cell a spreadsheet would run as a formula


def cell(value):
    """A CSV cell from a worker-controlled string: never one a spreadsheet takes for a formula."""
    return "'" + value if value.startswith(FORMULA) else value  # audit: G60


def class_csv(graded, checks):
    """One row per worker: its name, PASS/FAIL (or ERROR) per check, then passed and total."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["worker"] + [c.name for c in checks] + ["passed", "total"])
    for one in graded:
        verdicts = {r["name"]: VERDICT[r["status"]] for r in one.results}
        writer.writerow([cell(one.worker.name)] + [verdicts.get(c.name, "") for c in checks]
                        + [one.counts()["pass"], len(one.checks)])
    return out.getvalue()


NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value):
    """`value` with every character XML 1.0 cannot carry (control characters, lone surrogates) as U+FFFD."""
    return NOT_XML.sub("\ufffd", str(value))  # audit: G60


def junit_xml(graded):
    """JUnit XML: a <testsuite> per worker, a <testcase> per check, <failure> (or <error>) with expected/observed.

    Language-neutral, like the JSON and the CSV: the English text, whatever
    --lang says (a CI server parses it; index.html is the page for people).
    Times are seconds; a suite's time is the sum of its cases' (checks run
    side by side, so it can exceed the wall time).
    """
    root = ET.Element("testsuites", name="grade.py")
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    for one in graded:
        counts = one.counts()
        seconds = sum(r["seconds"] for r in one.results)
        suite = ET.SubElement(root, "testsuite", name=xml_text(one.worker.name), tests=str(len(one.results)),
                              failures=str(counts["fail"]), errors=str(counts["error"]), skipped="0",
                              time="%.3f" % seconds)
        for result in one.results:
            case = ET.SubElement(suite, "testcase", classname=xml_text(one.worker.name), name=result["name"],
                                 time="%.3f" % result["seconds"])
            if result["status"] != "pass":
                message = text("en", "junit.message", expected=result["expected"], observed=result["observed"])
                problem = ET.SubElement(case, "failure" if result["status"] == "fail" else "error",
                                        message=xml_text(message), type=VERDICT[result["status"]])
                problem.text = xml_text(message)
        totals["tests"] += len(one.results)
        totals["failures"] += counts["fail"]
        totals["errors"] += counts["error"]
        totals["time"] += seconds
    for key, value in totals.items():
        root.set(key, "%.3f" % value if key == "time" else str(value))
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.5em; vertical-align: top; text-align: left; }
td.pass { background: #cdeccd; }
td.fail { background: #f6c9c9; }
td.error { background: #f6e3a8; }
td.fail p, td.error p { margin: 0.2em 0; font-size: 0.85em; max-width: 28em; }
th.check { writing-mode: vertical-rl; font-weight: normal; font-family: monospace; }
pre, code { font-family: monospace; }
"""


def worker_lines(result, lang):
    """The worker's own frames and last printed lines of a failed check, each escaped with text.shown."""
    worker = result.get("worker") or {}
    lines = [text(lang, "html.frame", file=shown(f["file"]), line=f["line"], function=shown(f["function"]),
                  code=shown(f["code"])) for f in worker.get("traceback", [])]
    return lines + [text(lang, "html.printed", line=shown(line)) for line in worker.get("printed", [])]


def index_html(graded, checks, lang, seconds):
    """One self-contained page: the grid of workers x checks, coloured, failed cells with their text; each
    worker's checks and evidence tables. No script, no external asset; every worker-controlled string escaped."""
    def e(value):
        return html.escape(xml_text(value))  # and no control character: a parse error in HTML as in XML
    parts = ['<!DOCTYPE html>\n<html lang="%s">\n<head>\n<meta charset="utf-8">\n' % e(lang),
             "<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n" % (e(text(lang, "html.title")), STYLE),
             "<h1>%s</h1>\n" % e(text(lang, "html.title")),
             "<p>%s</p>\n" % e(text(lang, "class.totals", perfect=perfect(graded),
                                    workers=len(graded), passed=sum(one.counts()["pass"] for one in graded),
                                    total=sum(len(one.checks) for one in graded), seconds="%.1f" % seconds)),
             "<table>\n<tr><th>%s</th>" % e(text(lang, "class.worker"))]
    parts += ['<th class="check">%s</th>' % e(c.name) for c in checks]
    parts.append("<th>%s</th></tr>\n" % e(text(lang, "class.passed")))
    for n, one in enumerate(graded):
        by_name = {r["name"]: r for r in one.results}
        parts.append('<tr><th><a href="#w%d">%s</a></th>' % (n, e(one.worker.name)))
        for check in checks:
            result = by_name.get(check.name)
            if result is None:
                parts.append("<td></td>")
                continue
            body = e(VERDICT[result["status"]])
            if result["status"] != "pass":
                expected, observed = (render(result[key + "_message"], lang) for key in ("expected", "observed"))
                body = "<b>%s</b><p>%s</p><p>%s</p>" % (
                    body, e(text(lang, "html.expected", expected=expected)), e(text(lang, "html.observed", observed=observed)))
            parts.append('<td class="%s">%s</td>' % (result["status"], body))
        parts.append("<td>%d/%d</td></tr>\n" % (one.counts()["pass"], len(one.checks)))
    parts.append("</table>\n")
    for n, one in enumerate(graded):
        parts.append('<h2 id="w%d">%s</h2>\n<p><code>%s</code></p>\n<table>\n' % (n, e(one.worker.name), e(one.worker.path)))
        parts.append("<tr><th>%s</th><th>%s</th><th>%s</th></tr>\n" % (
            e(text(lang, "html.verdict")), e(text(lang, "html.check")), e(text(lang, "html.result"))))
        for result in one.results:
            expected, observed = (render(result[key + "_message"], lang) for key in ("expected", "observed"))
            parts.append('<tr><td class="%s">%s</td><td><code>%s</code></td><td>%s<br>%s%s</td></tr>\n' % (
                result["status"], e(VERDICT[result["status"]]), e(result["name"]),
                e(text(lang, "html.expected", expected=expected)), e(text(lang, "html.observed", observed=observed)),
                "".join("<br><code>%s</code>" % e(line) for line in worker_lines(result, lang))))
        parts.append("</table>\n")
        for _, rows, name in evidence_tables(one.grader.evidence, lang, with_names=True):
            parts.append("<h3>%s</h3>\n<p>%s</p>\n<table>\n" % (e(text(lang, "evidence.heading", name=name)),
                                                              e(text(lang, "evidence.note"))))
            for i, row in enumerate(rows):
                tag = "th" if i == 0 else "td"
                parts.append("<tr>%s</tr>\n" % "".join("<%s>%s</%s>" % (tag, e(value), tag) for value in row))
            parts.append("</table>\n")
    parts.append("</body>\n</html>\n")
    return "".join(parts)
