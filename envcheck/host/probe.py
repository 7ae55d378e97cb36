"""Host facts from NVML (module ``pynvml`` of the ``nvidia-ml-py`` package).

Stable API (compat, validate, select and the pre-training gate build on it):

``probe(environ=None, *, health=False, during=None) -> HostState``
    Read the host now. Never raises for NVML trouble: every NVML failure becomes a typed,
    explained state. ``environ`` (default ``os.environ``) supplies ``CUDA_VISIBLE_DEVICES``
    and ``CUDA_DEVICE_ORDER``. ``health``: also read each GPU's ``Gpu.health`` (``health.py``),
    in the same NVML session; ``during``: more reads in that session (level-1 health,
    ``level1.py``). ``mark_failed(gpu, exc)`` marks a GPU an NVML error stopped.
``host_fingerprint(state) -> dict``
    Driver version, GPU UUIDs and the CUDA variables: what must not change between a
    validation and a training run.
``HostState``
    ``nvml_status`` (one of ``NVML_STATUSES``), ``message``, ``fix``, ``driver_version``,
    ``cuda_driver_version`` (the newest CUDA the driver runs, "12.4"), ``nvml_version``,
    ``gpus``, ``warnings``; ``.ok``, ``.visible_gpus``, ``.usable_gpus``,
    ``.no_gpu_reason()``, ``.envelope()``, ``.to_json()`` (``envcheck.host/1``).
``Gpu``
    ``index`` (NVML's, = nvidia-smi's), ``name``, ``uuid``, ``memory_total_mib``,
    ``memory_free_mib``, ``memory_used_mib``, ``compute_capability`` ("8.0"),
    ``pci_bus_id``, ``mig_mode`` / ``persistence_mode`` ("enabled" | "disabled"),
    ``mig_devices`` (MIG instance UUIDs), ``status`` (one of ``GPU_STATUSES``), ``problem``,
    ``fix``, ``unavailable`` (field name, or "memory" for the three memory fields -> why it
    is None), ``visible`` and ``cuda_index`` (the number a CUDA process started with this
    environment gives the GPU), ``health`` (``health.GpuHealth``; None, and absent from the
    JSON, unless asked for).

A value NVML can't give (not supported on this GPU, function absent from an older driver) is
None with its reason in ``Gpu.unavailable``; a failing GPU (lost, needs a reset) gets its own
status and the rest of the report stands. ``pynvml`` is imported inside ``probe()``, so
importing this module costs nothing; ``probe(nvml=...)`` reads through other bindings of the
same names instead (``nvml_direct``, the gate's fast path). No ``dataclasses`` or ``typing``
(``records.py``): the gate's fast path imports this module.
"""
from __future__ import annotations

import os
from functools import partial

from ..results import HOST_SCHEMA, Result, envelope, node
from .library import host_facts, library_loads
from .records import as_dict, new, record
from .visibility import mark_visible, order_warnings

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see above)
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

    from .health import GpuHealth

SCHEMA = HOST_SCHEMA
NVML_STATUSES = ("ok", "no-library", "driver-not-loaded", "version-mismatch", "no-permission",
                 "gpu-lost", "no-gpu", "error")
GPU_STATUSES = ("ok", "lost", "reset-required", "no-permission", "blocked", "error")

# nvmlReturn_t codes (nvml.h) this module names.
NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND, LIBRARY_NOT_FOUND, FUNCTION_NOT_FOUND = 3, 4, 6, 12, 13
DMESG = "look for Xid errors in `sudo dmesg | grep -i xid`"

# Failure of nvmlInit or of a system-wide query: code -> (nvml_status, message, fix).
HOST_ERRORS: dict[int, tuple[str, str, str]] = {
    12: ("no-library", "the NVIDIA management library libnvidia-ml.so.1 was not found: no "
         "NVIDIA driver is installed, or this container was started without GPU access",
         "install the NVIDIA driver. In a container, start it with `--gpus all` (NVIDIA "
         "Container Toolkit)"),
    9: ("driver-not-loaded", "the NVIDIA kernel driver is not loaded",
        "load it with `sudo modprobe nvidia` (reinstall the driver if that fails; after a "
        "kernel update the module may need rebuilding) and check `sudo dmesg | grep -i nvidia`"),
    18: ("version-mismatch", "driver/library version mismatch: libnvidia-ml and the loaded "
         "nvidia kernel module come from different driver versions (driver upgraded without "
         "a reboot)",
         "reboot, or reload the kernel module: `sudo rmmod nvidia_uvm nvidia_drm "
         "nvidia_modeset nvidia && sudo modprobe nvidia`"),
    4: ("no-permission", "this user has no permission to query the NVIDIA driver",
        "check the permissions of /dev/nvidia* (group video or render) or the container's "
        "device cgroup"),
    15: ("gpu-lost", "a GPU has fallen off the bus or become inaccessible",
         f"reset the GPU (`sudo nvidia-smi -r`) or reboot; {DMESG}"),
    13: ("error", "the NVML library lacks a function every driver since 2018 has: the NVIDIA "
         "driver is too old", "upgrade the NVIDIA driver"),
    999: ("error", "NVML reported an unknown internal driver error",
          f"run `nvidia-smi`; reboot if it fails too; {DMESG}"),
}

# Failure of one GPU: code -> (Gpu.status, problem, fix).
GPU_ERRORS: dict[int, tuple[str, str, str]] = {
    15: ("lost", "the GPU has fallen off the bus or become inaccessible",
         f"reset it (`sudo nvidia-smi -r -i INDEX`) or reboot; {DMESG}"),
    16: ("reset-required", "the GPU needs a reset before it can be used again",
         "reset it (`sudo nvidia-smi -r -i INDEX`) or reboot"),
    4: ("no-permission", "this user may not access this GPU",
        "check the permissions of its /dev/nvidiaN or the container's device cgroup"),
    17: ("blocked", "the operating system or a cgroup blocks access to this GPU",
         "give this process the device (container `--gpus`, cgroup device rules)"),
}
# Errors of a field read that mean the whole GPU is gone, not just that field.
GPU_FATAL = frozenset({15, 16, 17})


@record
class Gpu:
    index: int
    name: str | None = None
    uuid: str | None = None
    memory_total_mib: int | None = None
    memory_free_mib: int | None = None
    memory_used_mib: int | None = None
    compute_capability: str | None = None
    pci_bus_id: str | None = None
    mig_mode: str | None = None
    persistence_mode: str | None = None
    mig_devices: list[str] = new(list)
    status: str = "ok"
    problem: str | None = None
    fix: str | None = None
    unavailable: dict[str, str] = new(dict)
    visible: bool = True
    cuda_index: int | None = None
    health: GpuHealth | None = None

    @property
    def usable(self) -> bool:
        """A CUDA process started with this environment can use it."""
        return self.status == "ok" and self.visible


@record
class HostState(Result):
    schema = SCHEMA
    nvml_status: str
    message: str | None = None
    fix: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nvml_version: str | None = None
    gpus: list[Gpu] = new(list)
    warnings: list[str] = new(list)
    cuda_visible_devices: str | None = None
    cuda_device_order: str | None = None

    @property
    def ok(self) -> bool:
        return self.nvml_status == "ok"

    @property
    def visible_gpus(self) -> list[Gpu]:
        return [g for g in self.gpus if g.visible]

    @property
    def usable_gpus(self) -> list[Gpu]:
        """Visible GPUs that answered: what a training process here can run on."""
        return [g for g in self.gpus if g.usable]

    def no_gpu_reason(self) -> tuple[str, str] | None:
        """(message, fix) when no GPU is usable, else None."""
        if self.usable_gpus:
            return None
        if not self.ok:
            return self.message or "NVML failed", self.fix or "run `nvidia-smi`"
        if not self.visible_gpus:
            return (f"CUDA_VISIBLE_DEVICES={self.cuda_visible_devices!r} hides every GPU",
                    "unset CUDA_VISIBLE_DEVICES or list GPUs shown by `envcheck gpu`")
        failed = self.visible_gpus[0]
        return (f"no visible GPU answers: GPU {failed.index}: {failed.problem}",
                failed.fix or "run `nvidia-smi`")

    @property
    def exit_code(self) -> int:
        """`envcheck gpu`: 0 with a usable GPU, 1 without."""
        return 0 if self.usable_gpus else 1

    def envelope(self) -> dict:
        """Ready with a usable GPU; else not-ready, with ``no_gpu_reason()``. The node: these
        facts, no health."""
        reason = self.no_gpu_reason()
        facts = node(self.facts())
        return envelope("not-ready", *reason, node_facts=facts) if reason else envelope("ready", node_facts=facts)

    def body(self) -> dict[str, Any]:
        return {
            "nvml": {"status": self.nvml_status, "message": self.message, "fix": self.fix},
            "driver_version": self.driver_version,
            "cuda_driver_version": self.cuda_driver_version,
            "nvml_version": self.nvml_version,
            "cuda_visible_devices": self.cuda_visible_devices,
            "cuda_device_order": self.cuda_device_order,
            "gpus": [_gpu_json(g) for g in self.gpus],
            "warnings": list(self.warnings),
        }


def _gpu_json(gpu: Gpu) -> dict[str, Any]:
    """The GPU's fields; ``health`` only where it was read (``probe(health=True)``), so the
    commands that don't read it keep their documents as they were."""
    data = as_dict(gpu)
    if gpu.health is None:
        del data["health"]
    return data


def host_fingerprint(state: HostState) -> dict[str, Any]:
    """What a cached validation depends on: a change means validate again."""
    seen = sorted((g for g in state.gpus if g.visible and g.cuda_index is not None), key=lambda g: g.cuda_index)
    return host_facts(state.driver_version, [g.uuid for g in state.gpus], [g.uuid for g in seen])


def decode_cuda_version(value: int) -> str:
    """NVML's CUDA int (1000*major + 10*minor) as "major.minor": 12020 -> "12.2"."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def explain_host_error(code: int, text: str) -> tuple[str, str, str]:
    """(nvml_status, message, fix) for an NVML error code at init or in a system query."""
    if code in HOST_ERRORS:
        return HOST_ERRORS[code]
    return ("error", f"NVML failed: {text} (NVML error {code})",
            "run `nvidia-smi` to see whether the driver answers; reinstall the driver if not")


def probe(environ: Mapping[str, str] | None = None, *, health: bool = False,
          during: Callable[[Any, HostState, Callable], None] | None = None,
          nvml: Any = None) -> HostState:
    """Read driver, CUDA and GPU facts through NVML; see the module docstring. ``during``
    (level-1 health, ``level1.py``) reads more in the same NVML session, after the GPUs were
    read: ``during(pynvml, state, read)``, ``read`` being the field reader GPUs are read with;
    when it returns True it keeps the session open and shuts NVML down itself (level 1
    watching a validation's run). ``nvml``: the bindings (default ``pynvml``; ``nvml_direct`` answers the same names)."""
    env = os.environ if environ is None else environ
    cvd, order = env.get("CUDA_VISIBLE_DEVICES"), env.get("CUDA_DEVICE_ORDER")
    if not library_loads():
        status, message, fix = explain_host_error(LIBRARY_NOT_FOUND, "NVML Shared Library Not Found")
        return HostState(status, message, fix, cuda_visible_devices=cvd, cuda_device_order=order)
    if nvml is None:
        import pynvml as nvml
    pynvml = nvml
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return _failed(exc, cvd, order)
    kept = False
    try:
        state = _read_host(pynvml, cvd, order, health)
        if during is not None and state.ok:
            kept = bool(during(pynvml, state, partial(_field, pynvml)))
    finally:
        if not kept:
            _shutdown(pynvml)
    if state.ok:
        state.warnings += mark_visible(state.gpus, cvd) + order_warnings(state.gpus, order, cvd)
    return state


def _failed(exc: Any, cvd: str | None, order: str | None) -> HostState:
    status, message, fix = explain_host_error(exc.value, str(exc))
    return HostState(status, message, fix, cuda_visible_devices=cvd, cuda_device_order=order)


def _shutdown(pynvml: Any) -> None:
    try:
        pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        pass  # the report is already read; a failing shutdown changes nothing in it


def _read_host(pynvml: Any, cvd: str | None, order: str | None, health: bool) -> HostState:
    state = HostState("ok", cuda_visible_devices=cvd, cuda_device_order=order)
    missing: dict[str, str] = {}
    state.driver_version = _field(pynvml, missing, "driver_version",
                                  pynvml.nvmlSystemGetDriverVersion)
    state.nvml_version = _field(pynvml, missing, "nvml_version",
                                pynvml.nvmlSystemGetNVMLVersion)
    cuda = _cuda_driver_version(pynvml, missing)
    state.cuda_driver_version = decode_cuda_version(cuda) if cuda else None
    state.warnings += [f"{name} is N/A: {why}" for name, why in missing.items()]
    try:
        count = pynvml.nvmlDeviceGetCount()
    except pynvml.NVMLError as exc:
        status, state.message, state.fix = explain_host_error(exc.value, str(exc))
        state.nvml_status = status
        return state
    state.gpus = [_read_gpu(pynvml, i, health) for i in range(count)]
    if not state.gpus:
        state.nvml_status = "no-gpu"
        state.message = "the NVIDIA driver answers but reports no GPU"
        state.fix = ("check that the GPU is seated and powered (`lspci | grep -i nvidia`) and "
                     "that this container or VM was given it")
    return state


def _cuda_driver_version(pynvml: Any, missing: dict[str, str]) -> int | None:
    """_v2 asks libcuda; v1 (older drivers, or no libcuda) answers from the driver itself."""
    return (_field(pynvml, {}, "cuda_driver_version", pynvml.nvmlSystemGetCudaDriverVersion_v2)
            or _field(pynvml, missing, "cuda_driver_version",
                      pynvml.nvmlSystemGetCudaDriverVersion))


def _field(pynvml: Any, missing: dict[str, str], name: str, fn: Callable, *args: Any) -> Any:
    """fn(*args), or None with the reason in ``missing``. GPU-fatal errors propagate."""
    try:
        return _decoded(fn, *args)
    except pynvml.NVMLError as exc:
        if exc.value in GPU_FATAL and args:
            raise
        missing[name] = _why_missing(exc.value, str(exc))
        return None


def _why_missing(code: int, text: str) -> str:
    from .health import OLDER_DRIVER

    known = {NOT_SUPPORTED: "not supported on this GPU", FUNCTION_NOT_FOUND: OLDER_DRIVER, NO_PERMISSION: "no permission"}
    return known.get(code) or f"NVML error {code}: {text}"


def _read_gpu(pynvml: Any, index: int, health: bool) -> Gpu:
    gpu = Gpu(index)
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        _fill_gpu(pynvml, gpu, handle)
        if health:
            from .health import read_health

            gpu.health = read_health(pynvml, handle, partial(_field, pynvml))
    except pynvml.NVMLError as exc:
        mark_failed(gpu, exc)
    return gpu


def mark_failed(gpu: Gpu, exc: Any) -> None:
    """The GPU's status, problem and fix from the NVML error that stopped reading it."""
    gpu.status, gpu.problem, gpu.fix = GPU_ERRORS.get(
        exc.value, ("error", f"NVML error {exc.value}: {exc}",
                    f"run `nvidia-smi -i {gpu.index}`; reboot if it fails too"))
    gpu.fix = gpu.fix.replace("INDEX", str(gpu.index))


def _fill_gpu(pynvml: Any, gpu: Gpu, handle: Any) -> None:
    missing = gpu.unavailable
    gpu.name = _field(pynvml, missing, "name", pynvml.nvmlDeviceGetName, handle)
    gpu.uuid = _field(pynvml, missing, "uuid", pynvml.nvmlDeviceGetUUID, handle)
    memory = _field(pynvml, missing, "memory", pynvml.nvmlDeviceGetMemoryInfo, handle)
    if memory is not None:
        gpu.memory_total_mib = memory.total >> 20
        gpu.memory_free_mib = memory.free >> 20
        gpu.memory_used_mib = memory.used >> 20
    cc = _field(pynvml, missing, "compute_capability",
                pynvml.nvmlDeviceGetCudaComputeCapability, handle)
    gpu.compute_capability = f"{cc[0]}.{cc[1]}" if cc else None
    pci = _field(pynvml, missing, "pci_bus_id", pynvml.nvmlDeviceGetPciInfo, handle)
    gpu.pci_bus_id = _text(pci.busId) if pci is not None else None
    mig = _field(pynvml, missing, "mig_mode", pynvml.nvmlDeviceGetMigMode, handle)
    gpu.mig_mode = _enabled(mig[0]) if mig else None
    persistence = _field(pynvml, missing, "persistence_mode",
                         pynvml.nvmlDeviceGetPersistenceMode, handle)
    gpu.persistence_mode = _enabled(persistence)
    if gpu.mig_mode == "enabled":
        gpu.mig_devices = _mig_devices(pynvml, missing, handle)


def _text(value: Any) -> Any:
    """Older bindings give strings as bytes, newer ones decode them; bytes NVML gives need
    not be UTF-8, so they are decoded with replacement (U+FFFD), never raising."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


def _decoded(fn: Callable, *args: Any) -> Any:
    """fn(*args) with any text in it decoded safely: pynvml decodes strictly, and its
    UnicodeDecodeError carries the bytes it could not decode."""
    try:
        return _text(fn(*args))
    except UnicodeDecodeError as exc:
        return _text(bytes(exc.object))


def _enabled(value: int | None) -> str | None:
    return None if value is None else ("enabled" if value else "disabled")


def _mig_devices(pynvml: Any, missing: dict[str, str], handle: Any) -> list[str]:
    """UUIDs of the MIG instances on a GPU in MIG mode (empty slots are skipped)."""
    count = _field(pynvml, missing, "mig_devices", pynvml.nvmlDeviceGetMaxMigDeviceCount,
                   handle) or 0
    uuids = []
    for slot in range(count):
        try:
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            uuids.append(_decoded(pynvml.nvmlDeviceGetUUID, mig))
        except pynvml.NVMLError as exc:
            if exc.value != NOT_FOUND:
                missing["mig_devices"] = _why_missing(exc.value, str(exc))
    return uuids
