"""Verdicts as data: a worker's result and a class's, in JSON types, built once and read by every renderer.

A worker's result is its --json report (docs/report.schema.json): per check
its status, rules, points, message ids and fields, evidence; what it printed;
the bytes hash of its submission. A class's result holds the workers'
results, the entries of its folders that were not graded (and why) and how
many of the expected workers finished. Nothing here renders text for a
person or picks a language: grader/render/ does, at the edge. Fields other
parts of the grader add to a check or a worker (flags, evidence, tracebacks,
printed lines, a seed) travel through untouched. Never runs anything.
"""
import hashlib

from . import __version__, contain
from .messages import render
from .registry import POINTS, RULES

SCHEMA = 2  # docs/report.schema.json: "schema" in every report; raised when a field changes or goes


def json_evidence(evidence):
    """The evidence with each phase's label in English next to its message: JSON types throughout."""
    return {name: [dict(p, phase=render(p["phase"], "en"), phase_message=p["phase"]) for p in phases]
            for name, phases in evidence.items()}


def digest(path):
    """The sha256 of a submission's bytes ("" when it cannot be read): what --resume compares."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return ""


def check_result(result, points, debug=False):
    """One check's entry: the classroom's result (text dropped: it is rendered at the edge), its rules, its points."""
    check = {key: value for key, value in result.items() if key != "text"}
    if not debug:
        check.pop("traceback", None)
    check["rules"] = list(RULES.get(check["name"], ()))
    check["max_points"] = points.get(check["name"], 0)
    check["points"] = check["max_points"] if check["status"] == "pass" else 0
    return check


def worker_result(graded, points=POINTS, debug=False):
    """One worker's result (its --json report), the same on stdout, in DIR/<name>.json and in a shard."""
    checks = [check_result(result, points, debug=debug) for result in graded.results]
    counts = graded.counts()
    grader = graded.grader
    report = {"version": __version__, "impl": graded.worker.path, "passed": counts["pass"], "failed": counts["fail"],
              "errors": counts["error"], "total": len(checks), "seconds": round(graded.seconds, 3), "checks": checks,
              "points": sum(c["points"] for c in checks), "max_points": sum(c["max_points"] for c in checks),
              "evidence": json_evidence(grader.evidence), "kept": grader.tmp if grader.keep else None,
              "schema": SCHEMA, "name": graded.worker.name, "seed": grader.seed,
              "limits": dict(grader.limits._asdict()), "protections_off": list(grader.protections_off),  # audit: G61
              # No fork, no import of its own: each step's imports count in its check's output (the schema says so).
              "import_output": None if contain.NO_FORK else grader.zygote.output(), "isolation": grader.isolation(),
              "sha256": digest(graded.worker.path)}
    report["reason"] = first_reason(report)
    return report


def rescored(worker, points):
    """A worker's result (read back from a report) with `points` per check: its verdicts unchanged."""
    checks = [dict(c, max_points=points.get(c["name"], 0)) for c in worker["checks"]]
    for check in checks:
        check["points"] = check["max_points"] if check["status"] == "pass" else 0
    return dict(worker, checks=checks, points=sum(c["points"] for c in checks),
                max_points=sum(c["max_points"] for c in checks))


def class_result(workers, skipped=(), expected=None, seconds=0.0):
    """A class's result: its workers' results (in name order), the entries not graded, and how many finished.

    `expected` is how many workers the run set out to grade; fewer results
    than that is a partial run, said in "partial" ({"done": 8, "of": 30}).
    """
    workers = sorted(workers, key=lambda w: w["name"])
    expected = len(workers) if expected is None else expected
    return {"schema": SCHEMA, "version": __version__, "workers": workers, "skipped": list(skipped),
            "partial": {"done": len(workers), "of": expected} if len(workers) < expected else None,
            "perfect": sum(1 for w in workers if w["passed"] == w["total"]),
            "passed": sum(w["passed"] for w in workers), "total": sum(w["total"] for w in workers),
            "points": sum(w["points"] for w in workers), "max_points": sum(w["max_points"] for w in workers),
            "seconds": round(seconds, 3)}  # audit: G61


def skipped_entry(path, reason):
    """An entry of a class folder that was not graded: its path and the message saying why."""
    return {"path": path, "reason": reason}


def first_reason(worker):
    """Why a worker lost points, in a few words (a message), or None when it passed everything.

    One cause behind every failed check (it does not compile, it is the stub,
    every check timed out, functions are missing) is named once; otherwise the
    first failed check in the registry's order, its rules and what was observed.
    """
    failed = [c for c in worker["checks"] if c["status"] != "pass"]
    if not failed:
        return None
    ids = {c["observed_message"]["id"] for c in failed}
    if len(failed) == len(worker["checks"]) and len(ids) == 1:
        first = failed[0]["observed_message"]
        kind = first["id"]
        if kind == "usage.syntax":
            return {"id": "reason.compile", "fields": {"line": first["fields"].get("line", "?")}}
        if kind == "run.raised-in" and all("NotImplementedError" in c["observed"] for c in failed):
            return {"id": "reason.stub", "fields": {}}
        if kind == "run.timed-out" and len(failed) > 1:
            return {"id": "reason.all-timed-out", "fields": {"seconds": first["fields"].get("seconds", "?")}}
        if kind == "impl.missing" and len(failed) > 1:
            names = sorted({n.strip() for c in failed for n in c["observed_message"]["fields"].get("names", "").split(",")})
            return {"id": "reason.missing", "fields": {"names": ", ".join(n for n in names if n)}}
        if len({c["observed"] for c in failed}) == 1 and len(failed) > 1:
            return {"id": "reason.every-check", "fields": {"observed": first}}
    check = failed[0]
    return {"id": "reason.check", "fields": {"name": check["name"], "rules": list(check.get("rules") or ()) or ["-"],
                                             "observed": check["observed_message"]}}
