"""The numbered crash points of the delivery path, and what each must leave behind.

Pure data: which process dies where, and the state its target event must be
in right after the crash (applied at the sink? marked sent at the source?).
It starts no process and reads no file.
"""
import collections

PUBLISHER = "publisher"
SINK = "sink"
INTAKE = "intake"

EXIT = "exit"  # os._exit from inside the victim
KILL = "kill"  # SIGKILL from outside, once the victim says it is at the point
MODES = (EXIT, KILL)
MODE_NAMES = {EXIT: "os._exit", KILL: "SIGKILL"}

ABSENT = "absent"  # neither the order row nor the outbox row exists

# key: what the child programs are told; victim: the process that dies;
# hit: (applied, sent) of the target event right after the crash, or ABSENT.
Point = collections.namedtuple("Point", "number key victim where hit")

POINTS = (
    Point(1, "after-pending", PUBLISHER, "publisher: after pending is read", (False, False)),
    Point(2, "after-attempt", PUBLISHER, "publisher: after the attempt is recorded", (False, False)),
    Point(3, "in-send", PUBLISHER, "publisher: inside send, before the request is written", (False, False)),
    Point(4, "sink-committed", PUBLISHER, "publisher: sink committed, response not read", (True, False)),
    Point(5, "after-ack", PUBLISHER, "publisher: after the ACK is verified (after_delivery)", (True, False)),
    Point(6, "after-mark", PUBLISHER, "publisher: after mark_sent commits", (True, True)),
    Point(7, "after-request", SINK, "sink: after the request is read", (False, False)),
    Point(8, "before-commit", SINK, "sink: inside the transaction, before COMMIT", (False, False)),
    Point(9, "after-commit", SINK, "sink: after COMMIT, before the response", (True, False)),
    Point(10, "after-response", SINK, "sink: after the response", (True, True)),
    Point(11, "between-inserts", INTAKE, "intake: inside the transaction, between the inserts", ABSENT),
)
BY_KEY = {point.key: point for point in POINTS}

# Several events, skus shared and not, different quantities: inventory per sku
# is a sum over more than one event, so a lost or doubled one shows.
EVENTS = (
    {"id": "ord-1", "sku": "apple", "qty": 3},
    {"id": "ord-2", "sku": "pear", "qty": 5},
    {"id": "ord-3", "sku": "apple", "qty": 7},
    {"id": "ord-4", "sku": "plum", "qty": 11},
)
# The publisher reads pending two at a time in the crash runs, so "after
# pending is read" has a batch to hit at ord-1 and at ord-3.
BATCH = 2
TARGETS = {"after-pending": (0, 2)}
DEFAULT_TARGETS = (1, 3)  # the second event (others before and after it) and the last one


def targets(point):
    """Indexes into EVENTS of the events a point is aimed at, one run each per mode."""
    return TARGETS.get(point.key, DEFAULT_TARGETS)
