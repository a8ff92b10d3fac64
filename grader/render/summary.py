"""DIR/index.html, the teacher's page: a row per student with score and first reason, then what the class missed.

Summary first (failing students first, then by name; sortable by a small
inline script, readable without it), then the pass rate of every check,
the entries not graded, and, collapsed, the full grid and each student's
failures and evidence. Reads a class result (grader/results.py) only.
"""
from ..messages import render, text
from . import page
from .page import e

SORT_SCRIPT = """
document.querySelectorAll("table.sortable th.sort").forEach(function (th, column) {
  th.addEventListener("click", function () {
    var body = th.closest("table").tBodies[0], rows = Array.prototype.slice.call(body.rows);
    var down = th.dataset.down !== "1"; th.dataset.down = down ? "1" : "0";
    rows.sort(function (a, b) {
      var x = a.cells[column].dataset.key || a.cells[column].textContent;
      var y = b.cells[column].dataset.key || b.cells[column].textContent;
      var n = parseFloat(x) - parseFloat(y);
      var c = isNaN(n) ? x.localeCompare(y) : n;
      return down ? c : -c;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
"""


def default_order(workers):
    """Failing students first, then by name: whom to look at comes first."""
    return sorted(workers, key=lambda w: (page.status(w) == "pass", w["name"]))


def index_html(result, names, lang):
    """The whole page for a class result; `names` the checks, in the registry's order."""
    workers = result["workers"]
    parts = ["<h1>%s</h1>\n" % e(text(lang, "html.title"))]
    if result["partial"]:
        parts.append('<p class="banner">%s</p>\n' % e(text(lang, "class.partial", **result["partial"])))
    parts.append("<p>%s</p>\n" % e(page.totals(result, lang)))
    parts += summary_table(workers, lang)
    parts += pass_rates(workers, names, lang)
    parts += skipped_list(result["skipped"], lang)
    parts += grid(workers, names, lang)
    parts += details(workers, lang)
    return page.document(text(lang, "html.title"), lang, "".join(parts), SORT_SCRIPT)


def summary_table(workers, lang):
    head = [("class.worker", ""), ("class.score", ""), ("class.passed", ""), ("class.reason", "")]
    parts = ['<h2 id="summary">%s</h2>\n<table class="sortable summary">\n<thead><tr>' % e(text(lang, "html.summary"))]
    parts += ['<th class="sort">%s</th>' % e(text(lang, label)) for label, _ in head]
    parts.append("</tr></thead>\n<tbody>\n")
    for worker in default_order(workers):
        parts.append('<tr class="%s"><td><a href="%s">%s</a></td><td class="num score" data-key="%d">%s</td>'
                     '<td class="num" data-key="%d">%s</td><td>%s</td></tr>\n' % (
                         page.status(worker), e(page.student_href(worker["name"])), e(worker["name"]),
                         worker["points"], e(page.score(worker)), worker["passed"], e(page.passed(worker)),
                         e(page.reason(worker, lang))))
    parts.append("</tbody>\n</table>\n")
    return parts


def pass_rates(workers, names, lang):
    """Which rule did the class miss: per check, how many passed it, its rules and points; the most missed first."""
    parts = ['<h2 id="checks">%s</h2>\n<table class="sortable rates">\n<thead><tr>' % e(text(lang, "html.rates"))]
    parts += ['<th class="sort">%s</th>' % e(text(lang, label))
              for label in ("html.check", "html.rules", "html.points", "html.rate")]
    parts.append("</tr></thead>\n<tbody>\n")
    for name, ran, ok, percent in rates(workers, names):
        rules = ", ".join(ran[0]["rules"]) if ran else ""
        points = ran[0]["max_points"] if ran else 0
        parts.append('<tr><td><code>%s</code></td><td>%s</td><td class="num">%d</td>'
                     '<td class="num" data-key="%.1f">%d/%d (%.0f%%) <span class="bar" style="width:%dpx"></span></td></tr>\n'
                     % (e(name), e(rules), points, percent, ok, len(ran), percent, int(percent)))
    parts.append("</tbody>\n</table>\n")
    return parts


def rates(workers, names):
    """(check, its results, how many passed, percent) per check, the least passed first, else registry order."""
    found = []
    for name in names:
        ran = [c for w in workers for c in w["checks"] if c["name"] == name]
        ok = sum(1 for c in ran if c["status"] == "pass")
        found.append((name, ran, ok, 100.0 * ok / len(ran) if ran else 0.0))
    return sorted(found, key=lambda rate: rate[3])  # stable: ties keep the registry's order


def skipped_list(skipped, lang):
    if not skipped:
        return []
    parts = ['<h2 id="skipped">%s</h2>\n<table class="skipped">\n<tr><th>%s</th><th>%s</th></tr>\n' % (
        e(text(lang, "html.skipped", count=len(skipped))), e(text(lang, "html.entry")), e(text(lang, "html.why")))]
    parts += ["<tr><td><code>%s</code></td><td>%s</td></tr>\n" % (e(s["path"]), e(render(s["reason"], lang)))
              for s in skipped]
    parts.append("</table>\n")
    return parts


def grid(workers, names, lang):
    """Every worker's verdict on every check, compact: the details are on each student's page."""
    parts = ["<details><summary>%s</summary>\n<table class=\"grid\">\n<tr><th>%s</th>" % (
        e(text(lang, "html.grid")), e(text(lang, "class.worker")))]
    parts += ['<th class="check">%s</th>' % e(name) for name in names]
    parts.append("<th>%s</th></tr>\n" % e(text(lang, "class.score")))
    for worker in workers:
        by_name = {c["name"]: c for c in worker["checks"]}
        cells = []
        for name in names:
            check = by_name.get(name)
            cells.append("<td></td>" if check is None else '<td class="%s">%s</td>' % (
                check["status"], e(page.verdict(lang, check["status"]))))
        parts.append("<tr><th>%s</th>%s<td class=\"num\">%s</td></tr>\n" % (
            e(worker["name"]), "".join(cells), e(page.score(worker))))
    parts.append("</table>\n</details>\n")
    return parts


def details(workers, lang):
    """Per student, collapsed: each failed check's observation, and the evidence tables."""
    parts = ["<h2 id=\"evidence\">%s</h2>\n" % e(text(lang, "html.evidence"))]
    for worker in workers:
        parts.append("<details><summary>%s: %s</summary>\n<ul>\n" % (e(worker["name"]), e(page.score(worker))))
        for check in worker["checks"]:
            if check["status"] != "pass":
                parts.append("<li><code>%s</code> %s%s</li>\n" % (
                    e(check["name"]), e(text(lang, "html.observed", observed=render(check["observed_message"], lang))),
                    "".join("<br><code>%s</code>" % e(line) for line in page.worker_lines(check, lang))))
        parts.append("</ul>\n")
        parts += page.evidence_html(worker, lang)
        parts.append("</details>\n")
    return parts
