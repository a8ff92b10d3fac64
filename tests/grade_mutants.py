"""The mutants of the kit that grade.py must kill, shared by tests/test_grade_mutants_*.py.

Mutants are copies of the kit with one classic mistake each, made at test time
from the small patches below (so there is no second code base to maintain). A
patch whose text no longer occurs exactly once is an ERROR naming the mutant
(StalePatch), never a silent kill: keep the anchor in step with the code.
"""
import collections
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys

from tests.support import ROOT, SLOWER, copy_packages, python_env, without_audit_markers

GRADE = os.path.join(ROOT, "grade.py")
REFERENCE = os.path.join("examples", "worker_reference.py")
TIME_BOUND = 120 * SLOWER  # seconds any single grader run may take

# One mutant: `mistake` names it (docs/rules.md cites it), `check` must fail on it, and its
# report must hold the message `message` (an id anywhere in the expected or observed
# message) and, if given, `words` in its English text. `also`: (check, message id) pairs,
# later checks whose step fails because of this mistake and must name its cause.
Mutant = collections.namedtuple("Mutant", "mistake check path edits message words also")


def mutant(mistake, check, path, edits, message, words=None, also=()):
    return Mutant(mistake, check, path, edits, message, words, tuple(also))


MUTANTS = (
    mutant("the reference copied with a new docstring", "own-work", "examples/worker_reference.py",
           [('"""This kit as one worker module', '"""My very own worker module')], "own.copy"),
    mutant("sent=1 saved before sending", "crash-after-ack", "outbox/core/dispatch.py",
           [("    for selected in batch:\n", "    for selected in batch:\n        mark_sent(con, selected[\"id\"])\n")],
           "crash.still-pending"),
    mutant("marked before after_delivery", "crash-after-ack", "outbox/core/dispatch.py",
           [("        if after_delivery is not None:\n            after_delivery(dict(selected))\n"
             "        db.set_synchronous(con, synchronous)\n"
             "        if mark_sent(con, selected[\"id\"]):\n            marked += 1\n",
             "        db.set_synchronous(con, synchronous)\n"
             "        if mark_sent(con, selected[\"id\"]):\n            marked += 1\n"
             "        if after_delivery is not None:\n            after_delivery(dict(selected))\n")],
           "crash.still-pending"),
    mutant("pending that marks rows", "seq-order", "outbox/core/store.py",
           [("    rows = con.execute(PENDING_SQL, (limit,)).fetchall()\n",
             "    rows = con.execute(PENDING_SQL, (limit,)).fetchall()\n"
             "    con.execute(\"UPDATE outbox SET sent = 1 WHERE seq IN (SELECT seq FROM outbox WHERE sent = 0 ORDER BY seq LIMIT ?)\", (limit,))\n")],
           "seq.read-only"),
    mutant("order by id", "seq-order", "outbox/core/store.py", [("ORDER BY seq LIMIT ?\"", "ORDER BY event_id LIMIT ?\"")],
           "seq.order", also=[("pending-cost", "cost.order")]),
    mutant("order by created_at", "seq-order", "outbox/core/store.py",
           [("ORDER BY seq LIMIT ?\"", "ORDER BY created_at LIMIT ?\"")], "seq.order"),
    mutant("pending returns the seq too", "seq-order", "outbox/core/store.py",
           [("    return [validate_event(json.loads(payload)) for (payload,) in rows]\n",
             "    return [dict(validate_event(json.loads(payload)), seq=n) for n, (payload,) in enumerate(rows, 1)]\n")],
           "seq.keys", "['id', 'qty', 'seq', 'sku']",
           also=[("receive-atomic", "publish.event-keys"), ("crash-after-ack", "publish.event-keys")]),
    mutant("a bool limit accepted", "seq-order", "outbox/core/store.py",
           [("    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BATCH:\n",
             "    if not isinstance(limit, int) or not 1 <= limit <= MAX_BATCH:\n")], "seq.bad-limit", "limit True"),
    mutant("pending ignores limit", "seq-order", "outbox/core/store.py",
           [("    rows = con.execute(PENDING_SQL, (limit,)).fetchall()\n",
             "    rows = con.execute(PENDING_SQL, (MAX_BATCH,)).fetchall()\n")], "seq.limit-one"),
    mutant("pending leaves its transaction open", "seq-order", "outbox/core/store.py",
           [("    rows = con.execute(PENDING_SQL, (limit,)).fetchall()\n",
             "    con.execute(\"BEGIN\")\n    rows = con.execute(PENDING_SQL, (limit,)).fetchall()\n")], "seq.open"),
    mutant("a seq reused (no AUTOINCREMENT)", "seq-order", "outbox/core/store.py",
           [("        seq INTEGER PRIMARY KEY AUTOINCREMENT,\n        event_id TEXT NOT NULL UNIQUE REFERENCES orders(id),\n",
             "        seq INTEGER PRIMARY KEY,\n        event_id TEXT NOT NULL UNIQUE REFERENCES orders(id),\n")],
           "seq.never-reused"),
    mutant("continue after a failure", "stop-on-first-failure", "outbox/core/dispatch.py",
           [("    marked = 0\n", "    marked = 0\n    failure = None\n"),
            ("                on_failure(selected[\"id\"], exc)\n            raise\n",
             "                on_failure(selected[\"id\"], exc)\n            failure = failure or exc\n            continue\n"),
            ("    return marked\n", "    if failure is not None:\n        raise failure\n    return marked\n")],
           "stop.calls"),
    mutant("error swallowed", "stop-on-first-failure", "outbox/core/dispatch.py",
           [("                on_failure(selected[\"id\"], exc)\n            raise\n",
             "                on_failure(selected[\"id\"], exc)\n            return marked\n")],
           "stop.error-out"),
    mutant("the exception wrapped, not the original", "stop-on-first-failure", "outbox/core/dispatch.py",
           [("                on_failure(selected[\"id\"], exc)\n            raise\n",
             "                on_failure(selected[\"id\"], exc)\n"
             "            raise NotAcknowledged(\"send failed: %s\" % exc) from exc\n")],
           "stop.same-error"),
    mutant("truthy ACK accepted", "exact-ack", "outbox/core/dispatch.py", [("        if result is not True:\n", "        if not result:\n")],
           "ack.raises"),
    mutant("write transaction held during send", "no-lock-during-send", "outbox/core/dispatch.py",
           [("            result = send(dict(selected))\n",
             "            if not con.in_transaction:\n                con.execute(\"BEGIN IMMEDIATE\")\n"
             "            result = send(dict(selected))\n"),
            ("        if mark_sent(con, selected[\"id\"]):\n",
             "        if con.execute(\"UPDATE outbox SET sent = 1 WHERE event_id = ? AND sent = 0\", (selected[\"id\"],)).rowcount:\n"),
            ("    return marked\n", "    if con.in_transaction:\n        con.execute(\"COMMIT\")\n    return marked\n")],
           "lock.outside"),
    mutant("mark using the callback's dict", "callback-mutation", "outbox/core/dispatch.py",
           [("            result = send(dict(selected))\n", "            result = send(selected)\n")], "mutation.flags"),
    mutant("after_delivery gets dispatch's own dict", "callback-mutation", "outbox/core/dispatch.py",
           [("            after_delivery(dict(selected))\n", "            after_delivery(selected)\n")], "mutation.after-flags"),
    mutant("dispatch ignores limit", "batch-limit", "outbox/core/dispatch.py",
           [("pending(con, limit)", "pending(con, MAX_BATCH)")], "batch.limit",
           also=[("callback-mutation", "mutation.one")]),
    mutant("dispatch sends in id order", "batch-limit", "outbox/core/dispatch.py",
           [("    for selected in batch:\n", "    for selected in sorted(batch, key=lambda event: event[\"id\"]):\n")],
           "batch.order"),
    mutant("dispatch returns the batch size", "batch-limit", "outbox/core/dispatch.py",
           [("    return marked\n", "    return len(batch)\n")], "batch.counts"),
    mutant("redirects followed", "untrusted-ack", "outbox/core/sender.py",
           [("_RefuseRedirects(), urllib.request.HTTPErrorProcessor()",
             "urllib.request.HTTPRedirectHandler(), urllib.request.HTTPErrorProcessor()")],
           "untrusted.fails", "redirect"),
    mutant("proxy variables honoured", "proxy-ignored", "outbox/core/sender.py",
           [("urllib.request.ProxyHandler({}),", "urllib.request.ProxyHandler(),")], "proxy.trap-empty"),
    mutant("wrong-id ACK accepted", "untrusted-ack", "outbox/core/sender.py", [("    elif ack[\"id\"] != event_id:\n", "    elif False:\n")],
           "untrusted.fails", "wrong id"),
    mutant("an ACK without id accepted", "untrusted-ack", "outbox/core/sender.py",
           [("    elif \"id\" not in ack:\n        what = 'ACK has no \"id\"'\n    elif ack[\"id\"] != event_id:\n",
             "    elif ack.get(\"id\", event_id) != event_id:\n")],
           "untrusted.raises", "without \"id\""),
    mutant("oversized ACK accepted", "untrusted-ack", "outbox/core/sender.py", [("MAX_ACK_BYTES = 4096\n", "MAX_ACK_BYTES = 1 << 20\n")],
           "untrusted.fails", "oversized"),
    mutant("ACKs limited to 1 KiB", "untrusted-ack", "outbox/core/sender.py", [("MAX_ACK_BYTES = 4096\n", "MAX_ACK_BYTES = 1024\n")],
           "untrusted.true", "4,096 bytes"),
    mutant("any 2xx status accepted", "untrusted-ack", "outbox/core/sender.py",
           [("            if response.status != 200:\n", "            if not 200 <= response.status < 300:\n")],
           "untrusted.raises", "status 201"),
    mutant("a truthy \"ack\" accepted", "untrusted-ack", "outbox/core/sender.py",
           [("    elif ack[\"ack\"] is not True:\n", "    elif not ack[\"ack\"]:\n")], "untrusted.fails", "\"ack\": \"true\""),
    mutant("send_http returns the ACK, not True", "untrusted-ack", "outbox/core/sender.py",
           [("    _check_ack(body, event[\"id\"], digest(event), where, require_digest=require_digest)\n    return True\n",
             "    _check_ack(body, event[\"id\"], digest(event), where, require_digest=require_digest)\n"
             "    return loads_strict(body)\n")],
           "untrusted.true", "a perfect ACK", also=[("proxy-ignored", "rule.send-http-true")]),
    mutant("NoAnswer not a DeliveryError", "dropped-response", "outbox/core/errors.py",
           # Still constructed as the sender constructs it (kind=...), so only the base class is wrong.
           [("class NoAnswer(DeliveryError):\n",
             "class NoAnswer(OutboxError):\n    def __init__(self, message, *, kind=None):\n"
             "        super().__init__(message)\n\n")], "rule.delivery-error", "got NoAnswer"),
    mutant("no URL check in send_http", "url-rule", "outbox/core/sender.py",
           [("    check_url(url)\n    check_timeout(timeout)\n", "    check_timeout(timeout)\n")], "url.socket"),
    mutant("any path accepted", "url-rule", "outbox/core/sender.py",
           [("    if parts[\"path\"] != \"/events\":\n", "    if parts[\"path\"] is None:\n")], "url.refused", "/other"),
    mutant("leading zeros accepted in an address", "url-rule", "outbox/core/sender.py",
           [("_IPV4 = re.compile(r\"(?:0|[1-9][0-9]{0,2})(?:\\.(?:0|[1-9][0-9]{0,2})){3}\")",
             "_IPV4 = re.compile(r\"[0-9]{1,3}(?:\\.[0-9]{1,3}){3}\")")], "url.refused", "127.000.0.1"),
    mutant("an octet over 255 accepted", "url-rule", "outbox/core/sender.py",
           [("        if octets[0] == 127 and max(octets) <= 255:\n", "        if octets[0] == 127:\n")],
           "url.refused", "127.0.0.256"),
    mutant("LOCALHOST refused", "url-rule", "outbox/core/sender.py",
           [("    if text.lower() == \"localhost\":\n", "    if text == \"localhost\":\n")], "url.refused-loopback", "LOCALHOST"),
    mutant("an empty port taken as port 80", "url-rule", "outbox/core/sender.py",
           [("    if port is not None and not (_PORT.fullmatch(port) and int(port) <= 65535):\n",
             "    if port and not (_PORT.fullmatch(port) and int(port) <= 65535):\n"),
            ("    return host, 80 if port is None else int(port)\n", "    return host, int(port or 80)\n")],
           "url.refused", "127.0.0.1:/events"),
    mutant("port 0 accepted", "url-rule", "outbox/core/sender.py",
           [("_PORT = re.compile(r\"[1-9][0-9]{0,4}\")", "_PORT = re.compile(r\"0|[1-9][0-9]{0,4}\")")],
           "url.refused", ":0/events"),
    mutant("the host looked up to decide whether it is loopback", "url-rule", "outbox/core/sender.py",
           [("    host = loopback_host(parts[\"host\"])\n",
             "    socket.getaddrinfo(parts[\"host\"].strip(\"[]\") or \"localhost\", None)\n"
             "    host = loopback_host(parts[\"host\"])\n")], "url.socket", "getaddrinfo"),
    mutant("send_http without timeout=", "url-rule", "outbox/core/sender.py",
           [("def send_http(url, event, *, timeout=5.0, require_digest=False):\n",
             "def send_http(url, event, *, require_digest=False):\n    timeout = 5.0\n")],
           "impl.signature", "send_http(url, event, *, timeout=5.0)"),
    mutant("a timeout that bounds each read, not the exchange", "send-timeout", "outbox/core/sender.py",
           [("        left = self.deadline - time.monotonic()\n", "        left = 1.0\n")], "timeout.bounded"),
    mutant("sink without dedup", "crash-after-ack", "sink/core/inbox.py",
           [("        if row is None:\n", "        if True:\n"), ("\"INSERT INTO inbox ", "\"INSERT OR REPLACE INTO inbox ")],
           "crash.two-deliveries"),
    mutant("a duplicate not logged", "crash-after-ack", "sink/core/inbox.py",
           [("        con.execute(\n            \"INSERT INTO deliveries ",
             "        if outcome != DUPLICATE:\n            con.execute(\n            \"INSERT INTO deliveries ")],
           "crash.two-deliveries"),
    mutant("inbox and inventory in separate commits", "receive-atomic", "sink/core/inbox.py",
           [("                (event[\"id\"], event_digest, payload, now),\n            )\n",
             "                (event[\"id\"], event_digest, payload, now),\n            )\n"
             "            con.execute(\"COMMIT\")\n            con.execute(\"BEGIN IMMEDIATE\")\n")],
           "receive.whole"),
    mutant("receive does not validate", "receive-inbox", "sink/core/inbox.py",
           [("import time\n", "import json\nimport time\n"),
            ("    event, payload = validate_and_serialise(event)",
             "    payload = json.dumps(event, sort_keys=True, separators=(\",\", \":\"))")],
           "inbox.invalid"),
    mutant("inventory overwritten, not added", "receive-inbox", "sink/core/inbox.py",
           [("\"UPDATE inventory SET qty = qty + ? WHERE sku = ?\"", "\"UPDATE inventory SET qty = ? WHERE sku = ?\"")],
           "inbox.adds"),
    mutant("one inventory row per event, not per sku", "receive-inbox", "sink/core/inbox.py",
           [("        sku TEXT PRIMARY KEY,\n", "        sku TEXT NOT NULL,\n"),
            ("            cur = con.execute(\"UPDATE inventory SET qty = qty + ? WHERE sku = ?\", (event[\"qty\"], event[\"sku\"]))\n"
             "            if cur.rowcount == 0:\n",
             "            if True:\n")],
           "inbox.one-row"),
    mutant("the sink compares qty only", "receive-inbox", "sink/core/inbox.py",
           [("import time\n", "import json\nimport time\n"),
            ("        elif row[0] == event_digest:\n", "        elif json.loads(row[1])[\"qty\"] == event[\"qty\"]:\n")],
           "inbox.conflict-sku"),
    mutant("receive returns its outcome in capitals", "receive-inbox", "sink/core/inbox.py",
           [("    return outcome\n", "    return outcome.upper()\n")], "inbox.applied"),
    mutant("intake in two commits", "intake-atomic", "outbox/core/store.py",
           [("                (event[\"id\"], event[\"sku\"], event[\"qty\"], now),\n            )\n",
             "                (event[\"id\"], event[\"sku\"], event[\"qty\"], now),\n            )\n"
             "            con.execute(\"COMMIT\")\n            con.execute(\"BEGIN IMMEDIATE\")\n")],
           "atomic.both"),
    mutant("conflict ACKed as a duplicate", "conflict", "sink/core/inbox.py",
           [("            outcome = CONFLICT\n", "            outcome = DUPLICATE\n")], "conflict.publish-fails"),
    mutant("conflict rolled back instead of committed", "conflict-committed", "sink/core/inbox.py",
           [("            (event[\"id\"], outcome, event_digest, now),\n        )\n",
             "            (event[\"id\"], outcome, event_digest, now),\n        )\n"
             "        if outcome == CONFLICT:\n            raise Conflict(\"event %r conflicts\" % (event[\"id\"],))\n")],
           "conflict.logged"),
    mutant("validate_event returns its argument", "validate-event", "outbox/core/event.py",
           [("    return {\"id\": event[\"id\"], \"sku\": event[\"sku\"], \"qty\": int(qty)}\n", "    return event\n")],
           "validate.new"),
    mutant("a bool accepted as qty", "validate-event", "outbox/core/event.py",
           [("isinstance(qty, bool) or not isinstance", "not isinstance")], "validate.refused", "a bool qty"),
    mutant("a trailing newline accepted ($ for \\Z)", "validate-event", "outbox/core/event.py", [("{0,63}\\Z\")", "{0,63}$\")")],
           "validate.refused", "a trailing newline"),
    mutant("non-ASCII letters and digits accepted (\\w)", "validate-event", "outbox/core/event.py",
           [("r\"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}\\Z\"", "r\"[^\\W_][\\w.:-]{0,63}\\Z\"")], "validate.refused", "a non-ASCII"),
    mutant("65 characters accepted", "validate-event", "outbox/core/event.py", [("{0,63}\\Z\")", "{0,64}\\Z\")")],
           "validate.refused", "65 characters"),
    mutant("an extra key accepted", "validate-event", "outbox/core/event.py",
           [("    if event.keys() != _FIELD_SET:", "    if not _FIELD_SET.issubset(event):")], "validate.refused", "an extra key"),
    mutant("a refusal that names no field", "validate-event", "outbox/core/event.py",
           [("raise InvalidEvent(\"qty must be an int from %d to %d, got %s\" % (QTY_MIN, QTY_MAX, show(qty)))",
             "raise InvalidEvent(\"invalid event: %s\" % show(qty))")], "validate.names"),
    mutant("intake does not validate", "intake-idempotent", "outbox/core/store.py",
           [("\n    event, payload = validate_and_serialise(event)\n    with db.transaction(con):\n",
             "\n    payload = json.dumps(event, sort_keys=True, separators=(\",\", \":\"))\n    with db.transaction(con):\n")],
           "idem.invalid"),
    mutant("intake returns True, not the seq", "intake-idempotent", "outbox/core/store.py",
           [("            (event[\"id\"], payload, now),\n        )\n        return cur.lastrowid\n",
             "            (event[\"id\"], payload, now),\n        )\n        return True\n")],
           "idem.returns-seq"),
    mutant("intake ignores a conflicting payload", "intake-idempotent", "outbox/core/store.py",
           [("    if row[1] != payload:\n", "    if False:\n")], "idem.conflict"),
    mutant("intake compares qty only", "intake-idempotent", "outbox/core/store.py",
           [("    if row[1] != payload:\n", "    if json.loads(row[1])[\"qty\"] != json.loads(payload)[\"qty\"]:\n")],
           "idem.conflict-sku"),
    mutant("intake's repeat depends on key order", "intake-idempotent", "outbox/core/store.py",
           [("\n    event, payload = validate_and_serialise(event)\n",
             "\n    event, payload = validate_event(event), json.dumps(event, separators=(\",\", \":\"))\n")],
           "idem.repeat-raised"),
    mutant("outbox.payload not the event's JSON", "intake-idempotent", "outbox/core/store.py",
           [("\n    event, payload = validate_and_serialise(event)\n",
             "\n    event, payload = validate_and_serialise(event)\n    payload = repr(sorted(event.items()))\n")],
           "rule.payload"),
    mutant("mark_sent reports a sent row as newly marked", "mark-sent", "outbox/core/store.py",
           [(" WHERE event_id = ? AND sent = 0\",", " WHERE event_id = ?\",")], "mark.true-false"),
    mutant("mark_sent marks the head of the line", "mark-sent", "outbox/core/store.py",
           [("\"UPDATE outbox SET sent = 1, sent_at = ? WHERE event_id = ? AND sent = 0\",",
             "\"UPDATE outbox SET sent = 1, sent_at = ? WHERE seq = (SELECT min(seq) FROM outbox WHERE sent = 0)"
             " AND ? IS NOT NULL\",")], "mark.only-b"),
    mutant("an unknown id not refused", "mark-sent", "outbox/core/store.py",
           [("            raise KeyError(\"no outbox row for event id %r\" % (event_id,))\n", "            return False\n")],
           "mark.unknown"),
    mutant("pending scans sent rows (no partial index)", "pending-cost", "outbox/core/store.py",
           [("    \"CREATE INDEX outbox_pending ON outbox(seq) WHERE sent = 0 AND quarantined_at IS NULL\",\n", "")],
           "cost.flat"),
    mutant("init_store returns a cursor", "durability", "outbox/core/store.py",
           [("kind=\"source\", durability=durability\n    )\n", "kind=\"source\", durability=durability\n    ).cursor()\n")],
           "impl.connection"),
    mutant("the other side's DB accepted", "wrong-database", "outbox/core/db.py",
           [("    if (found_app, found_version) != (application_id, version):\n", "    if False:\n")], "wrongdb.refused-open"),
    mutant("another application's DB taken as new", "wrong-database", "outbox/core/db.py",
           [("    if found_app == 0 and found_version == 0 and tables == 0:\n", "    if found_app == 0 and found_version == 0:\n")],
           "wrongdb.refused-foreign"),
    mutant("a text file refused with sqlite3's own error", "wrong-database", "outbox/core/db.py",
           [("    except sqlite3.DatabaseError as exc:\n        raise WrongDatabase(\"%r is not a %s DB of this kit: %s\" % (path, kind, exc)) from None\n",
             "    except ZeroDivisionError:\n        raise\n")],
           "wrongdb.refused-text"),
    mutant("the look reads the main file only (immutable=1)", "wrong-database", "outbox/core/db.py",
           [("connect(\"file:%s?mode=ro\" % urllib.parse.quote(os.path.abspath(path)), uri=True)",
             "connect(\"file:%s?immutable=1\" % urllib.parse.quote(os.path.abspath(path)), uri=True)"),
            ("    is_new = look(con, path, application_id=application_id, version=version, kind=kind)\n",
             "    peek = sqlite3.connect(\"file:%s?immutable=1\" % urllib.parse.quote(os.path.abspath(path)), uri=True)\n"
             "    try:\n"
             "        is_new = look(peek, path, application_id=application_id, version=version, kind=kind)\n"
             "    finally:\n"
             "        peek.close()\n"),
            ("            if con.execute(\"PRAGMA application_id\").fetchone()[0] == 0:\n", "            if True:\n")],
           "wrongdb.refused-open"),
    mutant("a 0-byte file refused", "wrong-database", "outbox/core/db.py",
           [("    if os.path.isdir(path):\n",
             "    if os.path.isdir(path) or (os.path.isfile(path) and os.path.getsize(path) == 0):\n")],
           "wrongdb.new-empty"),
    mutant("no WAL", "durability", "outbox/core/db.py",
           [("    mode = con.execute(\"PRAGMA journal_mode = WAL\").fetchone()[0]\n", "    mode = \"wal\"\n")], "durable.wal"),
    mutant("synchronous=OFF", "durability", "outbox/core/db.py",
           [("\"full\": \"PRAGMA synchronous = FULL\"", "\"full\": \"PRAGMA synchronous = OFF\"")], "durable.full"),
)
# Issue 24: the families of one-rule mistakes that passed 3.0.0, two or more mutants each, every second one
# written from the rule's text rather than from the first.
MUTANTS += (
    # The URL rule's spellings (corpus: grader/corpus/urls.py).
    mutant("a short port with a leading zero accepted", "url-rule", "outbox/core/sender.py",
           [("_PORT = re.compile(r\"[1-9][0-9]{0,4}\")", "_PORT = re.compile(r\"(?=[0-9]*[1-9])[0-9]{1,5}\")")],
           "url.refused", "127.0.0.1:01/events"),
    mutant("another spelling of the IPv6 loopback accepted", "url-rule", "outbox/core/sender.py",
           [("    if text in (\"[::1]\", \"::1\"):\n",
             "    if text.startswith(\"[\") and text[1:-1].replace(\"0\", \"\").strip(\":\") == \"1\":\n")],
           "url.refused", "[0:0:0:0:0:0:0:1]"),
    mutant("trailing whitespace stripped from the URL", "url-rule", "outbox/core/sender.py",
           [("    # Printable ASCII only, checked first: it also makes lower() below plain ASCII.\n",
             "    url = url.strip()\n")],
           "url.refused", "/events '"),
    mutant("a host that begins with localhost taken", "url-rule", "outbox/core/sender.py",
           [("    if text.lower() == \"localhost\":\n", "    if text.lower().startswith(\"localhost\"):\n")],
           "url.refused", "localhost.example"),
    # The ACK's exactness (corpus: grader/corpus/acks.py).
    mutant("an \"ack\" equal to true accepted (1, 1.0)", "untrusted-ack", "outbox/core/sender.py",
           [("    elif ack[\"ack\"] is not True:\n", "    elif ack[\"ack\"] != True:  # noqa: E712\n")],
           "corpus.rule-ack", "\"ack\": 1,"),
    mutant("the ACK's id compared loosely", "untrusted-ack", "outbox/core/sender.py",
           [("    elif ack[\"id\"] != event_id:\n", "    elif str(ack[\"id\"]).strip().lower() != event_id.lower():\n")],
           "corpus.rule-ack", "\"id\": \"ACK-"),
    mutant("a body over 4 KiB accepted when its size is not announced", "untrusted-ack", "outbox/core/sender.py",
           [("response.read(MAX_ACK_BYTES + 1)", "response.read()"),
            ("    if len(body) > MAX_ACK_BYTES:\n", "    if declared is not None and len(body) > MAX_ACK_BYTES:\n")],
           "corpus.rule-ack", "no Content-Length"),
    # The SQL: ids matched by a pattern or without case (corpus: grader/corpus/marks.py), a seq that is not the
    # row's, an order by another clock.
    mutant("mark_sent matches the id with LIKE", "mark-sent", "outbox/core/store.py",
           [("sent_at = ? WHERE event_id = ? AND sent = 0\",", "sent_at = ? WHERE event_id LIKE ? AND sent = 0\","),
            ("\"SELECT 1 FROM outbox WHERE event_id = ?\"", "\"SELECT 1 FROM outbox WHERE event_id LIKE ?\"")],
           "corpus.rule-mark", "'%'"),
    mutant("mark_sent compares ids without letter case", "mark-sent", "outbox/core/store.py",
           [("sent_at = ? WHERE event_id = ? AND sent = 0\",", "sent_at = ? WHERE event_id = ? COLLATE NOCASE AND sent = 0\","),
            ("\"SELECT 1 FROM outbox WHERE event_id = ?\"", "\"SELECT 1 FROM outbox WHERE event_id = ? COLLATE NOCASE\"")],
           "corpus.rule-mark", "'A_B'"),
    mutant("intake returns a count of the outbox, not the seq", "seq-order", "outbox/core/store.py",
           [("            (event[\"id\"], payload, now),\n        )\n        return cur.lastrowid\n",
             "            (event[\"id\"], payload, now),\n        )\n"
             "        return con.execute(\"SELECT count(*) FROM outbox\").fetchone()[0]\n")],
           "seq.returned-after-delete"),
    mutant("intake returns the order row's rowid", "seq-order", "outbox/core/store.py",
           [("            con.execute(\n                \"INSERT INTO orders (id, sku, qty, created_at)",
             "            order = con.execute(\n                \"INSERT INTO orders (id, sku, qty, created_at)"),
            ("            (event[\"id\"], payload, now),\n        )\n        return cur.lastrowid\n",
             "            (event[\"id\"], payload, now),\n        )\n        return order.lastrowid\n")],
           "seq.returned-after-delete"),
    mutant("order by a monotonic clock", "seq-order", "outbox/core/store.py",
           [("        now = time.time()\n", "        now = time.monotonic()\n"),
            ("ORDER BY seq LIMIT ?\"", "ORDER BY created_at LIMIT ?\"")], "seq.order"),
    mutant("order by time.perf_counter()", "seq-order", "outbox/core/store.py",
           [("        now = time.time()\n", "        now = time.perf_counter()\n"),
            ("ORDER BY seq LIMIT ?\"", "ORDER BY created_at, event_id LIMIT ?\"")], "seq.order"),
    # The delivery loop: one commit per item, after_delivery's error, the default limit.
    mutant("marks committed once per batch", "no-lock-during-send", "outbox/core/dispatch.py",
           # A worker with this mistake has no check before each send either: the kit's own would refuse it.
           [("        if con.in_transaction:\n            # A hook began one", "        if False:\n            # A hook began one"),
            ("        if mark_sent(con, selected[\"id\"]):\n            marked += 1\n",
             "        if not con.in_transaction:\n            con.execute(\"BEGIN IMMEDIATE\")\n"
             "        if con.execute(\"UPDATE outbox SET sent = 1 WHERE event_id = ? AND sent = 0\", (selected[\"id\"],)).rowcount:\n"
             "            marked += 1\n"),
            ("    return marked\n", "    if con.in_transaction:\n        con.execute(\"COMMIT\")\n    return marked\n")],
           "lock.each-committed"),
    mutant("items marked after the whole batch is sent", "no-lock-during-send", "outbox/core/dispatch.py",
           [("    marked = 0\n", "    marked = 0\n    acked = []\n"),
            ("        if mark_sent(con, selected[\"id\"]):\n            marked += 1\n    return marked\n",
             "        acked.append(selected[\"id\"])\n    for event_id in acked:\n"
             "        if mark_sent(con, event_id):\n            marked += 1\n    return marked\n")],
           "lock.each-committed"),
    mutant("after_delivery's error swallowed", "stop-on-first-failure", "outbox/core/dispatch.py",
           [("            after_delivery(dict(selected))\n",
             "            try:\n                after_delivery(dict(selected))\n            except Exception:\n                pass\n")],
           "stop.after-error-out"),
    mutant("marked even when after_delivery raises", "stop-on-first-failure", "outbox/core/dispatch.py",
           [("        if after_delivery is not None:\n            after_delivery(dict(selected))\n"
             "        db.set_synchronous(con, synchronous)\n"
             "        if mark_sent(con, selected[\"id\"]):\n            marked += 1\n",
             "        try:\n            if after_delivery is not None:\n                after_delivery(dict(selected))\n"
             "        finally:\n            db.set_synchronous(con, synchronous)\n"
             "            if mark_sent(con, selected[\"id\"]):\n                marked += 1\n")],
           "stop.after-pending"),
    mutant("a default limit of 10", "batch-limit", "outbox/core/dispatch.py",
           [("def dispatch(con, send, limit=MAX_BATCH, *,", "def dispatch(con, send, limit=10, *,")], "batch.default"),
    mutant("one item per call by default", "batch-limit", "outbox/core/dispatch.py",
           [("def dispatch(con, send, limit=MAX_BATCH, *,", "def dispatch(con, send, limit=1, *,")], "batch.default"),
    # The store: a look at a foreign file that changes it.
    mutant("the look through a read-write connection", "wrong-database", "outbox/core/db.py",
           [("connect(\"file:%s?mode=ro\" % urllib.parse.quote(os.path.abspath(path)), uri=True)", "connect(path)")],
           "wrongdb.refused-killed"),
    mutant("a -wal without its -shm deleted as a leftover", "wrong-database", "outbox/core/db.py",
           [("        with contextlib.closing(connect(\"file:%s?mode=ro\"",
             "        if os.path.exists(path + \"-wal\") and not os.path.exists(path + \"-shm\"):\n"
             "            os.remove(path + \"-wal\")\n        with contextlib.closing(connect(\"file:%s?mode=ro\"")],
           "wrongdb.refused-killed"),
)
BY_MISTAKE = {m.mistake: m for m in MUTANTS}


class StalePatch(Exception):
    """A mutant's patch no longer applies to the kit: the mutant test is out of date, not the grader."""


def grade(*args, timeout=TIME_BOUND, env=None, cwd=ROOT):
    """Run grade.py; return (exit status, stdout, stderr), read as UTF-8: what python_env() has it write on Windows too,
    where the locale's code page (cp1252) would misread its Japanese."""
    proc = subprocess.run(
        [sys.executable, GRADE] + list(args), cwd=cwd, env=env or python_env(), timeout=timeout,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, encoding="utf-8",
    )
    return proc.returncode, proc.stdout, proc.stderr


def make_mutant(root, mistake, edits, path):
    """Copy the kit's packages and reference worker under `root`, then apply `edits` to `path`."""
    copy_packages(root, ("outbox", "sink", "examples"), source=ROOT)
    target = os.path.join(root, path)
    with open(target, encoding="utf-8") as f:
        text = without_audit_markers(f.read())
    for old, new in edits:
        count = text.count(old)
        if count != 1:
            raise StalePatch("mutant %r: its patch text occurs %d times in %s (want 1): %r" % (mistake, count, path, old))
        text = text.replace(old, new)
    with open(target, "w", encoding="utf-8") as f:
        f.write(text)
    return os.path.join(root, REFERENCE)


def judge_all(root, mutants, runs_at_once=3):
    """Grade `mutants` (each in a folder of its own under `root`), one class run per set of checks.

    Mutants aimed at the same checks are one class: its workers are graded
    side by side, each with its own zygote and box, and a class verdict is
    the single-run verdict of each (tests/test_grader_classroom.py holds the
    grader to that); the grader's own start is paid once per set, not once
    per mutant. Returns [(mutant, the class run's exit status, {check name:
    that mutant's result})] in the order of `mutants`.
    """
    groups = collections.OrderedDict()
    for number, mutant in enumerate(mutants):
        folder = os.path.join(root, "m%02d" % number)
        reference = make_mutant(folder, mutant.mistake, mutant.edits, mutant.path)
        worker = os.path.join(os.path.dirname(reference), "m%02d.py" % number)  # a name of its own in the class
        shutil.copyfile(reference, worker)
        checks = tuple([mutant.check] + [check for check, _ in mutant.also])
        groups.setdefault(checks, []).append((number, worker))

    def run(checks, members):
        args = [arg for _, worker in members for arg in ("--impl", worker)]
        status, out, err = grade(*args, "--json", "--timeout", str(8 * SLOWER), "--jobs", "2",
                                 *[arg for c in checks for arg in ("-k", c)])
        report = json.loads(out)
        workers = report["workers"] if "workers" in report else [report]
        by_name = {w["name"]: {r["name"]: r for r in w["checks"]} for w in workers}
        return {number: (status, by_name["m%02d" % number]) for number, _ in members}

    verdicts = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=runs_at_once) as pool:
        for found in pool.map(lambda group: run(*group), groups.items()):
            verdicts.update(found)
    return [(mutant,) + verdicts[number] for number, mutant in enumerate(mutants)]


def message_ids(message):
    """Every message id in a message and in the messages among its fields."""
    found = {message["id"]}
    for value in message["fields"].values():
        if isinstance(value, dict) and "id" in value and "fields" in value:
            found |= message_ids(value)
    return found


def says(result, message_id, words=None):
    """Whether a check's result holds the message `message_id` (expected or observed) and `words` in its English text."""
    ids = message_ids(result["expected_message"]) | message_ids(result["observed_message"])
    return message_id in ids and (words is None or words in result["expected"] + " " + result["observed"])


def without_protections_off(err):
    """grade.py's stderr `err` without the one line, in English or Japanese, that names the protections off here.

    Only where some are off (Windows: the file-size limit; under Wine the Job
    Object's limits too) does grade.py write it, first; elsewhere `err` is
    returned as it is.
    """
    from grader import messages
    starts = tuple(messages.text(lang, "cli.protections-off", off="") for lang in ("en", "ja"))
    return "".join(line for line in err.splitlines(keepends=True) if not line.startswith(starts))
