"""Every line the grader prints for a person, in each language it speaks, and the one way to render one.

MESSAGES maps a language to {message id: text with {field} placeholders}.
"en" is here; "ja" lives in messages_ja.py so each table stays readable.
Adding a language is a pure data change: another dict with the same ids and
the same placeholders, added to MESSAGES (tests/test_grader_messages.py fails
if a message exists in one language only). The quiz's questions are in the
same tables: quiz_questions.py keeps each question's languages side by side.
A field written {name:term} holds a program value (pending, sent, applied,
duplicate, conflict, present, absent, source, sink); each language shows it
in its own words, through its "term.<value>" messages, and {name:terms} does
the same for a list of them. An unknown value is shown as it is.
{name:count} shows an int with thousands separators (20,000), in every
language; anything else as it is.
JSON output stays language-neutral: message ids with their fields, plus the
English text. Nothing here imports the worker or runs anything.
"""
import os
import string

from .messages_ja import JA
from .quiz_questions import QUIZ_TEXT

DEFAULT_LANG = "en"

EN = {
    # What each check proves: --list, the README table and the report share these.
    "proves.crash-after-ack": "A publisher killed by `os._exit(73)` in `after_delivery`, right after a verified ACK, leaves snack-7 pending while the sink holds inventory 7; a new publisher process delivers it again, the sink logs `applied` then `duplicate`, inventory stays 7, snack-7 ends sent.",
    "proves.dropped-response": "The sink commits, then closes the connection without a response: the publisher fails with a `DeliveryError`, snack-7 stays pending with inventory 7; a new publisher gets a duplicate ACK and marks it sent.",
    "proves.untrusted-ack": "A wrong-id ACK, an oversized response, `\"ack\": \"true\"` and a 302 redirect (to a trap that answers a perfect ACK, and must see nothing) each leave the item pending, with the reason named; `send_http` returns exactly `True` for a perfect ACK and for one of exactly 4,096 bytes, and raises a `DeliveryError` for one of 4,097 bytes, for status 201, for an ACK without `\"id\"` and for a JSON array. Then a corpus of answers, one fake sink answering each case's id with its own bytes: statuses other than 200, bodies around 4,096 bytes with and without a `Content-Length`, bodies cut short, `\"ack\"` values equal to true in Python but not the JSON literal, ids that differ in letter case, spaces, digits or type, bodies that are not JSON, not an object or not UTF-8: `send_http` returns exactly `True` where the ACK rule says so and raises a `DeliveryError` everywhere else.",
    "proves.proxy-ignored": "`HTTP_PROXY` and `http_proxy` point at a trap that must see nothing; delivery goes direct.",
    "proves.url-rule": "`send_http` runs on a corpus of URLs (seeded, boundary cases first; `--seed` picks the rest): each spelling the URL rule refuses (another scheme or path, user info, a query, a fragment, whitespace anywhere, escapes, another spelling of the IPv6 loopback, leading zeros or a short form of an address, an octet over 255, a host that only begins with `localhost` or a loopback address, digits that are not ASCII, an empty, zero, too large or leading-zero port) raises `ValueError` before any socket is made, while an audit hook refuses every socket and name lookup and a loopback trap must see nothing; each spelling it takes (`localhost` in any letter case, `127.a.b.c`, `[::1]`, a port from 1 to 65535 or none) is tried: a `DeliveryError` where nothing listens, a connection to that very port otherwise.",
    "proves.send-timeout": "`send_http(url, event, timeout=1)` against a grader-owned sink that trickles a perfect ACK one byte every 0.2 s (over 10 s in all) raises a `DeliveryError` within 3 s: the timeout bounds the whole exchange, not each read.",
    "proves.seq-order": "`z` before `a`, two intakes in one second, and one made while every clock of the `time` module (`time`, `monotonic`, `perf_counter` and their `_ns` forms) reads 10 s earlier all come out in intake order, as dicts with exactly `id`, `sku`, `qty`; limits 0, 17, `True`, `\"16\"` refused; `pending` changes no row and no `data_version`, and leaves no transaction open; with the row of the highest seq and its order deleted (as a purge would), the next intake still gets a higher seq, and returns that row's own seq (a seq is never reused).",
    "proves.pending-cost": "`pending(con, 16)` costs about the same with 20,000 sent rows as with 10 (best of many runs, at most 5x): it must not scan sent rows (a partial index `WHERE sent = 0`, or an index on `(sent, seq)`). The grader adds the sent rows by copying one of your rows with its own connection.",
    "proves.stop-on-first-failure": "A acked, B raises, C never sent; B's own exception object reaches the caller; a second call sends B then C. Then `after_delivery` raises on D: D stays pending, E is never sent, and that exception object reaches the caller.",
    "proves.no-lock-during-send": "A batch of three: inside every `send`, the items before it are already marked and committed (a second connection sees them), and a second connection with `busy_timeout` 0 runs `BEGIN IMMEDIATE` and an intake.",
    "proves.callback-mutation": "`send` rewrites its copy's id to the next pending id, then `after_delivery` does the same to its own copy (which does not show what `send` changed): each time the selected item is marked and the other is not.",
    "proves.batch-limit": "With `z`, `a`, `m`, `k` pending, `dispatch(con, send, 2)` sends `z` then `a` and returns 2; the next call sends `m` and `k`, and returns 1 because another connection marked `k` sent meanwhile: the count is what this call marked. With 20 pending, `dispatch(con, send)`, its limit left out, sends the first 16.",
    "proves.exact-ack": "`1`, `\"ok\"`, `None` and `{{\"ack\": True}}` returned by `send` are not ACKs.",
    "proves.conflict": "The same id with another payload gets 409; inventory and the outbox row are untouched.",
    "proves.conflict-committed": "`receive` of the same id with another qty raises `Conflict`, and while that exception propagates a separate read-only connection already sees the `conflict` row in `deliveries` (committed before raising); inventory unchanged.",
    "proves.receive-inbox": "`receive` applies apple-1 (qty 3), apple-2 (qty 5) and pear-1 (qty 2): `\"applied\"` each, inventory apple 8 and pear 2 (one row per sku), one inbox row per id; apple-1 again with its keys in another order is `\"duplicate\"`; apple-1 with another sku alone raises `Conflict`; an invalid event raises `ValueError` and writes nothing; the inventory stays apple 8, pear 2.",
    "proves.validate-event": "Valid events (names of 1 and 64 characters, qty 1 and 1,000,000) come back as equal, new dicts, the argument unchanged; a bool, float or str `qty`, 0, 1,000,001, names of 0 or 65 characters, a trailing newline, non-ASCII letters and digits, a bad first character, an extra or a missing key are each a `ValueError` whose message names the field. Then a corpus of events (seeded, boundary cases first): every class of input the event rule tells apart, each given the rule's outcome, the argument unchanged.",
    "proves.intake-idempotent": "An invalid event raises `ValueError` and writes nothing; `intake` returns the seq of the outbox row it wrote; `outbox.payload` holds the JSON of the event; the same event again, its keys in another order, returns the same seq and writes nothing; the same id with another qty, or another sku alone, raises `Conflict` and writes nothing.",
    "proves.mark-sent": "`mark_sent` returns True, then False for the same id; once it returns, another connection sees that row sent and no other; an unknown id raises `KeyError` and changes nothing. Then a corpus of ids on a DB of its own: patterns that `LIKE` or `GLOB` would match, other letter cases, spaces around an id, prefixes, numbers spelled otherwise: each unknown id a `KeyError` that changes nothing, each known one that row alone.",
    "proves.intake-atomic": "The intake process dies right after its first COMMIT: the order row and its outbox row are both there, never one without the other.",
    "proves.receive-atomic": "The sink dies inside receive's transaction (nothing applied) or right after its first COMMIT (the whole receipt applied); after a restart the inventory is 7 either way.",
    "proves.wrong-database": "`init_store` on a sink DB (also while the sink's connection is open, its tables perhaps only in its `-wal`, and on a copy of it as a killed process leaves it: commits in its `-wal`, no connection open) and `init_sink` on a source DB, and each of them on a text file and on an SQLite DB of another application, raise `WrongDatabase` and leave the file and its `-wal` byte-for-byte unchanged; a 0-byte file and an SQLite file without tables are new: the DB is created there.",
    "proves.durability": "Both DBs are in WAL mode (read by the grader's own connection) and the connections `init_store` and `init_sink` return use `synchronous=FULL` or `EXTRA` (a per-connection setting, so it is read on the worker's own connection).",

    # The report.
    "report.grading": "grading {impl}",
    "report.expected": "{verdict} {name:<22} expected: {expected}",
    "report.observed": "     {blank:<22} observed: {observed}",
    "verdict.pass": "PASS",
    "verdict.fail": "FAIL",
    "verdict.error": "ERROR",
    "report.kept": "temporary DBs kept in {path}",
    "report.seconds": "graded in {seconds}s",
    "report.isolation": "isolation: {on}",
    "report.isolation-off": "isolation: {on}; off: {off} (why: \"isolation\" in --json)",
    "isolation.landlock": "Landlock ABI {abi}",
    "isolation.seccomp": "seccomp",
    "isolation.namespaces": "namespaces (user, PID, IPC, mount)",
    "isolation.uid": "uid {uid}",
    "isolation.none": "none",
    "isolation.comma": ", ",
    "isolation.layer.landlock": "Landlock",
    "isolation.layer.seccomp": "seccomp",
    "isolation.layer.namespaces": "namespaces",
    "isolation.layer.network": "network namespace",
    "isolation.layer.uid": "a uid of its own",
    "isolation.layer.capabilities": "dropping capabilities",
    "isolation.layer.all": "every layer",
    "report.seed": "corpora of seed {seed} (--seed {seed} runs the same cases again)",
    "report.totals": "grade: {passed} passed, {failed} failed",
    "report.totals-errors": "grade: {passed} passed, {failed} failed, {errors} grader errors",
    "report.hint-debug": "hint: a grader error is the grader's own fault, not your worker's; run again with --debug for its traceback",
    "evidence.title": "Evidence for snack-7, {name} (each row a separate observation; none proves the next):",
    "evidence.heading": "Evidence for snack-7, {name}",
    "evidence.note": "Each row is a separate observation; none proves the next.",
    "evidence.observation": "observation",
    "evidence.after": "after {phase}",
    "evidence.order": "order row (source)",
    "evidence.outbox": "outbox (source)",
    "evidence.inbox": "inbox row (sink)",
    "evidence.deliveries": "deliveries (sink)",
    "evidence.ack": "ACK seen (publisher)",
    "evidence.inventory": "inventory snack (sink)",
    "evidence.none": "none",
    "evidence.ack-seen": "{value}",
    "evidence.not-sent": "-",
    "present": "present",
    "absent": "absent",
    "phase.intake": "intake",
    "phase.publisher-exit": "publisher #{n} (exit {status})",
    "phase.publisher-error": "publisher #{n} ({error})",
    "phase.publisher-timed-out": "publisher #{n} (timed out after {seconds} s)",
    # Program values, as {field:term} shows them (see the module docstring).
    "term.pending": "pending",
    "term.sent": "sent",
    "term.applied": "applied",
    "term.duplicate": "duplicate",
    "term.conflict": "conflict",
    "term.present": "present",
    "term.absent": "absent",
    "term.none": "none",
    "term.source": "source",
    "term.sink": "sink",
    "term.separator": ", ",

    # The quiz (grade.py --quiz); the questions themselves are in quiz_questions.py.
    "quiz.running": "quiz: running the kit's own crash-after-ack, dropped-response, conflict, stop-on-first-failure and two short relay runs (never your worker) ...",
    "quiz.ran": "quiz: the scenarios and relay runs passed in {seconds} s; {count} questions about what they observed (options in the order of --seed {seed}).",
    "quiz.heading": "Question {n} of {count}",
    "quiz.observed": "Observed in this run: {observed}",
    "quiz.prompt": "answer ({letters}): ",
    "quiz.right": "Right. {explanation}",
    "quiz.wrong": "Wrong: the answer is {answer}. {feedback}",
    "quiz.why-right": "Why {answer}: {explanation}",
    "quiz.not-a-choice": "{given!r} is not a choice; answer {letters}",
    "quiz.score": "quiz score: {score} of {count}",
    "quiz.piped-not-a-choice": "grade.py: --quiz: answer {n} is {given!r}, not one of {letters} (one answer a line)",
    "quiz.ended": "grade.py: --quiz: stdin ended after {given} answer(s); the quiz has {count} questions (one answer a line: a, b, ...)",
    "quiz.reference-failed": "grade.py: --quiz: the kit's own {name} did not pass on this machine, so there is no evidence to ask about: expected {expected}; observed {observed}",
    "quiz.relay-expected": "both relay runs end as the kit's relay must (delivered after the outage, the alert for the refused head), their figures as JSON",
    "quiz.separator": ", ",
    "quiz.letters-or": "{letters} or {last}",

    # The command line.
    "cli.description": "Prove 'two deliveries, one application' with real processes, and grade a worker module.",
    "cli.help.impl": "a worker module to grade, or a directory of them: every *.py in it and every */worker.py (repeatable; default: this kit, {reference})",
    "cli.help.only": "run only this check (repeatable): {names}",
    "cli.help.json": "print a machine-readable report instead of text",
    "cli.help.seed": "the seed of the corpora of cases (the same seed, the same cases; default: %(default)s); with --quiz, the order of the options (given, the same quiz again; not given, a new order each run, which --json records)",
    "cli.help.timeout": "time bound of each step (a process of the worker's), and of its import, in seconds (default: %(default)s)",
    "cli.help.jobs": "checks run at once, over all the workers (default: %(default)s)",
    "cli.help.keep": "keep the temporary DBs and print where they are",
    "cli.help.isolation": "all: each worker in the box this host offers (Landlock, seccomp, namespaces, a uid of "
                          "its own under root); off: none of them (default: %(default)s)",
    "cli.help.list": "list the checks and exit",
    "cli.help.lang": "language of the report: {langs} (default: from LC_ALL or LANG, else en)",
    "cli.help.debug": "on a grader error, print its traceback",
    "cli.help.version": "print the grader's version and exit",
    "usage.unknown-check": "unknown check {name!r}; the checks are: {names}",
    "usage.timeout": "--timeout must be more than 0 and at most 3600 seconds, got {value}",
    "usage.jobs": "--jobs must be at least 1, got {value}",
    "usage.no-impl": "--impl {path}: no such file",
    "usage.not-module": "--impl {path} is not a Python module: {why}",
    "usage.not-py": "its name does not end in .py",
    "usage.syntax": "line {line}: {error}",
    "cli.usage": "usage: ",
    "cli.options": "options",
    "cli.help.help": "show this help message and exit",
    "cli.help.quiz": "run the kit's own crash-after-ack, dropped-response, conflict and stop-on-first-failure, and two short relay runs, then ask what their evidence proves; answers from stdin, one a line (a, b, ...)",
    "cli.usage-error": "{prog}: error: {message}",
    "usage.quiz-with": "--quiz runs the kit's own reference scenarios and cannot be combined with {option}",
    # argparse's own complaints (argparse words them in English; --lang ja says them in Japanese).
    "argparse.argument": "argument {argument}: {problem}",
    "argparse.unrecognized": "unrecognized arguments: {args}",
    "argparse.expected-one": "expected one argument",
    "argparse.invalid-choice": "invalid choice: {value} (choose from {choices})",
    "argparse.invalid-value": "invalid {type} value: {value}",
    "argparse.ambiguous": "ambiguous option: {option} could match {matches}",
    "argparse.ignored": "ignored explicit argument {value}",
    "argparse.required": "the following arguments are required: {args}",
    "cli.interrupted": "grade.py: interrupted; stopping children and removing temporary files",
    "check.grader-error": "grader error (not your worker's fault): {error}",
    "cli.grader-error": "grade.py: grader error (not your worker's fault): {error}",
    "cli.help.report": "also write DIR/<name>.json, DIR/class.csv, DIR/junit.xml and DIR/index.html (only index.html follows --lang)",
    "cli.help.memory": "address space each of the worker's processes may use, in MiB (default: %(default)s)",
    "cli.help.file-size": "largest file the worker may write, in MiB (default: %(default)s)",
    "usage.mib": "{flag} must be from {low} to {high} (MiB), got {value}",
    "usage.report": "--report {path}: cannot write there: {error}",
    "usage.not-writable": "not writable",
    "usage.empty-dir": "--impl {path}: no *.py file and no */worker.py in this directory",
    "usage.duplicate": "two workers named {name}: {first} and {second}; each needs a name of its own (its file's stem or its folder)",
    "cli.protections-off": "grade.py: on this system these protections are off: {off}",
    "protection.limits": "resource limits (no `resource` module)",
    "protection.orphans": "ending processes that left their session with setsid() or a double fork (no PR_SET_CHILD_SUBREAPER)",
    "report.output": "     {blank:<22} printed:  {printed} in all; {dropped} dropped (the grader keeps the first and last {kept} of each stream)",
    "size.bytes": "{count} bytes",
    "report.kept-for": "{name}: temporary DBs kept in {path}",
    "progress.live": "grading: {done} of {total} workers done, {seconds} s",
    "progress.worker": "[{done}/{total}] {name}: {passed}/{checks} passed ({seconds} s)",
    "class.worker": "worker",
    "class.passed": "passed",
    "class.failed": "failed checks",
    "class.totals": "class: {perfect} of {workers} workers passed every check; {passed} of {total} checks passed; {seconds} s",
    "class.errors": "a check marked ! is a grader error (the grader's own fault, not the worker's); run that worker alone with --debug",
    "impl.compiles": "the worker compiles (Python source without a syntax error)",
    "html.title": "grade.py: the class",
    "html.verdict": "verdict",
    "html.check": "check",
    "html.result": "expected and observed",
    "html.expected": "expected: {expected}",
    "html.observed": "observed: {observed}",
    "junit.message": "expected: {expected}; observed: {observed}",

    # Generic pieces.
    "as-expected": "as expected",
    "plain": "{text}",
    "call.returned": "it returned normally",
    "call.gave": "it returned {value}",
    "sent-flags": "sent flags {flags}",
    "status-body": "status {status}, body {body}",
    "status.is": "status {status}",
    "outbox.is": "outbox {outbox}",
    "inventory.is": "inventory {inventory}",
    "deliveries.are": "deliveries {deliveries}",
    "inventory-deliveries": "inventory {inventory}, deliveries {deliveries}",
    "inventory-outbox": "inventory {inventory}, outbox {outbox}",
    "deliveries-inventory-outbox": "deliveries {deliveries}, inventory {inventory}, outbox {outbox}",
    "trap.saw": "it saw {hits}",
    "sink.saw": "it saw {hits}",
    "check.runs": "the {name} check runs to its verdict",
    "db.exists": "a DB file at {file}",
    "db.no-such-file": "no such file",
    "db.readable": "a readable DB",
    "db.readable-after": "readable DBs after {phase}",
    "db.source-unreadable": "source DB unreadable: {error}",
    "db.sink-unreadable": "sink DB unreadable: {error}",
    "grader.keeps-running": "the grader keeps running",
    "grader.interrupted": "the grader was interrupted",
    "grader.no-temp": "no writable temporary directory ({where}: {error}); set TMPDIR to a writable directory",

    # The rules a worker must keep, named in failures.
    "rule.exception-name": "{rule}; got {got}, whose bases are {bases} ({error})",
    "rule.delivery-error": "a failed delivery must raise DeliveryError or a subclass (the grader goes by class name)",
    "rule.conflict": "a conflicting payload must raise Conflict or a subclass (the grader goes by class name)",
    "rule.value-error": "a bad argument must raise ValueError or a subclass",
    "rule.key-error": "an unknown id must raise KeyError or a subclass",
    "rule.wrong-database": "the other side's DB must be refused with WrongDatabase or a subclass (the grader goes by class name)",
    "rule.payload": "outbox.payload holds the JSON of the event: one object with id, sku and qty",
    "payload.got": "the payload is {payload}",

    # Who a child is, in summaries.
    "who.intake": "the intake",
    "who.publisher": "the publisher",
    "who.publisher-n": "publisher #{n}",
    "who.publisher-case": "the publisher ({case})",
    "who.publisher-restarted": "the publisher (restarted sink)",
    "who.sender": "the sender",
    "who.check": "the {name} check",
    "run.timed-out": "{what} timed out after {seconds} s (killed)",
    "check.raised": "{function} keeps this check's rule on {call}, without raising: {rule}",
    "run.timed-out-in": "{what} timed out after {seconds} s (killed): your {function} did not return",
    "run.import-timed-out": "{what} timed out after {seconds} s (killed) before it began: importing your worker did not finish",
    "report.frame": "     {blank:<22} your code: {file}, line {line}, in {function}: {code}",
    "report.printed": "     {blank:<22} it printed: {line}",
    "html.frame": "your code: {file}, line {line}, in {function}: {code}",
    "html.printed": "it printed: {line}",
    "run.verdict": "{what}: expected {expected}; observed {observed}",
    "run.raised": "{what} raised {error}",
    "run.raised-in": "{what}: {function} raised {error}",
    "run.exit": "{what} exited with status {status}",
    "run.exit-said": "{what} exited with status {status}: {said}",
    "run.succeeds": "{what} succeeds",
    "run.signal": "{what} was ended by signal {signal}",
    "run.lost": "{what} ended with no exit status: the process that forked it is gone",
    "who.sink": "the sink process",
    "limit.memory": "{what} ran out of memory: limit {mib} MiB; --memory raises it",
    "limit.file-size": "{what} wrote a file past the size limit: {mib} MiB; --file-size raises it",
    "limit.cpu": "{what} used up its CPU time: limit {seconds} s; --timeout raises it",

    # Loading the worker.
    "impl.imports": "{path} imports cleanly",
    "impl.import-failed": "import failed: {error}",
    "impl.defines": "the worker defines {names}",
    "impl.missing": "missing function(s): {names}",
    "impl.connection": "{opener} returns a sqlite3.Connection",
    "impl.returned": "it returned {value}",
    "impl.signature": "the worker's function takes the stub's parameters, {signature} (the stub's signatures are the contract)",
    "impl.signature-error": "calling {function} failed before its first line ran: {error}",
    "publish.event": "dispatch calls send with a copy of an event as pending returns it: a dict with exactly id, sku, qty",
    "publish.event-keys": "send got keys {keys} from dispatch: an event has exactly id, sku, qty; look at what pending returns (seq-order) and what dispatch passes on",
    "rule.send-http-true": "send_http returns exactly True for a verified ACK, and raises DeliveryError for anything else",
    "publish.send-http-returned": "send_http returned {value}",
    "sink.said": "sink process: {observed}",
    "sink.starts": "the sink process starts and listens",
    "sink.raised": "it raised {error}",
    "sink.listens": "the sink process listens within {seconds}s",
    "sink.no-address": "it printed no address ({tail})",

    # crash-after-ack
    "crash.taken-in": "snack-7 taken in: order row and pending outbox row",
    "crash.dies": "publisher #1 dies in after_delivery with status {status}",
    "crash.still-pending": "after the crash snack-7 is still pending in the source",
    "crash.applied-once": "the sink applied snack-7 once: inventory 7",
    "crash.two-deliveries": "the sink saw 2 deliveries: applied, then duplicate",
    "crash.still-7": "inventory still 7 after the second delivery",
    "crash.sent": "snack-7 sent after publisher #2",
    "crash-after-ack.passed": "exit {status} after the ACK; pending + inventory 7; then 2 deliveries, 1 application, sent",
    # dropped-response
    "dropped.fails": "publisher #1 fails with a DeliveryError (no response)",
    "dropped.pending": "snack-7 stays pending",
    "dropped.committed": "the sink committed the receipt: inventory 7",
    "dropped.duplicate": "applied, then a duplicate ACK",
    "dropped.sent": "inventory 7 and snack-7 sent",
    "dropped.observed": "{error}; then deliveries {deliveries}, inventory {inventory}, outbox {outbox}",
    "dropped-response.passed": "no response after commit: error, pending, inventory 7; reconnect: duplicate ACK, sent",
    # untrusted-ack
    "case.wrong-id": "wrong id",
    "case.oversized": "oversized",
    "case.ack-string": "\"ack\": \"true\"",
    "case.redirect": "redirect",
    "case.perfect": "a perfect ACK",
    "case.ack-4096": "a perfect ACK of exactly 4,096 bytes",
    "case.ack-4097": "an ACK of 4,097 bytes",
    "case.status-201": "status 201 with a perfect ACK body",
    "case.no-id": "an ACK without \"id\"",
    "case.not-object": "a JSON array holding an ACK",
    "untrusted.fails": "{case}: dispatch fails with a DeliveryError",
    "untrusted.pending": "{case}: snack-7 stays pending",
    "untrusted.trap-empty": "the redirect target sees no request",
    "untrusted.observed": "wrong-id -> {wrong_id} | oversized -> {oversized} | ack-string -> {ack_string} | redirect -> {redirect}",
    "untrusted.sender": "the sender reports how send_http ended, once per fake sink",
    "untrusted.true": "{case}: send_http returns exactly True",
    "untrusted.raised": "it raised {error}",
    "untrusted.raises": "{case}: send_http raises a DeliveryError",
    "untrusted-ack.passed": "wrong-id, oversized, \"ack\": \"true\" and redirected ACKs leave snack-7 pending; True only for status 200 and a JSON object with the id, up to 4,096 bytes",
    # proxy-ignored
    "proxy.trap-empty": "the proxy trap sees nothing",
    "proxy.direct": "the sink got the request directly",
    "proxy.sent": "snack-7 sent",
    "proxy.observed": "trap 0 requests, sink 1, snack-7 sent",
    "proxy-ignored.passed": "HTTP_PROXY and http_proxy point at a trap; delivery goes direct",
    # url-rule
    "url.refused": "send_http({url}) raises ValueError before any socket is made (the URL rule: http://<loopback>[:port]/events only)",
    "url.socket": "it reached {event} first (the grader's audit hook refused it)",
    "url.trap-empty": "the loopback trap sees no connection",
    "url.trap-hit": "the trap was connected to",
    "url.loopback": "send_http({url}) takes the URL (it is loopback) and, with nothing listening there, raises a DeliveryError",
    "url.refused-loopback": "it refused the URL ({error}); localhost in any letter case, 127.x.y.z and [::1] are loopback",
    "url.connects": "send_http({url}) takes the URL (it is loopback) and connects to port {port}",
    "url.connected": "the ports it tried to connect to: {ports}",
    # The corpora (grader/corpus): the function at fault, the case, the rule, then what the worker did.
    "corpus.case": "{function}, case {n} of {total} (class `{cls}`, seed {seed}): {rule}",
    "corpus.rule-event": "validate_event({event}) {want} (the event rule: exactly the keys id, sku, qty; id and sku a str of 1 to 64 characters from A-Z a-z 0-9 . _ : -, the first a letter or digit; qty an int from 1 to 1,000,000, not a bool)",
    "corpus.rule-mark": "mark_sent(con, {event_id}) {want} and turns sent exactly {marks} (the row with that very id, compared with =: no pattern, no other letter case, no spaces trimmed)",
    "corpus.rule-ack": "send_http of {event_id} to a sink that answers status {status}, {framing}, a body of {size} bytes: {body}; it {want} (the ACK rule: status 200, a whole body of at most 4,096 bytes, announced or not, a JSON object with \"ack\": true, the literal, and \"id\" the very str sent)",
    "corpus.returns": "returns {value}",
    "corpus.raises": "raises {kind}",
    "corpus.raises-naming": "raises {kind}, its message naming {field!r}",
    "corpus.returned": "it returned {value}",
    "corpus.raised": "it raised {error}",
    "corpus.turned": "it turned sent: {marks}",
    "corpus.no-outcome": "the sender reported no outcome for this case",
    "corpus.passed": "as expected on all {count} cases of the corpus (seed {seed})",
    "framing.length": "its Content-Length announced",
    "framing.close": "no Content-Length (the body ends when the connection closes)",
    "framing.cut": "a Content-Length the body never reaches",
    "url-rule.passed": "each of the {count} URLs of the corpus refused with ValueError before any socket or name lookup, or taken: tried on its port, a DeliveryError with nothing listening",
    # send-timeout
    "timeout.bounded": "send_http with timeout={timeout} raises a DeliveryError within {bound} s against a sink that trickles its ACK over {trickle} s (the timeout bounds the whole exchange)",
    "timeout.returned": "it returned {result} after {seconds} s",
    "timeout.took": "it took {seconds} s ({error})",
    "timeout.observed": "{error} after {seconds} s",
    # seq-order
    "seq.order": "pending in intake (seq) order z, a, m",
    "seq.closed": "pending leaves no transaction open on its connection",
    "seq.open": "con.in_transaction is True after pending returned: commit (or roll back) before returning, or read without BEGIN",
    "seq.list": "pending returns a list of events",
    "seq.dicts": "pending returns each event as a dict with exactly id, sku, qty",
    "seq.not-dict": "pending returned an event as {value}; an event is a dict with exactly id, sku, qty",
    "seq.keys": "pending returned keys {keys}; an event has exactly id, sku, qty",
    "seq.values": "pending gives z as it was taken in: {{'id': 'z', 'sku': 'seq', 'qty': 1}}",
    "seq.never-reused": "with the outbox row of the highest seq ({top}) deleted, the next intake gets a higher seq: a seq is never reused (INTEGER PRIMARY KEY AUTOINCREMENT)",
    "seq.reused": "the next intake got seq {seq}",
    "seq.returned-after-delete": "with rows deleted, intake still returns the seq of the outbox row it wrote ({seq}), not a count or another table's rowid",
    "seq.gave": "pending gave {got}",
    "seq.limit-one": "pending(con, 1) gives only z, again",
    "seq.read-only": "pending changes nothing (outbox rows and data_version)",
    "seq.changed": "the outbox changed while only pending ran",
    "seq.bad-limit": "limit {limit} refused with ValueError",
    "seq-order.passed": "seq order z, a, m over id and clock order; limits 0, 17, True, '16' refused; pending read-only; no seq reused",
    # pending-cost
    "cost.template": "mark_sent marks the template row: True",
    "cost.copy": "the grader copies your sent row to make {count:count} sent rows",
    "cost.pending": "with {count:count} sent rows pending gives the 4 late events in seq order ({ids})",
    "cost.order": "pending gave {got}: the right events in another order; pending orders by seq only (see seq-order), and an index on seq that holds only unsent rows keeps that cheap",
    "cost.flat": "pending(16) with {many:count} sent rows at most {ratio}x as slow as with {few:count} (pending must not scan sent rows: a partial index WHERE sent = 0, or an index on (sent, seq))",
    "cost.timings": "best of many: {few:count} sent rows {few_ms} ms, {many:count} sent rows {many_ms} ms ({ratio}x)",
    "pending-cost.passed": "pending(16) costs about the same with 20,000 sent rows as with 10",
    # stop-on-first-failure
    "stop.b-not-marked": "B not marked sent before its send returned",
    "stop.b-marked": "B's sent column read {value} while its send ran, not 0",
    "stop.error-out": "B's exception reaches the caller",
    "stop.swallowed": "dispatch returned normally (the error was swallowed)",
    "stop.same-error": "B's own exception object reaches the caller",
    "stop.other-error": "got {error} instead",
    "stop.calls": "send called for A and B, never C",
    "stop.called": "send was called for {ids}",
    "stop.flags": "A sent; B and C pending",
    "stop.resumes": "a second call resumes at B, then C",
    "stop.sent": "it sent {ids}",
    "stop.all-sent": "all sent, second call returns 2",
    "stop.flags-returned": "flags {flags}, returned {marked}",
    "stop.after-error-out": "after_delivery raises on D: dispatch lets that error out",
    "stop.after-pending": "after_delivery raises on D: D stays pending (an item is marked only after after_delivery returns)",
    "stop.after-same-error": "after_delivery's own exception object reaches the caller",
    "stop.after-stops": "after_delivery raises on D: E is never sent and stays pending",
    "stop.flags-called": "flags {flags}; send was called for {ids}",
    "stop.observed": "send called for {first_calls}, then B's error out; sent flags {flags}; the next call sent {resumed}",
    "stop-on-first-failure.passed": "A sent, B's exception out unchanged, C untouched; the next call sends B then C",
    # no-lock-during-send
    "lock.outside": "dispatch's own connection is outside any transaction while send runs",
    "lock.in-transaction": "con.in_transaction is True inside the send of {id}",
    "lock.each-committed": "when the send of {id} starts, every item before it is marked and committed (a second connection sees it): one commit per item, not one per batch",
    "lock.earlier": "a second connection read the items before it as {flags}",
    "lock.begin": "a second connection can BEGIN IMMEDIATE while send runs",
    "lock.could-not": "during the send of {id} it could not: {error}",
    "lock.intake": "an intake on a second connection succeeds while send runs",
    "lock.intake-failed": "during the send of {id} it failed: {error}",
    "lock.sent-each": "dispatch(con, send, 3) sends first, second and third, in turn",
    "lock.sent-for": "send ran for {ids}",
    "lock.flags": "first, second and third sent; the orders taken in during the sends pending",
    "no-lock-during-send.passed": "BEGIN IMMEDIATE and an intake on a second connection (busy_timeout 0) succeed inside send",
    # callback-mutation
    "mutation.one": "dispatch(con, send, 1) sends one event, B: limit 1 is a batch of at most one (see batch-limit)",
    "mutation.sent": "send was called for {ids}",
    "mutation.flags": "send rewrote B's id to C: B marked (dispatch marks the id it selected), C and D pending",
    "mutation.after-copy": "after_delivery gets a copy of its own of the selected event, C with qty 1, not the dict send rewrote",
    "mutation.after-got": "after_delivery got {got}",
    "mutation.after-flags": "after_delivery rewrote C's id to D: C marked (dispatch marks the id it selected), D pending",
    "callback-mutation.passed": "send, then after_delivery, rewrote the id in their copies; the selected B and C marked, D pending",
    # batch-limit
    "batch.limit": "dispatch(con, send, 2) with 4 events pending sends at most 2 (limit)",
    "batch.sent": "send was called for {ids}",
    "batch.order": "it sends z, then a: the first two in seq order (taken in as z, a, m, k)",
    "batch.flags": "z and a sent; m and k pending",
    "batch.returns": "it returns 2, the number of items it marked",
    "batch.next": "the next dispatch(con, send, 2) sends m, then k",
    "batch.counts": "it returns 1: k was marked sent by another connection while m was sent, so marking k changed nothing; dispatch returns how many items this call marked",
    "batch.counted": "it returned {value}",
    "batch.default": "dispatch(con, send) with 20 pending, its limit left out, sends the first 16: the default limit is 16",
    "batch.sent-count": "it sent {count} ({ids}, ...)",
    "batch-limit.passed": "limit 2: z and a, in seq order; the next call counts only what it marked",
    # exact-ack
    "ack.raises": "send returning {result} is no ACK: dispatch raises",
    "ack.returned": "dispatch returned normally",
    "ack.pending": "send returning {result} leaves the item pending",
    "exact-ack.passed": "1, 'ok', None and {{'ack': True}} from send are not ACKs",
    "exact-ack.observed": "1 -> {one}; 'ok' -> {ok}; None -> {none}; {{'ack': True}} -> {dict}",
    # conflict
    "conflict.first-200": "snack-7 (qty 7) is applied: 200",
    "conflict.publish-fails": "publishing snack-7 with qty 9 fails with a DeliveryError",
    "conflict.409": "the same id with another payload gets 409",
    "conflict.inventory": "inventory untouched: 7",
    "conflict.outbox-untouched": "the qty-9 outbox row untouched and pending",
    "conflict.observed": "409 {body}; deliveries {deliveries}",
    "conflict.passed": "409 for snack-7 with qty 9; inventory 7; the outbox row pending",
    # conflict-committed
    "conflict.applied": "receive(snack-7) returns \"applied\"",
    "conflict.raises": "receive(snack-7 with qty 9) raises Conflict",
    "conflict.logged": "while Conflict propagates, another connection already sees deliveries applied, conflict (the conflict committed before raising)",
    "conflict.deliveries": "deliveries {outcomes}",
    "conflict.qty": "inventory {qty}",
    "conflict-committed.passed": "Conflict raised after the conflict row was committed; inventory 7",
    # validate-event
    "validate.valid": "validate_event({event}) returns an equal dict",
    "validate.new": "validate_event({event}) returns a NEW dict, not its argument",
    "validate.same": "it returned the very dict it was given",
    "validate.untouched": "validate_event leaves its argument {event} unchanged",
    "validate.changed": "the argument became {got}",
    "validate.got": "got {got}",
    "validate.refused": "{event} ({rule}) refused with a ValueError",
    "validate.names": "the error for {event} names {field!r}",
    "validate.message": "message: {message}",
    "validate-event.passed": "valid events copied at the boundaries; {count} broken ones refused, each naming its field",
    "bad.bool": "a bool qty",
    "bad.zero": "qty 0",
    "bad.too-many": "qty 1,000,001",
    "bad.str-qty": "a str qty",
    "bad.float": "a float qty",
    "bad.empty": "an empty name",
    "bad.65": "65 characters",
    "bad.space": "a space",
    "bad.first": "a first character that is no letter or digit",
    "bad.newline": "a trailing newline",
    "bad.non-ascii-letter": "a non-ASCII letter",
    "bad.non-ascii-digit": "a non-ASCII digit",
    "bad.int-id": "an int id",
    "bad.slash": "a slash",
    "bad.extra": "an extra key",
    "bad.missing": "a missing key",
    "bad.not-dict": "not a dict",
    # intake-idempotent
    "idem.invalid": "intake({event}) validates first: ValueError",
    "idem.invalid-nothing": "intake({event}) writes nothing",
    "idem.returns-seq": "intake returns the seq of the outbox row it wrote, an int: {seq}",
    "idem.repeat-raised": "it raised {error} (the same fields and values are the same event, whatever the key order)",
    "idem.conflict-sku": "another sku alone for 'dup' raises Conflict",
    "idem.same-seq": "the same event again returns the same seq {seq}",
    "idem.returned": "it returned {value}",
    "idem.conflict": "another payload for 'dup' raises Conflict",
    "idem.nothing-written": "neither the repeat nor the conflict wrote a row",
    "idem.changed": "orders/outbox changed",
    "intake-idempotent.passed": "invalid events refused, nothing written; the seq returned; payload is the event's JSON; same event: same seq, nothing written; another qty or sku: Conflict, nothing written",
    # mark-sent
    "mark.true-false": "mark_sent gives True, then False",
    "mark.gave": "it gave {first}, then {second}",
    "mark.only-b": "once mark_sent(con, 'b') returns, another connection sees b sent, and only b (committed in its own transaction)",
    "mark.unknown": "an unknown id raises KeyError",
    "mark.unknown-nothing": "the unknown id changed nothing",
    "mark-sent.passed": "True, then False, KeyError for an unknown id; only that row marked",
    # intake-atomic
    "atomic.intake-dies": "the intake process dies right after its first COMMIT (status {status})",
    "atomic.both": "the first commit holds both the order and its outbox row",
    "atomic.rows": "order row {order}, outbox {outbox}",
    "atomic.observed": "order present, outbox pending",
    "intake-atomic.passed": "a crash right after intake's first COMMIT leaves order and outbox row together",
    # receive-atomic
    "receive.sink-exits": "{fault}: the sink process exits with {status}",
    "receive.no-ack": "{fault}: the publisher gets no ACK",
    "receive.whole": "{fault}: the whole receipt, committed",
    "receive.nothing": "{fault}: nothing applied",
    "receive.rows": "inbox row {inbox}, deliveries {deliveries}, inventory {inventory}",
    "receive.restarted": "{fault}, then a restarted sink: inventory 7",
    "receive.observed": "crash-before-commit: {before:terms}; crash-after-commit: {after:terms}",
    "receive-atomic.passed": "a sink crash inside receive applies all or nothing; after a restart inventory is 7",
    "post.answer": "an HTTP answer from the sink",
    # wrong-database
    "wrongdb.refused": "{opener} on a {kind:term} DB raises WrongDatabase and leaves the file unchanged",
    "wrongdb.refused-open": "{opener} on the sink DB while init_sink's connection is still open (its tables perhaps only in sink.db-wal) raises WrongDatabase and leaves both files unchanged",
    "wrongdb.refused-killed": "{opener} on a sink DB that a killed process left behind (no connection open, its commits still in its -wal) raises WrongDatabase and leaves the file and its -wal byte for byte unchanged: look through mode=ro, never a read-write open that checkpoints or deletes the -wal",
    "wrongdb.refused-text": "{opener} on a file that is not SQLite (notes.txt) raises WrongDatabase and leaves it unchanged",
    "wrongdb.refused-foreign": "{opener} on an SQLite DB of another application (a table notes) raises WrongDatabase and leaves it unchanged",
    "wrongdb.opened": "it opened the file",
    "wrongdb.changed": "{file} or its -wal changed",
    "wrongdb.new-empty": "{opener} on a 0-byte file with nothing beside it creates its DB there (a new file)",
    "wrongdb.new-blank": "{opener} on an SQLite file with no table creates its DB there (a new file)",
    "wrongdb.refused-new": "it raised {error}",
    "wrongdb.no-tables": "the file has the tables {tables}",
    "wrong-database.passed": "the other side's DB (open or closed), a text file and another application's DB refused with WrongDatabase, unchanged; a 0-byte file and an empty SQLite file taken as new",
    # receive-inbox
    "inbox.applied": "receive({event}) returns \"applied\"",
    "inbox.adds": "apple-1 (qty 3) and apple-2 (qty 5) add up: inventory apple 8, pear 2 (receive adds each applied qty to its sku's inventory)",
    "inbox.one-row": "inventory holds one row per sku: apple and pear, one row each",
    "inbox.rows-per-sku": "rows per sku: {rows}",
    "inbox.inventory": "inventory {inventory}",
    "inbox.rows": "one inbox row per applied id: apple-1, apple-2, pear-1",
    "inbox.ids": "inbox holds {ids}",
    "inbox.duplicate": "receive({event}), apple-1 again with its keys in another order, returns \"duplicate\"",
    "inbox.conflict-sku": "receive({event}), apple-1 with another sku alone, raises Conflict",
    "inbox.invalid": "receive({event}) validates first: ValueError",
    "inbox.invalid-nothing": "receive({event}) writes nothing: no inbox, inventory or deliveries row",
    "inbox.state": "the sink DB reads (inventory, inbox, deliveries) {state}",
    "inbox.still": "the duplicate and the conflict leave the inventory at apple 8, pear 2",
    "inbox.deliveries": "deliveries for apple-1, in arrival order: applied, duplicate, conflict",
    "inbox.observed": "inventory {inventory}; apple-1 deliveries {outcomes:terms}",
    "receive-inbox.passed": "two apples add up to 8; the same event again a duplicate; another sku a Conflict; an invalid event refused, nothing written",
    # durability
    "durable.wal": "the DB {opener} creates is in WAL mode (read by the grader's own connection)",
    "durable.mode": "journal_mode is {mode}",
    "durable.full": "the connection {opener} returns uses synchronous=FULL or EXTRA (synchronous is per connection)",
    "durable.level": "synchronous is {level}",
    "durability.passed": "both DBs in WAL mode; both connections synchronous=FULL or EXTRA",
    "durability.observed": "init_store: wal, {store}; init_sink: wal, {sink}",
}

MESSAGES = {"en": dict(EN, **QUIZ_TEXT["en"]), "ja": dict(JA, **QUIZ_TEXT["ja"])}
LANGS = tuple(MESSAGES)


def choose_lang(environ=None):
    """The default language: ja when LC_ALL, else LANG, begins with "ja"; else en."""
    environ = os.environ if environ is None else environ
    locale = environ.get("LC_ALL") or environ.get("LANG") or ""
    for lang in LANGS:
        if lang != DEFAULT_LANG and locale.startswith(lang):
            return lang
    return DEFAULT_LANG


def text(lang, message_id, **fields):
    """The message `message_id` in `lang`, its {field} placeholders filled (fields may be messages)."""
    return render({"id": message_id, "fields": fields}, lang)


def render(message, lang):
    """Render a message dict {"id", "fields"}; a field that is itself a message is rendered first."""
    fields = {}
    for name, value in message["fields"].items():
        if isinstance(value, dict) and "id" in value and "fields" in value:
            value = render(value, lang)
        fields[name] = value
    return Formatter(lang).vformat(MESSAGES[lang][message["id"]], (), fields)


def term(lang, value):
    """A program value (pending, sent, applied, ...) in `lang`'s words; a value with no term as it is."""
    return MESSAGES[lang].get("term.%s" % value, str(value))


def terms(lang, values):
    """A list of program values in `lang`'s words, with its separator; "none" in its words if empty."""
    return MESSAGES[lang]["term.separator"].join(term(lang, v) for v in values) or MESSAGES[lang]["term.none"]


class Formatter(string.Formatter):
    """str.format, plus the specs for program values ({name:term}, {name:terms}) and counts ({name:count})."""

    def __init__(self, lang):
        super().__init__()
        self.lang = lang

    def format_field(self, value, spec):
        if spec == "term":
            return term(self.lang, value)
        if spec == "terms":
            return terms(self.lang, value)
        if spec == "count":
            return "{:,}".format(value) if isinstance(value, int) and not isinstance(value, bool) else str(value)
        return format(value, spec)
