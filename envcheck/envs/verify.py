"""What is installed in an env against what was installed: drift, file by file.

At the end of every create and add (and of a linked second env; an adopted env's at its first
check) the store takes a **baseline** (``envcheck-files.json``): each distribution's version
and its ``RECORD``'s sha256, each file its ``RECORD`` lists by size, modification and change
time and the hash ``RECORD`` gives it (the wheel's own, checked by the installer when the env
was made from a lock); each folder holding them by modification time and the names in it no
``RECORD`` lists (the venv's own files); each ``__pycache__`` beside a recorded source with
its pycs (``envs.pycache``); and ``pyvenv.cfg``'s sha256.

``verify`` compares now with the baseline:

- packages added, removed, or changed (another version, or a ``RECORD`` that differs: a
  reinstall from another file, an edited ``RECORD``);
- files removed; ``changed`` (another size); ``edited`` (the same size, other bytes: found by
  hashing a file whose modification or change time moved; an edit that puts the modification
  time back still moves the change time, which no one can set); ``added`` (in a folder whose
  time moved, a name no ``RECORD`` and no baseline lists: a stray ``*.pyc`` outside
  ``__pycache__`` too, which Python runs where no source is);
- ``bytecode``: a pyc in ``__pycache__`` the env's interpreter would run in place of its
  source that is not compiled from it (``envs.pycache``: what moved is judged, or, with
  ``hashes``, all); ``pyvenv.cfg`` changed or edited (read whole: it is a few lines).

Files and folders writable by the env's group or anyone are named apart (``writable``): not
drift, but anyone on the machine can change what a training job runs.

The default is that quick check; ``hashes=True`` hashes every file and judges every pyc. A file
whose times moved but whose bytes are the recorded ones is no drift (hard links of uv's cache
or of a linked env move the change time of every env sharing it): its new times come back in
``refreshed`` (sound bytecode in ``bytecode``) for the store to record: the next check is quick.
"""
from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import pycache
from .metadata import canonical_name, installed_packages, site_package_dirs

NAME = "envcheck-files.json"
SCHEMA = "envcheck.files/1"
DERIVED = ("__pycache__",)
# What each installer writes its own way into a dist-info folder: left out of the content digest.
PER_INSTALLER = ("INSTALLER", "REQUESTED", "direct_url.json", "uv_cache.json")
SEEDED = ("pip",)  # what virtualenv puts in an env pip installs into: no package of the env's own
LISTED = 200  # files named per kind in a report; the counts are always whole
VENV_CFG = "pyvenv.cfg"
KINDS = {"added": "file(s) added", "removed": "file(s) removed", "changed": "file(s) changed",
         "edited": "file(s) edited", "bytecode": "pyc(s) not compiled from their source"}


def _b64_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def _hex_sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def _rows(env_dir: str, info_dir: str) -> list[tuple[str, str]]:
    """[(file as RECORD names it, relative to site-packages; RECORD's hash)] for each file the
    dist-info folder ``info_dir`` (relative to the env) records with a hash (RECORD's own row
    has none)."""
    with open(os.path.join(env_dir, info_dir, "RECORD"), newline="", encoding="utf-8") as fh:
        return [(row[0], row[1][7:]) for row in csv.reader(fh) if len(row) >= 2 and row[1].startswith("sha256=")]


def _env_path(site: str, path: str) -> str:
    """A RECORD path (relative to ``site``, site-packages relative to the env) relative to the env."""
    return os.path.normpath(os.path.join(site, path))


def _dist_infos(env_dir: str) -> dict[str, tuple[str, str]]:
    """{distribution: (version, its dist-info folder relative to the env)}."""
    found = {}
    for sp in site_package_dirs(env_dir):
        site = os.path.relpath(sp, env_dir)
        for entry in os.scandir(sp):
            if entry.name.endswith(".dist-info") and os.path.isfile(os.path.join(entry.path, "RECORD")):
                name, _, version = entry.name[: -len(".dist-info")].rpartition("-")
                found[canonical_name(name)] = (version, f"{site}{os.sep}{entry.name}")
    return found


def take(env_dir: str, lock_digest: str | None = None) -> dict[str, Any]:
    """The baseline of the env as it is now (see the module docstring)."""
    root = os.path.join(env_dir, "")
    dists, dirs, content, known = {}, {}, [], set()
    for name, (version, info_dir) in sorted(_dist_infos(env_dir).items()):
        site = os.path.dirname(info_dir)
        files, inside = {}, []
        for path, digest in _rows(env_dir, info_dir):
            rel = _env_path(site, path)
            if _derived(rel):
                continue
            try:
                st = os.lstat(root + rel)
            except OSError:
                continue  # listed but absent (removed by hand): not part of what is installed
            files[path] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns]
            known.add(rel)
            parent = os.path.dirname(rel)
            while parent and parent not in dirs:
                dirs[parent] = None
                parent = os.path.dirname(parent)
            if not path.startswith("..") and os.path.basename(path) not in PER_INSTALLER:
                inside.append(f"{path}:{digest}")
        dists[name] = {"version": version, "record": _hex_sha256(root + info_dir + os.sep + "RECORD"),
                       "dist_info": info_dir, "site": site, "files": files}
        if name not in SEEDED:
            content.append(f"{name}=={version}:" + hashlib.sha256("\n".join(sorted(inside)).encode()).hexdigest())
    for sp in site_package_dirs(env_dir):
        dirs.setdefault(os.path.relpath(sp, env_dir), None)
    known |= set(dirs)
    for rel in list(dirs):
        try:
            st = os.stat(root + rel)
            names = os.listdir(root + rel)
        except OSError:
            dirs.pop(rel)
            continue
        extra = sorted(n for n in names if os.path.join(rel, n) not in known and not _derived(n))
        dirs[rel] = [st.st_mtime_ns, extra]
    return {"schema": SCHEMA, "lock": lock_digest, "digest": content_digest(content), "dists": dists, "dirs": dirs,
            "bytecode": pycache.take(env_dir, _recorded(dists)), "venv_cfg": _venv_cfg(env_dir)}


def _recorded(dists: dict[str, Any]) -> list[str]:
    """Every file the baseline's distributions recorded, relative to the env."""
    return [_env_path(d["site"], p) for d in dists.values() for p in d["files"]]


def _venv_cfg(env_dir: str) -> list | None:
    """[size, sha256] of the env's ``pyvenv.cfg``, or None when it has none."""
    path = os.path.join(env_dir, VENV_CFG)
    return [os.path.getsize(path), _hex_sha256(path)] if os.path.isfile(path) else None


def adopt(env_dir: str, recorded: dict[str, str], lock_digest: str | None = None) -> dict[str, Any]:
    """A baseline for an env made before envcheck kept one: its files as their RECORDs give
    them (to be checked with ``hashes=True``) and its packages as its manifest recorded them."""
    baseline = take(env_dir, lock_digest)
    dists = {n: d for n, d in baseline["dists"].items() if n in recorded}
    for name, version in recorded.items():
        dists[name] = {**dists.get(name, {"record": None, "dist_info": "", "site": "", "files": {}}),
                       "version": version}
    return {**baseline, "dists": dists}


def write(env_dir: str | os.PathLike, baseline: dict[str, Any]) -> None:
    """The env's baseline, written atomically beside its manifest."""
    from ..atomic import write_bytes

    write_bytes(Path(env_dir) / NAME, json.dumps(baseline, separators=(",", ":")).encode("utf-8"))


def content_digest(lines: list[str]) -> str:
    """The digest of what the env holds: each distribution, its version and the recorded hash
    of every file it installed inside site-packages (scripts, whose first line names the env's
    own path, what each installer writes its own way, and the pip virtualenv seeds left out),
    so envs made from one lock on any node, by uv or pip, have the same digest."""
    return "sha256:" + hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()


def _derived(rel: str) -> bool:
    return any(part in DERIVED for part in rel.split(os.sep))


def read(env_dir: str) -> dict[str, Any] | None:
    """The env's baseline, or None when it has none (made before envcheck kept one) or it
    can't be read as one."""
    try:
        with open(os.path.join(env_dir, NAME), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and data.get("schema") == SCHEMA and all(
        isinstance(data.get(k), dict) for k in ("dists", "dirs"))
    return data if ok else None


@dataclass
class Drift:
    """What differs from the baseline; ``clean`` when nothing does."""

    mode: str  # "quick" | "hashes"
    checked: int = 0  # files compared
    hashed: int = 0  # of which hashed
    packages: dict[str, dict] = field(default_factory=lambda: {"added": {}, "removed": {}, "changed": {}})
    files: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    compiled: int = 0  # pycs judged against their source compiled
    bytecode_note: str | None = None  # why bytecode could not be judged (each pyc then counts)
    writable: list[str] = field(default_factory=list)  # writable by others (not drift: see the module)
    writable_count: int = 0
    refreshed: dict[str, dict] = field(default_factory=dict, repr=False)  # dist -> {file: its new times}
    bytecode: dict[str, list] | None = field(default=None, repr=False)  # the bytecode record as found

    @property
    def clean(self) -> bool:
        return not any(self.packages.values()) and not any(self.counts.values())

    @property
    def refreshes(self) -> bool:
        """Does the baseline have times or bytecode to bring up to date (``refreshed``)?"""
        return bool(self.refreshed) or self.bytecode is not None

    def _file(self, kind: str, rel: str) -> None:
        self.counts[kind] += 1
        if len(self.files[kind]) < LISTED:
            self.files[kind].append(rel)

    def _mode(self, rel: str, st: os.stat_result) -> None:
        if st.st_mode & pycache.BY_OTHERS and not stat.S_ISLNK(st.st_mode):
            self.writable_count += 1
            if len(self.writable) < LISTED:
                self.writable.append(rel or ".")

    def summary(self) -> str:
        """One line: what drifted."""
        parts = [f"{len(v)} package(s) {k} ({_named(v)})" for k, v in self.packages.items() if v]
        parts += [f"{n} {KINDS[k]}" for k, n in self.counts.items() if n]
        return ", ".join(parts) or "no drift"

    def writable_summary(self) -> str | None:
        """One line naming what others may write, or None when nothing is."""
        more = f", +{self.writable_count - 3} more" if self.writable_count > 3 else ""
        named = ", ".join(self.writable[:3])
        return f"{self.writable_count} file(s) writable by others: {named}{more}" if self.writable_count else None

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "clean": self.clean, "checked": self.checked, "hashed": self.hashed,
                "compiled": self.compiled, "packages": self.packages, "files": self.files, "counts": self.counts,
                "bytecode_note": self.bytecode_note, "writable": {"count": self.writable_count, "files": self.writable}}


def _named(packages: dict, shown: int = 3) -> str:
    """The first ``shown`` package names, then how many more."""
    names = sorted(packages)
    more = f", +{len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def packages_since(before: dict[str, str], now: dict[str, str], mode: str = "packages") -> Drift:
    """The packages added, changed and removed from ``before`` to ``now`` ({name: version})."""
    drift = Drift(mode)
    for name, version in now.items():
        if name not in before:
            drift.packages["added"][name] = version
        elif before[name] != version:
            drift.packages["changed"][name] = {"from": before[name], "to": version}
    for name, version in before.items():
        if name not in now:
            drift.packages["removed"][name] = version
    return drift


def verify(env_dir: str, baseline: dict[str, Any], hashes: bool = False) -> Drift:
    """Compare the env now with ``baseline`` (see the module docstring)."""
    drift = packages_since({name: d["version"] for name, d in baseline["dists"].items()},
                           installed_packages(env_dir), "hashes" if hashes else "quick")
    root = os.path.join(env_dir, "")
    before = {name: d["version"] for name, d in baseline["dists"].items()}
    moved = set(drift.packages["changed"]) | set(drift.packages["removed"])
    lstat = os.lstat
    for name, d in baseline["dists"].items():
        if name in moved:
            continue  # its package's change says it
        if d["record"] is not None and _hex_sha256(root + d["dist_info"] + os.sep + "RECORD") != d["record"]:
            drift.packages["changed"][name] = {"from": before[name], "to": now.get(name), "record": "differs"}
            continue
        recorded = None  # RECORD's hashes, read once they are needed (RECORD is as it was: checked above)
        prefix = root + d["site"] + os.sep
        for path, (size, mtime, ctime) in d["files"].items():
            drift.checked += 1
            try:
                st = lstat(prefix + path)
            except OSError:
                drift._file("removed", _env_path(d["site"], path))
                continue
            if st.st_mode & pycache.BY_OTHERS:
                drift._mode(_env_path(d["site"], path), st)
            if st.st_size != size:
                drift._file("changed", _env_path(d["site"], path))
            elif hashes or st.st_mtime_ns != mtime or st.st_ctime_ns != ctime:
                recorded = recorded if recorded is not None else dict(_rows(env_dir, d["dist_info"]))
                drift.hashed += 1
                try:
                    same = _b64_sha256(prefix + path) == recorded.get(path)
                except OSError:
                    same = False
                if not same:
                    drift._file("edited", _env_path(d["site"], path))
                elif st.st_mtime_ns != mtime or st.st_ctime_ns != ctime:
                    drift.refreshed.setdefault(name, {})[path] = [size, st.st_mtime_ns, st.st_ctime_ns]
    _added(env_dir, baseline, drift, moved)
    _venv(env_dir, baseline, drift)
    _bytecode(env_dir, baseline, drift, hashes)
    return drift


def _venv(env_dir: str, baseline: dict[str, Any], drift: Drift) -> None:
    """The env's folder and its ``pyvenv.cfg`` against the baseline's (one kept before it
    recorded ``pyvenv.cfg`` takes it as it is)."""
    for rel in ("", VENV_CFG):
        try:
            drift._mode(rel, os.stat(os.path.join(env_dir, rel)))
        except OSError:
            continue
    if "venv_cfg" not in baseline:
        return
    was, now = baseline["venv_cfg"], _venv_cfg(env_dir)
    if was is not None and now is None:
        drift._file("removed", VENV_CFG)
    elif now is not None and was is None:
        drift._file("added", VENV_CFG)
    elif now != was:
        drift._file("changed" if now[0] != was[0] else "edited", VENV_CFG)


def _bytecode(env_dir: str, baseline: dict[str, Any], drift: Drift, hashes: bool) -> None:
    """Bytecode not compiled from its source (``envs.pycache``); the bytecode record as found
    is handed back in ``drift.bytecode`` when it differs from the baseline's."""
    recorded = baseline.get("bytecode")
    found = pycache.check(env_dir, recorded, lambda: _recorded(baseline["dists"]), hashes, drift._mode)
    drift.checked, drift.hashed = drift.checked + found.stated, drift.hashed + found.hashed
    drift.compiled, drift.bytecode_note = found.judged, found.note
    for rel in found.bad:
        drift._file("bytecode", rel)
    if found.record != recorded:
        drift.bytecode = found.record


def _added(env_dir: str, baseline: dict[str, Any], drift: Drift, moved: set[str]) -> None:
    """Names in a baseline folder whose time moved that nothing there accounts for."""
    files: set[str] | None = None  # every recorded file, relative to the env: made once a folder moved
    dirs = baseline["dirs"]
    new_dists = set(drift.packages["added"]) | moved
    owned: set[str] | None = None  # what the new or changed packages installed, read once if needed
    for rel, (mtime, extra) in dirs.items():
        path = os.path.join(env_dir, rel)
        try:
            st = os.stat(path)
            drift._mode(rel, st)
            if st.st_mtime_ns == mtime:
                continue
            names = os.listdir(path)
        except OSError:
            continue
        known = set(extra)
        if files is None:
            files = {_env_path(d["site"], p) for d in baseline["dists"].values() for p in d["files"]}
        for name in names:
            child = os.path.join(rel, name)
            if name in known or child in files or child in dirs or _derived(name):
                continue
            if name.endswith(".dist-info") and canonical_name(name[:-10].rpartition("-")[0]) in new_dists:
                continue  # an added or changed package: said as one
            if new_dists and owned is None:
                owned = _installed_by(env_dir, new_dists)
            if owned and child in owned:
                continue
            drift._file("added", child)


def _installed_by(env_dir: str, dists: set[str]) -> set[str]:
    """Every file ``dists`` installed, as their RECORDs say, and every folder holding one."""
    out: set[str] = set()
    for name, (_, info_dir) in _dist_infos(env_dir).items():
        if name in dists:
            for path, _ in _rows(env_dir, info_dir):
                rel = _env_path(os.path.dirname(info_dir), path)
                while rel and rel not in out:
                    out.add(rel)
                    rel = os.path.dirname(rel)
    return out


def refreshed(baseline: dict[str, Any], drift: Drift) -> dict[str, Any]:
    """The baseline with the times of files found unchanged by their hash, and the bytecode
    found compiled from its source, brought up to date."""
    dists = {name: {**d, "files": {**d["files"], **drift.refreshed[name]}} if name in drift.refreshed else d
             for name, d in baseline["dists"].items()}
    bytecode = drift.bytecode if drift.bytecode is not None else baseline.get("bytecode")
    return {**baseline, "dists": dists, **({"bytecode": bytecode} if bytecode is not None else {})}
