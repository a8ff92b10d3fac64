"""outbox.ops: the operator's code around the kernel.

Attempts and their backoff, failure kinds, quarantine and the other
operations on the source DB, the relay loop, retention, evidence, and
sinklook (the publisher's read-only look at a sink DB). It calls the kernel
(outbox.core) and is never imported by it: dispatch takes its bookkeeping as
hooks.
"""
