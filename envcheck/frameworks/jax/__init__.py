"""JAX: its distributions, how its build is read, and how envcheck runs it; its facts (with
their sources) are ``facts.json`` and its smoke backend (pure JAX, jitted) ``smoke.py``,
both beside this file.

A JAX install's CUDA is not in jax or jaxlib but in its CUDA plugin: ``jax[cuda12]`` adds
``jax-cuda12-plugin`` (and ``jax-cuda12-pjrt``), whose ``with-cuda`` extra brings the CUDA
12 runtime and cuDNN as ``nvidia-*-cu12`` wheels. So an env's build is a CUDA 12 one when
the plugin is installed (its name says the CUDA major) and CPU-only when it is not; a
release named alone (``compat --framework jax==0.10.2``, or a preset's requirement) is
judged as that release's CUDA 12 build, ``jax[cuda12]==0.10.2``. A release the table lacks
(older than its first row, between two, newer) is judged by its family's rules: the plugin's
documented build and JAX's compute-capability floor, from the plugin's first release on; and
an env's CUDA wheels are checked against the pins of its release's plugin.
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Mapping

from packaging.version import InvalidVersion, Version

from ..base import (SPLIT, Build, Conflict, Framework, GpuBlock, GpuOption, RunVariable, bare_build, cpu_only,
                    folder_facts, row_build)
from ..facts import Facts

_PLUGIN = re.compile(r"jax-cuda(\d+)-(plugin|pjrt)")
NAMED_ALONE = "jax-cuda12-plugin"  # what jax[cuda12], the build a release named alone is judged as, adds
# The CUDA wheels the plugin's ``with-cuda`` extra pins (the cu12 names of CUDA 12; the row's key).
PINNED = (("nvidia-cuda-runtime-cu{major}", "runtime_min"), ("nvidia-cudnn-cu{major}", "cudnn_pin"),
          ("nvidia-cuda-nvcc-cu{major}", "nvcc_min"))


def _facts() -> Facts:
    return FRAMEWORK.facts()


def _row(facts: Facts, version: Version) -> tuple[str, Facts] | tuple[None, None]:
    """(key, release row) of ``version`` (0.10.2 and 0.10.2.0 are one release)."""
    wanted = Version(version.base_version)
    key = next((key for key in facts["releases"] if Version(key) == wanted), None)
    return (key, facts["releases"][key]) if key is not None else (None, None)


def _plugin(dist: str, packages: Mapping[str, str]) -> str | None:
    """The CUDA plugin distribution: ``dist`` itself, else the one the env holds."""
    if _PLUGIN.fullmatch(dist):
        return dist
    return next((name for name in sorted(packages) if _PLUGIN.fullmatch(name)), None)


def _read_build(dist: str, version: Version, shown: str, local: str | None,
                packages: Mapping[str, str] | None = None) -> Build | None:
    facts = _facts()
    packages = packages or {}
    key, row = _row(facts, version)
    if key is not None and Version(shown) == Version(key):
        shown = key  # a requirement's release as the table names it, not "0.10.2.0"
    plugin = _plugin(dist, packages)
    if plugin is None and packages:  # an env without a CUDA plugin: jaxlib alone is CPU-only
        base = row_build("jax", dist, shown, row) if row else bare_build("jax", dist, shown)
        return cpu_only(base, "no JAX CUDA plugin installed (jax-cuda12-plugin, from "
                              "jax[cuda12]): jaxlib alone runs on the CPU")
    named_alone = plugin is None
    plugin = plugin or NAMED_ALONE
    family = facts["plugins"].get(plugin)
    if family is None:
        return None  # a plugin of a CUDA major the facts don't know (no guessing its build)
    release = version
    if row is None and plugin in packages and plugin != dist:  # the env's jax release unknown: its plugin's
        release = Version(packages[plugin])
        key, row = _row(facts, release)
    major = _PLUGIN.fullmatch(plugin)[1]
    if named_alone:
        how = f"judged as {dist}'s CUDA {major} build, jax[cuda{major}]=={key or release}"
    else:
        how = f"CUDA {major} from {plugin} {packages[plugin]}" if plugin in packages else f"CUDA {major} from {plugin}"
    if row is None:
        return _family_build(facts, family, dist, shown, release, how, major)
    notes = (f"{how} ({row['plugin']}); without the plugin it is CPU-only",) if named_alone else (how,)
    build = row_build("jax", dist, shown, row, notes, facts["min_cc"])
    return replace(build, conflicts=_conflicts(row, major, packages))


def _family_build(facts: Facts, family: Facts, dist: str, shown: str, release: Version, how: str,
                  major: str) -> Build | None:
    """A release the table lacks, judged by the rules of its family, the CUDA plugin: the
    build JAX documents for it and JAX's compute-capability floor; its Python range is not
    known, so not checked. None below the plugin's first release (no CUDA build on PyPI)."""
    if release < Version(family["first"]):
        return None
    known = sorted(facts["releases"], key=Version)
    place = ("older than the first known" if release < Version(known[0]) else
             "newer than the newest known" if release > Version(known[-1]) else "between two known releases")
    note = (f"{how}; {release} is not in the tables ({place}, "
            f"{known[0]}-{known[-1]}): judged by its family, JAX's CUDA {major} plugin "
            f"(from {family['first']}): its documented build (CUDA {family['cuda']}, cuDNN "
            f"{family['cudnn']}) and GPUs of compute capability {facts['min_cc']} and newer; "
            "its Python range is not known (not checked)")
    return replace(bare_build("jax", dist, shown), cuda=family["cuda"], cudnn=family["cudnn"],
                   gpu_capable=True, notes=(note,), min_cc=facts["min_cc"])


def _conflicts(row: Facts, major: str, packages: Mapping[str, str]) -> tuple[Conflict, ...]:
    """The env's CUDA wheels that the plugin's ``with-cuda`` pins refuse (a wheel the env lacks
    is not checked: jax[cuda12-local] takes CUDA from the system)."""
    from packaging.specifiers import SpecifierSet  # here: the registry's readers need none

    found = []
    for pattern, key in PINNED:
        dist, pin = pattern.format(major=major), row[key]
        have = packages.get(dist)
        if have is None:
            continue
        wanted = SpecifierSet(pin if pin[:1] in "<>=!~" else f">={pin}")
        try:
            fits = wanted.contains(have, prereleases=True)
        except InvalidVersion:  # a version no installer would have written: not what it pins
            fits = False
        if not fits:
            found.append(Conflict(
                f"{dist} {have} in the env is outside what {row['plugin']} requires ({dist}{wanted}): "
                "JAX fails to load its CUDA libraries on a GPU",
                f"pip install '{dist}{wanted}' into the env (what jax[cuda{major}] installs)"))
    return tuple(found)


def _gpu_block(build: Build, os: str) -> GpuBlock | None:
    """JAX has no NVIDIA GPU support on native Windows."""
    if os != "windows":
        return None
    return GpuBlock(_facts()["windows_gpu_note"].split(" (")[0],
                    ("use WSL2 (experimental for JAX) with pip install 'jax[cuda12]'",))


# JAX preallocates 75% of each GPU's memory when it starts; a job shares the GPU with whatever
# else runs there (a notebook kernel, a second process), so it allocates as it needs instead
# (XLA_PYTHON_CLIENT_PREALLOCATE=false, JAX's own switch, as TensorFlow's
# TF_FORCE_GPU_ALLOW_GROWTH). XLA_PYTHON_CLIENT_MEM_FRACTION is left to the user: it caps what
# a job may take, and any value envcheck chose would be wrong for someone.
_NO_PREALLOCATION = RunVariable("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def _gpu_options(version: Version) -> list[GpuOption]:
    """``jax[cuda12]`` of the release: its CUDA 12 plugin, CUDA and cuDNN as pip wheels."""
    return [GpuOption(NAMED_ALONE, version.public, f"jax[cuda12]=={version.public}")]


FRAMEWORK = Framework(
    name="jax",
    title="JAX",
    distributions=("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt"),
    table=None,
    facts_file=folder_facts(__file__),
    read_build=_read_build,
    multi_device="jax.jit over a device Mesh (NamedSharding: batch split, weights replicated)",
    batch_rule=SPLIT,  # one process splits a global batch over its devices
    order=2,
    run_variables=(_NO_PREALLOCATION,),
    example="jax==0.10.2",
    cpu_presets=("jax-cpu",),
    gpu_presets=("jax-cuda12",),
    gpu_block=_gpu_block,
    beyond_table="other jax releases from the first of its CUDA 12 plugin on PyPI, by the plugin's family",
    gpu_options=_gpu_options,
)
