"""Validation reports: their checks, how deep they went, the fingerprint they depend on, and
their storage.

Kept apart from ``validate`` so the pre-training gate's cache hit imports only this.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SCHEMA = "envcheck.report/1"
# How deep a validation went: the quick checks only; plus the framework listing its devices
# in the env's interpreter; plus the smoke fit. A report answers for its depth and below.
DEPTHS = ("quick", "listing", "smoke")


@dataclass
class Check:
    id: str
    status: str
    summary: str
    detail: str = ""
    fix: str | None = None


@dataclass
class Report:
    env: str
    verdict: str  # ready | degraded | not-ready
    checks: list[Check]
    devices: list[dict[str, Any]]
    multi_replica: dict[str, Any] | None
    speedup: dict[str, Any] | None
    build: dict[str, Any]
    host: dict[str, Any]
    fingerprint: dict[str, Any]
    created: str
    wall_s: float
    smoke: bool
    gpus_usable: int = 0  # GPUs this env's framework build can train on here
    depth: str = "quick"  # how deep it went: one of DEPTHS

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema"] = SCHEMA
        return data

    @property
    def ok(self) -> bool:
        return self.verdict != "not-ready"


def verdict_of(checks: list[Check]) -> str:
    statuses = {c.status for c in checks}
    return "not-ready" if "fail" in statuses else "degraded" if "warn" in statuses else "ready"


def deeper(a: str | None, b: str | None) -> bool:
    """Is depth ``a`` greater than depth ``b``? (an unknown depth counts as the least)"""
    rank = {d: i for i, d in enumerate(DEPTHS)}
    return rank.get(a or "", -1) > rank.get(b or "", -1)


def fingerprint(info, host) -> dict[str, Any]:
    """What a stored validation depends on: a change of any of it means validate again. The
    env's own state and its interpreter (replaced or deleted behind envcheck's back) count
    as much as its packages, the driver and the GPUs."""
    from ..host.probe import host_fingerprint

    return {"packages": dict(sorted(info.packages.items())),
            "python": info.manifest.get("python", {}).get("version"),
            "env_state": info.state, "interpreter": _file_identity(info.python),
            **host_fingerprint(host)}


def _file_identity(path: Path) -> list[Any] | None:
    """The file a path resolves to, by device, inode, size and modification time."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def store_report(home, report) -> Path:
    from ..envs.manifest import write_atomic

    path = home.report(report.env)
    write_atomic(path, report.to_json())
    return path


def load_report(home, name: str) -> dict[str, Any] | None:
    """The stored report, or None when absent, unreadable or of the wrong shape (tolerant, like
    the manifest: the caller validates again). Only reads."""
    try:
        with open(home.report(name), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == SCHEMA and _sound(data) else None


# The fields the gate and selection read, with their types (bool is not an int here).
_FIELDS = {"env": str, "verdict": str, "created": str, "fingerprint": dict, "smoke": bool,
           "gpus_usable": int, "checks": list}
_CHECK_FIELDS = {"id": str, "status": str, "summary": str}


def _sound(data: dict[str, Any]) -> bool:
    for key, kind in _FIELDS.items():
        value = data.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            return False
    for check in data["checks"]:
        if not isinstance(check, dict) or not all(isinstance(check.get(k), t) for k, t in _CHECK_FIELDS.items()):
            return False
        if not isinstance(check.get("fix"), (str, type(None))):
            return False
    return True
