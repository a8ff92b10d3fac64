"""The class table on stdout: one line per worker (score, passed/total, the first reason), then the totals.

With verbose, each failed check follows its worker's line, one per line.
Names and reasons a worker controls go through grader/text.py's `shown`.
"""
from ..messages import render, text
from ..text import shown
from ..wrap import display_width
from . import page

REASON_CHARS = 70  # the terminal's few words; index.html and the student's page say more


def pad(cell, width):
    return cell + " " * (width - display_width(cell))


def class_table(result, lang, verbose=False):
    """The lines of the class table for a class result, in name order."""
    header = [text(lang, "class.worker"), text(lang, "class.score"), text(lang, "class.passed"),
              text(lang, "class.reason")]
    rows = [(header, None)]
    for worker in result["workers"]:
        mark = "!" if worker["errors"] else ""
        rows.append(([shown(worker["name"]), page.score(worker), page.passed(worker) + mark,  # audit: G60
                      shown(page.reason(worker, lang, REASON_CHARS)) or "-"], worker))
    widths = [max(display_width(row[i]) for row, _ in rows) for i in range(3)]
    lines = []
    for row, worker in rows:
        lines.append("  ".join([pad(row[i], widths[i]) for i in range(3)] + [row[3]]).rstrip())
        if verbose and worker is not None:
            lines += ["    %s%s: %s" % (c["name"], "!" if c["status"] == "error" else "",
                                        shown(render(c["observed_message"], lang)))
                      for c in worker["checks"] if c["status"] != "pass"]
    lines += skipped_lines(result["skipped"], lang)
    lines.append("")
    if result["partial"]:
        lines.append(text(lang, "class.partial", **result["partial"]))
    lines.append(page.totals(result, lang))
    if any(w["errors"] for w in result["workers"]):
        lines.append(text(lang, "class.errors"))
    return lines


def skipped_lines(skipped, lang):
    """Every entry not graded, with its reason: nothing in a class folder is left out silently."""
    if not skipped:
        return []
    return [""] + [text(lang, "class.skipped", count=len(skipped))] + [
        "  %s: %s" % (shown(s["path"]), shown(render(s["reason"], lang))) for s in skipped]
