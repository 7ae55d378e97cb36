"""GRES consistency: the node's GPUs as Slurm has them (its ``Gres=`` in slurm.conf, its
gres.conf lines) against the GPUs NVML sees (count, model, minor numbers) and their device
files; and the gres.conf lines that match what NVML sees (``--write``).

A Slurm type matches a GPU's model when the type's words appear, in order, among the model's
(``a100`` and ``nvidia_a100-sxm4-80gb`` match ``NVIDIA A100-SXM4-80GB``; ``a10`` does not). A
``File`` is the GPU of its minor number (``/dev/nvidia3`` is minor 3, as the NVIDIA driver
names its device files) and must be a character device. Each difference is a not-ready
``Problem`` (id ``gres-...``), whose text says what Slurm says and what NVML sees.
``--write`` keeps a configured type that matches a model, else names the type as Slurm's
``AutoDetect=nvml`` does (the model in lower case, spaces made ``_``).
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import UsageError
from .gresconf import Gres, GresConf, parse_gres
from .names import fold
from .reasons import Problem

if TYPE_CHECKING:
    from ..host.level1 import HealthReport

FIX = "see `envcheck slurm gres`"  # what a drain reason says to do; the command says the rest


@dataclass(frozen=True)
class SeenGpu:
    """A GPU as NVML sees it."""
    index: int
    name: str | None
    uuid: str | None
    minor: int

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "uuid": self.uuid, "minor": self.minor}


def seen_gpus(report: HealthReport) -> list[SeenGpu]:
    """The GPUs of a level-1 read, each with its minor number (its NVML index where NVML
    could not read the minor)."""
    out = []
    for gpu in report.gpus:
        minor = gpu.readings.get("minor_number")
        out.append(SeenGpu(gpu.index, gpu.name, gpu.uuid, minor if isinstance(minor, int) else gpu.index))
    return out


def _words(text: str) -> list[str]:
    return "".join(c.lower() if c.isalnum() else " " for c in text).split()


def type_matches(gres_type: str, model: str | None) -> bool:
    """Do the words of ``gres_type`` appear in order among ``model``'s? (module docstring)"""
    if not model:
        return False
    wanted, have = _words(gres_type), iter(_words(model))
    return bool(wanted) and all(word in have for word in wanted)


def minor_of(path: str) -> int | None:
    """``/dev/nvidia3`` -> 3; None for a file that is not an NVIDIA GPU's device file."""
    name = os.path.basename(path)
    digits = name[6:]
    return int(digits) if name.startswith("nvidia") and digits.isascii() and digits.isdigit() else None


def device_problem(path: str) -> str | None:
    """None when ``path`` is a character device; else what it is."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return "missing" if not os.path.lexists(path) else f"can't be read: {exc.strerror or exc}"
    return None if stat.S_ISCHR(mode) else "not a character device"


@dataclass
class GresCheck:
    node: str
    slurm: list[Gres]
    conf: GresConf
    gpus: list[SeenGpu]
    problems: list[Problem] = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return not self.problems

    @property
    def slurm_count(self) -> int:
        return sum(g.count for g in self.slurm if g.name == "gpu")

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "consistent": self.consistent,
                "slurm": {"gres": [g.spelt() for g in self.slurm], "gpus": self.slurm_count,
                          "gres_conf": self.conf.path, "autodetect": self.conf.autodetect(self.node),
                          "lines": [line.to_json() for line in self.conf.for_node(self.node)]},
                "nvml": [g.to_json() for g in self.gpus],
                "problems": [p.to_json() for p in self.problems]}


def compare(node: str, gres_text: str, conf: GresConf, gpus: list[SeenGpu]) -> GresCheck:
    """Compare Slurm's GPUs of ``node`` with NVML's (see the module docstring)."""
    found = GresCheck(node, parse_gres(gres_text), conf, gpus)
    found.problems = _count(found) + _types(found) + _files(found)
    return found


def _problem(pid: str, text: str) -> Problem:
    return Problem(pid, f"{text}; {FIX}", None, "not-ready", text)


def _spelt(found: GresCheck) -> str:
    return ",".join(g.spelt() for g in found.slurm if g.name == "gpu") or "no gpu"


def _count(found: GresCheck) -> list[Problem]:
    want, have = found.slurm_count, len(found.gpus)
    if want == have:
        return []
    models = ", ".join(sorted({g.name or "unknown" for g in found.gpus}))
    text = f"slurm says {_spelt(found)}, NVML sees {have}" + (f" ({models})" if models else "")
    files = found.conf.files_of(found.node)
    minors = {g.minor for g in found.gpus}
    if want > have:
        gone = [f for f in files if minor_of(f) is not None and minor_of(f) not in minors]
        text += f": no GPU for {', '.join(gone)} (gres.conf)" if gone else ": GPU(s) missing"
    else:
        listed = {minor_of(f) for f in files}
        extra = [g for g in found.gpus if files and g.minor not in listed] or found.gpus[want:]
        text += ": not in Slurm: " + ", ".join(f"{g.uuid or f'GPU {g.index}'} (minor {g.minor})" for g in extra)
    return [_problem("gres-count", text)]


def _types(found: GresCheck) -> list[Problem]:
    """Each type Slurm names that too few GPUs match (when the count agrees: else the count
    said it, models included)."""
    out = []
    if found.slurm_count != len(found.gpus):
        return out
    for gres in found.slurm:
        if gres.name != "gpu" or not gres.type:
            continue
        matching = [g for g in found.gpus if type_matches(gres.type, g.name)]
        if len(matching) < gres.count:
            models = sorted({g.name or "unknown" for g in found.gpus}) or ["none"]
            out.append(_problem("gres-type", f"slurm says {gres.spelt()}, NVML sees {len(matching)} of that "
                                             f"type among {len(found.gpus)} ({', '.join(models)})"))
    return out


def _files(found: GresCheck) -> list[Problem]:
    out = []
    by_minor = {g.minor: g for g in found.gpus}
    listed = set()
    for line in found.conf.for_node(found.node):
        for path in line.files:
            minor = minor_of(path)
            listed.add(minor)
            wrong = device_problem(path)
            if wrong is not None:
                out.append(_problem("gres-device-file", f"gres.conf {line.where}: File={path} is {wrong}"))
            if minor is None:
                continue
            gpu = by_minor.get(minor)
            if gpu is None and found.slurm_count <= len(found.gpus):  # else the count names it
                out.append(_problem("gres-file-no-gpu", f"gres.conf {line.where}: File={path}, but NVML has no GPU "
                                                        f"of minor {minor}"))
            elif gpu is not None and line.type and not type_matches(line.type, gpu.name):
                out.append(_problem("gres-file-type", f"gres.conf {line.where}: File={path} Type={line.type}, but "
                                                      f"NVML sees {gpu.name} there ({gpu.uuid})"))
    if listed and found.slurm_count == len(found.gpus):
        for gpu in found.gpus:
            if gpu.minor not in listed:
                out.append(_problem("gres-gpu-unlisted", f"NVML sees {gpu.uuid or f'GPU {gpu.index}'} (minor "
                                                         f"{gpu.minor}), gres.conf lists no File for it"))
    return out


def lines(found: GresCheck, dev_dir: str = "/dev") -> list[str]:
    """gres.conf lines (and slurm.conf's ``Gres=``, as a comment) for the GPUs NVML sees."""
    configured = [g.type for g in found.slurm if g.name == "gpu" and g.type]
    configured += [line.type for line in found.conf.for_node(found.node) if line.type]
    groups: dict[str, list[SeenGpu]] = {}
    for gpu in sorted(found.gpus, key=lambda g: g.minor):
        name = next((t for t in configured if type_matches(t, gpu.name)), None) or _autodetect_type(gpu.name)
        groups.setdefault(name, []).append(gpu)
    out = [f"# envcheck slurm gres --write: the {len(found.gpus)} GPU(s) NVML sees on {found.node}"]
    for name, gpus in groups.items():
        files = fold(os.path.join(dev_dir, f"nvidia{g.minor}") for g in gpus)
        out.append(f"NodeName={found.node} Name=gpu Type={name} File={files}")
    gres = ",".join(f"gpu:{name}:{len(gpus)}" for name, gpus in groups.items())
    out.append(f"# slurm.conf: NodeName={found.node} ... Gres={gres or 'gpu:0'}")
    return out


def _autodetect_type(model: str | None) -> str:
    return "_".join((model or "unknown").lower().split())


def job_gpus(environ: Mapping[str, str], conf: GresConf, node: str,
             gpus: list[SeenGpu]) -> tuple[list[int], list[Problem], str]:
    """(the NVML indices of the job's GPUs, a problem per job GPU NVML doesn't see, where they
    came from). ``SLURM_JOB_GPUS`` first (Slurm's GPU indices: the Nth device file of the
    node's gres.conf lines, else minor N), else ``CUDA_VISIBLE_DEVICES`` as slurmd set it (the
    same indices, or UUIDs); neither: the job has no GPU."""
    source = "SLURM_JOB_GPUS" if environ.get("SLURM_JOB_GPUS") else "CUDA_VISIBLE_DEVICES"
    text = (environ.get(source) or "").strip()
    if not text or text == "NoDevFiles":
        return [], [], "the job has no GPU"
    files, by_minor = conf.files_of(node), {g.minor: g for g in gpus}
    by_uuid = {g.uuid: g for g in gpus if g.uuid}
    found, missing = [], []
    for item in (part.strip() for part in text.split(",")):
        if item.startswith(("GPU-", "MIG-")):
            gpu, named = by_uuid.get(item), item
        elif item.isascii() and item.isdigit():
            number = int(item)
            path = files[number] if number < len(files) else None
            minor = minor_of(path) if path else number
            gpu, named = by_minor.get(minor), f"{item} ({path or f'minor {minor}'})"
        else:
            raise UsageError(f"{source}={text[:80]!r}: {item[:40]!r} is not a GPU index or UUID",
                             "run this as slurm.conf's Prolog or Epilog: slurmd sets it")
        if gpu is None:
            missing.append(Problem("job-gpu-missing", f"the job's GPU {named} is not one NVML sees: "
                                   "check the GPU (`nvidia-smi`) and gres.conf", None, "not-ready",
                                   f"{source} GPU {named}: NVML has no such GPU"))
        elif gpu.index not in found:
            found.append(gpu.index)
    return found, missing, source
