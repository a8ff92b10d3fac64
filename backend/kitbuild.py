"""The kit's own PEP 517 build backend, and `make zipapp`: standard library only, so an install fetches nothing.

Owns what goes into a wheel, an sdist and outbox-kit.pyz, and nothing else:
pip calls the hooks below (pyproject.toml names this file through
`backend-path`), so `pip install .` works offline with no setuptools or
wheel from a registry. The wheel holds only the kit: the packages outbox,
sink and grader, grade.py, and the reference worker the grader grades by
default (as grader/worker_reference.py, since an `examples` package in
site-packages would belong to no one). It installs three commands:
`outbox`, `outbox-sink` and `outbox-grade`, one for each of `python3 -m
outbox`, `python3 -m sink` and `python3 grade.py`.
"""

import base64
import hashlib
import io
import os
import re
import stat
import sys
import tarfile
import time
import zipapp
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "outbox-kit"
DIST = "outbox_kit"
PACKAGES = ("outbox", "sink", "grader")
SCRIPTS = {"outbox": "outbox.cli.main:main", "outbox-sink": "sink.cli:main", "outbox-grade": "grade:main"}
REFERENCE = ("examples/worker_reference.py", "grader/worker_reference.py")  # (in the tree, in the wheel)
SDIST_EXTRA = ("pyproject.toml", "backend/kitbuild.py", "backend/pyz_main.py", "LICENSE", "README.md", "CHANGELOG.md", "Makefile",
               "examples/worker_reference.py")
SUMMARY = "Crash-safe event delivery with the transactional outbox pattern: shown, run and graded"
# The date every archive member carries, so the same tree builds the same bytes (SOURCE_DATE_EPOCH wins).
EPOCH = 315532800  # 1980-01-01, the earliest a zip can say


def version():
    """outbox.__version__, read from the source without importing it."""
    with open(os.path.join(ROOT, "outbox", "__init__.py"), encoding="utf-8") as f:
        found = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if found is None:
        raise RuntimeError("no __version__ line in outbox/__init__.py")
    return found.group(1)


def kit_files():
    """(path in the tree, path in the wheel) of every file the kit is made of, sorted."""
    files = []
    for package in PACKAGES:
        for folder, dirs, names in os.walk(os.path.join(ROOT, package)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if name.endswith(".py"):
                    path = os.path.relpath(os.path.join(folder, name), ROOT).replace(os.sep, "/")
                    files.append((path, path))
    files.append(("grade.py", "grade.py"))
    files.append(REFERENCE)
    return sorted(files, key=lambda pair: pair[1])


def metadata():
    return "".join([
        "Metadata-Version: 2.1\n",
        "Name: %s\n" % NAME,
        "Version: %s\n" % version(),
        "Summary: %s\n" % SUMMARY,
        "License: MIT\n",
        "Requires-Python: >=3.8\n",
        "Classifier: Programming Language :: Python :: 3\n",
        "Classifier: License :: OSI Approved :: MIT License\n",
    ])


def entry_points():
    return "[console_scripts]\n" + "".join("%s = %s\n" % item for item in sorted(SCRIPTS.items()))


# ---------------------------------------------------------------- PEP 517 hooks


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """outbox_kit-VERSION-py3-none-any.whl in `wheel_directory`, holding only the kit; returns its file name."""
    members = []
    for source, target in kit_files():
        with open(os.path.join(ROOT, source), "rb") as f:
            members.append((target, f.read()))
    return _write_wheel(wheel_directory, members)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel whose one .pth line puts this checkout on sys.path (`pip install -e .`)."""
    return _write_wheel(wheel_directory, [("%s.pth" % DIST, (ROOT + "\n").encode("utf-8"))])


def build_sdist(sdist_directory, config_settings=None):
    """outbox_kit-VERSION.tar.gz in `sdist_directory`: the kit, its build backend and the files pip needs."""
    base = "%s-%s" % (DIST, version())
    name = base + ".tar.gz"
    sources = sorted({source for source, _ in kit_files()} | set(SDIST_EXTRA))
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for source in sources:
            with open(os.path.join(ROOT, source), "rb") as f:
                _add_to_tar(tar, "%s/%s" % (base, source), f.read())
        _add_to_tar(tar, "%s/PKG-INFO" % base, metadata().encode("utf-8"))
    return name


# ---------------------------------------------------------------- make zipapp


def build_zipapp(target):
    """One file, `target` (outbox-kit.pyz): the kit and a __main__ that runs `outbox`, `sink` or `grade`."""
    staging = io.BytesIO()
    with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as archive:
        for source, member in kit_files() + [("backend/pyz_main.py", "__main__.py")]:
            with open(os.path.join(ROOT, source), "rb") as f:
                archive.writestr(_zip_info(member), f.read())
    staging.seek(0)
    zipapp.create_archive(staging, target, interpreter="/usr/bin/env python3")
    return target


# ---------------------------------------------------------------- archives


def _write_wheel(wheel_directory, members):
    info = "%s-%s.dist-info" % (DIST, version())
    members = list(members) + [
        (info + "/METADATA", metadata().encode("utf-8")),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: kitbuild\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (info + "/entry_points.txt", entry_points().encode("utf-8")),
    ]
    with open(os.path.join(ROOT, "LICENSE"), "rb") as f:
        members.append((info + "/LICENSE", f.read()))
    record = "".join("%s,sha256=%s,%d\n" % (name, _digest(data), len(data)) for name, data in members)
    members.append((info + "/RECORD", (record + info + "/RECORD,,\n").encode("utf-8")))
    name = "%s-%s-py3-none-any.whl" % (DIST, version())
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for member, data in members:
            wheel.writestr(_zip_info(member), data)
    return name


def _digest(data):
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def _stamp():
    return int(os.environ.get("SOURCE_DATE_EPOCH", EPOCH))


def _zip_info(name):
    info = zipfile.ZipInfo(name, date_time=time.gmtime(max(_stamp(), EPOCH))[:6])
    info.external_attr = (stat.S_IFREG | 0o644) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def _add_to_tar(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = _stamp()
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


if __name__ == "__main__":
    if sys.argv[1:2] != ["zipapp"] or len(sys.argv) != 3:
        sys.stderr.write("usage: python3 backend/kitbuild.py zipapp TARGET\n")
        sys.exit(2)
    print(build_zipapp(sys.argv[2]))
