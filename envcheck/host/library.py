"""Can NVML load here, and the host facts a stored validation depends on.

Standard library only, so the pre-training gate's stored-pass answer (``cli/fast.py``) reads
them without importing the probe (dataclasses) or ``pynvml``; ``probe`` uses the same
functions, so both compute one thing.
"""
from __future__ import annotations

import os
import sys

SONAME = "libnvidia-ml.so.1"  # what pynvml loads on Linux


def library_loads() -> bool:
    """Can the loader find NVML at all? Asking first spares every CPU-only host the import of
    pynvml (the fast paths' largest import)."""
    if not sys.platform.startswith("linux"):
        return True
    from _ctypes import dlopen  # what ctypes.CDLL calls, without ctypes' 2 ms of Python

    try:
        dlopen(SONAME, os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError:
        return False
    return True


def host_facts(driver_version: str | None, gpu_uuids: list, cuda_visible: list) -> dict:
    """What a cached validation depends on: a change means validate again. ``cuda_visible``:
    the GPUs a CUDA process started here sees, by UUID, in the order CUDA numbers them: what
    CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER mean, not how they are spelt (``envcheck run``
    and its kernels set the PCI order, and a validation's children run with it too: that is
    not a change)."""
    return {"driver_version": driver_version, "gpu_uuids": list(gpu_uuids), "cuda_visible": list(cuda_visible)}


def facts_without_nvml(environ=None) -> dict | None:
    """The host facts without a probe where NVML can't load (the probe then reports no driver
    and no GPU); None where it loads, and only ``probe`` can tell."""
    if library_loads():
        return None
    env = os.environ if environ is None else environ
    return host_facts(None, [], [])
