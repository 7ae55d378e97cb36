"""Which variant of a preset a host gets: the first, in the preset's order, whose build the
compat rules let train on that host's GPUs (``host.compat.judge``, as `compat` judges).

Two hosts ask: this one (`env create`, `provision --auto`: ``for_this_host``, which also
wants the system libraries a preset names, as `env create` always did), or a target described
by ``--for-driver`` and ``--for-cc`` on a builder without a GPU (`env lock`:
``for_target``). A GPU preset no variant of which fits is refused with each variant's reason,
never given a CPU build in its place.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .. import frameworks
from ..errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    from ..envs.presets import Preset
    from ..host.compat import HostProfile
    from ..host.probe import HostState
    from .session import Session


def _candidates(preset: Preset, asked: str | None) -> tuple[Preset, ...]:
    return (preset.with_variant(asked),) if asked else (preset.variants or (preset,))


def misfit_for(requirements: Sequence[Requirement], profile: HostProfile,
               requires_python: SpecifierSet | None = None) -> str | None:
    """Why the build ``requirements`` install can't train on the GPUs of ``profile`` (its
    ``python`` in ``requires_python``, a ``SpecifierSet``, included), or None."""
    from packaging.version import Version

    from ..host.compat import judge

    if profile.python and requires_python is not None \
            and not requires_python.contains(Version(profile.python), prereleases=True):
        return f"python {profile.python} is not in its requires-python {requires_python}"
    if not profile.gpu_ccs:
        return profile.driver_unreadable or "the target has no NVIDIA GPU (give --for-driver and --for-cc " \
                                            "for a GPU host)"
    build = frameworks.build_for_requirements(requirements)
    if build is None:
        return None  # which build it installs can't be told: nothing to judge it by
    verdict = judge(build, profile)
    if verdict.verdict == "fail" or not verdict.uses_gpu:
        return verdict.reasons[0] if verdict.reasons else "it would not use the target's GPUs"
    return None


def narrowed(preset: Preset, profile: HostProfile) -> Preset | None:
    """``preset`` with its framework requirement narrowed to the releases of the framework's
    table it admits whose build the compat rules let train on ``profile`` (``torch>=2.8`` for
    an R535 driver: ``torch>=2.8,!=2.11.*,...,<2.16``, so the resolver takes the newest build
    that fits, not the newest there is); None when no release it admits fits."""
    from dataclasses import replace

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    for at, requirement in enumerate(preset.requirements):
        framework = frameworks.of_distribution(requirement.name)
        if framework is None:
            continue
        releases = framework.releases()
        admitted = [r for r in releases if requirement.specifier.contains(Version(f"{r}.0"), prereleases=True)]
        fits = [r for r in admitted if _trains(requirement.name, r, profile)]
        if not fits or not releases:
            return None
        newest = Version(releases[0]).release
        above = ".".join(map(str, (*newest[:-1], newest[-1] + 1)))  # releases the table doesn't know: not judged
        clauses = [str(requirement.specifier)] if str(requirement.specifier) else []
        clauses += [f"!={r}.*" for r in admitted if r not in fits] + [f"<{above}"]
        narrow = type(requirement)(str(requirement))
        narrow.specifier = SpecifierSet(",".join(clauses))
        requirements = (*preset.requirements[:at], narrow, *preset.requirements[at + 1:])
        candidate = replace(preset, requirements=requirements, packages=[str(r) for r in requirements])
        return candidate if misfit_for(requirements, profile, preset.requires_python) is None else None
    return None


def _trains(dist: str, release: str, profile: HostProfile) -> bool:
    from ..host.compat import judge

    build = frameworks.framework_build(dist, f"{release}.0")
    verdict = judge(build, profile) if build is not None else None
    return verdict is not None and verdict.verdict != "fail" and verdict.uses_gpu


def for_target(preset: Preset, profile: HostProfile, asked: str | None = None) -> Preset:
    """The variant a target gets (a CPU preset: itself), its framework narrowed to the builds
    that fit (``narrowed``); a UsageError with each variant's reason when none fits."""
    if preset.kind != "gpu":
        return preset.with_variant(asked) if asked else preset
    reasons = []
    for variant in _candidates(preset, asked):
        why = misfit_for(variant.requirements, profile, variant.requires_python)
        if why is None:
            return variant
        fitting = narrowed(variant, profile) if profile.gpu_ccs else None
        if fitting is not None:
            return fitting
        reasons.append(f"{variant.variant}: {why}")
    raise UsageError(f"no GPU variant of preset {preset.name} fits the target "
                     f"(driver {profile.driver_version or 'none'}, GPUs {', '.join(profile.gpu_ccs) or 'none'}): "
                     + "; ".join(reasons),
                     "lock for a host whose driver and GPUs fit (--for-driver V --for-cc X.Y), or lock a CPU "
                     "preset for a CPU node")


def for_this_host(host: HostState, preset: Preset, python: str | None = None, asked: str | None = None,
                  for_another_host: bool = False) -> tuple[Preset, tuple[str, str | None] | None]:
    """(the variant this host gets, None) or, when none fits, (the first, why it doesn't and
    its fix) as ``gpu_misfit`` says it. ``for_another_host``: no judgement, the
    variant asked for or the first."""

    candidates = _candidates(preset, asked)
    if preset.kind != "gpu" or for_another_host:
        return candidates[0], None
    first = None
    for variant in candidates:
        try:
            misfit = gpu_misfit(variant, host, python)
        except UsageError as exc:  # no Python fits this variant
            misfit = (exc.message, exc.fix)
        if misfit is None:
            return variant, None
        fitting = _narrowed_here(variant, host, python)
        if fitting is not None and gpu_misfit(fitting, host, python) is None:
            return fitting, None
        if first is None:
            first = misfit if len(candidates) == 1 else (f"variant {variant.variant}: {misfit[0]}", misfit[1])
    return candidates[0], first


def _narrowed_here(preset: Preset, host: HostState, python: str | None) -> Preset | None:
    """``narrowed`` for this host's GPUs and the Python its env would get (None: no GPU here,
    or no Python fits)."""
    from ..envs.pythons import find_python
    from ..host.compat import HostProfile

    if host.no_gpu_reason():
        return None
    try:
        interpreter = find_python(preset.requires_python, python, needed_by=f"preset {preset.name}")
    except UsageError:
        return None
    return narrowed(preset, HostProfile.from_host(host, python=str(interpreter.version)))


def gpu_misfit(preset: Preset, host: HostState, python: str | None = None) -> tuple[str, str | None] | None:
    """Why this host can't train with GPU preset ``preset`` (the reason and its fix), or None
    when it can, or when the build it installs can't be told. The judgement ``--auto`` makes:
    a usable GPU, a compat verdict that trains on it, a Python that fits (``python``: the one
    asked for; none that fits is a UsageError) and the system libraries the preset needs."""
    from ..envs.pythons import find_python
    from ..host.compat import HostProfile, judge

    reason = host.no_gpu_reason()
    if reason:
        return f"no usable GPU: {reason[0]}", reason[1]
    build = frameworks.build_for_requirements(preset.requirements)
    if build is None:
        return None
    interpreter = find_python(preset.requires_python, python, needed_by=f"preset {preset.name}")
    verdict = judge(build, HostProfile.from_host(host, python=str(interpreter.version)))
    if verdict.verdict == "fail" or not verdict.uses_gpu:
        why = verdict.reasons[0] if verdict.reasons else "it would not use this host's GPUs"
        return (f"{build.label} can't train on this host's GPUs: {why}",
                verdict.fixes[0] if verdict.fixes else None)
    from ..validation.libraries import missing_libraries
    from ..validation.env_checks import libraries_fix

    missing = [] if preset.wheel_libraries else missing_libraries(interpreter.path, preset.libraries)
    if missing:
        return (f"system libraries missing: {', '.join(missing)}",
                libraries_fix(preset.cuda, preset.cudnn, build.framework, preset.name))
    return None


def refuse_misfit(session: Session, preset: Preset, python: str | None = None, variant: str | None = None,
                  for_another_host: bool = False) -> Preset:
    """The variant of ``preset`` `env create` and `provision` make here; a GPU preset
    this host can't train with is a UsageError before anything is downloaded, its fix one
    alternative per sentence (this host's fix, a CPU env, and ``--for-another-host`` for an
    env meant for another machine)."""
    host = session.host if preset.kind == "gpu" and not for_another_host else None
    chosen, misfit = for_this_host(host, preset, python, variant, for_another_host)
    if misfit is None:
        return chosen
    from .hints import cpu_hint

    reason, fix = misfit
    raise UsageError(f"this host can't train with GPU preset {preset.name}: {reason}",
                     sentences(fix, f"to train on this host's CPU, create a CPU env: "
                                    f"{cpu_hint(session.home, preset.framework)}",
                               "to build it for another host, pass --for-another-host"))


def sentences(*alternatives: str | None) -> str:
    """Alternatives as one sentence each: "a. B. C." (the first keeps its case, as fixes start)."""
    parts = [a.rstrip(". ") for a in alternatives if a]
    return ". ".join([parts[0]] + [p[0].upper() + p[1:] for p in parts[1:]]) + "."
