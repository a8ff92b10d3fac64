"""Mutation run over the operator code: small realistic mistakes, each run against the tests that cover it.

`make mutate-ops` (not part of `make test` or CI: about ten minutes on two
cores). Each mutant is a copy of the kit with one edit, made from the text
anchors below (an anchor that no longer occurs exactly once is an error
naming the mutant, never a silent kill); its test modules run in one
process with failfast, and the mutant is killed when any test fails.
First the unmutated copy runs the same modules: a test that already fails
there is left out of every mutant's run (so `--tests-from REV`, the tests of
an earlier commit, measures what those tests could kill). Prints one line
per mutant, the survivors, and the kill rate; exit 0 when the rate is at
least --goal.
"""
import argparse
import concurrent.futures
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:1] = [ROOT]

from tests.support import kit_files, without_audit_markers  # noqa: E402  (after the path is set, as in tests/run.py)

RUN_TIMEOUT = 300  # seconds for one mutant's modules
# Each test module once, under its name since issue 19 (one test module per library module).
OPS_STORE = ("tests.test_outbox_upgrade", "tests.test_outbox_attempts", "tests.test_outbox_operations",
             "tests.test_outbox_backoff", "tests.test_outbox_prometheus")
OPS_CLI = ("tests.test_outbox_cli_ops", "tests.test_outbox_nagios", "tests.test_outbox_textfile", "tests.test_outbox_cli")
RELAY = ("tests.test_outbox_relay", "tests.test_outbox_cli_relay") + OPS_STORE
STORE = OPS_STORE + OPS_CLI + ("tests.test_outbox_failures", "tests.test_outbox_relay")
EVIDENCE = ("tests.test_outbox_evidence", "tests.test_outbox_cli_relay", "tests.test_outbox_upgrade")
UPGRADE = OPS_STORE + OPS_CLI
METRICS = OPS_STORE + OPS_CLI + ("tests.test_alerts",)
CLI = ("tests.test_outbox_cli_args", "tests.test_outbox_cli_relay") + OPS_CLI
READONLY = ("tests.test_outbox_readonly", "tests.test_outbox_store", "tests.test_outbox_dispatch", "tests.test_outbox_db",
            "tests.test_sink_inbox") + OPS_CLI
# The modules' names before issue 19, so that --tests-from an earlier revision still finds its tests.
BEFORE_ISSUE_19 = {
    "tests.test_outbox_relay": "tests.test_ops_relay_loop", "tests.test_outbox_cli_relay": "tests.test_ops_relay",
    "tests.test_outbox_failures": "tests.test_ops_failures", "tests.test_outbox_evidence": "tests.test_ops_evidence",
    "tests.test_outbox_cli_args": "tests.test_ops_args", "tests.test_alerts": "tests.test_ops_alerts",
    "tests.test_outbox_readonly": "tests.test_ops_readonly", "tests.test_outbox_store": "tests.test_store",
    "tests.test_outbox_dispatch": "tests.test_pinned", "tests.test_outbox_db": "tests.test_pinned",
    "tests.test_sink_inbox": "tests.test_pinned",
    "tests.test_outbox_upgrade": "tests.test_ops_store", "tests.test_outbox_attempts": "tests.test_ops_store",
    "tests.test_outbox_operations": "tests.test_ops_store", "tests.test_outbox_backoff": "tests.test_ops_store",
    "tests.test_outbox_prometheus": "tests.test_ops_store",
    "tests.test_outbox_cli_ops": "tests.test_ops_cli", "tests.test_outbox_nagios": "tests.test_ops_cli",
    "tests.test_outbox_textfile": "tests.test_ops_cli",
}

# (name, file, [(text in the kit, text in the mutant)], test modules)
MUTANTS = (
    # The relay (outbox/ops/relay.py) and the failure kinds (outbox/ops/failures.py).
    ("backoff never starts again after a good round", "outbox/ops/relay.py",
     [("            failed_rounds = 0\n", "")], RELAY),
    ("an ACK in a failed batch does not start the backoff again", "outbox/ops/relay.py",
     [("failed_rounds = 1 if batch[\"acked\"] else failed_rounds + 1  # an ACK breaks", "failed_rounds += 1  #")],
     RELAY),
    ("progress printed every round", "outbox/ops/relay.py",
     [("        if now - self.at < PROGRESS_EVERY:\n            return\n", "")], RELAY),
    ("progress printed while idle or failing too", "outbox/ops/relay.py",
     [("        if tally.sent == self.sent:\n", "        if False:\n")], RELAY),
    ("events/s averaged since the start", "outbox/ops/relay.py",
     [("        self.at, self.sent = now, tally.sent\n", "        self.sent = tally.sent\n")], RELAY),
    ("a failed batch's marked items not counted", "outbox/ops/relay.py",
     [("                tally.sent += batch[\"marked\"]  # every ACK before the failure", "                pass  #")],
     RELAY),
    ("the alert counts every attempt, outages included", "outbox/ops/relay.py",
     [('head["permanent_failures"] >= max_attempts', 'head["attempts"] >= max_attempts')], RELAY),
    ("one refusal more than --max-attempts", "outbox/ops/relay.py",
     [('head["permanent_failures"] >= max_attempts', 'head["permanent_failures"] > max_attempts')], RELAY),
    ("the outage never ends", "outbox/ops/relay.py",
     [("back after %.1f s\" % (self.clock.monotonic() - self.since))\n            self.since = None\n",
       "back after %.1f s\" % (self.clock.monotonic() - self.since))\n")], RELAY),
    ("the unreachable line on every failure", "outbox/ops/relay.py",
     [("        if self.since is None:\n            self.since = now\n",
       "        if True:\n            self.since = self.since or now\n")], RELAY),
    ("give-up's last wait not cut to the time left", "outbox/ops/relay.py",
     [("        return min(wait, left)\n", "        return wait\n")], RELAY),
    ("never gives up", "outbox/ops/relay.py",
     [("        left = self.since + self.give_up_after - now\n        if left <= 0:\n",
       "        left = self.since + self.give_up_after - now\n        if False:\n")], RELAY),
    ("a stop does not stop the batch", "outbox/ops/relay.py",
     [("        if stop():\n            raise Stopping", "        if False:\n            raise Stopping")], RELAY),
    ("a stop counted as an attempt", "outbox/ops/relay.py",
     [("        if stop():\n            raise Stopping(\"relay stopping: %r not sent\" % (event_id,))\n"
       "        recording[\"before_send\"](event_id)\n",
       "        recording[\"before_send\"](event_id)\n"
       "        if stop():\n            raise Stopping(\"relay stopping: %r not sent\" % (event_id,))\n")], RELAY),
    ("a stop recorded as the head's failure", "outbox/ops/relay.py",
     [("        if stop():\n            raise Stopping(\"relay stopping: %r not sent\" % (event_id,))\n",
       "        if stop():\n            recording[\"on_failure\"](event_id, Stopping(\"relay stopping\"))\n"
       "            raise Stopping(\"relay stopping: %r not sent\" % (event_id,))\n")], RELAY),
    ("oldest pending age from the newest item", "outbox/ops/operations.py",
     [("SELECT count(*), min(created_at), coalesce", "SELECT count(*), max(created_at), coalesce")], STORE),
    ("overtakers read after the requeue too", "outbox/ops/operations.py",
     [('    if record["requeued_at"] is not None:\n        return kept\n', '    if False:\n        return kept\n')],
     STORE + ("tests.test_outbox_cli_relay",)),
    ("the overtakers of an open quarantine not read from the outbox", "outbox/ops/operations.py",
     [('    return sorted(set(kept) | set(sent))\n', '    return kept\n')], STORE + ("tests.test_outbox_cli_relay",)),
    ("requeue keeps no overtakers", "outbox/ops/operations.py",
     [('            "WHERE q.event_id = ? AND q.requeued_at IS NULL",\n            (event_id,),\n',
       '            "WHERE q.event_id = ? AND q.requeued_at IS NULL AND 0",\n            (event_id,),\n')],
     STORE + ("tests.test_outbox_cli_relay",)),
    ("requeue counts pending rows as overtakers", "outbox/ops/operations.py",
     [("JOIN outbox AS o ON o.sent = 1 AND o.seq > q.seq ", "JOIN outbox AS o ON o.seq > q.seq ")], STORE),
    ("a purge loses the overtakers of an open quarantine", "outbox/ops/operations.py",
     [('            "WHERE q.requeued_at IS NULL AND o.seq IN (SELECT seq FROM outbox WHERE sent = 1 "',
       '            "WHERE q.requeued_at IS NULL AND 0 AND o.seq IN (SELECT seq FROM outbox WHERE sent = 1 "')],
     STORE + EVIDENCE),
    ("requeue keeps the permanent failures", "outbox/ops/operations.py",
     [('"last_attempt_at = NULL, last_error = NULL, last_error_kind = NULL, permanent_failures = 0 "',
       '"last_attempt_at = NULL, last_error = NULL, last_error_kind = NULL "')], STORE),
    ("retry keeps the permanent failures", "outbox/ops/operations.py",
     [('"UPDATE outbox SET attempts = 0, permanent_failures = 0, last_attempt_at = NULL, last_error = NULL, "',
       '"UPDATE outbox SET attempts = 0, last_attempt_at = NULL, last_error = NULL, "')], STORE),
    ("retry of a quarantined item", "outbox/ops/operations.py",
     [('        if row["quarantined_at"] is not None:\n            raise OutboxError("%r is quarantined (since %s); '
       'requeue', '        if False:\n            raise OutboxError("%r is quarantined (since %s); requeue')], STORE),
    ("every failure counted as permanent", "outbox/ops/attempts.py",
     [("1 if failures.is_permanent(kind) else 0", "1")], STORE),
    ("the original payload not kept", "outbox/ops/operations.py",
     [('None if payload is None else row["payload"]', "payload")], STORE + EVIDENCE),
    ("history: only the latest quarantine", "outbox/ops/operations.py",
     [('"corrected_payload FROM quarantines WHERE event_id = ? ORDER BY id",',
       '"corrected_payload FROM quarantines WHERE event_id = ? ORDER BY id DESC LIMIT 1",')], STORE + EVIDENCE),
    ("quarantined listed newest first", "outbox/ops/operations.py",
     [('"last_error_kind FROM outbox WHERE sent = 0 AND quarantined_at IS NOT NULL ORDER BY seq")]',
       '"last_error_kind FROM outbox WHERE sent = 0 AND quarantined_at IS NOT NULL ORDER BY seq DESC")]')], STORE),
    ("purge of rows sent after the cutoff", "outbox/ops/operations.py",
     [('"DELETE FROM outbox WHERE seq IN (SELECT seq FROM outbox WHERE sent = 1 AND quarantined_at IS NULL "\n'
       '            "AND sent_at <= ? ORDER BY seq LIMIT ?)",',
       '"DELETE FROM outbox WHERE seq IN (SELECT seq FROM outbox WHERE sent = 1 AND quarantined_at IS NULL "\n'
       '            "AND sent_at >= ? ORDER BY seq LIMIT ?)",')],
     OPS_STORE + OPS_CLI),
    # The upgrade.
    ("an upgrade that loses sent_at", "outbox/core/upgrade.py",
     [('    "ALTER TABLE outbox ADD COLUMN last_error_kind TEXT",\n',
       '    "ALTER TABLE outbox ADD COLUMN last_error_kind TEXT",\n    "UPDATE outbox SET sent_at = created_at",\n')],
     UPGRADE),
    ("the upgrade in one transaction per step", "outbox/core/upgrade.py",
     [("                for statement in upgrades[step]:\n                    con.execute(statement)\n",
       "                for statement in upgrades[step]:\n                    con.execute(statement)\n"
       "                con.execute(\"COMMIT\")\n                con.execute(\"BEGIN IMMEDIATE\")\n")], UPGRADE),
    ("upgraded rows start with a refusal", "outbox/core/upgrade.py",
     [("permanent_failures INTEGER NOT NULL DEFAULT 0\",", "permanent_failures INTEGER NOT NULL DEFAULT 1\",")], UPGRADE),
    ("a newer file accepted", "outbox/core/upgrade.py", [("    if found > version:\n        raise _written_by_newer",
                                                "    if False:\n        raise _written_by_newer")], UPGRADE),
    # Metrics.
    ("a relay counter typed as a gauge", "outbox/cli/relay.py",
     [('"outbox_relay_sent_total", "counter"', '"outbox_relay_sent_total", "gauge"')], METRICS),
    ("gauges typed as counters", "outbox/cli/ops.py",
     [('lines += prometheus.family(name, "gauge", help_text', 'lines += prometheus.family(name, "counter", help_text')],
     METRICS),
    ("failure kinds listed only once seen", "outbox/cli/relay.py",
     [("for kind in sorted(failures.TRANSIENT | failures.PERMANENT)", "for kind in sorted(tally.failures)")], METRICS),
    ("the metrics file written in place", "outbox/export/textfile.py",
     [("        os.replace(temporary, path)\n",
       "        os.unlink(temporary)\n        with open(path, \"w\", encoding=\"utf-8\") as f:\n"
       "            for line in text.splitlines(True):\n                f.write(line)\n                f.flush()\n")],
     OPS_CLI),
    ("the metrics file readable by its owner only", "outbox/export/textfile.py", [("        os.chmod(temporary, 0o644)\n", "")],
     OPS_CLI),
    ("the sink's last delivery time from the first delivery", "sink/views.py",
     [("SELECT max(received_at) FROM deliveries", "SELECT min(received_at) FROM deliveries")], METRICS),
    # status --check.
    ("late delivery only a warning", "outbox/export/nagios.py", [("        status = CRITICAL\n", "        status = WARNING\n")],
     OPS_CLI),
    ("one quarantined item over the threshold", "outbox/export/nagios.py",
     [('    if figures["quarantined"] > max_quarantined:\n', '    if figures["quarantined"] >= max_quarantined:\n')],
     OPS_CLI),
    ("a warning hides a critical", "outbox/export/nagios.py",
     [("        status = max(status, WARNING)\n        problems.append(\"%d quarantined",
       "        status = WARNING\n        problems.append(\"%d quarantined")], OPS_CLI),
    # Reading without creating a file.
    ("read-only open without immutable", "outbox/core/readonly.py",
     [('        return uri + "&immutable=1"\n', '        return uri\n')], READONLY),
    ("a WAL with commits read as if empty", "outbox/core/readonly.py",
     [("    if not os.path.exists(wal) or os.path.getsize(wal) == 0:\n",
       "    if not os.path.exists(wal) or os.path.getsize(wal) >= 0:\n")], READONLY),
    # The command line.
    ("--limit 17 accepted", "outbox/cli/args.py",
     [("not 1 <= value <= store.MAX_BATCH", "not 1 <= value")], CLI),
    ("deep JSON not named as --event's fault", "outbox/cli/ops.py",
     [("        except (ValueError, RecursionError) as exc:\n", "        except ValueError as exc:\n")], CLI),
    ("--max-age accepted without --check", "outbox/cli/ops.py",
     [("    if not args.check and (args.max_age", "    if False and (args.max_age")], CLI),
    ("a conflict's alert names retry, not requeue --event", "outbox/cli/relay.py",
     [('python -m outbox requeue %s --db %s --event JSON', 'python -m outbox retry %s --db %s')],
     CLI),
)

# Runs in the mutant's copy, from its root: the modules' tests minus the skipped ids, failfast.
WORKER = r"""
import json, sys, unittest
modules, skip, failfast = json.loads(sys.argv[1]), set(json.loads(sys.argv[2])), sys.argv[3] == "1"
suite = unittest.TestSuite()

def flatten(item):
    if isinstance(item, unittest.TestSuite):
        for inner in item:
            yield from flatten(inner)
    else:
        yield item

for name in modules:
    for test in flatten(unittest.defaultTestLoader.loadTestsFromName(name)):
        if test.id() not in skip:
            suite.addTest(test)
result = unittest.TextTestRunner(stream=sys.stderr, verbosity=0, failfast=failfast).run(suite)
failed = [test.id() for test, _ in result.failures + result.errors]
print("@@failed " + json.dumps(failed))
sys.exit(1 if failed or not result.testsRun else 0)
"""


class StalePatch(Exception):
    """A mutant's anchor no longer occurs exactly once: the list is out of date, not the tests."""


def copy_kit(dest, tests_from):
    for name in kit_files():
        if tests_from and name.startswith("tests/"):
            continue
        target = os.path.join(dest, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, name), target)
    if tests_from:
        archive = subprocess.run(["git", "-C", ROOT, "archive", tests_from, "tests"], stdout=subprocess.PIPE,
                                 check=True)
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(dest)


def apply(root, name, path, edits):
    target = os.path.join(root, path)
    with open(target, encoding="utf-8") as f:
        text = without_audit_markers(f.read())
    for old, new in edits:
        if text.count(old) != 1:
            raise StalePatch("mutant %r: its anchor occurs %d times in %s: %r" % (name, text.count(old), path, old))
        text = text.replace(old, new)
    with open(target, "w", encoding="utf-8") as f:
        f.write(text)


def present(root, modules):
    """`modules` that exist in `root`, each once; a module missing there by its name of before issue 19."""
    found = []
    for module in modules:
        for name in (module, BEFORE_ISSUE_19.get(module)):
            if name and os.path.isfile(os.path.join(root, *name.split(".")) + ".py"):
                if name not in found:
                    found.append(name)
                break
    return found


def run_tests(root, modules, skip, failfast):
    """(exit status, failed test ids) of `modules` run in `root`."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(PYTHONPATH=root, PYTHONDONTWRITEBYTECODE="1")
    try:
        proc = subprocess.run([sys.executable, "-c", WORKER, json.dumps(modules), json.dumps(sorted(skip)),
                               "1" if failfast else "0"], cwd=root, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True,
                              timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, []  # a mutant that hangs its tests is killed by the timeout
    lines = [line for line in proc.stdout.splitlines() if line.startswith("@@failed ")]
    return proc.returncode, json.loads(lines[-1][len("@@failed "):]) if lines else []


def judge(mutant, stage, skip):
    name, path, edits, modules = mutant
    with tempfile.TemporaryDirectory(prefix="mutate-ops-") as folder:
        root = os.path.join(folder, "kit")
        shutil.copytree(stage, root)
        apply(root, name, path, edits)
        modules = present(root, modules)
        if not modules:
            return name, None, "no test module covers it"
        started = time.monotonic()
        status, failed = run_tests(root, modules, skip, failfast=True)
        if status is None:
            detail = "its tests timed out"
        else:
            detail = failed[0] if failed else "no test failed"
        return name, status != 0, "%.0fs, %s" % (time.monotonic() - started, detail)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests-from", metavar="REV", help="the tests/ of this git revision (default: this tree's)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default: %(default)s)")
    parser.add_argument("-k", metavar="WORDS", help="only the mutants whose name contains WORDS")
    parser.add_argument("--goal", type=float, default=0.95, help="kill rate to exit 0 (default: %(default)s)")
    args = parser.parse_args(argv)
    mutants = [m for m in MUTANTS if args.k is None or args.k in m[0]]
    with tempfile.TemporaryDirectory(prefix="mutate-ops-") as stage:
        copy_kit(stage, args.tests_from)  # once: edits to the tree while this runs do not leak in
        for name, path, edits, _ in mutants:  # every anchor checked before anything runs
            apply(stage, name, path, [(old, old) for old, _ in edits])
        modules = sorted({m for mutant in mutants for m in present(stage, mutant[3])})
        status, failing = run_tests(stage, modules, (), failfast=False)
        if failing:
            print("left out, failing on the unmutated code: %s" % ", ".join(failing))
        elif status != 0:
            print("the unmutated code does not pass its tests (exit %s)" % status)
            return 2
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            verdicts = list(pool.map(lambda mutant: judge(mutant, stage, set(failing)), mutants))
    counted = [v for v in verdicts if v[1] is not None]
    for name, killed, detail in verdicts:
        print("%-8s %s (%s)" % ({True: "killed", False: "SURVIVED", None: "n/a"}[killed], name, detail))
    killed = sum(1 for v in counted if v[1])
    rate = killed / len(counted) if counted else 0.0
    print("mutate-ops: %d of %d killed (%.0f%%)%s" % (killed, len(counted), 100 * rate,
                                                       "; tests from %s" % args.tests_from if args.tests_from else ""))
    return 0 if rate >= args.goal else 1


if __name__ == "__main__":
    sys.exit(main())
