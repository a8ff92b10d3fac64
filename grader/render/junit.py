"""DIR/junit.xml: a <testsuite> per worker, a <testcase> per check, <failure> (or <error>) with expected/observed.

Language-neutral, like the JSON and the CSV: the English text, whatever
--lang says (a CI server parses it; index.html is the page for people).
A testcase's time is its check's own; a suite's is the sum of its cases'
(checks run side by side, so it can exceed the wall time).
"""
import re
import xml.etree.ElementTree as ET

from ..messages import text
from ..text import shown

NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
VERDICT = {"pass": "PASS", "fail": "FAIL", "error": "ERROR"}


def xml_text(value):
    """`value` shown (grader/text.py), and any character XML 1.0 still cannot carry as U+FFFD."""
    return NOT_XML.sub("\ufffd", shown(value))  # audit: G60


def junit_xml(result):
    root = ET.Element("testsuites", name="grade.py")
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    for worker in result["workers"]:
        seconds = sum(c["seconds"] for c in worker["checks"])
        suite = ET.SubElement(root, "testsuite", name=xml_text(worker["name"]), tests=str(len(worker["checks"])),
                              failures=str(worker["failed"]), errors=str(worker["errors"]), skipped="0",
                              time="%.3f" % seconds)
        for check in worker["checks"]:
            case = ET.SubElement(suite, "testcase", classname=xml_text(worker["name"]), name=check["name"],
                                 time="%.3f" % check["seconds"])
            if check["status"] != "pass":
                message = text("en", "junit.message", expected=check["expected"], observed=check["observed"])
                problem = ET.SubElement(case, "failure" if check["status"] == "fail" else "error",
                                        message=xml_text(message), type=VERDICT[check["status"]])
                problem.text = xml_text(message)
        totals["tests"] += len(worker["checks"])
        totals["failures"] += worker["failed"]
        totals["errors"] += worker["errors"]
        totals["time"] += seconds
    for key, value in totals.items():
        root.set(key, "%.3f" % value if key == "time" else str(value))
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
