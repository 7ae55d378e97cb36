"""Pick the env to train with: a GPU env this host can really run, then a CPU env, else a warning.

Reads only manifests, ``*.dist-info`` names and stored reports, plus one NVML probe, so it
ranks a hundred envs in well under a second and starts no interpreter.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..envs.metadata import canonical_name

SCHEMA = "envcheck.selection/1"
FRAMEWORK_DISTS = {
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly"),
    "torch": ("torch",),
    "jax": ("jax", "jaxlib"),
}
CPU_PRESET_HINT = "envcheck env create dl --preset tensorflow-cpu"


@dataclass
class Ranked:
    name: str
    tier: str  # gpu | cpu
    reason: str
    framework: str | None = None
    version: str | None = None
    validated: str | None = None  # verdict of the last validation, if any

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass
class Selection:
    ranking: list[Ranked] = field(default_factory=list)
    excluded: list[dict[str, str]] = field(default_factory=list)
    warning: str | None = None
    host: dict[str, Any] = field(default_factory=dict)

    @property
    def chosen(self) -> str | None:
        return self.ranking[0].name if self.ranking else None

    @property
    def gpu_tier(self) -> list[Ranked]:
        return [r for r in self.ranking if r.tier == "gpu"]

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "selected": self.chosen, "ranking": [r.to_json() for r in self.ranking],
                "excluded": self.excluded, "warning": self.warning, "host": self.host}


def parse_requires(requires: tuple[str, ...] | list[str]):
    from ..envs.presets import parse_requirement

    return [parse_requirement(r) for r in requires]


def _satisfies(packages: dict[str, str], framework: str, requirements) -> str | None:
    """None when the env qualifies, else why not."""
    from ..validation.integrity import satisfied

    dists = FRAMEWORK_DISTS[framework]
    if not any(d in packages for d in dists):
        return f"no {framework} ({' / '.join(dists)})"
    for req in requirements:
        have = packages.get(canonical_name(req.name))
        if not satisfied(req, packages):
            return f"no {req.name}" if have is None else f"{req.name} {have} does not satisfy {req}"
    return None


def _sort_key(ranked: Ranked, build_version):
    passed = ranked.validated in ("ready", "degraded")
    return (0 if ranked.tier == "gpu" else 1, 0 if passed else 1, _neg_version(build_version), ranked.name)


def _neg_version(version):
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(version) if version else Version("0")
    except InvalidVersion:
        v = Version("0")
    return tuple(-x for x in v.release) + (0,) * (4 - len(v.release))


def _tier(info, build, host, verdict_of_env, stored) -> tuple[str, str]:
    from ..host.compat import HostProfile, judge

    if build is None or not build.gpu_capable:
        return "cpu", f"CPU-only build ({build.label if build else 'unknown framework'})"
    reason = host.no_gpu_reason()
    if reason:
        return "cpu", f"GPU build, but no usable GPU here: {reason[0]}"
    python = info.manifest.get("python", {}).get("version")
    verdict = judge(build, HostProfile.from_host(host, python=python))
    if verdict.verdict == "fail":
        return "cpu", f"GPU build that can't use this host's GPUs: {verdict.reasons[0]}"
    if stored == "not-ready":
        return "cpu", "GPU build whose last validation failed (envcheck validate " + info.name + ")"
    note = f" ({verdict.reasons[0]})" if verdict.verdict == "warn" and verdict.reasons else ""
    return "gpu", f"{build.label} runs on {len(host.usable_gpus)} GPU(s), driver {host.driver_version}{note}"


def select(envs: list, host=None, *, framework: str = "tensorflow", requires=(), home=None,
           require_gpu: bool = False) -> Selection:
    """Rank ``envs`` (store EnvInfo) for training on ``host`` (a probe; probed when None)."""
    from ..host.compat import build_from_packages

    if framework not in FRAMEWORK_DISTS:
        raise UsageError(f"unknown framework {framework!r}", "use tensorflow, torch or jax")
    requirements = parse_requires(requires) if requires else []
    if host is None:
        from ..host.probe import probe

        host = probe()
    selection = Selection(host={"nvml": host.nvml_status, "usable_gpus": len(host.usable_gpus),
                                "driver_version": host.driver_version})
    keyed = []
    for info in envs:
        if info.state != "ready":
            selection.excluded.append({"name": info.name, "reason": f"env is {info.state}"})
            continue
        why_not = _satisfies(info.packages, framework, requirements)
        if why_not:
            selection.excluded.append({"name": info.name, "reason": why_not})
            continue
        build = build_from_packages(info.packages)
        stored = _stored_verdict(home, info.name)
        tier, reason = _tier(info, build, host, None, stored)
        ranked = Ranked(info.name, tier, reason, build.framework if build else None,
                        build.version if build else None, stored)
        keyed.append((_sort_key(ranked, build.version if build else None), ranked))
    selection.ranking = [r for _, r in sorted(keyed, key=lambda kv: kv[0])]
    selection.warning = _warning(selection, framework, requirements, host, require_gpu)
    return selection


def _stored_verdict(home, name: str) -> str | None:
    if home is None:
        return None
    from ..validation.reports import load_report

    report = load_report(home, name)
    return report.get("verdict") if report else None


def _warning(selection: Selection, framework: str, requirements, host, require_gpu: bool) -> str | None:
    wanted = framework + "".join(f", {r}" for r in requirements)
    gpu_hint = "envcheck env create dl-gpu --preset tensorflow-gpu-cuda12"
    if not selection.ranking:
        hint = CPU_PRESET_HINT + (f" (or, for this host's GPUs: {gpu_hint})" if host.usable_gpus else "")
        return f"no env has {wanted}; create one: {hint}"
    if require_gpu and not selection.gpu_tier:
        if not host.usable_gpus:
            message, fix = host.no_gpu_reason()
            return f"a GPU env is required but this host has no usable GPU: {message}; fix: {fix}"
        return f"a GPU env is required but no env can use this host's GPUs; create one: {gpu_hint}"
    return None
