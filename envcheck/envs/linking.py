"""A second env made from an intact first one: its installed files hard-linked, not installed.

An env of the same lock (or of the same preset content on the same interpreter) holds
exactly the files a new env would get, bytecode included; linking them takes a second where
installing takes minutes. Only what names the env's own path is written anew: the scripts in
``bin/`` (their ``#!`` line, ``activate``'s ``VIRTUAL_ENV``) and ``pyvenv.cfg``; each
``RECORD`` that lists a rewritten script gets that script's new hash and size (and is then a
file of the new env's own, as are the manifest and the baseline). Symbolic links are copied
as links.

Hard links share the file, as uv's cache already shares it with every env it installed:
installers replace a file (unlink, then write), never edit it in place, so an upgrade in one
env leaves the other as it was; an in-place edit shows in both, and ``env verify`` of either
finds it (``envs.verify``: the change time moves, the hash differs). Across filesystems no
link can be made: ``LinkUnavailable`` says so and the caller installs as usual.
"""
from __future__ import annotations

import base64
import csv
import errno
import hashlib
import io
import os
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from ..atomic import write_bytes
from ..errors import BusyError
from ..paths import MANIFEST_NAME, REPORT_NAME
from .verify import NAME as BASELINE_NAME

if TYPE_CHECKING:
    from .store import EnvStore

OWN = {MANIFEST_NAME, REPORT_NAME, BASELINE_NAME}  # the env's own records: never shared
SCRIPT_DIRS = ("bin", "Scripts")
MAX_SCRIPT = 1 << 20  # a script larger than this is a binary, not text naming the env


class LinkUnavailable(Exception):
    """The files can't be linked here (another filesystem, links not supported)."""


def clone(source: Path, target: Path) -> int:
    """Fill ``target`` (an existing, empty but for the manifest, folder) with ``source``'s
    files; the number of files linked. ``LinkUnavailable`` before anything is linked when
    the two are on different filesystems or the filesystem makes no hard links."""
    if os.stat(source).st_dev != os.stat(target).st_dev:
        raise LinkUnavailable(f"{source} and {target} are on different filesystems")
    old, new = os.fsencode(os.path.abspath(source)), os.fsencode(os.path.abspath(target))
    linked, rewritten = 0, {}
    for folder, dirs, files in os.walk(source):
        rel = os.path.relpath(folder, source)
        into = os.path.normpath(os.path.join(target, rel))
        top = rel == "."
        for name in list(dirs):
            src = os.path.join(folder, name)
            if os.path.islink(src):  # os.walk lists a link to a folder among the folders
                os.symlink(os.readlink(src), os.path.join(into, name))
                dirs.remove(name)
            else:
                os.mkdir(os.path.join(into, name), os.stat(src).st_mode & 0o7777)
        for name in files:
            if top and (name in OWN or name.startswith(".")):
                continue
            src, dst = os.path.join(folder, name), os.path.join(into, name)
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
            elif _names_env(rel, name, src, old):
                rewritten[os.path.normpath(os.path.join(rel, name))] = _rewrite(src, dst, old, new)
            else:
                try:
                    os.link(src, dst)
                except OSError as exc:
                    if linked == 0 and exc.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                        raise LinkUnavailable(f"no hard link from {source} to {target}: {exc.strerror}") from None
                    raise
                linked += 1
    _fix_records(target, rewritten)
    return linked


def _names_env(rel: str, name: str, path: str, old: bytes) -> bool:
    """Does this file hold the env's own path? (scripts and ``pyvenv.cfg`` only are read)"""
    if not (rel in SCRIPT_DIRS or (rel == "." and name == "pyvenv.cfg")):
        return False
    if os.path.getsize(path) > MAX_SCRIPT:
        return False
    with open(path, "rb") as fh:
        return old in fh.read()


def _rewrite(src: str, dst: str, old: bytes, new: bytes) -> tuple[str, int]:
    """Write ``dst`` as ``src`` with the env's path replaced; (its RECORD hash, its size)."""
    with open(src, "rb") as fh:
        data = fh.read().replace(old, new)
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, os.stat(src).st_mode & 0o7777)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(dst, os.stat(src).st_mode & 0o7777)  # the umask took bits from the mode
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}", len(data)


def _fix_records(target: Path, rewritten: dict[str, tuple[str, int]]) -> None:
    """Each RECORD that lists a rewritten file, written anew with that file's hash and size."""
    if not rewritten:
        return
    from .metadata import site_package_dirs

    for sp in site_package_dirs(target):
        for entry in os.scandir(sp):
            record = os.path.join(entry.path, "RECORD")
            if not entry.name.endswith(".dist-info") or not os.path.isfile(record):
                continue
            with open(record, newline="", encoding="utf-8") as fh:
                rows = list(csv.reader(fh))
            changed = False
            for row in rows:
                if len(row) >= 3:
                    where = os.path.relpath(os.path.normpath(os.path.join(sp, row[0])), target)
                    if where in rewritten:
                        row[1], size = rewritten[where]
                        row[2] = str(size)
                        changed = True
            if changed:
                buffer = io.StringIO()
                csv.writer(buffer, lineterminator="\n").writerows(rows)
                # a new file in its place: the shared RECORD stays the first env's
                write_bytes(record, buffer.getvalue().encode("utf-8"), 0o666)


@contextmanager
def times_kept(store: EnvStore, name: str) -> Iterator[None]:
    """Around the removal of env ``name``: the other envs sharing its files (made from the same
    twin, or the twin itself) see their files' change times move as the links go (the link
    count is part of the inode). Each found clean by ``env verify`` (quick) before, under its
    lock, gets its baseline's times taken again after, so its next check stays quick instead of
    hashing every shared file. One found drifted, or busy, is left as it is: its next check
    hashes, and finds what it finds."""
    from . import verify as vf

    info = store._info(name)
    root = (info.manifest.get("linked_from") or name) if info is not None else name
    family = [e for e in store.list() if e.name != name and e.state == "ready"
              and (e.name == root or e.manifest.get("linked_from") in (root, name))]
    with ExitStack() as held:
        clean = []
        for other in family:
            try:
                held.enter_context(store.locked(other.name))
            except BusyError:
                continue
            baseline = vf.read(str(other.path))
            if baseline is not None and vf.verify(str(other.path), baseline).clean:
                clean.append((other, baseline))
        yield
        for other, baseline in clean:
            vf.write(other.path, vf.take(str(other.path), baseline.get("lock")))
