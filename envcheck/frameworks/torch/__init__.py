"""PyTorch: its distribution, how its build is read (``+cu118``/``+cpu`` local versions); its
smoke backend (native torch.nn, DistributedDataParallel ranks) is ``smoke.py`` beside this file.

A release the table lacks (older than its first row, newer than its last) is judged by the
rules of its family where they say what it was built with: a ``+cuXYZ`` tag (CUDA X.Y), an
env's CUDA runtime wheel, ``+cpu`` or ``+rocm`` (no CUDA); its cuDNN, Python range and (but
for the variant rows) compiled architectures are then not known. A release named alone with
none of these says nothing of its CUDA: no build."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Mapping

from packaging.version import InvalidVersion, Version

from ..base import (PER_DEVICE, Build, Framework, GpuOption, RunVariable, bare_build, cpu_only, major_minor,
                    minor, row_build)

_CUDA_LOCAL = re.compile(r"cu(\d+)(\d)")


def _variant_archs(version: Version, cuda: str) -> tuple[str, ...] | None:
    for row in FRAMEWORK.facts()["variant_archs"]["rows"]:
        low, high = minor(Version(row["torch_from"])), minor(Version(row["torch_to"]))
        if low <= minor(version) <= high and row["cuda"] == cuda:
            return tuple(row["archs"])
    return None


def _wheel_cuda(packages: Mapping[str, str], default_cuda: str | None) -> tuple[str, str | None, str] | None:
    """(CUDA, cuDNN, evidence) of the CUDA runtime wheel an env holds: PyPI's torch 1.13-2.10
    requires ``nvidia-cuda-runtime-cu11``/``-cu12`` (and ``nvidia-cudnn-cuXX``) at the exact
    versions it was built with; torch 2.11+ pulls them in through ``cuda-toolkit``, whose
    runtime is ``nvidia-cuda-runtime`` (or ``-cu13``). Another framework in the env may bring
    a runtime of its own (TensorFlow's ``[and-cuda]``), so one of the CUDA major the release
    was built for (``default_cuda``; None: not known) is taken first, another only where it is
    the one there."""
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
    major = default_cuda.split(".")[0] if default_cuda else None
    same = [wheel for wheel in found if wheel[0].split(".")[0] == major]
    return (same or found or [None])[0]


def _read_build(dist: str, version: Version, shown: str, local: str | None,
                packages: Mapping[str, str] | None = None) -> Build | None:
    release = f"{version.major}.{version.minor}"
    row = FRAMEWORK.facts()["releases"].get(release)
    if row is None:
        return _family_build(dist, version, shown, local, packages or {})
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


def _family_build(dist: str, version: Version, shown: str, local: str | None,
                  packages: Mapping[str, str]) -> Build | None:
    """A release the table lacks, by what its tag or the env's CUDA wheel says it was built with."""
    known = sorted(FRAMEWORK.facts()["releases"], key=Version)
    older = minor(version) < minor(Version(known[0]))
    missing = (f"torch {version.major}.{version.minor} is not in the tables ("
               f"{'older than the first' if older else 'newer than the last'} known, {known[0]}-{known[-1]})")
    build = bare_build("torch", dist, shown)
    if local and local.startswith(("cpu", "rocm")):
        return cpu_only(build, f"+{local}: a PyTorch build without CUDA; {missing}")
    match = _CUDA_LOCAL.fullmatch(local) if local else None
    # PyPI's torch pulls its CUDA in as wheels from 1.13 on, within the table: older ones bundle it
    wheel = None if local or older else _wheel_cuda(packages, None)
    if match:
        cuda, cudnn = f"{int(match[1])}.{match[2]}", None
        evidence = f"its +{local} tag"
    elif wheel is not None:
        cuda, cudnn, evidence = wheel
        evidence = f"the installed {evidence}"
    else:
        return None  # nothing says which CUDA it was built with
    archs = _variant_archs(version, cuda)
    unknown = ["cuDNN" if cudnn is None else None, None if archs else "compiled architectures", "Python range"]
    note = (f"{missing}: judged as a CUDA {cuda} build by {evidence}, with CUDA {cuda}'s driver and "
            f"compute-capability rules; its {', '.join(u for u in unknown if u)} not known")
    return replace(build, cuda=cuda, cudnn=cudnn, archs=archs, gpu_capable=True, notes=(note,))


# The caching allocator's expandable segments (less fragmentation, fewer OOMs on a full GPU),
# from torch 2.2, where torchtune and axolotl turn them on, on Linux only (where they are
# implemented). The old name: torch 2.9+ warns it is deprecated but, up to 2.9.1 at least,
# ignores ``expandable_segments`` under the new name ``PYTORCH_ALLOC_CONF`` (pytorch#183387).
_EXPANDABLE_SEGMENTS = RunVariable("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True",
                                   since="2.2", platforms=("linux",))


def _gpu_options(version: Version) -> list[GpuOption]:
    """PyPI's default CUDA build of the release, then each CUDA build PyTorch's index has of its
    line (the table's variant rows), newest CUDA first."""
    public = version.public
    row = FRAMEWORK.facts()["releases"].get(f"{version.major}.{version.minor}")
    options = [GpuOption("torch", public, f"torch=={public}")] if row is not None else []
    variants = [r for r in FRAMEWORK.facts()["variant_archs"]["rows"]
                if minor(Version(r["torch_from"])) <= minor(version) <= minor(Version(r["torch_to"]))]
    for r in sorted(variants, key=lambda r: Version(r["cuda"]), reverse=True):
        tag = "cu" + r["cuda"].replace(".", "")
        options.append(GpuOption("torch", f"{public}+{tag}", f"torch=={public}",
                                 f"https://download.pytorch.org/whl/{tag}"))
    return options


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
    beyond_table="other torch releases by a +cuXYZ or +cpu tag, e.g. torch==1.9.0+cu111",
    gpu_options=_gpu_options,
)
