"""`doctor --markdown`: the doctor's findings plus what a bug thread asks first (envcheck's
version, the OS, Python, each GPU's health, every env and its last verdict), as one result,
the way a framework's own ``collect_env`` report is pasted into issues.

Nothing private goes in: paths with the user's name taken out, no process arguments, no index
URLs; env names, package versions, tool versions and GPU facts only.
"""
from __future__ import annotations

import platform
import sys
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..results import Result
from .doctor import Diagnosis, doctor

if TYPE_CHECKING:
    from .session import Session


@dataclass
class EnvVerdict:
    """One env as the report shows it: its state, framework and last stored validation."""

    name: str
    state: str
    frameworks: list[str] = field(default_factory=list)  # "NAME VERSION" of each installed framework
    python: str | None = None
    verdict: str | None = None  # None: never validated (or its report is unreadable)
    depth: str | None = None
    validated: str | None = None  # when
    changed: list[str] = field(default_factory=list)  # what changed since (report.evidence): out of date

    @property
    def validation(self) -> str:
        """What its stored validation says now (``reports.validation_word``)."""
        from ..validation.reports import validation_word

        return validation_word(self.verdict, self.changed)


@dataclass
class BugReport(Result):
    schema: ClassVar[str] = "envcheck.bugreport/1"
    system: dict[str, str]
    diagnosis: Diagnosis
    envs: list[EnvVerdict] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return self.diagnosis.exit_code

    def body(self) -> dict[str, Any]:
        return {"system": self.system, "envs": [{**asdict(e), "validation": e.validation} for e in self.envs],
                "doctor": self.diagnosis.to_json()}


def system_facts() -> dict[str, str]:
    """envcheck's version, the Python running envcheck, and the machine as `collect_env`
    reports it (``host.system``: CPU, OS, glibc, compilers, the host's CUDA and cuDNN, conda),
    user names taken out of paths."""
    from importlib.metadata import PackageNotFoundError, version

    from ..host.system import system_facts as machine

    try:
        envcheck = version("envcheck")
    except PackageNotFoundError:
        envcheck = "unknown (not installed as a distribution)"
    return {"envcheck": envcheck,
            "python": f"{platform.python_version()} ({platform.python_implementation()}, "
                      f"{64 if sys.maxsize > 2**32 else 32}-bit)", **machine()}


def _env_verdicts(session: Session) -> list[EnvVerdict]:
    from .. import frameworks as registry
    from .report import evidence

    out = []
    for info in session.store.list():
        found = evidence(session, info) if info.state == "ready" else None
        stored, changed = (found.report, found.changed) if found else (None, [])
        dists = {d for fw in registry.detect(info.packages) for d in registry.get(fw).distributions}
        frameworks = [f"{name} {version}" for name, version in info.packages.items() if name in dists]
        out.append(EnvVerdict(info.name, info.state, frameworks,
                              info.manifest.get("python", {}).get("version"),
                              stored and stored.verdict, stored and stored.depth,
                              stored and stored.created, changed))
    return out


def bug_report(session: Session, *, smoke: bool = True, timeout: float | None = None,
               framework: str | None = None, level: int = 2) -> BugReport:
    """Run the doctor with GPU health read in its one NVML session; then every env's verdict
    (the selected env's is the one the doctor has just stored)."""
    diagnosis = doctor(session, smoke=smoke, timeout=timeout, framework=framework, level=level)
    return BugReport(system_facts(), diagnosis, _env_verdicts(session))
