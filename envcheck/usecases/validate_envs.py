"""`validate`: which envs, validated and stored, as one result whatever their number."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import OperationError, UsageError
from ..progress import SILENT, Progress
from ..results import OK_VERDICTS, VERDICTS, Result, envelope, node, node_host
from ..validation.health import node_health

if TYPE_CHECKING:
    from ..host.level1 import HealthReport
    from ..validation.devices import DeviceSpec
    from ..validation.reports import Report
    from .session import Session


@dataclass
class ValidationRun(Result):
    schema: ClassVar[str] = "envcheck.validation/1"
    reports: list[Report] = field(default_factory=list)
    strict: bool = False
    level: int = 2  # the health level (1 reads only, 2 + the env's checks, 3 + figures)
    # Level 1 with no env named and none to choose: the node's GPUs alone answer, as `dcgmi diag
    # -r 1` does (level 1 reads no framework, so it needs no env): `gpu --level 1`'s report.
    health: HealthReport | None = None

    @property
    def verdict(self) -> str:
        """The worst verdict of all reports (of the node's health where no env was validated)."""
        if not self.reports and self.health is not None:
            return self.health.verdict
        return max((r.verdict for r in self.reports), key=VERDICTS.index, default="not-ready")

    @property
    def exit_code(self) -> int:
        failed = {"not-ready", "degraded"} if self.strict else {"not-ready"}
        answered = self.reports or self.health is not None
        return 1 if not answered or self.verdict in failed else 0

    def envelope(self) -> dict:
        """The worst verdict; the first failing (else warning) check of the first report with
        it; the envs that validated ready or degraded; the node: the host the first report
        read, and the level-1 health of the reports' sections."""
        if not self.reports and self.health is not None:
            return {**self.health.envelope(), "ready_envs": []}
        if not self.reports:
            return envelope("not-ready", "no env was validated", "envcheck validate NAME", [])
        worst = next(r for r in self.reports if r.verdict == self.verdict)
        ready = [r.env for r in self.reports if r.verdict in OK_VERDICTS]
        facts = node(node_host(self.reports[0].host), node_health([r.health for r in self.reports]))
        return envelope(self.verdict, *report_problem(worst), ready, facts)

    def body(self) -> dict[str, Any]:
        counts = {v.replace("-", "_"): sum(r.verdict == v for r in self.reports) for v in VERDICTS}
        doc = {"reports": [r.to_json() for r in self.reports],
               "summary": {"envs": len(self.reports), **counts, "verdict": self.verdict,
                           "strict": self.strict, "level": self.level}}
        if self.health is not None:  # an envcheck.health/1 document, as `gpu --level 1 --json` prints it
            doc["health"] = self.health.facts()
        return doc


def report_problem(report: Report) -> tuple[str | None, str | None]:
    """("env NAME: CHECK: summary", its fix) of a validation report's first failing check, else
    its first warning; (None, None) when every check passed."""
    for status in ("fail", "warn"):
        for check in report.checks:
            if check.status == status:
                return f"env {report.env}: {check.id}: {check.summary}", check.fix
    return None, None


def validate_envs(session: Session, names: tuple[str, ...] = (), *, all_envs: bool = False,
                  devices: DeviceSpec = "all", smoke: bool = True, timeout: float | None = None,
                  strict: bool = False, progress: Progress = SILENT, level: int = 2, python: str | None = None,
                  adopt: str | None = None) -> ValidationRun:
    """Validate envs ``names``, or all of them, or (neither) the one `select` picks, on
    ``devices`` (``validation.devices.parse``'s Selection, or its text), at health ``level``
    (level 1 reads each GPU once for every env, and stores nothing; with no env named and none
    to choose, it answers with the node's GPUs alone); ``progress`` hears each env's checks and
    devices as they run. ``python``: the env or interpreter at that path instead, judged once
    and kept nowhere (``adopt``: adopted as that env, its report kept)."""
    from ..validation.devices import Selection, parse, resolve

    if names and all_envs:
        raise UsageError("give env names or --all, not both",
                         "envcheck validate NAME or envcheck validate --all")
    selection = devices if isinstance(devices, Selection) else parse(devices)
    session.want_level1()
    if adopt and not python:
        raise UsageError("--adopt NAME goes with --python PATH", "pass the env's path: --python PATH --adopt NAME")
    if python and (names or all_envs):
        raise UsageError("--python judges one env, not named ones", "give --python PATH or env names, not both")
    if python:
        targets = [session.judged_python(python, adopt)]
    elif names:
        targets = [session.store.get(n) for n in names]
    elif all_envs:
        from .session import require_envs

        targets = require_envs(session)
    else:
        try:
            targets = [session.resolve_env(None).info]
        except OperationError:
            if level != 1:
                raise
            targets = []
    selection = resolve(selection, session.host)  # an unknown GPU fails before any env is validated
    run = ValidationRun(strict=strict, level=level, health=None if targets else session.health)
    for info in targets:
        run.reports.append(session.validate_and_store(info, devices=selection, smoke=smoke, timeout=timeout,
                                                      progress=progress, level=level))
    return run
