"""JAX: its distributions, how its build is read, and how envcheck runs it; its facts (with
their sources) are ``facts.json`` and its smoke backend (pure JAX, jitted) ``smoke.py``,
both beside this file.

A JAX install's CUDA is not in jax or jaxlib but in its CUDA plugin: ``jax[cuda12]`` adds
``jax-cuda12-plugin`` (and ``jax-cuda12-pjrt``), whose ``with-cuda`` extra brings the CUDA
12 runtime and cuDNN as ``nvidia-*-cu12`` wheels. So an env's build is a CUDA 12 one when
the plugin is installed (its name says the CUDA major) and CPU-only when it is not; a
release named alone (``compat --framework jax==0.10.2``, or a preset's requirement) is
judged as that release's CUDA 12 build, ``jax[cuda12]==0.10.2``.
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Mapping

from packaging.version import Version

from ..base import SPLIT, Build, Framework, GpuBlock, RunVariable, cpu_only, folder_facts, row_build

_PLUGIN = re.compile(r"jax-cuda(\d+)-(plugin|pjrt)")


def _facts() -> dict:
    return FRAMEWORK.facts()


def _row(facts: dict, version: Version) -> tuple[str, dict] | tuple[None, None]:
    """(key, release row) of ``version`` (0.10.2 and 0.10.2.0 are one release)."""
    wanted = Version(version.base_version)
    return next(((key, row) for key, row in facts["releases"].items() if Version(key) == wanted),
                (None, None))


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
        base = row_build("jax", dist, shown, row) if row else Build(
            "jax", dist, shown, None, None, None, None, None, False)
        return cpu_only(base, "no JAX CUDA plugin installed (jax-cuda12-plugin, from "
                              "jax[cuda12]): jaxlib alone runs on the CPU")
    if plugin is None:  # a release named alone: its CUDA 12 build
        if row is None:
            return None
        return row_build("jax", dist, shown, row, (
            f"judged as {dist}'s CUDA 12 build, jax[cuda12]=={key} "
            f"({row['plugin']}); without the plugin it is CPU-only",))
    major = _PLUGIN.fullmatch(plugin)[1]
    family = facts["plugins"].get(plugin)
    if family is None:
        return None  # a plugin of a CUDA major the facts don't know (no guessing its build)
    if row is None and not packages:  # a plugin release named alone that the table lacks
        return None
    if row is None and plugin != dist:  # the env's jax release unknown: try its plugin's
        row = _row(facts, Version(packages[plugin]))[1]
    where = f"{plugin} {packages[plugin]}" if plugin in packages else plugin
    if row is None:  # an env's release the table lacks: its plugin's CUDA major is known
        return Build("jax", dist, shown, family["cuda"], family["cudnn"], None, None, None, True,
                     (f"CUDA {major} from {where}; release not in the tables: the plugin's "
                      f"documented build (CUDA {family['cuda']}, cuDNN {family['cudnn']}) assumed",))
    return replace(row_build("jax", dist, shown, row), notes=(f"CUDA {major} from {where}",))


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
)
