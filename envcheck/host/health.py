"""GPU health, read only when asked (``probe(health=True)``, for ``doctor --markdown``): what
``nvidia-smi`` shows beside the static facts. The gate and ``envcheck gpu`` don't read it.

``GpuHealth``
    ``utilization_gpu_pct`` / ``utilization_memory_pct`` (over NVML's last sample period),
    ``temperature_c``, ``power_draw_w`` / ``power_limit_w`` (the enforced limit),
    ``ecc_uncorrected_volatile`` (since the driver loaded) / ``ecc_uncorrected_aggregate``
    (the GPU's lifetime), ``processes`` (running compute processes) and ``unavailable``
    (field -> why it is None).

As nvitop and gpustat do, a field the GPU does not support (a consumer GPU has no ECC, many
have no power sensor) or that an older driver lacks is None with its reason, never a failed
report. A process's name is the base name of its executable (no path, no arguments: a
pasted report shows no home folder or command-line secret); None when NVML can't name it
(another PID namespace, a process that has ended).
"""
from __future__ import annotations

import os
from .records import new, record

OLDER_DRIVER = "this driver's NVML lacks the function (older driver)"  # why a read is missing

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (records.py says why)
if TYPE_CHECKING:
    from typing import Any, Callable

# nvml.h enums (pynvml spells them too; named here so the bindings' version doesn't matter)
TEMPERATURE_GPU, UNCORRECTED, VOLATILE, AGGREGATE = 0, 1, 0, 1


@record
class GpuProcess:
    pid: int
    used_memory_mib: int | None
    name: str | None = None


@record
class GpuHealth:
    utilization_gpu_pct: int | None = None
    utilization_memory_pct: int | None = None
    temperature_c: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    processes: list[GpuProcess] | None = None
    unavailable: dict[str, str] = new(dict)


# Reader: read(missing, name, fn, *args): fn(*args), or None with the reason


def read_health(pynvml: Any, handle: Any, read: Callable[..., Any]) -> GpuHealth:
    """The health of the GPU ``handle``; ``read`` is the probe's field reader (GPU-fatal
    errors propagate through it, so a GPU lost mid-read is marked lost)."""
    health = GpuHealth()
    missing = health.unavailable
    util = read(missing, "utilization", pynvml.nvmlDeviceGetUtilizationRates, handle)
    if util is not None:
        health.utilization_gpu_pct, health.utilization_memory_pct = util.gpu, util.memory
    health.temperature_c = read(missing, "temperature_c", pynvml.nvmlDeviceGetTemperature,
                                handle, TEMPERATURE_GPU)
    health.power_draw_w = _watts(read(missing, "power_draw_w", pynvml.nvmlDeviceGetPowerUsage,
                                      handle))
    health.power_limit_w = _watts(read(missing, "power_limit_w",
                                       pynvml.nvmlDeviceGetEnforcedPowerLimit, handle))
    health.ecc_uncorrected_volatile = read(missing, "ecc_uncorrected_volatile",
                                           pynvml.nvmlDeviceGetTotalEccErrors, handle,
                                           UNCORRECTED, VOLATILE)
    health.ecc_uncorrected_aggregate = read(missing, "ecc_uncorrected_aggregate",
                                            pynvml.nvmlDeviceGetTotalEccErrors, handle,
                                            UNCORRECTED, AGGREGATE)
    # _v3 directly: the unversioned wrapper turns an older driver's missing function into an
    # exception that is not an NVMLError. A driver before 510 has only _v2 (the same struct).
    running = read(missing, "processes", pynvml.nvmlDeviceGetComputeRunningProcesses_v3, handle)
    if running is None and missing.get("processes") == OLDER_DRIVER:
        running = read(missing, "processes", pynvml.nvmlDeviceGetComputeRunningProcesses_v2, handle)
        if running is not None:
            del missing["processes"]
    if running is not None:
        health.processes = [_process(pynvml, p) for p in running]
    return health


def _watts(milliwatts: int | None) -> float | None:
    return None if milliwatts is None else milliwatts / 1000


def _process(pynvml: Any, info: Any) -> GpuProcess:
    used = info.usedGpuMemory  # None where the driver can't tell (WDDM)
    return GpuProcess(info.pid, None if used is None else used >> 20, _name(pynvml, info.pid))


def _name(pynvml: Any, pid: int) -> str | None:
    try:
        name = pynvml.nvmlSystemGetProcessName(pid)
    except (pynvml.NVMLError, UnicodeDecodeError):
        return None
    if isinstance(name, bytes):
        name = name.decode("utf-8", errors="replace")
    return os.path.basename(name.strip()) or None
