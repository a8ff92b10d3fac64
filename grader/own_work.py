"""The own-work check: the kit is not part of the submission.

Decided here, in the grader's process: the source is read with a cap
(SOURCE_CAP) and compared with the kit's reference worker as normalised
ASTs (names, comments and docstrings stripped); a step says which modules
the worker's import loaded from the kit's folder, which the worker's
sys.path does not hold (worker_side/main.py). A host that hands out the
kit's helpers allows both with --allow-kit-imports; the kit grading its own
reference is the kit, not a submission.
"""
import ast
import os

from .common import Fail, expect, msg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join(ROOT, "examples", "worker_reference.py")
if not os.path.isfile(REFERENCE):  # installed (pip, outbox-kit.pyz): the wheel keeps it beside the grader
    REFERENCE = os.path.join(ROOT, "grader", "worker_reference.py")
SOURCE_CAP = 1024 * 1024  # bytes of a submission's source the grader reads; a larger one is not parsed


def read_source(path):
    """The submission's source, at most SOURCE_CAP bytes; Fail "submission over 1 MiB" past that."""
    with open(path, "rb") as f:
        data = f.read(SOURCE_CAP + 1)
    expect(len(data) <= SOURCE_CAP, msg("own.small", mib=SOURCE_CAP // (1024 * 1024)),
           msg("own.too-big", size=os.path.getsize(path)))
    return data


class Normalise(ast.NodeTransformer):
    """Every name in order of first use as n0, n1, ...; docstrings gone: what a copy keeps when renamed."""

    def __init__(self):
        self.names = {}

    def name(self, value):
        if value is None:
            return None
        return self.names.setdefault(value, "n%d" % len(self.names))

    def generic_visit(self, node):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        for field in ("id", "arg", "name", "asname", "attr", "module"):
            value = getattr(node, field, None)
            if isinstance(value, str):
                setattr(node, field, self.name(value))
        return super().generic_visit(node)


def shape(data):
    """The normalised AST of `data` (source bytes), or None if it does not parse."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        return ast.dump(Normalise().visit(tree))
    except RecursionError:
        return None


def is_the_kit(path):
    return os.path.realpath(path) == os.path.realpath(REFERENCE)


def judge(g, run_step):
    """The own-work check of the worker at g.impl; run_step() gives the kit's modules its import loaded."""
    impl = g.grader.impl
    allowed = g.grader.allow_kit_imports or is_the_kit(impl)
    expected = msg("own.expected")
    reasons = []
    with open(REFERENCE, "rb") as f:
        reference = shape(f.read())
    if shape(read_source(impl)) == reference:
        reasons.append(msg("own.copy"))
    modules = run_step()
    if modules:
        reasons.append(msg("own.imports", modules=", ".join(modules[:8])))
    if reasons and not allowed:
        raise Fail(expected, reasons[0] if len(reasons) == 1 else msg("own.both", first=reasons[0], second=reasons[1]))
    if reasons:
        why = msg("own.kit-itself") if is_the_kit(impl) else msg("own.allowed")
        return msg("own-work.passed"), msg("own.allowed-because", why=why, reason=reasons[0])
    return msg("own-work.passed"), msg("as-expected")
