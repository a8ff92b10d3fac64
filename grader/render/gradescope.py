"""results.json as Gradescope's autograder specification defines it, for one worker's result.

Top level: `score` (points), `execution_time`, `output` (the first reason),
`visibility`, `tests`; per check a test with `name`, `score`, `max_score`,
`status` ("passed" or "failed"), `output` (expected, and observed when it
failed) and `visibility`. English: Gradescope shows it as it is.
"""
import json

from ..messages import render, text
from .page import reason

VISIBILITY = "visible"  # students see every check: the checks are the lab's own, nothing is hidden


def results_json(worker):
    tests = []
    for check in worker["checks"]:
        output = text("en", "html.expected", expected=check["expected"])
        if check["status"] != "pass":
            output += "\n" + text("en", "html.observed", observed=check["observed"])
        tests.append({"name": check["name"], "score": check["points"], "max_score": check["max_points"],
                      "status": "passed" if check["status"] == "pass" else "failed",
                      "output": output, "visibility": VISIBILITY})
    return json.dumps({"score": worker["points"], "execution_time": worker["seconds"],
                       "output": reason(worker, "en", limit=10 ** 6) or render({"id": "reason.none", "fields": {}}, "en"),
                       "visibility": VISIBILITY, "tests": tests}, indent=2) + "\n"
