"""Devices as users name them: ``cpu:0``, ``gpu:1`` — parsed once, at the edge.

A GPU's number is its NVML index, as ``nvidia-smi`` and ``envcheck gpu`` show it, in
``validate --devices`` as in ``run --gpus``. The smoke runner sees GPUs by CUDA's numbering;
``runner_name`` translates (envcheck starts it with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, the
order NVML numbers GPUs in).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

from ..errors import UsageError

# Device numbers are ASCII digits ('²' and a full-width '１' are no GPU's number), nine at most
# (no GPU has a longer one, and int() of thousands of digits is an error of its own)
_NUMBER = r"[0-9]{1,9}"
_DEVICE = re.compile(rf"(cpu|gpu):({_NUMBER})")
_INDEX = re.compile(_NUMBER)
GROUPS = ("all", "cpu", "gpu")
FIX = "use all, cpu, gpu, or a list like cpu:0,cpu:1 or gpu:0,gpu:2 (GPU numbers as `envcheck gpu` shows them)"


@dataclass(frozen=True, order=True)
class Device:
    kind: str  # "cpu" | "gpu"
    index: int  # for a GPU: its NVML index

    def __str__(self) -> str:
        return f"{self.kind}:{self.index}"


DeviceSpec = Union[str, tuple[Device, ...]]  # a group name of GROUPS, or explicit devices


def parse_device(text: str) -> Device:
    match = _DEVICE.fullmatch(text.strip().lower())
    if not match:
        raise UsageError(f"bad device {text!r}", FIX)
    return Device(match[1], int(match[2]))


def parse_index(text: str) -> int | None:
    """A device number as users write it (``2`` in ``gpu:2`` or ``--gpus 0,2``); None if it isn't one."""
    text = text.strip()
    return int(text) if _INDEX.fullmatch(text) else None


def parse_devices(spec: DeviceSpec) -> DeviceSpec:
    """``all`` | ``cpu`` | ``gpu`` or a list like ``cpu:0,cpu:1`` / ``gpu:0,gpu:2`` (parsed
    values pass through, so a use case may take either)."""
    if isinstance(spec, tuple):
        return spec
    text = spec.strip().lower()
    if text in GROUPS:
        return text
    parts = [p for p in (part.strip() for part in text.split(",")) if p]
    if not parts:
        raise UsageError(f"bad device list {spec!r}", FIX)
    try:
        return tuple(dict.fromkeys(parse_device(p) for p in parts))
    except UsageError:
        raise UsageError(f"bad device list {spec!r}", FIX) from None


def unknown_gpus(spec: DeviceSpec, host) -> list[Device]:
    """The GPUs named in ``spec`` that this host can't use (hidden, failed or absent)."""
    if not isinstance(spec, tuple):
        return []
    usable = {g.index for g in host.usable_gpus}
    return [d for d in spec if d.kind == "gpu" and d.index not in usable]


def check_known(spec: DeviceSpec, host) -> None:
    """A UsageError naming GPUs of ``spec`` this host can't use, before any work starts."""
    unknown = unknown_gpus(spec, host)
    if unknown:
        have = ", ".join(f"gpu:{g.index}" for g in host.usable_gpus) or "no usable GPU"
        raise UsageError(f"unknown GPU {', '.join(map(str, unknown))}: this host has {have}",
                         "see `envcheck gpu` (GPUs are numbered as nvidia-smi numbers them)")


def runner_name(device: Device, host) -> str:
    """The name the smoke runner (CUDA's numbering) knows ``device`` by."""
    if device.kind == "cpu":
        return str(device)
    gpu = next(g for g in host.gpus if g.index == device.index)
    return f"gpu:{gpu.cuda_index}"
