"""The Prometheus text exposition format (version 0.0.4), written and nothing else.

Used by `python -m outbox status --prometheus`, the relay's metrics file and the sink's metrics.
It builds text only: no socket, no file, no DB.
"""
import math
import re

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = ("gauge", "counter")


def family(name, kind, help_text, samples):
    """Lines of one metric family: ``# HELP``, ``# TYPE``, then one sample per line.

    `samples` is a list of (labels dict, value); a value of None is left out
    (the metric has no value now, e.g. the age of the oldest pending item when
    nothing is pending). Names and label names that break the format raise ValueError.
    """
    if not _NAME.match(name) or kind not in TYPES:
        raise ValueError("metric name %r or type %r is not valid in the text format" % (name, kind))
    lines = ["# HELP %s %s" % (name, help_text.replace("\\", "\\\\").replace("\n", "\\n")), "# TYPE %s %s" % (name, kind)]
    for labels, value in samples:
        if value is None:
            continue
        lines.append("%s%s %s" % (name, _labels(labels), _value(value)))
    return lines


def _labels(labels):
    if not labels:
        return ""
    parts = []
    for key in sorted(labels):
        if not _LABEL.match(key) or key.startswith("__"):
            raise ValueError("label name %r is not valid in the text format" % (key,))
        text = str(labels[key]).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
        parts.append('%s="%s"' % (key, text))
    return "{%s}" % ",".join(parts)


def _value(value):
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))
