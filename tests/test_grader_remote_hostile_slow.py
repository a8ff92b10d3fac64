"""The grader's process boundary against a worker that speaks the protocol itself (issue 23, items 1, 4, 5).

Each worker below is graded by a real grade.py in one class beside the
reference and the stub. Each forges lines on its step's protocol socket, or
patches its own interpreter, from inside a contract call: the verdict stays
that worker's own (a failed check, never exit 3, never a hang past the
step's bound), and the reference and the stub keep theirs.
"""
import os
import textwrap

from tests.support import SLOWER, TempDirTestCase, copy_packages
from tests.grade_mutants import grade
from tests.test_judge_hostile import REFERENCE, STUB, class_reports

# Every hostile worker below is the kit's own packages, copied beside it (so
# that it can earn checks), with the attack in front of one contract call.
KIT = "from outbox import dispatch, init_store, intake, mark_sent, pending, send_http, validate_event\n" \
      "from sink import init_sink, receive\n"
FORGE = textwrap.dedent('''
    import json as _json, os as _os, stat as _stat

    def forge(raw):
        """Write raw (bytes) as a protocol line on every socket this process holds: its step's protocol socket (on
        Windows, where a socket is no file descriptor, the step speaks through pipes: on every pipe past stderr)."""
        for fd in range(3, 256):
            try:
                mode = _os.fstat(fd).st_mode
                if _stat.S_ISSOCK(mode) or (_os.name == "nt" and _stat.S_ISFIFO(mode)):
                    _os.write(fd, b"\\n@@grade " + raw + b"\\n")
            except OSError:
                pass
''')
WRAP = textwrap.dedent('''
    _real_{name} = {name}

    def {name}(*args, **kwargs):
        attack()
        return _real_{name}(*args, **kwargs)
''')


def worker(attack, name="init_store", head=""):
    return KIT + head + FORGE + textwrap.dedent(attack) + WRAP.format(name=name)


WORKERS = {
    # Item 1: 80 forged error lines of 1 MiB each, on a step whose lines the grader does not keep.
    "flood": worker('''
        def attack():
            line = _json.dumps({"kind": "error", "type": "X", "message": "x" * (1024 * 1024 - 100)}).encode()
            for _ in range(80):
                forge(line)
    '''),
    # Item 2: lines whose fields have the wrong types: a list where the grader looks a key up.
    "typed": worker('''
        def attack():
            forge(_json.dumps({"kind": "callback", "id": 1, "of": []}).encode())
            forge(_json.dumps({"kind": "callback", "id": 2, "of": 999, "args": ["z" * 20000]}).encode())
    '''),
    # Item 2 again: an answer to every request id the step may be at, whose error names a list as its function.
    "replied": worker('''
        def attack():
            for number in range(1, 40):
                forge(_json.dumps({"kind": "reply", "id": number, "error": {"function": [], "mro": "x"}}).encode())
    '''),
    # Item 3: a line nested past the recursion limit (the grader's reader must live on), then a callback whose
    # reply is larger than the socket holds, while the worker reads nothing more.
    "nested": worker('''
        import time as _time

        def attack():
            forge(_json.dumps({"kind": "callback", "id": 7, "of": 1, "args": [["y" * 16000] * 200, 2]}).encode())
            forge(b"[" * 100000)
            _time.sleep(3600)
    ''', name="dispatch"),
    # Item 4: a full scan in pending, hidden by a clock that stands still.
    "clock": worker('''
        import time as _time
        _time.perf_counter = lambda: 0.0

        def attack():
            pass

        _real_pending = pending

        def pending(con, limit=16):
            con.execute("SELECT count(*) FROM outbox WHERE payload LIKE '%never%'").fetchall()
            return _real_pending(con, limit)
    ''', name="validate_event"),
    # Item 6: at its import, in the zygote, junk and a forged "step 1 ended with 0" on the zygote's control socket.
    "controller": KIT + FORGE + textwrap.dedent('''
        for _fd in range(3, 256):
            try:
                if _stat.S_ISSOCK(_os.fstat(_fd).st_mode):
                    _os.write(_fd, b"not json\\n" + _json.dumps({"op": "ended", "id": 1, "status": 0}).encode() + b"\\n")
            except OSError:
                pass
    '''),
    # Item 6 again: the same line a second after its import, from a thread of its zygote, while steps run.
    "latecomer": KIT + FORGE + textwrap.dedent('''
        import threading as _threading

        def _write():
            for _fd in range(3, 256):
                try:
                    if _stat.S_ISSOCK(_os.fstat(_fd).st_mode):
                        _os.write(_fd, b"not json\\n")
                except OSError:
                    pass

        _threading.Timer(1.0, _write).start()
    '''),
    # Item 5: marks before after_delivery, survives the grader's crash (os._exit made a no-op), hides the mark
    # and then crashes as asked.
    "undead": KIT + textwrap.dedent('''
        import os as _os
        _exit = _os._exit

        def dispatch(con, send, limit=16, *, after_delivery=None):
            marked = 0
            for event in pending(con, limit):
                if send(dict(event)) is not True:
                    raise RuntimeError("not acknowledged")
                mark_sent(con, event["id"])  # too early: before after_delivery
                marked += 1
                if after_delivery is None:
                    continue
                _os._exit = lambda status: None  # the grader's "crash" is only asked of this process
                try:
                    after_delivery(dict(event))
                except BaseException:
                    pass
                _os._exit = _exit
                con.execute("UPDATE outbox SET sent = 0 WHERE event_id = ?", (event["id"],))
                con.commit()
                _exit(73)
            return marked
    '''),
}
CHECKS = ["crash-after-ack", "pending-cost", "mark-sent"]
EXPECTED = {  # the checks each attack passes, with the attack in place; the others fail (never "error")
    "worker_reference": set(CHECKS),
    "worker_stub": set(),
    "flood": set(),
    "typed": set(CHECKS),  # the forged callback is refused as no such callback; the rest is the kit's work
    "replied": set(),  # its init_store "raised" the forged error: its own verdict
    "nested": {"pending-cost", "mark-sent"},
    "clock": {"crash-after-ack", "mark-sent"},
    "undead": {"pending-cost", "mark-sent"},
}


class ForgedProtocolClassTest(TempDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()

    def test_forged_lines_and_patched_clocks_change_no_verdict_but_the_forgers_own(self):
        folder = self.path("class")
        for name, body in WORKERS.items():
            os.makedirs(os.path.join(folder, name))
            copy_packages(os.path.join(folder, name), ("outbox", "sink"))
            with open(os.path.join(folder, name, "worker.py"), "w", encoding="utf-8") as f:
                f.write(body)
        reports = self.path("reports")
        status, out, err = grade("--impl", REFERENCE, "--impl", STUB, "--impl", folder, "--report", reports,
                                 "--timeout", str(6 * SLOWER), *[a for c in CHECKS for a in ("-k", c)])
        self.assertEqual(status, 1, err)
        self.assertNotIn("Traceback", err)
        found = class_reports(self, reports)
        results = {name: {c["name"]: c for c in report["checks"]} for name, report in found.items()}
        for name, passes in EXPECTED.items():
            with self.subTest(worker=name):
                statuses = {c: results[name][c]["status"] for c in CHECKS}
                self.assertEqual(statuses, {c: "pass" if c in passes else "fail" for c in CHECKS},
                                 {c: results[name][c]["observed"] for c in CHECKS})
        # Steps its zygote ran when it spoke are lost (its own failed checks); none is the grader's error.
        # The controller's zygote is ended before its first step: each step runs as a child of the grader's own
        # (they pass when the machine is idle; under load a fresh child's import may use up a step's bound).
        for name in ("latecomer", "controller"):
            self.assertNotIn("error", [c["status"] for c in results[name].values()], name)
        for check in CHECKS:  # a protocol flood is a limit of that worker's step, said as such
            self.assertIn("protocol", results["flood"][check]["observed"], check)
