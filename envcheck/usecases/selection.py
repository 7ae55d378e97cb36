"""Pick the env to train with: a GPU env this host can really run, then a CPU env, else a warning.

Reads only manifests, ``*.dist-info`` names and stored reports, plus the session's one NVML
probe, so it ranks a hundred envs in well under a second and starts no interpreter. A stored
report counts only while it is current (``StoredReport.verdict_now``: same fingerprint), so an
old failure never pushes a GPU env down, nor an old pass lifts one. With no ``framework``, an
env with any framework of the registry counts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from .. import frameworks
from ..distributions import canonical_name
from ..results import Result, envelope

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from ..envs.env_info import EnvInfo
    from ..frameworks import Build
    from ..host.compat import Verdict
    from ..host.probe import HostState
    from ..paths import Home


@dataclass
class Ranked:
    name: str
    tier: str  # gpu | cpu
    reason: str
    framework: str | None = None
    version: str | None = None
    validated: str | None = None  # verdict of the last validation, while it is current
    why_cpu: str | None = None  # a GPU build on the CPU tier, in a word: no-gpu | incompatible | failed
    build: str | None = None  # what its framework was built for: gpu | cpu (None: not known)
    validation: str = "never validated"  # what its stored validation says now (reports.VALIDATION)

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass
class Selection(Result):
    schema: ClassVar[str] = "envcheck.selection/1"
    ranking: list[Ranked] = field(default_factory=list)
    excluded: list[dict[str, str]] = field(default_factory=list)
    warning: str | None = None
    host: dict[str, Any] = field(default_factory=dict)
    require_gpu: bool = False

    @property
    def chosen(self) -> str | None:
        return self.ranking[0].name if self.ranking else None

    @property
    def gpu_tier(self) -> list[Ranked]:
        return [r for r in self.ranking if r.tier == "gpu"]

    @property
    def selected(self) -> str | None:
        """`select`'s answer: the first-ranked env, or none (exit 1) when ``require_gpu`` finds
        no GPU env, so a script reading it never takes a CPU env for the GPU env it asked for."""
        return None if self.require_gpu and not self.gpu_tier else self.chosen

    @property
    def exit_code(self) -> int:
        return 0 if self.selected else 1

    def envelope(self) -> dict:
        """An env selected: ready (degraded when a warning goes with it), that env ready; none:
        not-ready with the warning, split into what is wrong and what to do ("…; fix: …",
        else "…; create one: …")."""
        warning = self.warning or ""
        problem, sep, fix = warning.partition("; fix: ") if "; fix: " in warning else warning.partition("; ")
        problem, fix = problem or None, (fix if sep else None)
        if self.selected:
            return envelope("degraded" if problem else "ready", problem, fix, [self.selected])
        return envelope("not-ready", problem or "no env qualifies", fix, [])

    def body(self) -> dict[str, Any]:
        return {"selected": self.selected, "ranking": [r.to_json() for r in self.ranking],
                "excluded": self.excluded, "warning": self.warning, "host": self.host}


def _missing(packages: dict[str, str], framework: str | None,
             requirements: Sequence[Requirement]) -> str | None:
    """None when the env qualifies, else why not."""
    from ..validation.integrity import satisfied

    wanted = [frameworks.get(framework)] if framework else list(frameworks.registry().values())
    if not any(d in packages for fw in wanted for d in fw.distributions):
        if framework:
            return f"no {framework} ({' / '.join(wanted[0].distributions)})"
        return f"no known framework ({', '.join(frameworks.names())})"
    for req in requirements:
        have = packages.get(canonical_name(req.name))
        if not satisfied(req, packages):
            return f"no {req.name}" if have is None else f"{req.name} {have} does not satisfy {req}"
    return None


def _sort_key(ranked: Ranked, build: Build | None) -> tuple:
    """GPU tier first; then a passed validation; on the CPU tier a CPU-only build before a GPU
    build that can't use a GPU here (it could only validate `degraded`); then the newest
    framework; then the name."""
    passed = ranked.validated in ("ready", "degraded")
    idle_gpu_build = ranked.tier == "cpu" and build is not None and build.gpu_capable
    return (0 if ranked.tier == "gpu" else 1, 0 if passed else 1, 1 if idle_gpu_build else 0,
            _neg_version(build.version if build else None), ranked.name)


def _neg_version(version: str | None) -> tuple[int, ...]:
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(version) if version else Version("0")
    except InvalidVersion:
        v = Version("0")
    return tuple(-x for x in v.release) + (0,) * (4 - len(v.release))


def _tier(info: EnvInfo, build: Build | None, host: HostState, stored: str | None,
          verdicts: dict[tuple[Build, str | None], Verdict]) -> tuple[str, str, str | None]:
    """(tier, reason, why a GPU build is on the CPU tier in a word). ``verdicts`` remembers the
    judgement of each (build, Python): envs copied from one preset share it."""
    from ..host.compat import HostProfile, judge

    if build is None or not build.gpu_capable:
        return "cpu", f"CPU-only build ({build.label if build else 'framework build not known'})", None
    reason = host.no_gpu_reason()
    if reason:
        return "cpu", f"GPU build, but no usable GPU here: {reason[0]}", "no-gpu"
    python = info.manifest.get("python", {}).get("version")
    key = (build, python)
    if key not in verdicts:
        verdicts[key] = judge(build, HostProfile.from_host(host, python=python))
    verdict = verdicts[key]
    if verdict.verdict == "fail":
        return "cpu", f"GPU build that can't use this host's GPUs: {verdict.reasons[0]}", "incompatible"
    if stored == "not-ready":
        return "cpu", f"GPU build whose last validation failed (envcheck validate {info.name})", "failed"
    note = f" ({verdict.reasons[0]})" if verdict.verdict == "warn" and verdict.reasons else ""
    return "gpu", f"{build.label} runs on {len(host.usable_gpus)} GPU(s), driver {host.driver_version}{note}", None


def select(envs: list[EnvInfo], host: HostState, *, framework: str | None = None,
           requires: Sequence[str] = (), home: Home | None = None, require_gpu: bool = False) -> Selection:
    """Rank ``envs`` (store EnvInfo) for training on ``host`` (a probe)."""
    if framework is not None:
        frameworks.get(framework)  # an unknown name is a UsageError before any work
    requirements = []
    if requires:
        from ..envs.presets import parse_requirement

        requirements = [parse_requirement(r) for r in requires]
    selection = Selection(host={"nvml": host.nvml_status, "usable_gpus": len(host.usable_gpus),
                                "driver_version": host.driver_version}, require_gpu=require_gpu)
    keyed: list[tuple[tuple, Ranked]] = []
    verdicts: dict[tuple[Build, str | None], Verdict] = {}
    for info in envs:
        if info.state != "ready":
            selection.excluded.append({"name": info.name, "reason": f"env is {info.state}"})
            continue
        why_not = _missing(info.packages, framework, requirements)
        if why_not:
            selection.excluded.append({"name": info.name, "reason": why_not})
            continue
        build = frameworks.build_from_packages(info.packages, framework)
        stored, validation = validation_state(home, info, host)
        tier, reason, why_cpu = _tier(info, build, host, stored, verdicts)
        named = build.framework if build else (framework or frameworks.detect(info.packages)[0])
        ranked = Ranked(info.name, tier, reason, named, build.version if build else None, stored, why_cpu,
                        None if build is None else "gpu" if build.gpu_capable else "cpu", validation)
        keyed.append((_sort_key(ranked, build), ranked))
    selection.ranking = [r for _, r in sorted(keyed, key=lambda kv: kv[0])]
    selection.warning = _warning(selection, framework, requirements, host, require_gpu, home)
    return selection


def validation_state(home: Home | None, info: EnvInfo, host: HostState) -> tuple[str | None, str]:
    """(the verdict of env ``info``'s stored validation while it still describes the env and
    this host (``StoredReport.verdict_now``: an out-of-date pass or failure counts for
    nothing), what that validation says now in ``reports.VALIDATION``'s words)."""
    if home is None:
        return None, "never validated"
    from ..validation.reports import StoredReport, fingerprint

    stored = StoredReport.load(home, info.name)
    if stored is None:
        return None, "never validated"
    now = fingerprint(info, host)
    return stored.verdict_now(now), stored.state_now(now)


def _warning(selection: Selection, framework: str | None, requirements: Sequence[Requirement],
             host: HostState, require_gpu: bool, home: Home | None) -> str | None:
    from .hints import create_hint_for, gpu_hint

    wanted = (framework or "a known framework") + "".join(f", {r}" for r in requirements)
    if not selection.ranking:
        return f"no env has {wanted}; {create_hint_for(home, host, framework)}"
    if require_gpu and not selection.gpu_tier:
        if not host.usable_gpus:
            message, fix = host.no_gpu_reason()
            return f"a GPU env is required but this host has no usable GPU: {message}; fix: {fix}"
        gpu = gpu_hint(home, host, framework)
        return ("a GPU env is required but no env can use this host's GPUs"
                + (f"; {gpu}" if gpu else "; no GPU preset fits this host"))
    return None
