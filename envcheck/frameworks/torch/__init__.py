"""PyTorch: its distribution, how its build is read (``+cu118``/``+cpu`` local versions); its
smoke backend (native torch.nn, DistributedDataParallel ranks) is ``smoke.py`` beside this file."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Mapping

from packaging.version import InvalidVersion, Version

from ...data import compat_facts
from ..base import PER_DEVICE, Build, Framework, RunVariable, cpu_only, major_minor, minor, row_build

_CUDA_LOCAL = re.compile(r"cu(\d+)(\d)")


def _variant_archs(version: Version, cuda: str) -> tuple[str, ...] | None:
    for row in compat_facts()["torch"]["variant_archs"]["rows"]:
        low, high = minor(Version(row["torch_from"])), minor(Version(row["torch_to"]))
        if low <= minor(version) <= high and row["cuda"] == cuda:
            return tuple(row["archs"])
    return None


def _wheel_cuda(packages: Mapping[str, str], default_cuda: str) -> tuple[str, str | None, str] | None:
    """(CUDA, cuDNN, evidence) of the CUDA runtime wheel an env holds: PyPI's torch 1.13-2.10
    requires ``nvidia-cuda-runtime-cu11``/``-cu12`` (and ``nvidia-cudnn-cuXX``) at the exact
    versions it was built with; torch 2.11+ pulls them in through ``cuda-toolkit``, whose
    runtime is ``nvidia-cuda-runtime`` (or ``-cu13``). Another framework in the env may bring
    a runtime of its own (TensorFlow's ``[and-cuda]``), so one of the CUDA major the release
    was built for (``default_cuda``) is taken first, another only where it is the one there."""
    found = []
    for name in ("nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11",
                 "nvidia-cuda-runtime"):
        runtime = packages.get(name)
        try:
            cuda = major_minor(runtime) if runtime else None
        except InvalidVersion:
            cuda = None
        if cuda is None:
            continue
        suffix = name.rpartition("-")[2]
        cudnn = packages.get(f"nvidia-cudnn-{suffix}") or packages.get("nvidia-cudnn")
        try:
            cudnn = major_minor(cudnn) if cudnn else None
        except InvalidVersion:
            cudnn = None
        found.append((cuda, cudnn, f"{name} {runtime}"))
    major = default_cuda.split(".")[0]
    same = [wheel for wheel in found if wheel[0].split(".")[0] == major]
    return (same or found or [None])[0]


def _read_build(dist: str, version: Version, shown: str, local: str | None,
                packages: Mapping[str, str] | None = None) -> Build | None:
    row = compat_facts()["torch"]["releases"].get(f"{version.major}.{version.minor}")
    if row is None:
        return None
    build = row_build("torch", dist, shown, row)
    if not local:
        wheel = _wheel_cuda(packages or {}, build.cuda)
        if wheel is None:
            return build
        cuda, cudnn, evidence = wheel
        if cuda == major_minor(build.cuda):
            return replace(build, notes=(f"CUDA {cuda} from the installed {evidence}",))
        archs = _variant_archs(version, cuda)
        return replace(build, cuda=cuda, cudnn=cudnn, archs=archs,
                       notes=(f"CUDA {cuda} from the installed {evidence}, not the release's "
                              f"default {major_minor(build.cuda)}"
                              + ("" if archs else "; compiled architectures not known"),))
    if local.startswith("cpu"):
        return cpu_only(build, f"+{local}: the CPU-only PyTorch build")
    if local.startswith("rocm"):
        return cpu_only(build, f"+{local}: a ROCm build, for AMD GPUs; no CUDA")
    match = _CUDA_LOCAL.fullmatch(local)
    if not match:
        return replace(build, notes=(f"local version +{local} not recognised; facts of the "
                                     "default PyPI wheel assumed",))
    cuda = f"{int(match[1])}.{match[2]}"
    if cuda == major_minor(build.cuda):
        return build
    archs = _variant_archs(version, cuda)
    note = f"+{local}: a CUDA {cuda} build from download.pytorch.org; cuDNN not in the tables"
    if archs is None:
        note += ", compiled architectures not known"
    return replace(build, cuda=cuda, cudnn=None, archs=archs, notes=(note,))


# The caching allocator's expandable segments (less fragmentation, fewer OOMs on a full GPU),
# from torch 2.2, where torchtune and axolotl turn them on, on Linux only (where they are
# implemented). The old name: torch 2.9+ warns it is deprecated but, up to 2.9.1 at least,
# ignores ``expandable_segments`` under the new name ``PYTORCH_ALLOC_CONF`` (pytorch#183387).
_EXPANDABLE_SEGMENTS = RunVariable("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True",
                                   since="2.2", platforms=("linux",))


FRAMEWORK = Framework(
    name="torch",
    title="PyTorch",
    distributions=("torch",),
    table="torch",
    read_build=_read_build,
    multi_device="DistributedDataParallel, one process per device (gloo on CPUs, nccl on GPUs)",
    # DistributedDataParallel: one process per GPU, each with the full batch.
    batch_rule=PER_DEVICE,
    order=1,
    run_variables=(_EXPANDABLE_SEGMENTS,),
    cpu_presets=("pytorch-cpu",),
    gpu_presets=("pytorch-cuda12", "pytorch-cuda11"),
    example="torch==2.5.1+cu118",
    aliases=("pytorch",),
)
