"""The architecture the module docstrings state, and the layout of the tests, checked on the source with `ast`.

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
# readonly.py and upgrade.py: reading without writing, and the schema history; sinklook.py: the publisher's
# read-only look at a sink DB (evidence), through the tables the contract names; sink/core/inbox.py: the sink DB's
# schema and its one writer; sink/views.py: the sink DB read for people (show, status, /metrics).
SQL_MODULES = ("outbox/core/db.py", "outbox/core/readonly.py", "outbox/core/upgrade.py", "outbox/core/store.py",
               "outbox/core/history.py", "outbox/batch.py", "outbox/ops/attempts.py", "outbox/ops/operations.py", "outbox/ops/sinklook.py",
               "sink/core/inbox.py", "sink/core/ack.py", "sink/views.py")
# The guarantee kernel: all an auditor must read for "an event is marked sent only after a verified ACK, in seq
# order, stopping at the first failure; the sink applies each id once": every file of the kernel folders, with
# what init_store runs before db.open_db (history.py, the history tables' schema alone; upgrade.py, which looks
# at an older file first through readonly.py). The kernel imports nothing of the kit outside itself: never an
# operator module (outbox.ops: dispatch takes their bookkeeping as hooks), an exporter, a command line, nor a
# reader for people (sink/views.py reads the sink DB for show, status and /metrics).
KERNEL_FOLDERS = ("outbox/core", "sink/core")
KERNEL_MODULES = tuple(sorted(os.path.relpath(path, ROOT).replace(os.sep, "/") for folder in KERNEL_FOLDERS
                              for path in glob.glob(os.path.join(ROOT, folder, "*.py"))))
# The only module that may import an HTTP client.
HTTP_CLIENT_MODULES = ("outbox/core/sender.py",)
HTTP_CLIENT_IMPORTS = ("urllib.request", "http.client")
# What the sink may take from the publisher's package: the event rules, the errors, the DB helpers,
# the time format and the Prometheus text writer (pure formatting, shared so the two sides' lines and
# gauges read alike).
SINK_MAY_IMPORT_FROM_OUTBOX = ("outbox.core.event", "outbox.core.errors", "outbox.core.db", "outbox.core.readonly",
                               "outbox.export.timestamps", "outbox.export.prometheus")
# ... and its command line, the parser and argument types both command lines share, and their stop signals.
SINK_CLI_MAY_ALSO_IMPORT = ("outbox.cli.args", "outbox.cli.stopping")
# The edges where errors become output and an exit status.
CLI_MODULE_PATTERNS = ("*/cli.py", "*/cli/*.py", "*/__main__.py")
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

# Tests by behaviour (CONTRIBUTING.md, "Tests"): the tests of PACKAGE/MODULE.py are in tests/test_PACKAGE_MODULE.py,
# the slow ones (wall-clock bounds, long runs) in tests/test_PACKAGE_MODULE_slow.py or _WHAT_slow.py; grade.py's in
# tests/test_grade.py. A role folder (ROLE_FOLDERS) is left out of the name (outbox/core/store.py is
# test_outbox_store's), and a folder's main.py is the folder's (outbox/cli/main.py is test_outbox_cli's,
# outbox/cli/relay.py test_outbox_cli_relay's).
LIBRARY_PACKAGES = ("outbox", "sink", "grader")
LIBRARY_SCRIPTS = ("grade.py",)
ROLE_FOLDERS = ("core", "ops", "export")
# Library modules with no test module of their own: the test modules that test them, and why.
TESTED_ELSEWHERE = {
    "grader/network.py": (("test_grader_box", "test_grader_box_slow"), "the worker's network: NetworkTest beside the "
                          "other layers of the box, whose boxed process it needs; and through grade.py"),
    "outbox/__init__.py": (("test_outbox_store", "test_outbox_dispatch"), "the API: names of other modules, "
                           "imported from the package by their tests"),
    "outbox/__main__.py": (("test_outbox_cli",), "`python -m outbox`: two lines that call outbox.cli.main"),
    "outbox/core/__init__.py": (("test_layout",), "the kernel folder's charter, a docstring"),
    "outbox/ops/__init__.py": (("test_layout",), "the operator folder's charter, a docstring"),
    "outbox/export/__init__.py": (("test_layout",), "the exporters' folder's charter, a docstring"),
    "outbox/cli/__init__.py": (("test_outbox_cli",), "the command line folder's charter, a docstring"),
    "outbox/cli/opargs.py": (("test_outbox_cli_args", "test_outbox_cli_ops", "test_outbox_cli_relay"),
                             "two argument types, tested through the commands that use them"),
    "sink/core/__init__.py": (("test_layout",), "the sink's kernel folder's charter, a docstring"),
    "outbox/core/errors.py": (("test_outbox_store", "test_outbox_sender", "test_outbox_failures"),
                              "the exception classes, asserted where each is raised"),
    "outbox/core/history.py": (("test_outbox_operations", "test_outbox_upgrade"),
                               "the history tables' schema alone; outbox.ops.operations writes and reads their rows"),
    "outbox/ops/retention.py": (("test_outbox_operations", "test_outbox_cli_ops"),
                                "the purge loop and the duration syntax, beside the quarantine a purge must never "
                                "remove"),
    "outbox/ops/sinklook.py": (("test_outbox_evidence",), "read through by its one user, `evidence`, on real sink DBs"),
    "outbox/export/timestamps.py": (("test_outbox_prometheus", "test_outbox_cli_ops"),
                                    "one function: the times in the figures and lines an operator reads"),
    "sink/__init__.py": (("test_sink_inbox", "test_sink_server"), "the API: names of other modules"),
    "sink/__main__.py": (("test_sink_cli",), "`python -m sink`: two lines that call sink.cli"),
    "sink/metrics.py": (("test_outbox_prometheus",), "the sink's figures in the text format, parsed there with "
                        "the publisher's"),
    "sink/storethread.py": (("test_sink_server",), "the server's store thread, its calls and its death, "
                            "through the server"),
    "grader/__init__.py": (("test_grade",), "the grader's version"),
    "grader/checks.py": (("test_grade", "test_grade_mutants_1"), "the in-process checks, run on the kit and on "
                         "each mutant"),
    "grader/drivers.py": (("test_grade", "test_grade_mutants_1"), "the scenarios' steps, run on the kit and on "
                          "each mutant"),
    "grader/wire.py": (("test_grade", "test_judge_hostile"), "values across the two sides, under every check"),
    "grader/own_work.py": (("test_judge_hostile",), "the own-work check, on the hostile workers"),
    "grader/worker_side/__init__.py": (("test_grade",), "the worker's side, a docstring"),
    "grader/worker_side/calls.py": (("test_grade", "test_judge_hostile"), "the calls a step makes, under every check"),
    "grader/worker_side/main.py": (("test_grade", "test_judge_hostile"), "the worker's process, under every check"),
    "grader/corpus/__init__.py": (("test_grader_corpus", "test_grader_corpus_events"),
                                  "the outcomes and the comparison every corpus shares"),
    "grader/corpus/checks.py": (("test_grade", "test_grade_mutants_1"), "the corpora run by the checks, on the kit "
                                "and on its mutants"),
    "grader/parent.py": (("test_grade", "test_grader_contain"), "the parent's machinery, under every check"),
    "grader/scenarios.py": (("test_grade", "test_grade_mutants_1"), "the multi-process checks, run on the kit "
                            "and on each mutant"),
    "grader/landlock.py": (("test_grader_box",), "one layer of the box, shown working from inside a boxed process"),
    "grader/seccomp.py": (("test_grader_box",), "one layer of the box, shown working from inside a boxed process"),
    "grader/namespaces.py": (("test_grader_box",), "one layer of the box, shown working from inside a boxed process"),
    "grader/report.py": (("test_grader_classroom",), "every file of --report DIR, read the way its consumer "
                         "reads it"),
    "grader/quiz_questions.py": (("test_grader_quiz", "test_grader_messages_ja"), "the quiz's questions, data"),
    # The teacher's report (issue 28): the result data and one renderer per format, read from a generated class.
    "grader/results.py": (("test_grader_teacher", "test_grader_classroom"), "the results every renderer reads"),
    "grader/render/__init__.py": (("test_grader_teacher",), "the renderers' charter"),
    "grader/render/csvfile.py": (("test_grader_teacher", "test_grader_classroom"), "class.csv, read with csv"),
    "grader/render/evidence.py": (("test_grader_classroom", "test_grader_messages_ja"), "the evidence tables"),
    "grader/render/gradescope.py": (("test_grader_teacher",), "results.json against Gradescope's shape"),
    "grader/render/jsonfile.py": (("test_grader_classroom",), "--json and the JSON files, against the schema"),
    "grader/render/junit.py": (("test_grader_classroom",), "junit.xml, read with xml.etree"),
    "grader/render/page.py": (("test_grader_teacher",), "what the pages share, through the pages"),
    "grader/render/student.py": (("test_grader_teacher",), "a student's page, parsed with html.parser"),
    "grader/render/summary.py": (("test_grader_teacher", "test_grader_classroom"), "index.html, parsed with html.parser"),
    "grader/render/terminal.py": (("test_grader_teacher", "test_grader_classroom"), "the class table on stdout"),
}
# Test modules about several modules at once, named for what they cover.
ABOUT_SEVERAL = {
    "test_all_pythons": "tests/all_pythons.py, the interpreter matrix of `make test-all` and CI",
    "test_alerts": "docs/alerts.yml against the metrics the relay, `status` and the sink export",
    "test_audit": "docs/audit.md: every guarantee the reader docs state, against the code, the tests and the checks",
    "test_bench_slow": "bench/, the machinery of `make bench`",
    "test_docs": "README.md, the reader docs, the lab and the glossary against the code",
    "test_environments": "the kit in the environments lab hosts have: proxies, warnings as errors, locale, time zone",
    "test_environments_slow": "a read-only copy of the kit, run by an unprivileged user",
    "test_grade_mutants_1": "grade.py against mutants of the whole kit, a third of them each",
    "test_grade_mutants_2": "grade.py against mutants of the whole kit, a third of them each",
    "test_grade_mutants_3": "grade.py against mutants of the whole kit, a third of them each",
    "test_judge_hostile": "grade.py against a class of workers written to cheat, beside the reference and the stub",
    "test_judge_hostile_values_slow": "grade.py against a class whose values, names, exceptions and files are odd",
    "test_grader_corpus": "grader/corpus as a whole: its outcomes, and the seeds and classes of every family",
    "test_grader_teacher": "the teacher's report: summary, student pages, points, Gradescope, partial, resumed, sharded runs",
    "test_grade_rules": "docs/rules.md: every rule a worker must keep, its check and its mutants",
    "test_install": "backend/: outbox-kit.pyz (`make zipapp`) run from another folder, with nothing installed",
    "test_install_slow": "backend/: `pip install .` offline with the kit's own build backend, and the wheel",
    "test_ops_recipes": "examples/ops/: the systemd units, the cron line, the Nagios objects, the scrape config",
    "test_layout": "the architecture the module docstrings state, and this layout of the tests",
    "test_torture": "tests/torture: a fast slice of `make torture`",
    "test_torture_mutants": "tests/torture's crash matrix against mutants of the kit",
}
# Clocks whose readings, in an assertion, make it a wall-clock or CPU-time bound: only in *_slow test modules.
CLOCKS = ("time.monotonic", "time.perf_counter", "time.process_time", "monotonic", "perf_counter", "process_time",
          "cpu_seconds")


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
            # `from outbox.core import db` is the module outbox.core.db; `from x import name` is at least x.
            found.extend((node.lineno, module + "." + alias.name) for alias in node.names)
            found.append((node.lineno, module))
    return found


def is_under(module, prefix):
    return module == prefix or module.startswith(prefix + ".")


def module_name(relpath):
    return relpath[: -len(".py")].replace("/", ".")


def kernel_import_violation(relpath, module):
    """True if `relpath`, a kernel module, imports `module` from the kit outside the kernel."""
    folders = tuple(folder.replace("/", ".") for folder in KERNEL_FOLDERS)
    if relpath not in KERNEL_MODULES or module.split(".")[0] not in PACKAGES or module in PACKAGES + folders:
        return False  # not the kernel; the standard library; or a package itself (`from outbox.core import db`)
    return not any(is_under(module, module_name(path)) for path in KERNEL_MODULES)


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


def test_module_for(relpath):
    """The name of the test module of a library module: outbox/core/store.py -> test_outbox_store.

    A role folder (ROLE_FOLDERS) is left out but for its __init__.py, and a
    folder's main.py stands for the folder: outbox/cli/main.py -> test_outbox_cli.
    """
    parts = relpath[: -len(".py")].split("/")
    if len(parts) > 2 and parts[-1] != "__init__":
        parts = parts[:1] + [part for part in parts[1:-1] if part not in ROLE_FOLDERS] + parts[-1:]
    if len(parts) > 2 and parts[-1] == "main":
        parts = parts[:-1]
    return "test_" + "_".join(parts)


def library_module_of(test_module, library):
    """The library module (of `library`, relative paths) whose tests `test_module` holds, or None.

    test_P_M is P/M.py's; a slow module test_P_M_slow or test_P_M_WHAT_slow
    too, the longest such P_M winning (test_outbox_cli_relay_outage_slow is
    outbox/cli/relay.py's, not outbox/cli/main.py's).
    """
    own = {test_module_for(relpath): relpath for relpath in library}
    if test_module in own:
        return own[test_module]
    if test_module.endswith("_slow"):
        prefixes = [name for name in own if test_module.startswith(name + "_")]
        if prefixes:
            return own[max(prefixes, key=len)]
    return None


def unused_imports(tree):
    """(line, name) for every name an import binds that nothing in the module reads."""
    bound = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.extend((node.lineno, alias.asname or alias.name.split(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            bound.extend((node.lineno, alias.asname or alias.name) for alias in node.names if alias.name != "*")
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    return [(line, name) for line, name in bound if name not in read]


def dotted(node):
    """"time.monotonic" for the expression time.monotonic, "cpu_seconds" for a bare name; "" otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return "%s.%s" % (node.value.id, node.attr)
    return ""


def clock_assertions(tree):
    """Line numbers of assertions (self.assert*) that read a clock of CLOCKS, directly or through a variable."""
    def reads_clock(node, derived):
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Call):
                if dotted(n.func) in CLOCKS:
                    return True
                continue  # a clock handed to a call (a wait's timeout) bounds that wait: no assertion on the time
            if isinstance(n, ast.Name) and n.id in derived:
                return True
            stack.extend(ast.iter_child_nodes(n))
        return False

    derived = set()
    for _ in range(3):  # started = monotonic(); took = monotonic() - started; slow = took > 1 ...
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(reads_clock(n, derived) for n in ast.walk(node.value)):
                derived.update(t.id for t in node.targets if isinstance(t, ast.Name))
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.startswith("assert")
                and any(reads_clock(arg, derived) for arg in list(node.args) + [k.value for k in node.keywords])):
            found.append(node.lineno)
    return sorted(found)


class LayoutTest(unittest.TestCase):
    def setUp(self):
        self.files = source_files(*PACKAGES)
        self.assertIn("outbox/core/store.py", self.files)  # the walk found the packages at all
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
            if os.path.isdir(os.path.join(ROOT, *module.split("."))):
                return False  # the `from outbox.core import x` entry of a package; x is checked as outbox.core.x
            allowed = SINK_MAY_IMPORT_FROM_OUTBOX + (SINK_CLI_MAY_ALSO_IMPORT if is_cli_module(path) else ())
            return not any(is_under(module, name) for name in allowed)

        self.assertEqual(self.violations(bad), [])
        bare = ["%s:%d" % (path, node.lineno) for path, tree in self.trees.items() if path.startswith("sink/")
                for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names if alias.name == "outbox"]
        self.assertEqual(bare, [], "`import outbox` gives the sink the whole publisher")

    def test_the_kernel_imports_only_the_kernel_and_its_helpers(self):
        self.assertIn("outbox/core/dispatch.py", KERNEL_MODULES)  # the folders' walk found the kernel at all
        for relpath in KERNEL_MODULES:
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
        self.assertIn("outbox.core.db", self.imports("sink/core/inbox.py", "from outbox.core import db"))
        self.assertIn("sink.server", self.imports("sink/cli.py", "from . import server"))
        self.assertIn("sink.inbox", self.imports("outbox/x.py", "from ..sink import inbox"))

    def test_kernel_rule(self):
        self.assertTrue(kernel_import_violation("outbox/core/dispatch.py", "outbox.ops.attempts"))
        self.assertTrue(kernel_import_violation("outbox/core/store.py", "outbox.ops.operations.quarantine"))
        self.assertTrue(kernel_import_violation("outbox/core/upgrade.py", "outbox.ops.relay"))
        self.assertFalse(kernel_import_violation("outbox/core/dispatch.py", "outbox.core.store.mark_sent"))
        self.assertFalse(kernel_import_violation("sink/core/inbox.py", "outbox.core.db"))
        self.assertFalse(kernel_import_violation("outbox/ops/relay.py", "outbox.ops.attempts"))
        self.assertFalse(kernel_import_violation("outbox/core/store.py", "sqlite3"))

    def test_sql_pattern(self):
        for text in ("SELECT payload FROM outbox", "INSERT INTO t VALUES (?)", "UPDATE outbox SET sent = 1",
                     "DELETE FROM inbox", "CREATE TABLE t (x)", "BEGIN IMMEDIATE", "PRAGMA query_only = OFF"):
            self.assertTrue(SQL_TEXT.match(text), text)
        for text in ("COMMIT", "END", "select a sku", "drop-after-commit", "Update the README"):
            self.assertFalse(SQL_TEXT.match(text), text)

    def test_cli_pattern(self):
        for relpath in ("outbox/cli/main.py", "sink/cli.py", "outbox/__main__.py", "outbox/cli/ops.py"):
            self.assertTrue(is_cli_module(relpath), relpath)
        for relpath in ("outbox/core/store.py", "sink/server.py", "outbox/client.py"):
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


class TestsByBehaviourTest(unittest.TestCase):
    """Each library module's tests are found by its name; the few test modules about several say what they cover."""

    def setUp(self):
        self.library = source_files(*LIBRARY_PACKAGES) + list(LIBRARY_SCRIPTS)
        self.assertIn("outbox/core/store.py", self.library)
        self.test_modules = sorted(os.path.basename(path)[: -len(".py")]
                                   for path in glob.glob(os.path.join(ROOT, "tests", "test_*.py")))
        self.assertIn("test_layout", self.test_modules)

    def test_every_library_module_has_its_test_module_or_says_where_it_is_tested(self):
        names = [test_module_for(relpath) for relpath in self.library]
        self.assertEqual(sorted(set(name for name in names if names.count(name) > 1)), [],
                         "two library modules map to one test module name")
        missing = []
        for relpath in self.library:
            own = test_module_for(relpath)
            if own in self.test_modules:
                self.assertNotIn(relpath, TESTED_ELSEWHERE, "tests/%s.py exists: drop the TESTED_ELSEWHERE entry" % own)
            elif relpath not in TESTED_ELSEWHERE:
                missing.append("%s: tests/%s.py, or an entry in TESTED_ELSEWHERE" % (relpath, own))
        self.assertEqual(missing, [])

    def test_tested_elsewhere_names_library_modules_and_test_modules_that_exist(self):
        for relpath, (test_modules, reason) in TESTED_ELSEWHERE.items():
            self.assertIn(relpath, self.library, "TESTED_ELSEWHERE names a module the kit no longer has")
            self.assertTrue(reason, relpath)
            for name in test_modules:
                self.assertIn(name, self.test_modules, relpath)

    def test_every_test_module_is_a_library_modules_or_says_what_it_covers(self):
        for name in self.test_modules:
            owner = library_module_of(name, self.library)
            with self.subTest(test_module=name):
                if owner is None:
                    self.assertIn(name, ABOUT_SEVERAL, "name it test_PACKAGE_MODULE[_WHAT]_slow, or list it "
                                                       "in ABOUT_SEVERAL with what it covers")
                else:
                    self.assertNotIn(name, ABOUT_SEVERAL, "it is %s's: drop it from ABOUT_SEVERAL" % owner)
        for name in ABOUT_SEVERAL:
            self.assertIn(name, self.test_modules, "ABOUT_SEVERAL names a test module that is gone")

    def test_wall_clock_assertions_only_in_slow_modules(self):
        found = []
        for name in self.test_modules:
            if not name.endswith("_slow"):
                relpath = "tests/%s.py" % name
                found.extend("%s:%d" % (relpath, line) for line in clock_assertions(parse(relpath)))
        self.assertEqual(found, [], "wait on a condition, or move the bound to a *_slow module")

    def test_socket_functions_are_patched_only_where_contributing_says_and_sqlite3_never(self):
        """Issue 22: CONTRIBUTING.md's "Tests" lists each patch of the socket module; this keeps that list true."""
        patch = re.compile(r"""mock\.patch(?:\.object)?\(\s*(?:["'](socket|sqlite3)\.([\w.]+)["']|(socket|sqlite3)"""
                           r"""(?:\.\w+)*,\s*["'](\w+)["'])""")
        found = set()
        for path in sorted(glob.glob(os.path.join(ROOT, "tests", "**", "*.py"), recursive=True)):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for match in patch.finditer(text):
                module, name = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
                found.add((os.path.relpath(path, ROOT).replace(os.sep, "/"), module, name))
        self.assertEqual(found, {("tests/test_outbox_sender.py", "socket", "getaddrinfo"),
                                 ("tests/test_outbox_sender.py", "socket", "create_connection"),
                                 ("tests/test_outbox_sender.py", "socket", "connect"),
                                 ("tests/test_sink_server.py", "socket", "getfqdn")})
        with open(os.path.join(ROOT, "CONTRIBUTING.md"), encoding="utf-8") as f:
            contributing = f.read()
        for name in ("no_network", "getaddrinfo", "create_connection", "socket.connect", "socket.getfqdn"):
            self.assertIn(name, contributing)

    def test_no_unused_imports_in_the_tests(self):
        found = ["%s:%d %s" % (relpath, line, name) for relpath in source_files("tests")
                 for line, name in unused_imports(parse(relpath))]
        self.assertEqual(found, [])


class TestRulesSelfTest(unittest.TestCase):
    """The detectors of TestsByBehaviourTest must be able to fail."""

    LIBRARY = ["outbox/cli/main.py", "outbox/cli/relay.py", "outbox/core/store.py", "grader/contain.py", "grade.py"]

    def test_test_modules_map_to_their_library_modules(self):
        for name, owner in (("test_outbox_store", "outbox/core/store.py"), ("test_grade", "grade.py"),
                            ("test_grader_contain_slow", "grader/contain.py"),
                            ("test_outbox_cli_relay_outage_slow", "outbox/cli/relay.py"),
                            ("test_outbox_cli_slow", "outbox/cli/main.py"), ("test_outbox_store_extra", None),
                            ("test_grade_rules", None), ("test_bench_slow", None), ("test_outbox", None)):
            self.assertEqual(library_module_of(name, self.LIBRARY), owner, name)
        self.assertEqual(test_module_for("outbox/cli/relay.py"), "test_outbox_cli_relay")
        self.assertEqual(test_module_for("outbox/ops/relay.py"), "test_outbox_relay")
        self.assertEqual(test_module_for("outbox/cli/main.py"), "test_outbox_cli")
        self.assertEqual(test_module_for("outbox/core/__init__.py"), "test_outbox_core___init__")

    def test_unused_imports_are_found(self):
        tree = ast.parse("import os, sys\nimport outbox.core.errors\nfrom a import b as c, d\n"
                         "def f():\n    import json\n    return sys.argv, outbox.core.errors, d\n")
        self.assertEqual(unused_imports(tree), [(1, "os"), (3, "c"), (5, "json")])

    def test_clock_assertions_are_found(self):
        tree = ast.parse("started = time.monotonic()\nself.assertLess(time.monotonic() - started, 2)\n"
                         "took = time.monotonic() - started\nslow = took > 1\nself.assertFalse(slow)\n"
                         "self.assertLess(cpu_seconds(pid), 0.5)\nself.assertTrue(at <= time.time())\n"
                         "self.assertEqual(clock.monotonic(), 3)\nwait_until(lambda: time.monotonic() > 1)\n"
                         "left = lambda: deadline - time.monotonic()\nself.assertEqual(child.line(left()), 'ready')\n")
        self.assertEqual(clock_assertions(tree), [2, 5, 6])


if __name__ == "__main__":
    unittest.main()
