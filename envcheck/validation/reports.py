"""Validation reports: their checks, how deep they went, the fingerprint they depend on, and
their storage.

Kept apart from ``validate``. A stored report is read as a ``StoredReport``, which says
whether it still answers (``current``, ``changed``, ``answers``) by ``freshness``'s one rule
(the gate's stored-pass answer calls ``freshness`` itself, without importing this) and what
to keep when a new validation arrives (``to_store``): the gate, selection, `report` and the
session ask it, never the raw dict.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import freshness

if TYPE_CHECKING:
    from ..envs.env_info import EnvInfo
    from ..host.probe import HostState
    from ..paths import Home

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
    health: dict[str, Any] | None = None  # level-1 health of the GPUs (validation.health's section)
    level: int = 2  # the health level it ran at (1, 2, 3)
    figures: list[dict[str, Any]] | None = None  # level 3: each measured figure, judged (validation.figures)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema"] = SCHEMA
        return data

    @property
    def ok(self) -> bool:
        return self.verdict != "not-ready"


def verdict_of(checks: list[Check]) -> str:
    from ..results import verdict_of_statuses

    return verdict_of_statuses(c.status for c in checks)


def fingerprint(info: EnvInfo, host: HostState) -> dict[str, Any]:
    """What a stored validation of env ``info`` on ``host`` (a probe) depends on: see
    ``freshness.fingerprint``, which the gate's stored-pass answer computes too."""
    from ..host.probe import host_fingerprint
    from ..paths import MANIFEST_NAME

    return freshness.fingerprint(info.path, python=info.python, manifest=info.record_dir / MANIFEST_NAME,
                                 python_version=info.manifest.get("python", {}).get("version"),
                                 state=info.state, packages=info.packages, host=host_fingerprint(host),
                                 lock=(info.manifest.get("lock") or {}).get("digest"))


@dataclass(frozen=True)
class StoredReport:
    """A stored validation report, as ``load_report`` read it (``data``: its sound JSON), and
    whether it still answers for this env and host now, by ``freshness``'s one rule."""

    data: dict[str, Any]

    @classmethod
    def load(cls, home: Home, name: str) -> StoredReport | None:
        """Env ``name``'s stored report, or None when there is none that can be read."""
        data = load_report(home, name)
        return None if data is None else cls(data)

    @property
    def verdict(self) -> str:
        return self.data["verdict"]

    @property
    def depth(self) -> str:
        return freshness.depth_of(self.data)

    @property
    def fingerprint(self) -> dict[str, Any]:
        return self.data["fingerprint"]

    @property
    def age_s(self) -> float | None:
        return freshness.age_s(self.data)

    def current(self, fingerprint: dict[str, Any]) -> bool:
        """Does it describe the env and host of ``fingerprint`` (nothing it depends on changed)?"""
        return freshness.current(self.data, fingerprint)

    def changed(self, fingerprint: dict[str, Any]) -> list[str]:
        """The fingerprint's parts that changed since (empty exactly when ``current``)."""
        return freshness.changed(self.data, fingerprint)

    def state_now(self, fingerprint: dict[str, Any]) -> str:
        """What it says now, in ``VALIDATION``'s words (``validation_word``)."""
        return validation_word(self.verdict, self.changed(fingerprint))

    def verdict_now(self, fingerprint: dict[str, Any]) -> str | None:
        """Its verdict while it is current, else None: an out-of-date pass or failure says
        nothing about the env now."""
        return self.verdict if self.current(fingerprint) else None

    def answers(self, fingerprint: dict[str, Any], *, max_age: float, smoke: bool = False) -> bool:
        """May it answer the gate in place of a validation (as deep as ``smoke`` asks)? Current,
        younger than ``max_age``, a pass as deep as asked or a failure deeper than a rerun."""
        return freshness.answers(self.data, fingerprint, max_age, smoke)

    def to_store(self, report: Report) -> Report | None:
        """What to store after validation ``report``: None to keep this one. A validation never
        erases what an earlier one measured, whatever changed since. Of the same fingerprint,
        a shallower one is dropped when it passed, or when the deeper one failed (that failure
        stands until a validation as deep says otherwise); one that is stored (a shallower
        failure, whose failure is the answer now, or one as deep) carries what this one
        measured and it did not: device rows, multi-replica, speedup, level-3 figures and the
        checks it skipped, each saying which validation measured it, so `report` still shows
        them. When the fingerprint changed, ``report`` is the answer now and is stored with
        those figures all the same; the checks it skipped stay skipped (a verdict on the env as
        it was is none on the env now), their summaries saying what the earlier validation
        found and what changed since."""
        changed = self.changed(report.fingerprint)
        if not changed and freshness.deeper(self.depth, report.depth) and (report.ok or self.verdict == "not-ready"):
            return None
        return _carry(self.data, report, changed)


def to_store(stored: StoredReport | None, report: Report) -> Report | None:
    """What to store after ``report`` when ``stored`` is there (``StoredReport.to_store``):
    None to keep ``stored``."""
    return report if stored is None else stored.to_store(report)


def _carry(stored: dict[str, Any], report: Report, changed: list[str]) -> Report:
    """A copy of ``report`` with what ``stored`` measured and it did not; ``changed``: the
    fingerprint's parts that changed since ``stored`` (its checks then carried as skipped)."""
    source = f"measured by the {freshness.depth_of(stored)} validation of {stored.get('created')}"
    skipped = {c.id for c in report.checks if c.status == "skip"}
    earlier = {c["id"]: c for c in stored["checks"]
               if c["id"] in skipped and (c["status"] != "skip" or isinstance(c.get("measured"), str))}
    checks = [_carried(earlier[c.id], source, changed) if c.id in earlier else c for c in report.checks]
    figures = stored.get("figures") if isinstance(stored.get("figures"), list) else None
    return replace(report, checks=checks, devices=report.devices or list(stored.get("devices") or []),
                   multi_replica=report.multi_replica or stored.get("multi_replica"),
                   speedup=report.speedup or stored.get("speedup"),
                   build=report.build or dict(stored.get("build") or {}), figures=report.figures or figures)


def _carried(check: dict[str, Any], source: str, changed: list[str]) -> Check:
    """A stored check, its summary saying which validation measured it (once, however often
    it is carried on). Measured before ``changed`` (fingerprint parts) changed, it is carried
    as skipped, its summary saying what it found then."""
    measured = check.get("measured") if isinstance(check.get("measured"), str) else None
    summary = check["summary"] if measured else f"{check['summary']} ({source})"
    status, fix = check["status"], check.get("fix")
    if changed and status != "skip":
        summary = f"not run since {', '.join(changed)} changed; it was {status}: {summary}"
        status, fix = "skip", None
    return Check(check["id"], status, summary, str(check.get("detail") or ""), fix, measured or source)


def store_report(home: Home, report: Report) -> Path:
    from ..envs.manifest import write_atomic

    path = home.report(report.env)
    write_atomic(path, report.to_json())
    return path


# What an env's stored validation says now, the words every view shows (select, doctor, report;
# text, JSON, Markdown, HTML): its verdict while it is current; "drifted" when the env itself
# changed since (its packages, files, interpreter, manifest, state or lock), "out of date" when
# only the host did (driver, GPUs, CUDA variables); "never validated" without a report.
VALIDATION = ("ready", "degraded", "not-ready", "never validated", "drifted", "out of date")
ENV_PARTS = ("packages", "python", "env_state", "interpreter", "manifest", "files", "lock")


def validation_word(verdict: str | None, changed: list[str]) -> str:
    """``VALIDATION``'s word for a stored ``verdict`` (None: no report) whose fingerprint parts
    ``changed`` since."""
    if verdict is None:
        return "never validated"
    if not changed:
        return verdict
    return "drifted" if any(part in ENV_PARTS for part in changed) else "out of date"


def load_report(home: Home, name: str) -> dict[str, Any] | None:
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
