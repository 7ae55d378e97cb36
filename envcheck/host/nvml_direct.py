"""NVML through ``ctypes`` directly: the few functions level 1 and the probe call, under
``pynvml``'s names and with its answers, for the pre-training gate's fast path.

Importing ``pynvml`` costs about 14 ms (it defines every structure and function of NVML); the
gate re-reads level 1 on every call that needs a GPU, so its fast path (``cli/fast.py``) calls
``level1(nvml=nvml_direct)`` and the probe, ``level1_reads`` and ``health`` read through this
module instead: the same code, the same findings (tests/test_nvml_direct.py holds both paths
equal on every fault of the fault table). Everything else uses ``pynvml``.

What matches ``pynvml``: the symbols loaded (``nvmlInitWithFlags``, ``..._v2`` handle and
count, ``nvmlDeviceGetPciInfo_v3``, ``nvmlDeviceGetComputeRunningProcesses_v3``,
``nvmlEventSetWait_v2``), ``NVMLError(code)`` with ``.value`` and ``nvmlErrorString`` as its
text, FUNCTION_NOT_FOUND (13) for a symbol an older driver lacks, and the answers' shapes
(``.total``/``.free``/``.used``, ``.busId``, ``.gpu``/``.memory``, ``.pid``/
``.usedGpuMemory`` (None where not available), events' ``.device``/``.eventType``/
``.eventData``). Text comes back as bytes, which the probe decodes with replacement, as it
does pynvml's undecodable text.
"""
from __future__ import annotations

from ctypes import (CDLL, Structure, byref, c_char, c_char_p, c_int, c_uint,
                    c_ulonglong, c_void_p, create_string_buffer)

SONAME = "libnvidia-ml.so.1"
UNINITIALIZED, INSUFFICIENT_SIZE, LIBRARY_NOT_FOUND, FUNCTION_NOT_FOUND = 1, 7, 12, 13
NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF  # NVML_VALUE_NOT_AVAILABLE_ulonglong
TEXT = 96  # NVML's largest buffer for names, UUIDs and versions is 96 bytes

_lib = None
_functions: dict = {}


class NVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        try:
            return nvmlErrorString(self.value).decode("utf-8", errors="replace")
        except NVMLError:
            return f"NVML Error with code {self.value}"


class _Memory(Structure):
    _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]


class _Pci(Structure):
    _fields_ = [("busIdLegacy", c_char * 16), ("domain", c_uint), ("bus", c_uint),
                ("device", c_uint), ("pciDeviceId", c_uint), ("pciSubSystemId", c_uint),
                ("busId", c_char * 32)]


class _Utilization(Structure):
    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


class _Process(Structure):
    _fields_ = [("pid", c_uint), ("usedGpuMemory", c_ulonglong), ("gpuInstanceId", c_uint),
                ("computeInstanceId", c_uint)]


class _Event(Structure):
    _fields_ = [("device", c_void_p), ("eventType", c_ulonglong), ("eventData", c_ulonglong),
                ("gpuInstanceId", c_uint), ("computeInstanceId", c_uint)]


class _Answer:
    """An answer's fields as plain attributes (pynvml's "friendly object")."""

    def __init__(self, **values):
        self.__dict__.update(values)


def _fn(name: str):
    try:
        return _functions[name]
    except KeyError:
        pass
    if _lib is None:
        raise NVMLError(UNINITIALIZED)
    try:
        fn = getattr(_lib, name)
    except AttributeError:
        raise NVMLError(FUNCTION_NOT_FOUND) from None
    _functions[name] = fn
    return fn


def _call(name: str, *args) -> None:
    code = _fn(name)(*args)
    if code:
        raise NVMLError(code)


def _out(name: str, handle, kind=c_uint, *before) -> int:
    """fn(handle, *before, &value) -> value."""
    value = kind()
    _call(name, handle, *before, byref(value))
    return value.value


def _text(name: str, *before) -> bytes:
    buffer = create_string_buffer(TEXT)
    _call(name, *before, buffer, c_uint(TEXT))
    return buffer.value


# -- the library and the system ---------------------------------------------------------------

def nvmlInit() -> None:
    global _lib
    if _lib is None:
        try:
            _lib = CDLL(SONAME)
        except OSError:
            raise NVMLError(LIBRARY_NOT_FOUND) from None
        _fn("nvmlErrorString").restype = c_char_p
    _call("nvmlInitWithFlags", c_uint(0))


def nvmlShutdown() -> None:
    _call("nvmlShutdown")


def nvmlErrorString(code: int) -> bytes:
    return _fn("nvmlErrorString")(c_int(code))


def nvmlSystemGetDriverVersion() -> bytes:
    return _text("nvmlSystemGetDriverVersion")


def nvmlSystemGetNVMLVersion() -> bytes:
    return _text("nvmlSystemGetNVMLVersion")


def nvmlSystemGetCudaDriverVersion() -> int:
    value = c_int()
    _call("nvmlSystemGetCudaDriverVersion", byref(value))
    return value.value


def nvmlSystemGetCudaDriverVersion_v2() -> int:
    value = c_int()
    _call("nvmlSystemGetCudaDriverVersion_v2", byref(value))
    return value.value


def nvmlSystemGetProcessName(pid: int) -> bytes:
    buffer = create_string_buffer(1024)
    _call("nvmlSystemGetProcessName", c_uint(pid), buffer, c_uint(1024))
    return buffer.value


def nvmlDeviceGetCount() -> int:
    value = c_uint()
    _call("nvmlDeviceGetCount_v2", byref(value))
    return value.value


# -- one GPU -----------------------------------------------------------------------------------

def nvmlDeviceGetHandleByIndex(index: int) -> c_void_p:
    handle = c_void_p()
    _call("nvmlDeviceGetHandleByIndex_v2", c_uint(index), byref(handle))
    return handle


def nvmlDeviceGetIndex(handle) -> int:
    return _out("nvmlDeviceGetIndex", handle)


def nvmlDeviceGetName(handle) -> bytes:
    return _text("nvmlDeviceGetName", handle)


def nvmlDeviceGetUUID(handle) -> bytes:
    return _text("nvmlDeviceGetUUID", handle)


def nvmlDeviceGetMemoryInfo(handle) -> _Memory:
    memory = _Memory()
    _call("nvmlDeviceGetMemoryInfo", handle, byref(memory))
    return memory


def nvmlDeviceGetCudaComputeCapability(handle) -> tuple[int, int]:
    major, minor = c_int(), c_int()
    _call("nvmlDeviceGetCudaComputeCapability", handle, byref(major), byref(minor))
    return major.value, minor.value


def nvmlDeviceGetPciInfo(handle) -> _Pci:
    pci = _Pci()
    _call("nvmlDeviceGetPciInfo_v3", handle, byref(pci))
    return pci


def nvmlDeviceGetMigMode(handle) -> list[int]:
    current, pending = c_uint(), c_uint()
    _call("nvmlDeviceGetMigMode", handle, byref(current), byref(pending))
    return [current.value, pending.value]


def nvmlDeviceGetPersistenceMode(handle) -> int:
    return _out("nvmlDeviceGetPersistenceMode", handle)


def nvmlDeviceGetMaxMigDeviceCount(handle) -> int:
    return _out("nvmlDeviceGetMaxMigDeviceCount", handle)


def nvmlDeviceGetMigDeviceHandleByIndex(handle, index: int) -> c_void_p:
    mig = c_void_p()
    _call("nvmlDeviceGetMigDeviceHandleByIndex", handle, c_uint(index), byref(mig))
    return mig


def nvmlDeviceGetUtilizationRates(handle) -> _Utilization:
    util = _Utilization()
    _call("nvmlDeviceGetUtilizationRates", handle, byref(util))
    return util


def nvmlDeviceGetTemperature(handle, sensor: int) -> int:
    return _out("nvmlDeviceGetTemperature", handle, c_uint, c_int(sensor))


def nvmlDeviceGetTemperatureThreshold(handle, threshold: int) -> int:
    return _out("nvmlDeviceGetTemperatureThreshold", handle, c_uint, c_int(threshold))


def nvmlDeviceGetPowerUsage(handle) -> int:
    return _out("nvmlDeviceGetPowerUsage", handle)


def nvmlDeviceGetEnforcedPowerLimit(handle) -> int:
    return _out("nvmlDeviceGetEnforcedPowerLimit", handle)


def nvmlDeviceGetTotalEccErrors(handle, error_type: int, counter_type: int) -> int:
    return _out("nvmlDeviceGetTotalEccErrors", handle, c_ulonglong, c_int(error_type),
                c_int(counter_type))


def nvmlDeviceGetComputeRunningProcesses_v3(handle) -> list[_Answer]:
    return _processes("nvmlDeviceGetComputeRunningProcesses_v3", handle)


def nvmlDeviceGetComputeRunningProcesses_v2(handle) -> list[_Answer]:  # a driver before 510: the same struct
    return _processes("nvmlDeviceGetComputeRunningProcesses_v2", handle)


def _processes(name: str, handle) -> list[_Answer]:
    fn = _fn(name)
    count = c_uint(0)
    code = fn(handle, byref(count), None)
    if code == 0:
        return []
    if code != INSUFFICIENT_SIZE:
        raise NVMLError(code)
    count.value = count.value * 2 + 5  # room for processes started meanwhile, as pynvml
    procs = (_Process * count.value)()
    code = fn(handle, byref(count), procs)
    if code:
        raise NVMLError(code)
    return [_Answer(pid=p.pid, usedGpuMemory=None if p.usedGpuMemory == NOT_AVAILABLE
                    else p.usedGpuMemory, gpuInstanceId=p.gpuInstanceId,
                    computeInstanceId=p.computeInstanceId) for p in procs[:count.value]]


def nvmlDeviceGetRemappedRows(handle) -> tuple[int, int, int, int]:
    values = (c_uint(), c_uint(), c_uint(), c_uint())
    _call("nvmlDeviceGetRemappedRows", handle, *map(byref, values))
    return tuple(v.value for v in values)


def nvmlDeviceGetRetiredPagesPendingStatus(handle) -> int:
    return _out("nvmlDeviceGetRetiredPagesPendingStatus", handle, c_int)


def nvmlDeviceGetCurrPcieLinkGeneration(handle) -> int:
    return _out("nvmlDeviceGetCurrPcieLinkGeneration", handle)


def nvmlDeviceGetMaxPcieLinkGeneration(handle) -> int:
    return _out("nvmlDeviceGetMaxPcieLinkGeneration", handle)


def nvmlDeviceGetCurrPcieLinkWidth(handle) -> int:
    return _out("nvmlDeviceGetCurrPcieLinkWidth", handle)


def nvmlDeviceGetMaxPcieLinkWidth(handle) -> int:
    return _out("nvmlDeviceGetMaxPcieLinkWidth", handle)


def nvmlDeviceGetPcieReplayCounter(handle) -> int:
    return _out("nvmlDeviceGetPcieReplayCounter", handle)


def nvmlDeviceGetCurrentClocksEventReasons(handle) -> int:
    return _out("nvmlDeviceGetCurrentClocksEventReasons", handle, c_ulonglong)


def nvmlDeviceGetCurrentClocksThrottleReasons(handle) -> int:
    return _out("nvmlDeviceGetCurrentClocksThrottleReasons", handle, c_ulonglong)


def nvmlDeviceGetApplicationsClock(handle, clock_type: int) -> int:
    return _out("nvmlDeviceGetApplicationsClock", handle, c_uint, c_int(clock_type))


def nvmlDeviceGetMaxClockInfo(handle, clock_type: int) -> int:
    return _out("nvmlDeviceGetMaxClockInfo", handle, c_uint, c_int(clock_type))


def nvmlDeviceGetComputeMode(handle) -> int:
    return _out("nvmlDeviceGetComputeMode", handle, c_int)


def nvmlDeviceGetMinorNumber(handle) -> int:
    return _out("nvmlDeviceGetMinorNumber", handle)


def nvmlDeviceGetNvLinkState(handle, link: int) -> int:
    return _out("nvmlDeviceGetNvLinkState", handle, c_uint, c_uint(link))


def nvmlDeviceGetNvLinkVersion(handle, link: int) -> int:
    return _out("nvmlDeviceGetNvLinkVersion", handle, c_uint, c_uint(link))


# -- events ------------------------------------------------------------------------------------

def nvmlEventSetCreate() -> c_void_p:
    event_set = c_void_p()
    _call("nvmlEventSetCreate", byref(event_set))
    return event_set


def nvmlDeviceRegisterEvents(handle, types: int, event_set) -> None:
    _call("nvmlDeviceRegisterEvents", handle, c_ulonglong(types), event_set)


def nvmlEventSetWait_v2(event_set, timeout_ms: int) -> _Answer:
    event = _Event()
    _call("nvmlEventSetWait_v2", event_set, byref(event), c_uint(timeout_ms))
    return _Answer(device=c_void_p(event.device), eventType=event.eventType,
                   eventData=event.eventData, gpuInstanceId=event.gpuInstanceId,
                   computeInstanceId=event.computeInstanceId)


def nvmlEventSetFree(event_set) -> None:
    _call("nvmlEventSetFree", event_set)
