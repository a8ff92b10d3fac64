"""DIR/class.csv: one row per worker, PASS/FAIL/ERROR per check, then points, max points, passed and total.

Language-neutral. Every cell a worker controls goes through grader/text.py's
`csv_cell` (never a formula). Written with a UTF-8 byte order mark so that
Excel, which otherwise reads a CSV in the machine's code page, shows Japanese
names as they are; Python's csv, LibreOffice and pandas (encoding utf-8-sig) read it alike.
"""
import csv
import io

from ..text import csv_cell

VERDICT = {"pass": "PASS", "fail": "FAIL", "error": "ERROR"}
BOM = "\ufeff"


def class_csv(result, names):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["worker"] + list(names) + ["points", "max_points", "passed", "total"])
    for worker in result["workers"]:
        verdicts = {c["name"]: VERDICT[c["status"]] for c in worker["checks"]}
        writer.writerow([csv_cell(worker["name"])] + [verdicts.get(name, "") for name in names]  # audit: G60
                        + [worker["points"], worker["max_points"], worker["passed"], worker["total"]])
    return BOM + out.getvalue()
