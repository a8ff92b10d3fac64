"""What the HTML pages share: the one escape, the shell (no external asset), the style, a worker's score and reason.

Every value goes through `e`: grader/text.py's `shown` (characters a reader
could not see, written as escapes), then HTML escaping.
"""
import html
import urllib.parse

from .. import __version__
from ..messages import render, text
from ..text import shown
from . import evidence

GENERATOR = "grade.py"  # <meta name="generator">: how --report DIR knows a page as one of its own
REASON_CHARS = 110  # a reason in the summary: a few words, the rest on the student's page

STYLE = """
body { font-family: sans-serif; margin: 1.2em; color: #222; max-width: 1360px; }
table { border-collapse: collapse; margin: 0.4em 0 1.2em; }
th, td { border: 1px solid #bbb; padding: 0.2em 0.45em; vertical-align: top; text-align: left; }
th { background: #eee; }
tr.fail td.score, td.fail { background: #f6c9c9; }
tr.pass td.score, td.pass { background: #cdeccd; }
tr.error td.score, td.error { background: #f6e3a8; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th.sort { cursor: pointer; }
.bar { display: inline-block; height: 0.8em; background: #6a6; }
.banner { background: #f6e3a8; padding: 0.4em 0.6em; border: 1px solid #c9a93a; }
details { margin: 0.3em 0; }
summary { cursor: pointer; }
th.check { writing-mode: vertical-rl; font-weight: normal; font-family: monospace; }
.grid td { padding: 0.1em 0.3em; font-size: 0.8em; }
pre, code { font-family: monospace; }
pre { white-space: pre-wrap; background: #f4f4f4; padding: 0.4em; max-height: 30em; overflow: auto; }
"""


def e(value):
    """`value` for HTML text or an attribute: unseen characters escaped (grader/text.py), then &<>"' escaped."""
    return html.escape(shown(value))  # audit: G60


def document(title, lang, body, script=""):
    """A whole self-contained page: no script but `script` (inline), no external asset."""
    return ('<!DOCTYPE html>\n<html lang="%s">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="generator" content="%s %s">\n<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n'
            '%s%s</body>\n</html>\n' % (e(lang), GENERATOR, e(__version__), e(title), STYLE, body,
                                        "<script>%s</script>\n" % script if script else ""))


def totals(result, lang):
    """The class's totals line: perfect workers, checks and points passed, the time."""
    return text(lang, "class.totals", perfect=result["perfect"], workers=len(result["workers"]),
                passed=result["passed"], total=result["total"], points=result["points"],
                max_points=result["max_points"], seconds="%.1f" % result["seconds"])


def score(worker):
    """"83/100" points: the worker's score as the tables show it."""
    return "%d/%d" % (worker["points"], worker["max_points"])


def passed(worker):
    return "%d/%d" % (worker["passed"], worker["total"])


def reason(worker, lang, limit=REASON_CHARS):
    """The first reason in `lang`, cut to `limit` characters; "" when the worker passed everything."""
    if worker["reason"] is None:
        return ""
    said = " ".join(render(worker["reason"], lang).split())
    return said if len(said) <= limit else said[:limit - 1].rstrip() + "\u2026"


def status(worker):
    """The row's colour: error (a grader error), fail, or pass."""
    if worker["errors"]:
        return "error"
    return "pass" if worker["passed"] == worker["total"] else "fail"


def student_href(name):
    """The link from index.html to a student's page: the name quoted for a URL."""
    return "students/" + urllib.parse.quote(name + ".html", safe="")


def verdict(lang, status_):
    return text(lang, "verdict." + status_)


def evidence_html(worker, lang):
    """The worker's evidence tables, each headed by its title: a list of HTML parts."""
    parts = []
    for _, rows, name in evidence.tables(worker["evidence"], lang, with_names=True):
        parts.append("<h3>%s</h3>\n<p>%s</p>\n<table>\n" % (e(text(lang, "evidence.heading", name=name)),
                                                          e(text(lang, "evidence.note"))))
        for i, row in enumerate(rows):
            tag = "th" if i == 0 else "td"
            parts.append("<tr>%s</tr>\n" % "".join("<%s>%s</%s>" % (tag, e(v), tag) for v in row))
        parts.append("</table>\n")
    return parts


def worker_lines(check, lang):
    """The worker's own frames and last printed lines of a failed check, as lines of text in `lang`."""
    worker = check.get("worker") or {}
    lines = [text(lang, "html.frame", file=f["file"], line=f["line"], function=f["function"], code=f["code"])
             for f in worker.get("traceback", [])]
    return lines + [text(lang, "html.printed", line=line) for line in worker.get("printed", [])]
