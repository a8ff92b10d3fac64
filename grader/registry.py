"""Every check of the grader, one row each: its name, the worker functions it needs, the function that runs it.

`--list`, `-k`, the order of the report and the children's imports come
from CHECKS. The slow ones come early, so that they start first when checks
run in parallel. A check is written in these places, each kept true by a
test (CONTRIBUTING.md, "Adding a grader check"):
  here                        its row (an in-process check by its function's name, a string: the
                              deciding side never imports worker_side/, the side that imports the
                              worker), its points in POINTS and its rules in RULES;
  checks.py or scenarios.py   its code: an in-process check, or a story across processes;
  messages.py, messages_ja.py "proves.<name>", what it proves, and every line it prints;
  docs/participants(.ja).md  the table of checks: a copy of "proves.<name>" in each language;
  docs/rules.md, rules.ja.md  the rules it enforces, by the check's name;
  tests/grade_mutants.py      the mutants of the kit it must fail;
  docs/lab.md, lab.ja.md      the step of the lab that names it.
"""
import collections

from . import scenarios

Check = collections.namedtuple("Check", "name proves needs run")

STORE = ("init_store", "intake")
PUBLISH = STORE + ("dispatch", "send_http")
SINK = ("init_sink", "receive")


def check(name, needs, run):
    return Check(name, "proves." + name, tuple(needs), run)


CHECKS = (
    check("crash-after-ack", PUBLISH + SINK, scenarios.scenario_crash_after_ack),
    check("dropped-response", PUBLISH + SINK, scenarios.scenario_dropped_response),
    check("receive-atomic", PUBLISH + SINK, scenarios.scenario_receive_atomic),
    check("untrusted-ack", PUBLISH, scenarios.scenario_untrusted_ack),
    check("proxy-ignored", PUBLISH, scenarios.scenario_proxy_ignored),
    check("url-rule", ("send_http",), scenarios.in_process("check_url_rule")),
    check("send-timeout", ("send_http",), scenarios.scenario_send_timeout),
    check("pending-cost", STORE + ("pending", "mark_sent"), scenarios.in_process("check_pending_cost")),
    check("seq-order", STORE + ("pending",), scenarios.in_process("check_seq_order")),
    check("stop-on-first-failure", STORE + ("dispatch",), scenarios.in_process("check_stop_on_first_failure")),
    check("no-lock-during-send", STORE + ("dispatch",), scenarios.in_process("check_no_lock_during_send")),
    check("callback-mutation", STORE + ("dispatch",), scenarios.in_process("check_callback_mutation")),
    check("batch-limit", STORE + ("dispatch",), scenarios.in_process("check_batch_limit")),
    check("exact-ack", STORE + ("dispatch",), scenarios.in_process("check_exact_ack")),
    check("conflict", PUBLISH + SINK, scenarios.scenario_conflict),
    check("conflict-committed", SINK, scenarios.in_process("check_conflict_committed")),
    check("receive-inbox", SINK, scenarios.in_process("check_receive_inbox")),
    check("validate-event", ("validate_event",), scenarios.in_process("check_validate_event")),
    check("intake-idempotent", STORE, scenarios.in_process("check_intake_idempotent")),
    check("mark-sent", STORE + ("mark_sent",), scenarios.in_process("check_mark_sent")),
    check("intake-atomic", STORE, scenarios.scenario_intake_atomic),
    check("wrong-database", ("init_store", "init_sink"), scenarios.in_process("check_wrong_database")),
    check("durability", ("init_store", "init_sink"), scenarios.in_process("check_durability")),
    check("own-work", (), scenarios.scenario_own_work),
)
NAMES = tuple(c.name for c in CHECKS)

# Default points per check, out of 100 for the whole registry: the crash stories and the rules where real
# systems lose events weigh most. `--list` shows them; a host overrides them with `--points FILE`.
POINTS = {
    "crash-after-ack": 10, "dropped-response": 8, "receive-atomic": 4, "untrusted-ack": 5, "proxy-ignored": 3,
    "url-rule": 4, "send-timeout": 3, "pending-cost": 3, "seq-order": 4, "stop-on-first-failure": 5,
    "no-lock-during-send": 5, "callback-mutation": 5, "batch-limit": 3, "exact-ack": 4, "conflict": 3,
    "conflict-committed": 3, "receive-inbox": 5, "validate-event": 3, "intake-idempotent": 5, "mark-sent": 3,
    "intake-atomic": 4, "wrong-database": 3, "durability": 3, "own-work": 2,
}
# The rules of docs/rules.md each check enforces (its "check" column; tests/test_grader_registry.py keeps
# this equal to it): a report names them beside a failure.
RULES = {
    "crash-after-ack": ("R3", "D5"), "dropped-response": ("H13",), "receive-atomic": ("R7",),
    "untrusted-ack": ("H6", "H8", "H9", "H10", "H11", "H12"), "proxy-ignored": ("H5",),
    "url-rule": ("C1", "H1", "H2", "H3", "H4"), "send-timeout": ("H7",), "pending-cost": ("P6",),
    "seq-order": ("I4", "P1", "P2", "P3", "P4", "P5"), "stop-on-first-failure": ("D6", "D7"),
    "no-lock-during-send": ("D1",), "callback-mutation": ("D2", "D3"), "batch-limit": ("D8", "D9"),
    "exact-ack": ("D4",), "conflict": ("R5",), "conflict-committed": ("R6",), "receive-inbox": ("S9", "R1", "R2", "R4"),
    "validate-event": ("V1", "V2", "V3", "V4", "V5"), "intake-idempotent": ("S2", "I1", "I3", "I5", "I6"),
    "mark-sent": ("M1", "M2", "M3"), "intake-atomic": ("I2",), "wrong-database": ("S5", "S6", "S7", "S8"),
    "durability": ("S1", "S3", "S4"), "own-work": ("C2",),
}
