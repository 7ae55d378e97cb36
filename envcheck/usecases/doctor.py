"""`doctor`: the main job at a glance. Host GPU state, envs ranked, the chosen one validated,
and the next steps, as one result."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..progress import SILENT, Progress
from ..results import OK_VERDICTS, Result, envelope, node
from ..validation.health import node_health
from .validate_envs import report_problem

if TYPE_CHECKING:
    from ..host.probe import HostState
    from ..validation.reports import Report
    from .selection import Selection
    from .session import Session


@dataclass
class Diagnosis(Result):
    schema: ClassVar[str] = "envcheck.doctor/1"
    host: HostState
    selection: Selection
    report: Report | None
    next_steps: list[str] = field(default_factory=list)
    envs: list[dict[str, Any]] = field(default_factory=list)  # each env as the fleet compares it
    health: Any = None  # the level-1 read of this host (host.level1.HealthReport), None: not read

    @property
    def ok(self) -> bool:
        return self.report is not None and self.report.verdict != "not-ready"

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def envelope(self) -> dict:
        """The chosen env's verdict and first problem (its first next step as the fix when it
        has none); not-ready with no env to validate. The node: the host read, and the level-1
        health of the chosen env's validation."""
        first_step = self.next_steps[0] if self.next_steps else None
        read = self.health.node_health() if self.health is not None else None
        facts = node(self.host.facts(), node_health([self.report.health]) if self.report else read, self.envs)
        if self.report is None:
            return envelope("not-ready", "no env to validate", first_step, [], facts)
        verdict = self.report.verdict
        problem, fix = report_problem(self.report)
        if fix is None and verdict == "not-ready":
            fix = first_step
        return envelope(verdict, problem, fix, [self.report.env] if verdict in OK_VERDICTS else [], facts)

    def body(self) -> dict[str, Any]:
        return {"ok": self.ok, "host": self.host.facts(), "selection": self.selection.to_json(),
                "report": self.report.to_json() if self.report else None,
                "next_steps": self.next_steps}


def _next_steps(session: Session, selection: Selection, report: Report | None,
                framework: str | None = None) -> list[str]:
    from .hints import create_hint, gpu_hint

    host = session.host
    if report is None:
        return [selection.warning or create_hint(session, framework)]
    fixes: dict[str, list[str]] = {}  # a fix several checks share is one step, naming them
    for check in report.checks:
        if check.status in ("fail", "warn") and check.fix:
            fixes.setdefault(check.fix, []).append(check.id)
    steps = [f"{', '.join(ids)}: {fix}" for fix, ids in fixes.items()]
    if host.usable_gpus and not selection.gpu_tier:
        # the frameworks the user has: the GPU build of the chosen env's, not the registry's first
        mine = framework or next((r.framework for r in selection.ranking if r.framework), None)
        gpu = gpu_hint(session.home, host, mine)
        steps.append("this host has usable GPUs but no env can use them"
                     + (f": {gpu}" if gpu else "; no GPU preset fits this host"))
    if report.verdict != "not-ready":
        gpus = "all" if report.gpus_usable else "none"
        steps.append(f"train: envcheck run --env {report.env} --gpus {gpus} -- python train.py")
        steps.append("gate a training script: import envcheck; envcheck.ensure_ready()")
    return steps


def doctor(session: Session, *, smoke: bool = True, timeout: float | None = None,
           progress: Progress = SILENT, framework: str | None = None, level: int = 2) -> Diagnosis:
    """``progress`` hears the host read and the envs ranked (of ``framework`` only, if given),
    then the chosen env's validation at health ``level`` (1: reads only)."""
    session.want_level1()
    progress.start("doctor", "doctor: reading the GPUs and ranking the envs")
    selection = session.select(framework=framework)
    progress.done(f"chose env {selection.chosen}" if selection.chosen else "no env to validate")
    report = None
    if selection.chosen:
        report = session.validate_and_store(session.store.get(selection.chosen), smoke=smoke,
                                            timeout=timeout, progress=progress, level=level)
    return Diagnosis(session.host, selection, report, _next_steps(session, selection, report, framework),
                     [info.identity() for info in session.store.list()], session.health_read())
