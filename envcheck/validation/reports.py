"""Validation reports: their checks, how deep they went, the fingerprint they depend on, and
their storage.

Kept apart from ``validate``; when a stored report still answers (fingerprint, depth, age) is
``freshness``, which the gate's stored-pass answer uses without importing this.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from . import freshness

SCHEMA = "envcheck.report/1"


@dataclass
class Check:
    id: str
    status: str
    summary: str
    detail: str = ""
    fix: str | None = None
    measured: str | None = None  # carried from an earlier validation: which one (``to_store``)


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
    depth: str = "quick"  # how deep it went: one of freshness.DEPTHS

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


def fingerprint(info, host) -> dict[str, Any]:
    """What a stored validation of env ``info`` on ``host`` (a probe) depends on: see
    ``freshness.fingerprint``, which the gate's stored-pass answer computes too."""
    from ..host.probe import host_fingerprint
    from ..paths import MANIFEST_NAME

    return freshness.fingerprint(info.path, python=info.python, manifest=info.path / MANIFEST_NAME,
                                 python_version=info.manifest.get("python", {}).get("version"),
                                 state=info.state, packages=info.packages, host=host_fingerprint(host))


def to_store(stored: dict[str, Any] | None, report: Report) -> Report | None:
    """What to store after ``report`` when ``stored`` (``load_report``'s) is there: None to
    keep ``stored``. A validation never erases what one of the same fingerprint measured: a
    shallower one is dropped when it passed, or when the deeper one failed (that failure stands
    until a validation as deep says otherwise); one that is stored (a shallower failure, whose
    failure is the answer now, or one as deep) carries what ``stored`` measured and it did
    not: device rows, multi-replica, speedup and the checks it skipped, each saying which
    validation measured it, so `report` still shows them."""
    if not stored or stored.get("fingerprint") != report.fingerprint:
        return report
    if freshness.deeper(stored.get("depth"), report.depth) and (report.ok or stored.get("verdict") == "not-ready"):
        return None
    return _carry(stored, report)


def _carry(stored: dict[str, Any], report: Report) -> Report:
    """A copy of ``report`` with what ``stored`` measured and it did not."""
    source = f"measured by the {stored.get('depth')} validation of {stored.get('created')}"
    skipped = {c.id for c in report.checks if c.status == "skip"}
    earlier = {c["id"]: c for c in stored["checks"] if c["id"] in skipped and c["status"] != "skip"}
    checks = [_carried(earlier[c.id], source) if c.id in earlier else c for c in report.checks]
    return replace(report, checks=checks, devices=report.devices or list(stored.get("devices") or []),
                   multi_replica=report.multi_replica or stored.get("multi_replica"),
                   speedup=report.speedup or stored.get("speedup"),
                   build=report.build or dict(stored.get("build") or {}))


def _carried(check: dict[str, Any], source: str) -> Check:
    """A stored check, its summary saying which validation measured it (once, however often
    it is carried on)."""
    measured = check.get("measured") if isinstance(check.get("measured"), str) else None
    summary = check["summary"] if measured else f"{check['summary']} ({source})"
    return Check(check["id"], check["status"], summary, str(check.get("detail") or ""), check.get("fix"),
                 measured or source)


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
