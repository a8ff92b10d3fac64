"""DIR/students/<name>.html: the page a teacher hands to one student, naming that student and no other.

Their score, then per check its verdict, points, the rules it enforces
(docs/rules.md's ids), expected and observed, and whatever else the grader
recorded for that check (a traceback, printed lines: shown as data); then the
evidence tables. Reads one worker's result only.
"""
import json

from ..messages import render, text
from . import page
from .page import e

SHOWN = ("name", "status", "ok", "expected", "observed", "expected_message", "observed_message", "seconds",
         "rules", "points", "max_points", "worker")  # the fields the table shows; any other a check carries follows it
QUIET = ("output",)  # carried, but only shown when something was dropped


def student_html(worker, lang):
    name = worker["name"]
    parts = ["<h1>%s</h1>\n" % e(text(lang, "student.title", name=name)),
             "<p>%s</p>\n" % e(text(lang, "student.score", points=worker["points"], max_points=worker["max_points"],
                                    passed=worker["passed"], total=worker["total"])),
             '<p class="%s">%s</p>\n' % (page.status(worker), e(page.reason(worker, lang, limit=10 ** 6))),
             "<p>%s</p>\n" % e(text(lang, "student.rules")),
             "<table>\n<tr>%s</tr>\n" % "".join("<th>%s</th>" % e(text(lang, label)) for label in (
                 "html.check", "html.verdict", "html.points", "html.rules", "html.what"))]
    for check in worker["checks"]:
        what = [text(lang, "html.expected", expected=render(check["expected_message"], lang))]
        if check["status"] != "pass":
            what.append(text(lang, "html.observed", observed=render(check["observed_message"], lang)))
            what += page.worker_lines(check, lang)  # its traceback's frames and what it printed last
        extra = "".join(extra_field(key, value) for key, value in sorted(check.items())
                        if key not in SHOWN + QUIET and value not in (None, "", [], {}))
        parts.append('<tr><td><code>%s</code></td><td class="%s">%s</td><td class="num">%d/%d</td><td>%s</td>'
                     "<td>%s%s</td></tr>\n" % (
                         e(check["name"]), e(check["status"]), e(page.verdict(lang, check["status"])),
                         check["points"], check["max_points"], e(", ".join(check["rules"])),
                         "<br>".join(e(line) for line in what), extra))
    parts.append("</table>\n")
    parts += page.evidence_html(worker, lang)
    return page.document(text(lang, "student.title", name=name), lang, "".join(parts))


def extra_field(key, value):
    """A field another part of the grader added to a check (a traceback, printed lines...): shown as data."""
    shown_value = value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False)
    return "<details><summary>%s</summary><pre>%s</pre></details>" % (e(key), e_lines(shown_value))


def e_lines(value):
    """Multi-line text for <pre>: each line escaped, the line breaks kept."""
    return "\n".join(e(line) for line in value.split("\n"))
