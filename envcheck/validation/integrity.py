"""Is an env still what its manifest says? Read from metadata, like ``pip check``, no interpreter."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..distributions import canonical_name
from ..envs.metadata import requirements

if TYPE_CHECKING:
    from packaging.requirements import Requirement


@dataclass
class Integrity:
    unsatisfied: list[str] = field(default_factory=list)  # requested, not satisfied
    broken: list[str] = field(default_factory=list)  # "dist needs req, has version"

    @property
    def ok(self) -> bool:
        return not (self.unsatisfied or self.broken)


def _marker_env(python_version: str | None) -> dict[str, str]:
    from packaging.markers import default_environment

    env = default_environment()
    if python_version:
        parts = python_version.split(".")
        env.update(python_version=".".join(parts[:2]), python_full_version=python_version)
    return env


def satisfied(req: Requirement, packages: dict[str, str]) -> bool:
    """Is ``req`` (a packaging Requirement) met by the {name: version} map?"""
    from packaging.version import InvalidVersion, Version

    have = packages.get(canonical_name(req.name))
    if have is None:
        return False
    try:
        return req.specifier.contains(Version(have), prereleases=True)
    except InvalidVersion:
        return False


def check_integrity(env: Path, requested: list[str], packages: dict[str, str],
                    python_version: str | None) -> Integrity:
    """Requested requirements still satisfied, and every installed dependency present."""
    from packaging.requirements import InvalidRequirement, Requirement

    marker_env = _marker_env(python_version)
    result = Integrity()
    for text in requested:
        req = Requirement(text)
        if (req.marker is None or req.marker.evaluate(marker_env)) and not satisfied(req, packages):
            result.unsatisfied.append(f"{text} (installed: {packages.get(canonical_name(req.name), 'none')})")
    requires = requirements(env)
    for dist, version in packages.items():
        for line in requires.get(dist, []):
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({**marker_env, "extra": ""}):
                continue
            if not satisfied(req, packages):
                have = packages.get(canonical_name(req.name), "not installed")
                result.broken.append(f"{dist} {version} requires {req}, has {have}")
    return result
