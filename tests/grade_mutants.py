"""The mutants of the kit that grade.py must kill, shared by tests/test_grade_mutants_*.py.

Mutants are copies of the kit with one classic mistake each, made at test time
from the small patches below (so there is no second code base to maintain). A
patch whose text no longer occurs exactly once is an ERROR naming the mutant
(StalePatch), never a silent kill: keep the anchor in step with the code.
"""
import json
import os
import subprocess
import sys

from tests.support import ROOT, copy_packages, python_env

GRADE = os.path.join(ROOT, "grade.py")
REFERENCE = os.path.join("examples", "worker_reference.py")
TIME_BOUND = 120  # seconds any single grader run may take

# (mistake, the check that must catch it, file, [(text in the kit, text in the mutant), ...])
MUTANTS = (
    ("sent=1 saved before sending", "crash-after-ack", "outbox/dispatch.py",
     [("    for selected in batch:\n", "    for selected in batch:\n        mark_sent(con, selected[\"id\"])\n")]),
    ("pending that marks rows", "seq-order", "outbox/store.py",
     [("    rows = con.execute(PENDING_SQL, (limit,)).fetchall()\n",
       "    rows = con.execute(PENDING_SQL, (limit,)).fetchall()\n"
       "    con.execute(\"UPDATE outbox SET sent = 1 WHERE seq IN (SELECT seq FROM outbox WHERE sent = 0 ORDER BY seq LIMIT ?)\", (limit,))\n")]),
    ("order by id", "seq-order", "outbox/store.py", [("ORDER BY seq LIMIT ?\"", "ORDER BY event_id LIMIT ?\"")]),
    ("order by created_at", "seq-order", "outbox/store.py",
     [("ORDER BY seq LIMIT ?\"", "ORDER BY created_at LIMIT ?\"")]),
    ("continue after a failure", "stop-on-first-failure", "outbox/dispatch.py",
     [("    marked = 0\n", "    marked = 0\n    failure = None\n"),
      ("        result = send(dict(selected))\n",
       "        try:\n            result = send(dict(selected))\n        except Exception as exc:\n"
       "            failure = failure or exc\n            continue\n"),
      ("    return marked\n", "    if failure is not None:\n        raise failure\n    return marked\n")]),
    ("error swallowed", "stop-on-first-failure", "outbox/dispatch.py",
     [("        result = send(dict(selected))\n",
       "        try:\n            result = send(dict(selected))\n        except Exception:\n            return marked\n")]),
    ("truthy ACK accepted", "exact-ack", "outbox/dispatch.py", [("        if result is not True:\n", "        if not result:\n")]),
    ("write transaction held during send", "no-lock-during-send", "outbox/dispatch.py",
     [("    marked = 0\n", "    marked = 0\n    con.execute(\"BEGIN IMMEDIATE\")\n"),
      ("        if mark_sent(con, selected[\"id\"]):\n",
       "        if con.execute(\"UPDATE outbox SET sent = 1 WHERE event_id = ? AND sent = 0\", (selected[\"id\"],)).rowcount:\n"),
      ("    return marked\n", "    con.execute(\"COMMIT\")\n    return marked\n")]),
    ("mark using the callback's dict", "callback-mutation", "outbox/dispatch.py",
     [("        result = send(dict(selected))\n", "        result = send(selected)\n")]),
    ("redirects followed", "untrusted-ack", "outbox/sender.py",
     [("urllib.request.ProxyHandler({}), _RefuseRedirects(),", "urllib.request.ProxyHandler({}), urllib.request.HTTPRedirectHandler(),")]),
    ("proxy variables honoured", "proxy-ignored", "outbox/sender.py",
     [("urllib.request.ProxyHandler({}),", "urllib.request.ProxyHandler(),")]),
    ("wrong-id ACK accepted", "untrusted-ack", "outbox/sender.py", [("    elif ack[\"id\"] != event_id:\n", "    elif False:\n")]),
    ("oversized ACK accepted", "untrusted-ack", "outbox/sender.py", [("MAX_ACK_BYTES = 4096\n", "MAX_ACK_BYTES = 1 << 20\n")]),
    ("no URL check in send_http", "url-rule", "outbox/sender.py",
     [("    check_url(url)\n    check_timeout(timeout)\n", "    check_timeout(timeout)\n")]),
    ("a timeout that bounds each read, not the exchange", "send-timeout", "outbox/sender.py",
     [("        left = self.deadline - time.monotonic()\n", "        left = 1.0\n")]),
    ("sink without dedup", "crash-after-ack", "sink/inbox.py",
     [("        if row is None:\n", "        if True:\n"), ("\"INSERT INTO inbox ", "\"INSERT OR REPLACE INTO inbox ")]),
    ("inbox and inventory in separate commits", "receive-atomic", "sink/inbox.py",
     [("                (event[\"id\"], event_digest, payload, now),\n            )\n",
       "                (event[\"id\"], event_digest, payload, now),\n            )\n"
       "            con.execute(\"COMMIT\")\n            con.execute(\"BEGIN IMMEDIATE\")\n")]),
    ("intake in two commits", "intake-atomic", "outbox/store.py",
     [("                (event[\"id\"], event[\"sku\"], event[\"qty\"], now),\n            )\n",
       "                (event[\"id\"], event[\"sku\"], event[\"qty\"], now),\n            )\n"
       "            con.execute(\"COMMIT\")\n            con.execute(\"BEGIN IMMEDIATE\")\n")]),
    ("conflict ACKed as a duplicate", "conflict", "sink/inbox.py",
     [("            outcome = CONFLICT\n", "            outcome = DUPLICATE\n")]),
    ("conflict rolled back instead of committed", "conflict-committed", "sink/inbox.py",
     [("            (event[\"id\"], outcome, event_digest, now),\n        )\n",
       "            (event[\"id\"], outcome, event_digest, now),\n        )\n"
       "        if outcome == CONFLICT:\n            raise Conflict(\"event %r conflicts\" % (event[\"id\"],))\n")]),
    ("a bool accepted as qty", "validate-event", "outbox/event.py",
     [("isinstance(qty, bool) or not isinstance", "not isinstance")]),
    ("a trailing newline accepted ($ for \\Z)", "validate-event", "outbox/event.py", [("{0,63}\\Z\")", "{0,63}$\")")]),
    ("non-ASCII letters and digits accepted (\\w)", "validate-event", "outbox/event.py",
     [("r\"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}\\Z\"", "r\"[^\\W_][\\w.:-]{0,63}\\Z\"")]),
    ("65 characters accepted", "validate-event", "outbox/event.py", [("{0,63}\\Z\")", "{0,64}\\Z\")")]),
    ("intake ignores a conflicting payload", "intake-idempotent", "outbox/store.py",
     [("    if row[1] != payload:\n", "    if False:\n")]),
    ("outbox.payload not the event's JSON", "intake-idempotent", "outbox/store.py",
     [("\n    event, payload = validate_and_serialise(event)\n",
       "\n    event, payload = validate_and_serialise(event)\n    payload = repr(sorted(event.items()))\n")]),
    ("mark_sent reports a sent row as newly marked", "mark-sent", "outbox/store.py",
     [(" WHERE event_id = ? AND sent = 0\",", " WHERE event_id = ?\",")]),
    ("pending scans sent rows (no partial index)", "pending-cost", "outbox/store.py",
     [("    \"CREATE INDEX outbox_pending ON outbox(seq) WHERE sent = 0 AND quarantined_at IS NULL\",\n", "")]),
    ("the other side's DB accepted", "wrong-database", "outbox/db.py",
     [("    if (found_app, found_version) != (application_id, version):\n", "    if False:\n")]),
    ("no WAL", "durability", "outbox/db.py",
     [("    mode = con.execute(\"PRAGMA journal_mode = WAL\").fetchone()[0]\n", "    mode = \"wal\"\n")]),
    ("synchronous=OFF", "durability", "outbox/db.py",
     [("\"full\": \"PRAGMA synchronous = FULL\"", "\"full\": \"PRAGMA synchronous = OFF\"")]),
)


class StalePatch(Exception):
    """A mutant's patch no longer applies to the kit: the mutant test is out of date, not the grader."""


def grade(*args, timeout=TIME_BOUND, env=None, cwd=ROOT):
    """Run grade.py; return (exit status, stdout, stderr)."""
    proc = subprocess.run(
        [sys.executable, GRADE] + list(args), cwd=cwd, env=env or python_env(), timeout=timeout,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
    )
    return proc.returncode, proc.stdout, proc.stderr


def make_mutant(root, mistake, edits, path):
    """Copy the kit's packages and reference worker under `root`, then apply `edits` to `path`."""
    copy_packages(root, ("outbox", "sink", "examples"), source=ROOT)
    target = os.path.join(root, path)
    with open(target, encoding="utf-8") as f:
        text = f.read()
    for old, new in edits:
        count = text.count(old)
        if count != 1:
            raise StalePatch("mutant %r: its patch text occurs %d times in %s (want 1): %r" % (mistake, count, path, old))
        text = text.replace(old, new)
    with open(target, "w", encoding="utf-8") as f:
        f.write(text)
    return os.path.join(root, REFERENCE)


def judge(folder, mutant):
    """Grade one mutant with the check aimed at it; return (mistake, check, exit status, that check's result)."""
    mistake, check, path, edits = mutant
    worker = make_mutant(folder, mistake, edits, path)
    status, out, err = grade("--impl", worker, "-k", check, "--json", "--timeout", "8")
    report = json.loads(out)
    return mistake, check, status, report["checks"][0]
