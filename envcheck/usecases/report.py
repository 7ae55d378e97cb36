"""`report`: the stored validation reports of envs, read against this host, as one result.

Each env's last validation (``validation.reports.load_report``) is rebuilt into a ``Report``
of the shape `validate` writes, with its fields read tolerantly (a device row, number or
text of the wrong type becomes "not known", never a crash), and judged against the env and
host of now: the fingerprint parts that changed since it was stored are listed
(``StoredReport.changed``, the rule the gate and selection use), so an old "ready" is shown
as out of date, not as a pass. An env without a readable report is listed
as having none. The CLI renders the result as text, JSON (``envcheck.reports/1``) or one
self-contained HTML page; `doctor --html` renders the same result (``doctor_reports``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import UsageError
from ..results import Result

if TYPE_CHECKING:
    from ..envs.env_info import EnvInfo
    from ..host.probe import HostState
    from ..validation.reports import Report
    from .doctor import Diagnosis
    from .session import Session

NEVER = "never validated"
UNREADABLE = "its stored report is unreadable or of an older shape"


@dataclass
class EnvEvidence:
    """One env and its stored validation (``report`` None: ``missing`` says why)."""

    name: str
    state: str  # the env's state now: ready | incomplete | broken
    report: Report | None = None
    missing: str | None = None
    changed: list[str] = field(default_factory=list)  # fingerprint keys that differ from now

    @property
    def current(self) -> bool | None:
        return None if self.report is None else not self.changed

    @property
    def validation(self) -> str:
        """What its stored validation says now (``reports.validation_word``)."""
        from ..validation.reports import validation_word

        return validation_word(self.report.verdict if self.report else None, self.changed)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state,
                "report": self.report.to_json() if self.report else None,
                "missing": self.missing, "current": self.current, "changed": self.changed,
                "validation": self.validation}


@dataclass
class StoredReports(Result):
    schema: ClassVar[str] = "envcheck.reports/1"
    host: HostState  # read now
    envs: list[EnvEvidence]
    generated: str
    next_steps: list[str] = field(default_factory=list)  # doctor's, for `doctor --html`
    health: Any = None  # level 1 as read now (host.level1.HealthReport; doctor's), None: not read

    @property
    def exit_code(self) -> int:
        """1 when an env has no report or a not-ready one: what was not measured is no pass."""
        return 1 if not self.envs or any(e.report is None or e.report.verdict == "not-ready"
                                         for e in self.envs) else 0

    def body(self) -> dict[str, Any]:
        verdicts = [e.report.verdict for e in self.envs if e.report]
        summary = {"envs": len(self.envs), "ready": verdicts.count("ready"),
                   "degraded": verdicts.count("degraded"), "not_ready": verdicts.count("not-ready"),
                   "no_report": sum(e.report is None for e in self.envs),
                   "out_of_date": sum(e.current is False for e in self.envs)}
        health = None if self.health is None else {
            "verdict": self.health.verdict, "gpus": {str(g.index): g.verdict for g in self.health.gpus}}
        return {"generated": self.generated, "host": self.host.facts(), "health": health,
                "envs": [e.to_json() for e in self.envs], "summary": summary,
                "next_steps": self.next_steps}


def stored_reports(session: Session, names: tuple[str, ...] = (), *, all_envs: bool = False) -> StoredReports:
    """The stored reports of envs ``names``, or of all envs, or (neither) of the one `select`
    picks, as `validate` chooses them."""
    if names and all_envs:
        raise UsageError("give env names or --all, not both", "envcheck report NAME or envcheck report --all")
    if names:
        targets = [session.store.get(n) for n in dict.fromkeys(names)]
    elif all_envs:
        from .session import require_envs

        targets = require_envs(session)
    else:
        targets = [session.resolve_env(None).info]
    return StoredReports(session.host, [evidence(session, info) for info in targets], _now())


def doctor_reports(session: Session, diagnosis: Diagnosis) -> StoredReports:
    """Every env's evidence after a doctor run, the env it validated with that fresh report
    (stored or not), and doctor's next steps."""
    fresh = diagnosis.report
    envs = [EnvEvidence(info.name, info.state, fresh) if fresh and info.name == fresh.env
            else evidence(session, info) for info in session.store.list()]
    return StoredReports(diagnosis.host, envs, _now(), list(diagnosis.next_steps), diagnosis.health)


def evidence(session: Session, info: EnvInfo) -> EnvEvidence:
    """Env ``info``'s stored report, rebuilt, and what changed since it was made."""
    from ..validation.reports import StoredReport, fingerprint

    stored = StoredReport.load(session.home, info.name)
    if stored is None:
        there = session.home.report(info.name).exists()
        return EnvEvidence(info.name, info.state, missing=UNREADABLE if there else NEVER)
    return EnvEvidence(info.name, info.state, rebuild(stored.data),
                       changed=stored.changed(fingerprint(info, session.host)))


def rebuild(data: dict[str, Any]) -> Any:
    """A stored report (already checked by ``load_report`` for the fields the gate reads)
    as the ``Report`` `validate` returned, every other field read tolerantly."""
    from ..validation.reports import Check, Report

    checks = [Check(c["id"], c["status"], c["summary"], _text(c.get("detail")) or "", c.get("fix"))
              for c in data["checks"]]
    devices = [_device(d) for d in _list(data.get("devices"))
               if isinstance(d, dict) and isinstance(d.get("device"), str) and isinstance(d.get("status"), str)]
    return Report(env=data["env"], verdict=data["verdict"], checks=checks, devices=devices,
                  multi_replica=_multi(data.get("multi_replica")), speedup=_speedup(data.get("speedup")),
                  build=_dict(data.get("build")) or {}, host=_dict(data.get("host")) or {},
                  fingerprint=data["fingerprint"], created=data["created"],
                  wall_s=_number(data.get("wall_s")) or 0.0, smoke=data["smoke"],
                  gpus_usable=data["gpus_usable"], depth=_text(data.get("depth")) or "quick",
                  health=_dict(data.get("health")),
                  level=data["level"] if data.get("level") in (1, 2, 3) else 2)


def _device(d: dict[str, Any]) -> dict[str, Any]:
    from ..validation.smoke import DeviceResult

    return asdict(DeviceResult(
        device=d["device"], status=d["status"], ms_per_step=_number(d.get("ms_per_step")),
        loss_first=_number(d.get("loss_first")), loss_last=_number(d.get("loss_last")),
        placed_on=_text(d.get("placed_on")), error=_text(d.get("error")),
        memory=_dict(d.get("memory")), cudnn=_dict(d.get("cudnn"))))


def _multi(value: Any) -> dict[str, Any] | None:
    from ..validation.smoke import MultiReplica

    if not isinstance(value, dict) or not isinstance(value.get("status"), str):
        return None
    counts = {k: _count(value.get(k)) for k in ("replicas", "per_replica_batch", "global_batch")}
    return asdict(MultiReplica(status=value["status"], **counts,
                               scaling_efficiency=_number(value.get("scaling_efficiency")),
                               ms_per_step=_number(value.get("ms_per_step")),
                               detail=_text(value.get("detail")) or "",
                               samples_per_s=_number(value.get("samples_per_s"))))


def _speedup(value: Any) -> dict[str, Any] | None:
    per_gpu = _dict(value.get("gpu_over_cpu")) if isinstance(value, dict) else None
    cpu = _number(value.get("cpu_ms_per_step")) if isinstance(value, dict) else None
    if per_gpu is None or cpu is None:
        return None
    ratios = {k: _number(v) for k, v in per_gpu.items() if isinstance(k, str)}
    return {"cpu_ms_per_step": cpu, "gpu_over_cpu": {k: v for k, v in ratios.items() if v is not None}}


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return value if ok else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: Any) -> dict | None:
    return value if isinstance(value, dict) else None


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _now() -> str:
    from ..envs.manifest import now

    return now()
