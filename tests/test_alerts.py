"""docs/alerts.yml has the shape `promtool check rules` accepts, and reads metrics the kit really exports.

Where promtool is installed, `promtool check rules` and `promtool test rules
docs/alerts.test.yml` run too (skipped by name otherwise). Without it, this
checks the structure itself: a strict YAML subset (block mappings and sequences,
double-quoted strings, plain scalars only for names and durations, so any
YAML parser reads the same), the rule file's keys and their types, alert
names, durations, label names, balanced brackets in each expression, and
that every outbox_/sink_ metric an expression names is one the kit writes.
PromQL itself is not parsed.
"""
import json
import os
import re
import shutil
import subprocess
import unittest

from outbox.ops import relay
from outbox.cli.ops import render_status
from outbox.cli.relay import render_relay
from sink import metrics
from tests.support import ROOT, read_doc

ALERTS = os.path.join(ROOT, "docs", "alerts.yml")
ALERT_TESTS = os.path.join(ROOT, "docs", "alerts.test.yml")
PLAIN = re.compile(r"[A-Za-z0-9_.-]+\Z")
DURATION = re.compile(r"(?:[0-9]+(?:ms|s|m|h|d|w|y))+\Z")
NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
RULE_KEYS = {"alert", "expr", "for", "labels", "annotations"}
METRIC = re.compile(r"\b((?:outbox|sink)_[a-z_]+)\b")


def parse_yaml_subset(text):
    """The value of `text`, a YAML document in the subset described above; ValueError naming the line otherwise."""
    lines = []
    for number, raw in enumerate(text.split("\n"), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if "\t" in raw:
            raise ValueError("line %d: a tab" % number)
        lines.append((number, len(raw) - len(raw.lstrip(" ")), raw.strip()))
    value, end = _block(lines, 0, 0)
    if end != len(lines):
        raise ValueError("line %d: unexpected indentation" % lines[end][0])
    return value


def _block(lines, start, indent):
    """The mapping or sequence whose items start at lines[start] with exactly `indent` spaces."""
    sequence = lines[start][2].startswith("- ")
    result = [] if sequence else {}
    i = start
    while i < len(lines) and lines[i][1] == indent:
        number, _, text = lines[i]
        if sequence != text.startswith("- "):
            raise ValueError("line %d: a mapping and a sequence mixed at one level" % number)
        if sequence:
            # "- key: value" opens a mapping whose keys sit two columns further in.
            lines[i] = (number, indent + 2, text[2:])
            item, i = _block(lines, i, indent + 2)
            result.append(item)
            continue
        key, sep, rest = text.partition(":")
        if not sep or not NAME.match(key) or (rest and not rest.startswith(" ")):
            raise ValueError("line %d: not a `key: value` line: %r" % (number, text))
        if key in result:
            raise ValueError("line %d: key %r twice" % (number, key))
        rest = rest.strip()
        if rest:
            result[key] = _scalar(number, rest)
            i += 1
        elif i + 1 < len(lines) and lines[i + 1][1] > indent:
            result[key], i = _block(lines, i + 1, lines[i + 1][1])
        else:
            raise ValueError("line %d: %r has no value" % (number, key))
    if i < len(lines) and lines[i][1] > indent:
        raise ValueError("line %d: unexpected indentation" % lines[i][0])
    return result, i


def _scalar(number, text):
    if text.startswith('"'):
        if not text.endswith('"') or len(text) < 2:
            raise ValueError("line %d: an unterminated string" % number)
        return json.loads(text)  # YAML's double-quoted escapes, as far as this file uses them, are JSON's
    if not PLAIN.match(text):
        raise ValueError("line %d: %r must be double-quoted" % (number, text))
    return text


def exported_metrics():
    """Every metric name the kit writes: status --prometheus, the relay's metrics file, the sink's /metrics."""
    figures = {"pending": 1, "sent": 1, "quarantined": 1, "oldest_pending_age_s": 1.0, "max_attempts_pending": 1,
               "head": {"attempts": 1, "permanent_failures": 1, "retried": 1}}
    tally = relay.Tally()
    tally.last_success = 1.0
    status = {"applied": 1, "duplicates": 1, "conflicts": 1, "last_delivery_unix": 1.0, "inventory": {"s": 1}}
    text = render_status(figures) + render_relay(tally) + metrics.render(status)
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def balanced(expr):
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for char in expr:
        if char in "([{":
            stack.append(char)
        elif char in pairs and (not stack or stack.pop() != pairs[char]):
            return False
    return not stack


class AlertRulesTest(unittest.TestCase):
    def setUp(self):
        with open(ALERTS, encoding="utf-8") as f:
            self.document = parse_yaml_subset(f.read())

    def rules(self):
        return [rule for group in self.document["groups"] for rule in group["rules"]]

    def test_the_rule_file_structure(self):
        self.assertEqual(set(self.document), {"groups"})
        names = [group["name"] for group in self.document["groups"]]
        self.assertEqual(len(names), len(set(names)))
        for group in self.document["groups"]:
            self.assertEqual(set(group), {"name", "rules"})
            self.assertIsInstance(group["rules"], list)
        alerts = []
        for rule in self.rules():
            with self.subTest(rule=rule.get("alert")):
                self.assertLessEqual(set(rule), RULE_KEYS)
                self.assertTrue({"alert", "expr"} <= set(rule))
                self.assertRegex(rule["alert"], NAME)
                self.assertIsInstance(rule["expr"], str)
                self.assertTrue(balanced(rule["expr"]), rule["expr"])
                self.assertRegex(rule["for"], DURATION)
                for key in ("labels", "annotations"):
                    for name, value in rule.get(key, {}).items():
                        self.assertRegex(name, NAME)
                        self.assertIsInstance(value, str)
                self.assertIn(rule["labels"]["severity"], ("page", "warning"))
                self.assertTrue({"summary", "description"} <= set(rule["annotations"]))
                alerts.append(rule["alert"])
        self.assertEqual(len(alerts), len(set(alerts)))

    def test_the_rules_cover_what_the_issue_asks_and_read_real_metrics(self):
        exprs = " ".join(rule["expr"] for rule in self.rules())
        for metric in ("outbox_oldest_pending_age_seconds", "outbox_head_attempts", "outbox_quarantined",
                       "outbox_relay_last_success_timestamp_seconds"):
            self.assertIn(metric, exprs)
        self.assertEqual(sorted(set(METRIC.findall(exprs)) - exported_metrics()), [])

    def test_every_alert_is_explained_in_the_readme(self):
        readme = read_doc("docs/operating.md")
        missing = [rule["alert"] for rule in self.rules() if "`%s`" % rule["alert"] not in readme]
        self.assertEqual(missing, [], "alerts docs/operating.md does not explain")

    def test_every_gauge_a_rule_reads_has_a_sample_from_the_first_round(self):
        # A relay that never had a good round, and figures read once: what a rule reads is there, or the rule
        # is about that absence (absent(), or `or` falling back to a gauge that is there).
        figures = {"pending": 0, "sent": 0, "quarantined": 0, "oldest_pending_age_s": None, "max_attempts_pending": 0,
                   "head": None}
        text = render_status(figures, written=1.0) + render_relay(relay.Tally(), started=1.0, written=1.0)
        sampled = set(re.findall(r"^((?:outbox|sink)_[a-z_]+)(?:\{.*\})? ", text, re.M))
        for rule in self.rules():
            read = set(METRIC.findall(rule["expr"])) - {name for name in METRIC.findall(rule["expr"])
                                                        if name.startswith("sink_")}
            with self.subTest(rule=rule["alert"]):
                if "absent(" in rule["expr"] and not (read - sampled):
                    continue
                fallback = "outbox_relay_last_success_timestamp_seconds or outbox_relay_started_timestamp_seconds"
                if fallback in rule["expr"]:
                    read.discard("outbox_relay_last_success_timestamp_seconds")
                if rule["alert"] == "OutboxRelayMetricsAbsent":
                    continue  # it fires on the absence itself
                self.assertEqual(sorted(read - sampled), [], "no sample from the first round")

    def test_the_promtool_unit_tests_cover_each_rule_firing_and_resolved(self):
        with open(ALERT_TESTS, encoding="utf-8") as f:
            text = f.read()
        self.assertIn("rule_files:\n  - alerts.yml\n", text)
        for rule in self.rules():
            checks = re.findall(r"alertname: %s\n        exp_alerts:( \[\])?" % rule["alert"], text)
            with self.subTest(rule=rule["alert"]):
                self.assertIn("", checks, "never seen firing")
                self.assertIn(" []", checks, "never seen quiet or resolved")

    def test_promtool_checks_the_rules_and_runs_their_unit_tests(self):
        promtool = shutil.which("promtool")
        if promtool is None:
            self.skipTest("promtool is not installed (apt-get install prometheus gives it)")
        for args in (["check", "rules", ALERTS], ["test", "rules", ALERT_TESTS]):
            with self.subTest(args=args[:2]):
                done = subprocess.run([promtool] + args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      universal_newlines=True, timeout=120)
                self.assertEqual(done.returncode, 0, done.stdout)
                self.assertIn("SUCCESS", done.stdout)

    def test_the_subset_parser_refuses_what_it_does_not_know(self):
        self.assertEqual(parse_yaml_subset('a:\n  - b: "x: y"\n    c: 5m\n'), {"a": [{"b": "x: y", "c": "5m"}]})
        for text in ("a: x: y\n", "a:\n\tb: c\n", "a: 1\na: 2\n", "a:\n  - b: c\n  d: e\n", "a: x #c\n", "a:\n"):
            with self.assertRaises(ValueError, msg=text):
                parse_yaml_subset(text)


if __name__ == "__main__":
    unittest.main()
