"""The next step to suggest when no env fits: one policy for every command's advice.

Hints name presets that exist (built-in or the user's) and, for GPUs, fit this host; the env
name in a hint is the preset's, as ``provision`` names envs, so following both makes no
duplicate. A GPU preset this host's driver is too old for becomes "upgrade the driver",
with the version it needs, never a create command that would fail.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.version import Version

from .. import frameworks

if TYPE_CHECKING:
    from ..envs.presets import Preset
    from ..host.probe import HostState
    from ..paths import Home
    from .session import Session


def create_command(preset: str) -> str:
    return f"envcheck env create {preset} --preset {preset}"


def _frameworks(name: str | None) -> list[frameworks.Framework]:
    return [frameworks.get(name)] if name else list(frameworks.registry().values())


def _preset(home: Home, name: str) -> Preset | None:
    from ..envs.presets import resolve_preset
    from ..errors import UsageError

    try:
        return resolve_preset(home, name=name)
    except UsageError:
        return None  # not installed here, or a broken user file: not something to suggest


def cpu_hint(home: Home, framework: str | None = None) -> str:
    for fw in _frameworks(framework):
        for name in fw.cpu_presets:
            if _preset(home, name) is not None:
                return create_command(name)
    fw = frameworks.get(framework) if framework else None
    what = f"{fw.title} " if fw else ""
    return (f"envcheck env create NAME --preset-file YOUR.toml (a preset listing {what}packages; "
            f"there is no built-in {what}CPU preset)")


def gpu_hint(home: Home, host: HostState, framework: str | None = None) -> str | None:
    """A GPU preset that fits this host, else the driver upgrade one needs; None without GPUs."""
    from ..host.compat import HostProfile, judge, min_driver

    if not host.usable_gpus:
        return None
    profile = HostProfile.from_host(host)
    upgrades: list[tuple[str, str, str]] = []
    for fw in _frameworks(framework):
        for name in fw.gpu_presets:
            preset = _preset(home, name)
            build = frameworks.build_for_requirements(preset.requirements) if preset else None
            if build is None or not build.gpu_capable:
                continue
            if judge(build, profile).uses_gpu:
                return create_command(name)
            need = min_driver(build.cuda, profile.os).min_driver
            # only a driver upgrade would fix it (one of unreadable version: not known)
            if profile.driver_version and Version(profile.driver_version) < Version(need):
                upgrades.append((need, name, build.cuda))
    if not upgrades:
        return None
    upgrades.sort(key=lambda u: [int(p) for p in u[0].split(".")])
    each = ", ".join(f">= {need} for preset {name} (CUDA {cuda})" for need, name, cuda in upgrades)
    return (f"upgrade the NVIDIA driver (now {host.driver_version}): {each}; then: "
            f"{create_command(upgrades[0][1])}")


def create_hint(session: Session, framework: str | None = None) -> str:
    """What to create when there is nothing to use: a CPU env, and a GPU one where one fits."""
    return create_hint_for(session.home, session.host, framework)


def create_hint_for(home: Home, host: HostState, framework: str | None = None) -> str:
    hint = f"create one: {cpu_hint(home, framework)}"
    gpu = gpu_hint(home, host, framework)
    return hint + (f" (for this host's GPUs: {gpu})" if gpu else "")
