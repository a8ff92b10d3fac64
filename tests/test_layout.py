"""The architecture the module docstrings state, checked on the source with `ast`.

Each rule below is one test; the lists of modules allowed to break a rule are
visible constants, so a new module is a conscious one-line change here. Only
the standard `ast` module: nothing is imported or run.
"""
import ast
import fnmatch
import glob
import os
import re
import unittest

from tests.support import ROOT

PACKAGES = ("outbox", "sink")
# The modules that may hold SQL text: the store modules and the DB helpers. store.py: the kernel's SQL;
# attempts.py, operations.py and history.py: the operator's records on the source DB, and their tables;
# readonly.py and upgrade.py: reading without writing, and the schema history; sinkview.py: the publisher's
# read-only view of a sink DB (evidence), through the tables the contract names; sink/inbox.py: the sink DB's
# schema and its one writer; sink/views.py: the sink DB read for people (show, status, /metrics).
SQL_MODULES = ("outbox/db.py", "outbox/readonly.py", "outbox/upgrade.py", "outbox/store.py", "outbox/history.py",
               "outbox/attempts.py", "outbox/operations.py", "outbox/sinkview.py", "sink/inbox.py", "sink/views.py")
# The guarantee kernel: all an auditor must read for "an event is marked sent only after a verified ACK, in seq
# order, stopping at the first failure; the sink applies each id once".
KERNEL_MODULES = ("outbox/errors.py", "outbox/event.py", "outbox/db.py", "outbox/store.py", "outbox/dispatch.py",
                  "outbox/sender.py", "sink/inbox.py")
# What the kernel may import besides itself, and these import nothing else: store.init_store gives a new file
# the operator's history tables (history.py, their schema alone) and upgrades an older file (upgrade.py, which
# looks at it first through readonly.py). Never an operator module (attempts, operations, relay, evidence, ...):
# dispatch takes their bookkeeping as hooks; and never a reader for people (sink/views.py reads the sink DB for
# show, status and /metrics).
KERNEL_HELPERS = ("outbox/history.py", "outbox/upgrade.py", "outbox/readonly.py")
# The only module that may import an HTTP client.
HTTP_CLIENT_MODULES = ("outbox/sender.py",)
HTTP_CLIENT_IMPORTS = ("urllib.request", "http.client")
# What the sink may take from the publisher's package: the event rules, the errors, the DB helpers,
# the time format and the Prometheus text writer (pure formatting, shared so the two sides' lines and
# gauges read alike).
SINK_MAY_IMPORT_FROM_OUTBOX = ("outbox.event", "outbox.errors", "outbox.db", "outbox.readonly", "outbox.timestamps",
                               "outbox.prometheus")
# ... and its command line, the parser and argument types both command lines share.
SINK_CLI_MAY_ALSO_IMPORT = ("outbox.cli_args",)
# The edges where errors become output and an exit status.
CLI_MODULE_PATTERNS = ("*/cli.py", "*/cli_*.py", "*/__main__.py")
GRADER_MODULES = ("grade", "grader")
# The grader's own tests are the one place that imports it.
GRADER_TESTS = ("tests/test_grade*.py", "tests/grade_mutants.py")
# SQL statements as the kit writes them (upper-case keywords). A bare COMMIT
# or END is a word faults.py compares statements with, not SQL it runs.
SQL_TEXT = re.compile(
    r"^\s*(SELECT\s.*\bFROM\b|SELECT\s+\d|INSERT\s+(OR\s+\w+\s+)?INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s"
    r"|CREATE\s+(TABLE|INDEX|UNIQUE|TRIGGER|VIEW|TEMP)|DROP\s+(TABLE|INDEX|TRIGGER|VIEW)\s|ALTER\s+TABLE\s"
    r"|BEGIN(\s+(IMMEDIATE|EXCLUSIVE|DEFERRED))?\s*;?\s*$|PRAGMA\s+\w|SAVEPOINT\s|WITH\s+\w+\s+AS\s*\()",
    re.S,
)


def source_files(*packages):
    """Repository-relative paths of every .py file in `packages`."""
    found = []
    for package in packages:
        for path in sorted(glob.glob(os.path.join(ROOT, package, "**", "*.py"), recursive=True)):
            found.append(os.path.relpath(path, ROOT).replace(os.sep, "/"))
    return found


def parse(relpath):
    with open(os.path.join(ROOT, relpath), encoding="utf-8") as f:
        return ast.parse(f.read(), relpath)


def imported_modules(relpath, tree):
    """(line, dotted module name) for every import, relative ones resolved; `from a import b` gives a.b too."""
    package = os.path.dirname(relpath).replace("/", ".")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = ".".join(part for part in (base, node.module) if part)
            else:
                module = node.module
            # `from outbox import db` is the module outbox.db; `from x import name` is at least x.
            found.extend((node.lineno, module + "." + alias.name) for alias in node.names)
            found.append((node.lineno, module))
    return found


def is_under(module, prefix):
    return module == prefix or module.startswith(prefix + ".")


def module_name(relpath):
    return relpath[: -len(".py")].replace("/", ".")


def kernel_import_violation(relpath, module):
    """True if `relpath`, a kernel module or helper, imports `module` from the kit outside the kernel and helpers."""
    inside = KERNEL_MODULES + KERNEL_HELPERS
    if relpath not in inside or module.split(".")[0] not in PACKAGES or module in PACKAGES:
        return False  # not the kernel; the standard library; or the package itself (`from outbox import db`)
    return not any(is_under(module, module_name(path)) for path in inside)


def docstring_nodes(tree):
    nodes = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                nodes.add(id(body[0].value))
    return nodes


def string_constants(tree):
    docstrings = docstring_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node


def is_cli_module(relpath):
    return any(fnmatch.fnmatch(relpath, pattern) for pattern in CLI_MODULE_PATTERNS)


def version_guards(tree):
    """The `if sys.version_info < ...:` blocks: the Python floor may print and exit anywhere it runs."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "version_info" in ast.dump(node.test):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


class LayoutTest(unittest.TestCase):
    def setUp(self):
        self.files = source_files(*PACKAGES)
        self.assertIn("outbox/store.py", self.files)  # the walk found the packages at all
        self.trees = {relpath: parse(relpath) for relpath in self.files}

    def violations(self, predicate):
        return ["%s:%d %s" % (relpath, line, module)
                for relpath, tree in self.trees.items()
                for line, module in imported_modules(relpath, tree)
                if predicate(relpath, module)]

    def test_outbox_never_imports_sink(self):
        self.assertEqual(self.violations(lambda path, module: path.startswith("outbox/") and is_under(module, "sink")), [])

    def test_sink_takes_from_outbox_only_event_rules_errors_and_db_helpers(self):
        def bad(path, module):
            if not path.startswith("sink/") or not is_under(module, "outbox"):
                return False
            if module == "outbox":
                return False  # the `from outbox import x` entry; x itself is checked as outbox.x
            allowed = SINK_MAY_IMPORT_FROM_OUTBOX + (SINK_CLI_MAY_ALSO_IMPORT if is_cli_module(path) else ())
            return not any(is_under(module, name) for name in allowed)

        self.assertEqual(self.violations(bad), [])
        bare = ["%s:%d" % (path, node.lineno) for path, tree in self.trees.items() if path.startswith("sink/")
                for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names if alias.name == "outbox"]
        self.assertEqual(bare, [], "`import outbox` gives the sink the whole publisher")

    def test_the_kernel_imports_only_the_kernel_and_its_helpers(self):
        for relpath in KERNEL_MODULES + KERNEL_HELPERS:
            self.assertIn(relpath, self.files)
        self.assertEqual(self.violations(kernel_import_violation), [])

    def test_http_client_code_only_in_the_sender(self):
        def bad(path, module):
            return path not in HTTP_CLIENT_MODULES and any(
                is_under(module, client) for client in HTTP_CLIENT_IMPORTS)

        self.assertEqual(self.violations(bad), [])

    def test_sql_text_only_in_the_store_modules_and_db_helpers(self):
        found = []
        for relpath, tree in self.trees.items():
            if relpath in SQL_MODULES:
                continue
            found.extend("%s:%d %r" % (relpath, node.lineno, node.value[:40])
                         for node in string_constants(tree) if SQL_TEXT.match(node.value))
        self.assertEqual(found, [])

    def test_sql_modules_hold_sql(self):
        # The pattern must still recognise the kit's SQL, or the rule above checks nothing.
        for relpath in SQL_MODULES:
            self.assertTrue(any(SQL_TEXT.match(node.value) for node in string_constants(self.trees[relpath])), relpath)

    def test_no_print_or_exit_outside_the_cli_modules(self):
        found = []
        for relpath, tree in self.trees.items():
            if is_cli_module(relpath):
                continue
            guarded = version_guards(tree)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call) or id(node) in guarded:
                    continue
                func = node.func
                name = func.id if isinstance(func, ast.Name) else (
                    "%s.%s" % (func.value.id, func.attr)
                    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else "")
                if name in ("print", "sys.exit", "exit", "quit", "os._exit"):
                    found.append("%s:%d %s()" % (relpath, node.lineno, name))
        # faults.py ends the process on purpose: its crash faults are os._exit by design.
        found = [entry for entry in found if not (entry.startswith("sink/faults.py:") and entry.endswith("os._exit()"))]
        self.assertEqual(found, [])

    def test_nothing_imports_the_grader(self):
        files = source_files(*PACKAGES, "tests", "examples")
        found = ["%s:%d %s" % (relpath, line, module) for relpath in files
                 if not any(fnmatch.fnmatch(relpath, pattern) for pattern in GRADER_TESTS)
                 for line, module in imported_modules(relpath, parse(relpath))
                 if module.split(".")[0] in GRADER_MODULES]
        self.assertEqual(found, [])


class RuleSelfTest(unittest.TestCase):
    """The detectors themselves: each rule must be able to fail."""

    def imports(self, relpath, text):
        return [module for _, module in imported_modules(relpath, ast.parse(text))]

    def test_relative_and_from_imports_resolve(self):
        self.assertIn("outbox.db", self.imports("sink/inbox.py", "from outbox import db"))
        self.assertIn("sink.server", self.imports("sink/cli.py", "from . import server"))
        self.assertIn("sink.inbox", self.imports("outbox/x.py", "from ..sink import inbox"))

    def test_kernel_rule(self):
        self.assertTrue(kernel_import_violation("outbox/dispatch.py", "outbox.attempts"))
        self.assertTrue(kernel_import_violation("outbox/store.py", "outbox.operations.quarantine"))
        self.assertTrue(kernel_import_violation("outbox/upgrade.py", "outbox.relay"))
        self.assertFalse(kernel_import_violation("outbox/dispatch.py", "outbox.store.mark_sent"))
        self.assertFalse(kernel_import_violation("sink/inbox.py", "outbox.db"))
        self.assertFalse(kernel_import_violation("outbox/relay.py", "outbox.attempts"))
        self.assertFalse(kernel_import_violation("outbox/store.py", "sqlite3"))

    def test_sql_pattern(self):
        for text in ("SELECT payload FROM outbox", "INSERT INTO t VALUES (?)", "UPDATE outbox SET sent = 1",
                     "DELETE FROM inbox", "CREATE TABLE t (x)", "BEGIN IMMEDIATE", "PRAGMA query_only = OFF"):
            self.assertTrue(SQL_TEXT.match(text), text)
        for text in ("COMMIT", "END", "select a sku", "drop-after-commit", "Update the README"):
            self.assertFalse(SQL_TEXT.match(text), text)

    def test_cli_pattern(self):
        for relpath in ("outbox/cli.py", "sink/cli.py", "outbox/__main__.py", "outbox/cli_ops.py"):
            self.assertTrue(is_cli_module(relpath), relpath)
        for relpath in ("outbox/store.py", "sink/server.py", "outbox/client.py"):
            self.assertFalse(is_cli_module(relpath), relpath)


# The entry points that refuse a Python below the floor, each with a guard of its own that Python 2.7 can
# parse (none can import a shared one: grade.py and tests/run.py run before any of the kit may load), and the
# package whose first statement runs outbox's guard instead of holding a copy.
FLOOR_GUARDS = ("grade.py", "tests/run.py", "outbox/__init__.py")
FLOOR_BY_IMPORT = ("sink/__init__.py",)


def floors(tree):
    """The tuples the module's top-level `if sys.version_info < X:` guards compare with (X a literal or a name)."""
    names = {target.id: node.value for node in tree.body if isinstance(node, ast.Assign)
             for target in node.targets if isinstance(target, ast.Name)}
    found = []
    for node in tree.body:
        test = node.test if isinstance(node, ast.If) else None
        if (isinstance(test, ast.Compare) and "version_info" in ast.dump(test.left)
                and isinstance(test.ops[0], ast.Lt)):
            bound = test.comparators[0]
            bound = names.get(bound.id, bound) if isinstance(bound, ast.Name) else bound
            found.append(ast.literal_eval(bound))
    return found


def first_statement(tree):
    """The first statement after the module docstring."""
    body = tree.body[1:] if tree.body and isinstance(tree.body[0], ast.Expr) else tree.body
    return body[0]


class FloorGuardTest(unittest.TestCase):
    def test_every_entry_point_names_the_same_floor(self):
        from tests.all_pythons import FLOOR

        for relpath in FLOOR_GUARDS:
            self.assertEqual(floors(parse(relpath)), [FLOOR], relpath)
        for relpath in FLOOR_BY_IMPORT:
            tree = parse(relpath)
            self.assertEqual(floors(tree), [], "%s keeps a copy of the floor" % relpath)
            first = first_statement(tree)
            self.assertTrue(isinstance(first, ast.ImportFrom) and first.module.split(".")[0] == "outbox",
                            "%s must import outbox first, so outbox's guard runs before anything else" % relpath)
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            self.assertIn("Python %d.%d to" % FLOOR, f.read())

    def test_the_floor_reader_finds_a_literal_a_name_and_a_stray_copy(self):
        self.assertEqual(floors(ast.parse("import sys\nif sys.version_info < (3, 8):\n    pass\n")), [(3, 8)])
        self.assertEqual(floors(ast.parse("M = (3, 7)\nif sys.version_info < M:\n    pass\n")), [(3, 7)])
        self.assertFalse(isinstance(first_statement(ast.parse('"""doc"""\nimport sys\nfrom outbox import x\n')),
                                    ast.ImportFrom))


if __name__ == "__main__":
    unittest.main()
