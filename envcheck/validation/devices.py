"""Devices as users name them, typed once: parsed at the edge, resolved once against the host.

One grammar for ``validate --devices`` and ``run --gpus``: a word alone (``all``, ``none``,
``cpu``, ``gpu``) or a list of devices, each ``cpu:N``, ``gpu:N``, a bare ``N`` (the GPU of
that NVML index) or a GPU's whole UUID (``GPU-…``, as ``nvidia-smi -L`` and ``envcheck gpu
--json`` show it). Each option allows its part of it (a :class:`Grammar`): ``parse`` checks
the syntax before any work, ``resolve`` ties each GPU to this host's, so a :class:`Device`
carries its NVML index (as ``nvidia-smi`` and ``envcheck gpu`` number it), the index the
framework sees (CUDA's, under ``CUDA_VISIBLE_DEVICES``; envcheck starts the framework with
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, the order NVML numbers GPUs in) and its UUID.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Union

from ..errors import UsageError

if TYPE_CHECKING:
    from ..host.probe import Gpu, HostState

# Device numbers are ASCII digits ('²' and a full-width '１' are no GPU's number), nine at most
# (no GPU has a longer one, and int() of thousands of digits is an error of its own)
_NUMBERED = re.compile(r"(?:(cpu|gpu):)?([0-9]{1,9})")
_UUID = re.compile(r"gpu-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
WORDS = ("all", "none", "cpu", "gpu")


@dataclass(frozen=True)
class Device:
    kind: str  # "cpu" | "gpu"
    index: int | None  # as users number it: a GPU's NVML index, a logical CPU's number; None: by UUID, unresolved
    framework_index: int | None = None  # the number the framework knows it by (a GPU: CUDA's); None: unresolved
    uuid: str | None = None  # a GPU's

    @property
    def nvml_index(self) -> int | None:
        return self.index if self.kind == "gpu" else None

    @property
    def resolved(self) -> bool:
        return self.framework_index is not None

    @property
    def runner_name(self) -> str:
        """The name the smoke runner (the framework's numbering) knows it by."""
        return f"{self.kind}:{self.framework_index}"

    def __str__(self) -> str:
        return f"{self.kind}:{self.index}" if self.index is not None else str(self.uuid)


@dataclass(frozen=True)
class Grammar:
    """What one option allows of the grammar, and how its messages name a GPU."""

    noun: str  # "device list" | "GPU list"
    words: tuple[str, ...]  # the words allowed alone
    kinds: tuple[str, ...]  # the kinds a list may name
    gpu_name: str  # how a GPU of NVML index N is named in messages
    fix: str

    def name(self, device: Device) -> str:
        return self.gpu_name.format(device.index) if device.index is not None else str(device.uuid)


DEVICES = Grammar("device list", ("all", "cpu", "gpu"), ("cpu", "gpu"), "gpu:{}",
                  "use all, cpu, gpu, or a list like cpu:0,cpu:1 or gpu:0,gpu:2 (GPU numbers as "
                  "`envcheck gpu` shows them, or a GPU's UUID GPU-...)")
GPUS = Grammar("GPU list", ("all", "none"), ("gpu",), "{}",
               "use all, none, or GPUs by NVML index like 0,2 (or gpu:0, or a GPU's UUID GPU-...; "
               "see `envcheck gpu`)")


@dataclass(frozen=True)
class Selection:
    """What an option asked for: a word of the grammar, or devices in the order given."""

    word: str | None = None  # all | none | cpu | gpu
    devices: tuple[Device, ...] = ()
    text: str = field(default="", compare=False)  # as the user gave it
    grammar: Grammar = field(default=DEVICES, compare=False, repr=False)


DeviceSpec = Union[Selection, str]  # what validation takes: a Selection, or its text to parse


def parse(spec: str, grammar: Grammar = DEVICES) -> Selection:
    """``spec`` in ``grammar``, or a one-line UsageError saying what it allows."""
    text = spec.strip()
    if text.lower() in WORDS:
        if text.lower() not in grammar.words:
            raise UsageError(f"bad {grammar.noun} {spec!r}: {text.lower()} is not allowed in a {grammar.noun}",
                             grammar.fix)
        return Selection(text.lower(), text=spec, grammar=grammar)
    parts = [p for p in (part.strip() for part in text.split(",")) if p]
    if not parts:
        raise UsageError(f"bad {grammar.noun} {spec!r}", grammar.fix)
    devices = tuple(dict.fromkeys(_parse_one(p, spec, grammar) for p in parts))
    return Selection(None, devices, spec, grammar)


def _parse_one(token: str, spec: str, grammar: Grammar) -> Device:
    lower = token.lower()
    numbered = _NUMBERED.fullmatch(lower)
    if numbered:
        kind, number = numbered[1] or "gpu", int(numbered[2])
        device = Device(kind, number, number if kind == "cpu" else None)
    elif _UUID.fullmatch(lower):
        device = Device("gpu", None, uuid="GPU-" + lower[4:])
    else:
        raise UsageError(f"bad {grammar.noun} {spec!r}", grammar.fix)
    if device.kind not in grammar.kinds:
        raise UsageError(f"bad {grammar.noun} {spec!r}: {token} is not allowed in a {grammar.noun}", grammar.fix)
    return device


def gpu_device(gpu: Gpu) -> Device:
    """The Device of a GPU of the host probe (``host.probe.Gpu``)."""
    return Device("gpu", gpu.index, gpu.cuda_index, gpu.uuid)


def usable_gpus(host: HostState) -> list[Device]:
    """Every GPU a process started from here can use."""
    return [gpu_device(g) for g in host.usable_gpus if g.cuda_index is not None]


def resolve(selection: Selection, host: HostState) -> Selection:
    """``selection`` with each GPU tied to this host's; a GPU it can't use (absent, hidden by
    CUDA_VISIBLE_DEVICES, failed) is a UsageError before any work starts."""
    if all(d.resolved for d in selection.devices):
        return selection
    devices = (d if d.resolved else _resolve_gpu(d, host, selection.grammar) for d in selection.devices)
    return replace(selection, devices=tuple(dict.fromkeys(devices)))


def _resolve_gpu(device: Device, host: HostState, grammar: Grammar) -> Device:
    if device.uuid is None:
        gpu = next((g for g in host.gpus if g.index == device.index), None)
    else:
        gpu = next((g for g in host.gpus if (g.uuid or "").lower() == device.uuid.lower()), None)
    name = grammar.name(device)
    if gpu is None:
        have = ", ".join(grammar.gpu_name.format(g.index) for g in host.gpus) or "none"
        where = "" if host.ok else f" ({host.message})"
        raise UsageError(f"unknown GPU {name}: this host's GPUs (NVML indices) are: {have}{where}",
                         "see `envcheck gpu` (GPUs are numbered as nvidia-smi numbers them)")
    if not gpu.visible:
        usable = ", ".join(grammar.gpu_name.format(g.index) for g in host.usable_gpus) or "no GPU"
        raise UsageError(f"GPU {name} is hidden by CUDA_VISIBLE_DEVICES={host.cuda_visible_devices!r} "
                         "(set by your shell or job scheduler)",
                         f"use one of {usable}, or unset CUDA_VISIBLE_DEVICES")
    if not gpu.usable or gpu.cuda_index is None:
        raise UsageError(f"GPU {name} is not usable: {gpu.problem}", gpu.fix or "run `nvidia-smi`")
    return gpu_device(gpu)
