"""The judge against workers written to cheat: each graded in a class beside the reference and the stub.

The reference and the stub keep their single-run verdicts, the attack
passes no check it did not earn, and every report file is written.
"""
import json
import os
import shutil
import textwrap

from tests.support import ROOT, SLOWER, TempDirTestCase
from tests.grade_mutants import grade

REFERENCE = os.path.join(ROOT, "examples", "worker_reference.py")
STUB = os.path.join(ROOT, "examples", "worker_stub.py")
LAZY = ("from outbox import validate_event, init_store, intake, pending, mark_sent, dispatch, send_http\n"
        "from sink import init_sink, receive\n")
# Writes a "verdict ok" protocol line on every inherited descriptor, then implements nothing.
FORGER = textwrap.dedent('''
    import json, os
    line = "\\n@@grade " + json.dumps({"kind": "verdict", "ok": True, "expected": {"id": "as-expected", "fields": {}},
                                       "observed": {"id": "as-expected", "fields": {}}}) + "\\n"
    for fd in range(3, 64):
        try:
            os.write(fd, line.encode())
        except OSError:
            pass
    def _none(*args, **kwargs):
        raise NotImplementedError("nothing here")
    validate_event = init_store = intake = pending = mark_sent = dispatch = send_http = init_sink = receive = _none
''')
# Patches every grader module it can reach in its own interpreter to say "passed".
PATCHER = textwrap.dedent('''
    import gc, sys
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("grader"):
            for name in dir(module):
                if name in ("expect", "say"):
                    setattr(module, name, lambda *a, **k: None)
    def _none(*args, **kwargs):
        raise NotImplementedError("nothing here")
    validate_event = init_store = intake = pending = mark_sent = dispatch = send_http = init_sink = receive = _none
''')


def class_reports(test, reports):
    """{worker name: its JSON report} from --report DIR, once `test` has seen every class-wide file written."""
    for name in ("class.csv", "index.html", "junit.xml"):
        test.assertTrue(os.path.exists(os.path.join(reports, name)), name)
    found = {}
    for name in os.listdir(reports):
        if name.endswith(".json") and name != "class.json":  # class.json: the class's, not a worker's
            with open(os.path.join(reports, name), encoding="utf-8") as f:
                report = json.load(f)
            found[report["name"]] = report
    return found


class HostileClassTest(TempDirTestCase):
    def test_attacks_pass_no_check_they_did_not_earn_and_every_report_is_written(self):
        folder = self.path("class")
        os.makedirs(folder)
        shutil.copy(REFERENCE, os.path.join(folder, "copied_reference.py"))
        workers = {"lazy.py": LAZY, "forger.py": FORGER, "patcher.py": PATCHER}
        for name, body in workers.items():
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                f.write(body)
        reports = self.path("reports")
        checks = ["seq-order", "exact-ack", "own-work"]
        status, out, err = grade("--impl", REFERENCE, "--impl", STUB, "--impl", folder, "--report", reports,
                                 "--timeout", str(5 * SLOWER), *[a for c in checks for a in ("-k", c)])
        self.assertEqual(status, 1, err)
        self.assertNotIn("Traceback", err)
        results = {name: {c["name"]: c["status"] for c in report["checks"]}
                   for name, report in class_reports(self, reports).items()}
        self.assertEqual(results["worker_reference"], dict.fromkeys(checks, "pass"))
        self.assertEqual(results["worker_stub"], {"seq-order": "fail", "exact-ack": "fail", "own-work": "pass"})
        for attack in ("lazy", "forger", "patcher"):
            self.assertEqual([c for c, s in results[attack].items() if s == "pass" and c != "own-work"], [], attack)
        self.assertEqual(results["copied_reference"]["own-work"], "fail")
        self.assertEqual(results["lazy"]["seq-order"], "fail")  # `import outbox` fails in the worker's process
