"""When a stored validation still answers: its fingerprint, its depth and its age, one rule.

``current`` (nothing it depends on changed; ``changed`` names what did), ``depth_of`` and
``answers`` are that rule; ``validation.reports.StoredReport`` is its typed face, which the
gate, selection, `report` and the session use, and the gate's stored-pass answer calls these
directly.

Standard library only, and no pathlib: the pre-training gate's stored-pass answer
(``cli/fast.py``) computes the fingerprint with these very functions, without the store, the
session or the report types, and ``reports.fingerprint`` (what ``validate`` stores) is these
functions applied to an ``EnvInfo``, so the two can't drift apart.

The fingerprint covers what a validation depends on: the installed distributions, the env's
Python, manifest and interpreter, its installed files as cheaply seen (``files_stamp``), and
the host (driver, GPU UUIDs, CUDA variables: ``host.library``).
"""
from __future__ import annotations

import os

try:  # the C module the datetime module re-exports: a third of its import time
    from _datetime import datetime, timezone
except ImportError:  # not CPython
    from datetime import datetime, timezone

from ..envs.metadata import site_package_dirs
from .health import CHECK_ID as HEALTH_CHECK

# How deep a validation went: the quick checks only; plus the framework listing its devices
# in the env's interpreter; plus the smoke fit. A report answers for its depth and below.
DEPTHS = ("quick", "listing", "smoke")


def deeper(a: str | None, b: str | None) -> bool:
    """Is depth ``a`` greater than depth ``b``? (an unknown depth counts as the least)"""
    rank = {d: i for i, d in enumerate(DEPTHS)}
    return rank.get(a or "", -1) > rank.get(b or "", -1)


def fingerprint(env_dir: str | os.PathLike, *, python: str | os.PathLike, manifest: str | os.PathLike,
                python_version: str | None, state: str, packages: dict[str, str], host: dict,
                lock: str | None = None) -> dict:
    """What a stored validation depends on: a change of any of it means validate again. The
    env's own state, manifest, interpreter and files (replaced, edited or deleted behind
    envcheck's back) count as much as its packages, the driver and the GPUs (``host``: the
    facts of ``host.library.host_facts``), and, for an env made from a lock, the lock's digest."""
    return {"packages": dict(sorted(packages.items())), "python": python_version,
            "env_state": state, "interpreter": file_identity(python),
            "manifest": file_identity(manifest), "files": files_stamp(env_dir), **host,
            **({"lock": lock} if lock else {})}


def file_identity(path: str | os.PathLike) -> list | None:
    """The file a path resolves to, by device, inode, size and modification time."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def files_stamp(env_dir: str | os.PathLike) -> str:
    """A digest of the env's installed files, one stat per top-level entry of site-packages:
    each entry by name and inode, a package folder's ``__init__.py``, a distribution's
    ``RECORD`` and any other file by inode, size and modification time.

    Moving a package away or back, replacing it, reinstalling a distribution, or editing a
    package's ``__init__.py`` or a top-level module changes it; the bytecode Python writes
    when the env imports (``__pycache__``) does not (folder times would change with it).
    Files deeper in a package are not covered: a smoke fit (``check --smoke``) is what
    proves those."""
    import zlib

    parts = []
    for folder in site_package_dirs(env_dir):
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name == "__pycache__":
                continue
            try:
                if entry.name.endswith(".dist-info"):
                    st = os.stat(os.path.join(entry.path, "RECORD"))
                elif entry.is_dir():
                    st = os.stat(os.path.join(entry.path, "__init__.py"))
                else:
                    st = entry.stat()
                stamp = f"{st.st_ino}.{st.st_size}.{st.st_mtime_ns}"
            except OSError:  # a namespace package, a dangling link: its name and inode say it
                stamp = "-"
            parts.append(f"{entry.name}/{entry.inode()}/{stamp}")
    return f"{len(parts)}-{zlib.crc32(chr(10).join(parts).encode('utf-8', 'surrogateescape')):08x}"


def age_s(report: dict) -> float | None:
    """Seconds since the report was made (None when its time can't be read)."""
    try:
        created = datetime.fromisoformat(report["created"])
    except (KeyError, TypeError, ValueError):
        return None
    return (datetime.now(timezone.utc) - created).total_seconds()


def depth_of(report: dict) -> str:
    """How deep a stored report went (one written before depths were kept: by its smoke flag)."""
    return report.get("depth") or ("smoke" if report.get("smoke") else "quick")


def current(report: dict | None, fingerprint: dict) -> bool:
    """Is the stored report of this fingerprint, i.e. does nothing it depends on differ now?
    (``changed`` names what does: it is empty exactly when this is true)"""
    return bool(report) and report.get("fingerprint") == fingerprint


def changed(report: dict, fingerprint: dict) -> list[str]:
    """The fingerprint's parts that differ between the stored report and now, in the current
    fingerprint's order (a part only one of them has counts too)."""
    before = report.get("fingerprint")
    if not isinstance(before, dict):
        return list(fingerprint) or ["fingerprint"]
    missing = object()
    return [key for key in {**fingerprint, **before}
            if before.get(key, missing) != fingerprint.get(key, missing)]


def failed_on_health(report: dict) -> bool:
    """Did the report's level-1 ``health`` check fail? Health is never taken from a stored
    report (a GPU is reset, or fails, between two jobs): such a report answers nothing, and
    the gate validates again with level 1 read now."""
    return any(isinstance(c, dict) and c.get("id") == HEALTH_CHECK and c.get("status") == "fail"
               for c in report.get("checks") or [])


def verdict_without_health(report: dict) -> str:
    """The stored report's verdict from its checks but its level-1 ``health`` check (health
    counts as read now, never as stored): ready, degraded or not-ready."""
    from ..results import verdict_of_statuses

    return verdict_of_statuses(c.get("status") for c in report.get("checks") or []
                               if isinstance(c, dict) and c.get("id") != HEALTH_CHECK)


def answers(report: dict | None, fingerprint: dict, max_age: float, smoke: bool) -> bool:
    """May the stored report answer? It must be of this fingerprint (``current``) and fresh. A
    pass answers when it went as deep as asked; a failure stands until a validation at least
    as deep as it says otherwise (so a quick check never turns a failed smoke fit into "ready"),
    unless level-1 health failed it (``failed_on_health``)."""
    if not current(report, fingerprint) or failed_on_health(report):
        return False
    age = age_s(report)
    if age is None or not 0 <= age <= max_age:
        return False
    depth = depth_of(report)
    if report.get("verdict") in ("ready", "degraded"):
        return not (smoke and deeper("smoke", depth))
    return deeper(depth, "smoke" if smoke else "listing")  # a rerun would go less deep
