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


def host_facts(driver_version: str | None, gpu_uuids: list, cuda_visible_devices: str | None,
               cuda_device_order: str | None) -> dict:
    """What a cached validation depends on: a change means validate again."""
    return {"driver_version": driver_version, "gpu_uuids": list(gpu_uuids),
            "cuda_visible_devices": cuda_visible_devices, "cuda_device_order": cuda_device_order}


def facts_without_nvml(environ=None) -> dict | None:
    """The host facts without a probe where NVML can't load (the probe then reports no driver
    and no GPU); None where it loads, and only ``probe`` can tell."""
    if library_loads():
        return None
    env = os.environ if environ is None else environ
    return host_facts(None, [], env.get("CUDA_VISIBLE_DEVICES"), env.get("CUDA_DEVICE_ORDER"))
