"""Which GPUs a CUDA process started here sees, and by which number: CUDA_VISIBLE_DEVICES
and CUDA_DEVICE_ORDER read as CUDA reads them."""
from __future__ import annotations

from ..child_env import PCI_ORDER

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (records.py says why)
if TYPE_CHECKING:
    from typing import Callable

    from .probe import Gpu


def mark_visible(gpus: list[Gpu], cvd: str | None) -> list[str]:
    """Set ``visible``/``cuda_index`` as CUDA reads CUDA_VISIBLE_DEVICES; return warnings.

    CUDA's rule: entries are indices or UUID prefixes (GPU-..., MIG-...); at the first entry
    that names no GPU, it and every entry after it are ignored.
    """
    if cvd is None:
        for position, gpu in enumerate(gpus):
            gpu.visible, gpu.cuda_index = True, position
        return []
    for gpu in gpus:
        gpu.visible, gpu.cuda_index = False, None
    warnings = []
    entries = [e.strip() for e in cvd.split(",")] if cvd.strip() else []
    for position, entry in enumerate(entries):
        gpu = _match_entry(gpus, entry)
        if gpu is None:
            ignored = ",".join(entries[position:])
            warnings.append(f"CUDA_VISIBLE_DEVICES={cvd!r}: {entry!r} names no GPU on this "
                            f"host, so CUDA ignores {ignored!r}")
            break
        if gpu.visible:
            warnings.append(f"CUDA_VISIBLE_DEVICES={cvd!r} lists GPU {gpu.index} twice")
            continue
        gpu.visible, gpu.cuda_index = True, sum(g.visible for g in gpus)
    return warnings


def _match_entry(gpus: list[Gpu], entry: str) -> Gpu | None:
    if entry.isdigit():
        index = int(entry)
        return gpus[index] if index < len(gpus) else None
    if entry.startswith("MIG-GPU-"):  # old form MIG-GPU-<gpu uuid>/<gi>/<ci>
        return _unique(gpus, lambda g: (g.uuid or "").startswith(entry[4:].split("/")[0]))
    if entry.startswith("MIG-"):
        return _unique(gpus, lambda g: any(m.startswith(entry) for m in g.mig_devices))
    if entry.startswith("GPU-"):
        return _unique(gpus, lambda g: (g.uuid or "").startswith(entry))
    return None


def _unique(gpus: list[Gpu], test: Callable[[Gpu], bool]) -> Gpu | None:
    found = [g for g in gpus if test(g)]
    return found[0] if len(found) == 1 else None


def order_warnings(gpus: list[Gpu], order: str | None, cvd: str | None) -> list[str]:
    """Mixed GPU models: CUDA's default order (fastest first) is not NVML's (PCI bus)."""
    models = sorted({g.name for g in gpus if g.name})
    if len(models) < 2 or order == PCI_ORDER:
        return []
    text = (f"GPUs of different models ({', '.join(models)}) and CUDA_DEVICE_ORDER is "
            f"{order or 'unset'}: CUDA numbers GPUs fastest first, nvidia-smi and this report "
            "by PCI bus id, so cuda:N may be another GPU than index N here")
    if cvd and any(e.strip().isdigit() for e in cvd.split(",")):
        text += "; CUDA_VISIBLE_DEVICES indices follow CUDA's order too"
    return [text + f"; fix: export CUDA_DEVICE_ORDER={PCI_ORDER}"]
