"""`doctor`: the main job at a glance. Host GPU state, envs ranked, the chosen one validated,
and the next steps, as one result."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA = "envcheck.doctor/1"


@dataclass
class Diagnosis:
    host: Any
    selection: Any
    report: Any | None
    next_steps: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.report is not None and self.report.verdict != "not-ready"

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "ok": self.ok, "host": self.host.to_json(),
                "selection": self.selection.to_json(),
                "report": self.report.to_json() if self.report else None, "next_steps": self.next_steps}


def _next_steps(host, selection, report) -> list[str]:
    steps: list[str] = []
    if report is None:
        steps.append(selection.warning or "create an env: envcheck env create dl --preset tensorflow-cpu")
        return steps
    name = report.env
    for check in report.checks:
        if check.status in ("fail", "warn") and check.fix:
            steps.append(f"{check.id}: {check.fix}")
    if host.usable_gpus and not selection.gpu_tier:
        steps.append("this host has usable GPUs but no env can use them: "
                     "envcheck env create dl-gpu --preset tensorflow-gpu-cuda12")
    if report.verdict != "not-ready":
        gpus = "all" if report.gpus_usable else "none"
        steps.append(f"train: envcheck run --env {name} --gpus {gpus} -- python train.py")
        steps.append("gate a training script: import envcheck; envcheck.ensure_ready()")
    return steps


def doctor(home, *, smoke: bool = True, timeout: float = 120.0) -> Diagnosis:
    from ..host.probe import probe
    from .selection import select
    from ..envs.store import EnvStore
    from ..validation.reports import store_report
    from ..validation.validate import validate

    store = EnvStore(home)
    host = probe()
    selection = select(store.list(), host, home=home)
    report = None
    if selection.chosen:
        report = validate(store.get(selection.chosen), host, smoke=smoke, timeout=timeout)
        store_report(home, report)
    return Diagnosis(host, selection, report, _next_steps(host, selection, report))
