"""--report DIR: the folder grade.py owns, and every file in it, each written atomically as its worker finishes.

DIR/<name>.json (a worker's result), DIR/students/<name>.html (its page),
DIR/gradescope/<name>.json (its Gradescope results.json), then the class
files: DIR/class.json, class.csv, junit.xml, index.html. A worker's files are
written the moment it finishes, each through a temporary file and a rename,
so an interrupted run leaves every finished worker's report and class files
marked partial. DIR holds nothing else: a file grade.py did not write is
refused (the caller exits 2 naming it) unless --force, and then left
untouched; the kit's own stale reports are removed. The renderers in
grader/render/ make the content; this module only decides file names and
writes. Never runs anything.
"""
import hashlib
import json
import os
import tempfile

from . import __version__
from .render import csvfile, gradescope, jsonfile, junit, student, summary
from .render.page import GENERATOR
from .text import shown

CLASS_FILES = ("class.json", "class.csv", "junit.xml", "index.html")
STUDENTS, GRADESCOPE = "students", "gradescope"
TEMP_PREFIX = ".grade-"  # an atomic write's temporary file, left only by a process killed in the middle
UMASK = os.umask(0o022)  # read once, at import, in the main thread: mkstemp's files are 0600, reports are
os.umask(UMASK)          # for a teacher to read and serve, so they get the mode open() would give them


NAME_BYTES = 200  # of a report file's stem: <stem>.json and <stem>.html must fit the 255 bytes a file system allows


def file_stem(name):
    """The stem of a worker's report files: its name if that is printable and short, else a cut, escaped
    form with a digest of the name (so two long or odd names still get files of their own)."""
    safe = shown(name).replace("/", "_").replace("\\", "_")
    if safe == name and len(name.encode("utf-8", "surrogateescape")) <= NAME_BYTES and not name.startswith("."):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    while len(safe.encode("utf-8")) > NAME_BYTES - 13:
        safe = safe[:-1]
    return "%s-%s" % (safe.lstrip(".") or "worker", digest)


def worker_files(name):
    """The files of one worker's result, relative to DIR (named by file_stem)."""
    stem = file_stem(name)
    return [stem + ".json", os.path.join(STUDENTS, stem + ".html"), os.path.join(GRADESCOPE, stem + ".json")]


def atomic_write(path, content):
    """`content` at `path` through a temporary file in the same folder and a rename: all of it or none."""
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".tmp", dir=folder)
    try:
        with open(fd, "w", encoding="utf-8", newline="") as f:
            f.write(content)
        os.chmod(temp, 0o666 & ~UMASK)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


def read_json(path):
    """The JSON object in `path`, or None when it holds no JSON object (or cannot be read)."""
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def head(path, size=4096):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(size)
    except OSError:
        return ""


def is_worker_report(value):
    return value is not None and "schema" in value and "version" in value and isinstance(value.get("checks"), list)


def is_ours(relpath, path):
    """Whether `path` (DIR/`relpath`) is a file grade.py writes there, by its place and its content.

    By content, not by a list of names: the reports of an earlier release
    (without any record of what they wrote) are recognised too.
    """
    base = os.path.basename(relpath)
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    if base.startswith(TEMP_PREFIX) and base.endswith(".tmp"):
        return True
    folder = os.path.dirname(relpath)
    if folder == STUDENTS:
        return base.endswith(".html") and ('name="generator" content="%s' % GENERATOR) in head(path)
    if folder == GRADESCOPE:
        value = read_json(path) if base.endswith(".json") else None
        return value is not None and isinstance(value.get("tests"), list) and "score" in value
    if folder:
        return False
    if base == "class.csv":
        return head(path).lstrip("\ufeff").startswith("worker,")
    if base == "junit.xml":
        return '<testsuites name="grade.py"' in head(path)
    if base == "index.html":
        return "<title>grade.py: " in head(path) or ('content="%s' % GENERATOR) in head(path)
    if base == "class.json":
        value = read_json(path)
        return value is not None and "workers" in value and "schema" in value
    return base.endswith(".json") and is_worker_report(read_json(path))


def survey(folder):
    """(ours, foreign): the relative paths in `folder` grade.py wrote, and those it did not."""
    ours, foreign = [], []
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            relpath = os.path.relpath(os.path.join(top, name), folder)
            (ours if is_ours(relpath, os.path.join(top, name)) else foreign).append(relpath)
        rel = os.path.relpath(top, folder)
        if rel != "." and rel not in (STUDENTS, GRADESCOPE):
            foreign.append(rel + os.sep)
            dirs[:] = []
        else:
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
    return ours, sorted(set(foreign))


class ReportFolder:
    """DIR as one run of grade.py writes it: claimed, cleared of stale reports, filled as workers finish."""

    def __init__(self, path, lang, names):
        self.path, self.lang, self.names = path, lang, names

    def clear(self, keep=()):
        """Remove the kit's own files, but those of the worker names in `keep` (resumed): none is stale after."""
        kept = {rel for name in keep for rel in worker_files(name)}
        ours, _ = survey(self.path)
        for relpath in ours:
            if relpath not in kept:
                os.unlink(os.path.join(self.path, relpath))

    def resumable(self, version=__version__):
        """{name: result} of the worker reports in DIR that this grader version wrote."""
        found = {}
        for entry in sorted(os.listdir(self.path)):
            if entry.endswith(".json") and entry not in CLASS_FILES:
                value = read_json(os.path.join(self.path, entry))
                if is_worker_report(value) and value.get("version") == version and isinstance(value.get("name"), str) \
                        and file_stem(value["name"]) + ".json" == entry:
                    found[value["name"]] = value
        return found

    def write_worker(self, result):
        """One worker's JSON, page and Gradescope file, the moment it finishes."""
        json_file, page, scope = (os.path.join(self.path, rel) for rel in worker_files(result["name"]))
        atomic_write(page, student.student_html(result, self.lang))
        atomic_write(scope, gradescope.results_json(result))
        atomic_write(json_file, jsonfile.dumps(result))  # last: its presence means the worker's files are whole

    def write_class(self, result):
        """The class files for what has finished so far (marked partial until every worker has)."""
        atomic_write(os.path.join(self.path, "class.json"), jsonfile.dumps(dict(result, workers=[
            w["name"] for w in result["workers"]])))
        atomic_write(os.path.join(self.path, "class.csv"), csvfile.class_csv(result, self.names))
        atomic_write(os.path.join(self.path, "junit.xml"), junit.junit_xml(result))
        atomic_write(os.path.join(self.path, "index.html"), summary.index_html(result, self.names, self.lang))


def load_shard(path, version=__version__):
    """(worker results, class.json or None) of a --report folder, for --merge: its JSON alone."""
    return ReportFolder(path, "en", ()).resumable(version), read_json(os.path.join(path, "class.json"))
