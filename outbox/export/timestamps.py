"""How the kit writes a time for a person: UTC, ISO 8601, to the second ("2026-12-01T15:03:08Z").

The DBs keep Unix seconds; every line and JSON value an operator reads, on
either side, writes them through `utc`. No clock is read here.
"""
import time


def utc(timestamp):
    """`timestamp` (Unix seconds) as "YYYY-MM-DDTHH:MM:SSZ", in UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))
