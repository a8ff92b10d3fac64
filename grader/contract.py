"""The worker contract, written once: the functions a worker defines, the forms the grader calls them in, and what is not part of it.

Data only, importing nothing. grader/wire.py's CONTRACT (both sides' names for the calls) is SIGNATURES; both
stubs (examples/worker_stub.py, worker_stub_ja.py) define exactly these
signatures and name every extra, and the worker contract in
docs/participants(.ja).md lists CALLS in this order and every extra
(tests/test_grader_contract.py holds all of them to this module). What each
function must do is the stubs' docstrings and that page's bullets, each rule
with its check in docs/rules.md.
"""

# name -> the signature the stub defines, in the stub's order.
SIGNATURES = {
    "validate_event": "validate_event(event)",
    "init_store": "init_store(path)",
    "intake": "intake(con, event)",
    "pending": "pending(con, limit=16)",
    "mark_sent": "mark_sent(con, event_id)",
    "dispatch": "dispatch(con, send, limit=16, *, after_delivery=None)",
    "send_http": "send_http(url, event, *, timeout=5.0)",
    "init_sink": "init_sink(path)",
    "receive": "receive(con, event)",
}

# Every form in which the grader calls them, and no other.
CALLS = (
    "validate_event(event)", "init_store(path)", "init_sink(path)", "intake(con, event)", "pending(con, limit)",
    "mark_sent(con, event_id)", "dispatch(con, send)", "dispatch(con, send, limit)",
    "dispatch(con, send, limit, after_delivery=f)", "send_http(url, event, timeout=t)", "receive(con, event)",
)

# The kit's own extras: a worker need not accept them, and the grader never passes them.
EXTRAS = ("durability=", "require_digest=", "before_send=", "on_failure=", "intake_many")
