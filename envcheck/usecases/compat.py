"""`compat`: can a framework build (named, or an env's) train on this host, or a what-if one?

What the options don't give comes from the live host (the session's one NVML probe), so a
given driver, GPU list, OS or ``no_gpu`` makes a "what-if" profile.
"""
from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from .. import frameworks
from ..errors import UsageError
from ..frameworks import Build
from ..host.compat import OPERATING_SYSTEMS, HostProfile, Verdict, judge, min_driver, probed_driver
from ..results import Result, envelope

if TYPE_CHECKING:
    from .session import Session


@dataclass
class CompatResult(Result):
    schema: ClassVar[str] = "envcheck.compat/1"
    build: Build
    host: HostProfile
    source: dict[str, str]  # where the driver and GPUs came from: "given" | "probe"
    verdict: Verdict

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict.verdict == "fail" else 0

    def envelope(self) -> dict:
        """ok: ready; warn: degraded; fail: not-ready; the worst reason and the first fix.
        ``ready_envs`` is None: compat judges a build, not envs."""
        verdict = {"ok": "ready", "warn": "degraded"}.get(self.verdict.verdict, "not-ready")
        reasons, fixes = self.verdict.reasons, self.verdict.fixes
        if verdict == "ready":
            return envelope(verdict)
        return envelope(verdict, reasons[0] if reasons else None, fixes[0] if fixes else None)

    def body(self) -> dict[str, Any]:
        build = self.build
        build_json = asdict(build)
        build_json["driver"] = (asdict(min_driver(build.cuda, self.host.os))
                                if build.cuda and self.host.os in OPERATING_SYSTEMS else None)
        return {
            "framework": build.framework,
            "version": build.version,
            "build": build_json,
            "host": {**asdict(self.host), "gpu_ccs": list(self.host.gpu_ccs), "source": self.source},
            "verdict": self.verdict.verdict,
            "uses_gpu": self.verdict.uses_gpu,
            "reasons": self.verdict.reasons,
            "fixes": self.verdict.fixes,
        }


def judge_compat(session: Session, *, framework: str | None = None, env_name: str | None = None,
                 driver: str | None = None, gpu_ccs: tuple[str, ...] = (), no_gpu: bool = False,
                 os_name: str | None = None, python: str | None = None,
                 require_gpu: bool = False) -> CompatResult:
    if (framework is None) == (env_name is None):
        raise UsageError("give exactly one of --framework DIST==VERSION or --env NAME",
                         f"e.g. envcheck compat --framework {frameworks.examples()[0]}")
    if no_gpu and (driver or gpu_ccs):
        raise UsageError("--no-gpu contradicts --driver/--gpu-cc", "give one or the other")
    if framework is not None:
        build = named_build(framework)
    else:
        build, env_python = _env_build(session, env_name)
        python = python or env_python
    host, source = host_profile(session, driver, gpu_ccs, no_gpu, os_name, python)
    return CompatResult(build, host, source, judge(build, host, require_gpu=require_gpu))


def named_build(spec: str) -> Build:
    dist, sep, version = spec.partition("==")
    if not sep or not dist.strip() or not version.strip():
        raise UsageError(f"bad --framework {spec!r}",
                         f"write it as DIST==VERSION, e.g. {frameworks.examples()[0]}")
    build = frameworks.framework_build(dist.strip(), version.strip())
    if build is None:
        known = ", ".join(f"{f.name} {f.releases()[-1]}-{f.releases()[0]} ({' '.join(f.distributions)})"
                          for f in frameworks.registry().values() if f.releases())
        framework = frameworks.of_distribution(dist.strip())
        beyond = f"; beyond the tables: {framework.beyond_table}" if framework and framework.beyond_table else ""
        raise UsageError(f"no compatibility facts for {spec}", f"known: {known}{beyond}")
    return build


def _env_build(session: Session, name: str) -> tuple[Build, str | None]:
    info = session.store.get(name)
    build = frameworks.build_from_packages(info.packages)
    if build is None:
        raise UsageError(f"env {name} has no framework the compatibility tables know",
                         f"install one of {', '.join(frameworks.distributions())} "
                         f"(`{info.add_command('...')}`)")
    return build, (info.manifest.get("python") or {}).get("version")


def host_profile(session: Session, driver: str | None, gpu_ccs: tuple[str, ...], no_gpu: bool,
             os_name: str | None, python: str | None) -> tuple[HostProfile, dict[str, str]]:
    """The host profile: what was given, the rest from the live host; and where each came from."""
    os_name = os_name or ("windows" if sys.platform == "win32" else "linux")
    source = {"driver": "given", "gpus": "given"}
    if no_gpu:
        return HostProfile(None, (), os_name, python), source
    state = session.host if driver is None or not gpu_ccs else None
    unreadable = None  # a given --driver is checked as input; a probed one is a host fact
    if driver is None:
        (driver, unreadable), source["driver"] = probed_driver(state.driver_version), "probe"
    if not gpu_ccs:
        gpu_ccs = tuple(g.compute_capability for g in state.usable_gpus if g.compute_capability)
        source["gpus"] = "probe"
    if state is not None:
        source["nvml"] = state.nvml_status
    return HostProfile(driver, gpu_ccs, os_name, python, unreadable), source
