"""The framework registry: one folder per framework, ``<name>/``, found by the registry.

A framework's folder holds its declaration (``__init__.py``: a :class:`Framework` named
``FRAMEWORK``) and its smoke backend (``smoke.py``, which the standalone smoke runner loads by
path inside the env's interpreter: standard library and the framework only, Python 3.7).
Owns: each framework's distribution names, reading its build (CUDA, cuDNN, archs) from
installed metadata and its compat table, its smoke backend, multi-device strategy and batch
rule, the variables ``run`` and the smoke set, and the presets to suggest. Adding a framework
is one new folder here plus its presets.

May import: ``envcheck.errors``, ``envcheck.data``, ``envcheck.distributions`` (names as
PEP 503 compares them), ``packaging``. Must not know the store, the host or the CLI. Neither
this package nor ``envs`` imports the other: the manifest's ``frameworks`` field is ``detect``
handed to the store by the use cases, and what a framework adds to a child's environment is
handed to ``child_env`` by its caller (``smoke_environ``, ``Framework.run_environ``).
"""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from packaging.version import Version

from ..distributions import canonical_name
from ..errors import UsageError
from .base import Build, Framework, GpuBlock, parse_version

if TYPE_CHECKING:
    from packaging.requirements import Requirement

__all__ = ["Build", "Framework", "GpuBlock", "registry", "get", "names", "of_distribution",
           "detect", "distributions", "framework_build", "build_from_packages",
           "build_for_requirement", "build_for_requirements", "FOLDER", "smoke_environ", "smoke_scratch",
           "examples"]

FOLDER = Path(__file__).parent  # the smoke runner finds each <name>/smoke.py here too


@lru_cache(maxsize=1)
def registry() -> dict[str, Framework]:
    """Every framework folder's declaration, by name, in their ``order`` (first wins ties)."""
    found = (importlib.import_module(f"{__name__}.{module.name}").FRAMEWORK
             for module in pkgutil.iter_modules(__path__) if module.ispkg)
    return {f.name: f for f in sorted(found, key=lambda f: (f.order, f.name))}


def names() -> tuple[str, ...]:
    return tuple(registry())


def get(name: str) -> Framework:
    """The framework called ``name`` or one of its ``aliases``; a UsageError listing the known
    ones otherwise."""
    found = registry().get(name) or next((f for f in registry().values() if name in f.aliases), None)
    if found is None:
        raise UsageError(f"unknown framework {name!r}", f"use one of: {', '.join(names())}")
    return found


def smoke_environ() -> dict[str, str]:
    """Every framework's smoke variables (``Framework.smoke_environ``), the first framework's
    value where two set one: the runner's backend may import any of them (a library of one
    framework in an env of another), and reads their stderr."""
    variables: dict[str, str] = {}
    for framework in registry().values():
        for name, value in framework.smoke_environ.items():
            variables.setdefault(name, value)
    return variables


def smoke_scratch() -> tuple[str, ...]:
    """Every framework's scratch variables for the smoke runner (``Framework.smoke_scratch``):
    its backend may import any of them (Keras on TensorFlow in an env of another framework)."""
    return tuple(dict.fromkeys(v for f in registry().values() for v in f.smoke_scratch))


def examples() -> tuple[str, ...]:
    """A release of each framework with build tables, as ``compat --framework`` takes it."""
    return tuple(f.example for f in registry().values() if f.example)


def of_distribution(dist: str) -> Framework | None:
    name = canonical_name(dist)
    return next((f for f in registry().values() if name in f.distributions), None)


def distributions() -> tuple[str, ...]:
    """Every distribution of every known framework."""
    return tuple(d for f in registry().values() for d in f.distributions)


def detect(packages: Mapping[str, str]) -> list[str]:
    """The frameworks installed, by a {name: version} map of an env's packages."""
    installed = {canonical_name(name) for name in packages}
    return [f.name for f in registry().values() if installed.intersection(f.distributions)]


def framework_build(dist: str, version: str, local: str | None = None,
                    packages: Mapping[str, str] | None = None) -> Build | None:
    """The build facts of ``dist`` ``version`` (``local``: the "+cu118"/"+cpu" part, if not
    already in ``version``); None for a distribution or release the tables don't know.
    ``packages``: the env's other installed distributions {canonical name: version}, where
    a build's CUDA shows in what it pulled in (PyPI torch's ``nvidia-*-cu12`` wheels)."""
    framework = of_distribution(dist)
    name = canonical_name(dist)
    parsed = parse_version(version, f"{name} version")
    if local is None:
        local = parsed.local
    elif parsed.local is None:
        version = f"{version}+{local}"
    if framework is None:
        return None
    return framework.read_build(name, parsed, version, local, packages or {})


def build_from_packages(packages: Mapping[str, str], framework: str | None = None) -> Build | None:
    """The framework build of an env's {name: version} map (of ``framework`` only, if given): a
    GPU-capable build first (registry order), else the first CPU-only one, else None. The
    whole map is read, so a build's CUDA wheels count."""
    canonical = {canonical_name(name): version for name, version in packages.items()}
    dists = get(framework).distributions if framework else distributions()
    builds = [build for dist in dists if dist in canonical
              if (build := framework_build(dist, canonical[dist], packages=canonical)) is not None]
    gpu = [build for build in builds if build.gpu_capable]
    return (gpu or builds or [None])[0]


def build_for_requirements(requirements) -> Build | None:
    """The build a preset's requirements would install: its first framework requirement's."""
    for requirement in requirements:
        if of_distribution(requirement.name) is not None:
            return build_for_requirement(requirement)
    return None


def build_for_requirement(requirement: "Requirement") -> Build | None:
    """The build a requirement would install: the newest release in its framework's table that
    it admits (``tensorflow[and-cuda]~=2.21.0`` -> tensorflow 2.21); None if not a framework's."""
    framework = of_distribution(requirement.name)
    if framework is None:
        return None
    for spec in requirement.specifier:  # ==2.0.1, ==2.13.0+cpu: that exact build (its local part read)
        if spec.operator in ("==", "===") and "*" not in spec.version:
            return framework_build(requirement.name, spec.version)
    for release in framework.releases():
        if requirement.specifier.contains(Version(f"{release}.0"), prereleases=True):
            return framework_build(requirement.name, f"{release}.0")
    return None
