"""Level-1 health: the NVML reads beyond the probe's (``probe.Gpu`` and ``health.GpuHealth``),
as raw values, in the probe's NVML session (``probe(during=...)``). No judgement here: that is
``findings.py``.

``GpuReads`` holds, per GPU, remapped rows, retired pages pending, the PCIe link (current and
maximum generation and width), the PCIe replay counter read twice (at the start and at the end
of the session), clock event reasons, the slowdown and shutdown temperatures, compute mode, the
minor number (``/dev/nvidia<minor>``), the NVLink links active and their version (level 3's
all-reduce expectation: ``validation.figures``), the SM and memory clocks set as applications
clocks and their maxima (a fleet compares them across nodes: ``envcheck fleet preflight``) and
the critical-Xid events NVML delivered during the session. A value NVML can't give is None with its reason in ``unavailable``, as in the probe.
"""
from __future__ import annotations

from .probe import GPU_FATAL, mark_failed
from .records import new, record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (records.py says why)
if TYPE_CHECKING:
    from typing import Any, Callable

    from .probe import HostState

    # nvml.h values, named here so the bindings' version doesn't matter.
THRESHOLD_SHUTDOWN, THRESHOLD_SLOWDOWN = 0, 1
CLOCK_SM, CLOCK_MEM = 1, 2  # nvmlClockType_t
EVENT_XID_CRITICAL = 0x8
TIMEOUT = 10  # NVML_ERROR_TIMEOUT: no event came
MAX_EVENTS = 256
MAX_NVLINKS = 36  # NVML_NVLINK_MAX_LINKS; a GPU answers INVALID_ARGUMENT past its last link


@record
class GpuReads:
    remapped_rows: dict[str, int] | None = None  # correctable, uncorrectable, pending, failure
    retired_pages_pending: bool | None = None
    pcie_gen: int | None = None
    pcie_max_gen: int | None = None
    pcie_width: int | None = None
    pcie_max_width: int | None = None
    pcie_replay_counter: int | None = None        # at the start of the session
    pcie_replay_counter_after: int | None = None  # at its end
    clock_event_reasons: int | None = None
    temperature_slowdown_c: int | None = None
    temperature_shutdown_c: int | None = None
    compute_mode: int | None = None
    minor_number: int | None = None
    nvlink_links: int | None = None               # active NVLink links; 0: none (no NVLink)
    nvlink_version: int | None = None             # nvmlNvlinkVersion_t: 4 = NVLink 3.0 (A100)
    clocks_sm_app_mhz: int | None = None          # applications clocks (nvidia-smi -ac sets them)
    clocks_mem_app_mhz: int | None = None
    clocks_sm_max_mhz: int | None = None
    clocks_mem_max_mhz: int | None = None
    xid_events: list[int] | None = None           # None: NVML events unavailable (reason below)
    unavailable: dict[str, str] = new(dict)


def read_gpu(pynvml: Any, handle: Any, read: Reader) -> GpuReads:
    """Everything but the second replay read and the events (``Level1Session``)."""
    reads = GpuReads()
    missing = reads.unavailable
    rows = read(missing, "remapped_rows", pynvml.nvmlDeviceGetRemappedRows, handle)
    if rows is not None:
        reads.remapped_rows = dict(zip(("correctable", "uncorrectable", "pending", "failure"),
                                       map(int, rows)))
    pending = read(missing, "retired_pages_pending",
                   pynvml.nvmlDeviceGetRetiredPagesPendingStatus, handle)
    reads.retired_pages_pending = None if pending is None else bool(pending)
    reads.pcie_gen = read(missing, "pcie_gen", pynvml.nvmlDeviceGetCurrPcieLinkGeneration, handle)
    reads.pcie_max_gen = read(missing, "pcie_max_gen", pynvml.nvmlDeviceGetMaxPcieLinkGeneration,
                              handle)
    reads.pcie_width = read(missing, "pcie_width", pynvml.nvmlDeviceGetCurrPcieLinkWidth, handle)
    reads.pcie_max_width = read(missing, "pcie_max_width", pynvml.nvmlDeviceGetMaxPcieLinkWidth,
                                handle)
    reads.pcie_replay_counter = read(missing, "pcie_replay_counter",
                                     pynvml.nvmlDeviceGetPcieReplayCounter, handle)
    reads.clock_event_reasons = _clock_reasons(pynvml, handle, read, missing)
    reads.temperature_slowdown_c = read(missing, "temperature_slowdown_c",
                                        pynvml.nvmlDeviceGetTemperatureThreshold, handle,
                                        THRESHOLD_SLOWDOWN)
    reads.temperature_shutdown_c = read(missing, "temperature_shutdown_c",
                                        pynvml.nvmlDeviceGetTemperatureThreshold, handle,
                                        THRESHOLD_SHUTDOWN)
    reads.compute_mode = read(missing, "compute_mode", pynvml.nvmlDeviceGetComputeMode, handle)
    reads.minor_number = read(missing, "minor_number", pynvml.nvmlDeviceGetMinorNumber, handle)
    for field, function, kind in (("clocks_sm_app_mhz", "nvmlDeviceGetApplicationsClock", CLOCK_SM),
                                  ("clocks_mem_app_mhz", "nvmlDeviceGetApplicationsClock", CLOCK_MEM),
                                  ("clocks_sm_max_mhz", "nvmlDeviceGetMaxClockInfo", CLOCK_SM),
                                  ("clocks_mem_max_mhz", "nvmlDeviceGetMaxClockInfo", CLOCK_MEM)):
        setattr(reads, field, read(missing, field, getattr(pynvml, function), handle, kind))
    _nvlink(pynvml, handle, read, reads)
    return reads


def _nvlink(pynvml: Any, handle: Any, read: Reader, reads: GpuReads) -> None:
    """The active NVLink links and the first one's version; 0 links where NVML says the GPU
    has no NVLink (NOT_SUPPORTED on link 0, as a PCIe card answers)."""
    tried: dict[str, str] = {}
    first = read(tried, "nvlink_links", pynvml.nvmlDeviceGetNvLinkState, handle, 0)
    if first is None:
        if tried.get("nvlink_links") == "not supported on this GPU":
            reads.nvlink_links = 0
        else:
            reads.unavailable.update(tried)
        return
    states = [first]
    for link in range(1, MAX_NVLINKS):
        try:
            states.append(pynvml.nvmlDeviceGetNvLinkState(handle, link))
        except pynvml.NVMLError as exc:
            if exc.value in GPU_FATAL:
                raise
            break  # past the GPU's last link
    active = [link for link, state in enumerate(states) if state]
    reads.nvlink_links = len(active)
    if active:
        reads.nvlink_version = read(reads.unavailable, "nvlink_version",
                                    pynvml.nvmlDeviceGetNvLinkVersion, handle, active[0])


def _clock_reasons(pynvml: Any, handle: Any, read: Reader, missing: dict[str, str]) -> Any:
    """The current name (drivers >= 535), else the older one it replaced."""
    newer = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if newer is not None:
        tried: dict[str, str] = {}
        value = read(tried, "clock_event_reasons", newer, handle)
        if value is not None or "lacks the function" not in tried.get("clock_event_reasons", ""):
            missing.update(tried)
            return value
    return read(missing, "clock_event_reasons", pynvml.nvmlDeviceGetCurrentClocksThrottleReasons,
                handle)


class Level1Session:
    """``probe(during=session)``: reads each answering GPU, watches NVML's critical-Xid events
    for ``window_s`` (0: only those already queued), then reads the replay counters again. A
    GPU lost meanwhile is marked as the probe marks it, and the others stand.

    ``watch=True``: the NVML session stays open after the read, its event set registered
    (``__call__`` returns True: the probe leaves the shutdown to it), so the work that follows
    (a validation's run, its smoke fit included) is watched too: ``catch_up()`` takes the
    events queued since and reads the replay counters again (a counter rising during the run
    is rising; a GPU lost meanwhile is marked lost); ``close()`` catches up one last time, frees
    the event set and shuts NVML down. NVML is initialised once either way."""

    def __init__(self, window_s: float = 0.0, watch: bool = False):
        self.window_ms = max(0, int(window_s * 1000))
        self.reads: dict[int, GpuReads] = {}
        self.watch = watch
        self._open: tuple | None = None  # (pynvml, gpus, handles, event set or None, read)

    def __call__(self, pynvml: Any, state: HostState, read: Reader) -> bool:
        gpus = {g.index: g for g in state.gpus if g.status == "ok"}
        handles = self._each(pynvml, gpus, {}, lambda i, _: self._first(pynvml, i, read))
        created: dict[str, str] = {}
        event_set = read(created, "xid_events", pynvml.nvmlEventSetCreate)
        kept = False
        if event_set is None:
            for reads in self.reads.values():
                reads.unavailable.update(created)
        else:
            try:
                self._each(pynvml, gpus, handles, lambda i, h: self._register(
                    pynvml, read, h, event_set, self.reads[i]))
                self._drain(pynvml, event_set, self.window_ms)
                kept = self.watch
            finally:
                if not kept:
                    _free(pynvml, event_set)
        self._each(pynvml, gpus, handles, lambda i, h: self._replay_again(pynvml, read, h,
                                                                          self.reads[i]))
        if self.watch:
            self._open = (pynvml, gpus, handles, event_set if kept else None, read)
        return self.watch

    @property
    def watching(self) -> bool:
        return self._open is not None

    def catch_up(self) -> None:
        """The events queued since the last look and the replay counters now (see above)."""
        if self._open is None:
            return
        pynvml, gpus, handles, event_set, read = self._open
        if event_set is not None:
            self._drain(pynvml, event_set, 0)
        self._each(pynvml, gpus, handles, lambda i, h: self._replay_again(pynvml, read, h,
                                                                          self.reads[i]))

    def close(self) -> None:
        """Catch up, then free the event set and shut NVML down (once; later calls do nothing)."""
        if self._open is None:
            return
        try:
            self.catch_up()
        finally:
            pynvml, _, _, event_set, _ = self._open
            self._open = None
            if event_set is not None:
                _free(pynvml, event_set)
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError:
                pass  # everything is read; a failing shutdown changes nothing in it

    def _each(self, pynvml: Any, gpus: dict, handles: dict[int, Any],
              step: Callable[[int, Any], Any]) -> dict[int, Any]:
        """step(index, handle) for each GPU still answering; a GPU-fatal error marks the GPU
        failed and drops it. Returns what each step returned."""
        results = {}
        for index, gpu in gpus.items():
            if gpu.status != "ok":
                continue
            try:
                results[index] = step(index, handles.get(index))
            except pynvml.NVMLError as exc:
                mark_failed(gpu, exc)
        return results

    def _first(self, pynvml: Any, index: int, read: Reader) -> Any:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.reads[index] = read_gpu(pynvml, handle, read)
        return handle

    @staticmethod
    def _register(pynvml: Any, read: Reader, handle: Any, event_set: Any, reads: GpuReads) -> None:
        read(reads.unavailable, "xid_events", pynvml.nvmlDeviceRegisterEvents, handle,
             EVENT_XID_CRITICAL, event_set)
        if "xid_events" not in reads.unavailable:
            reads.xid_events = []

    @staticmethod
    def _replay_again(pynvml: Any, read: Reader, handle: Any, reads: GpuReads) -> None:
        if reads.pcie_replay_counter is not None:
            reads.pcie_replay_counter_after = read({}, "pcie_replay_counter",
                                                   pynvml.nvmlDeviceGetPcieReplayCounter, handle)

    def _drain(self, pynvml: Any, event_set: Any, timeout: int) -> None:
        """Every event queued (waiting ``timeout`` ms for the first), up to ``MAX_EVENTS``."""
        for _ in range(MAX_EVENTS):
            try:
                event = pynvml.nvmlEventSetWait_v2(event_set, timeout)
            except pynvml.NVMLError as exc:
                if exc.value != TIMEOUT:
                    self._wait_failed(str(exc))
                return
            timeout = 0
            if event.eventType & EVENT_XID_CRITICAL:
                self._record(pynvml, event)

    def _wait_failed(self, why: str) -> None:
        for reads in self.reads.values():
            if reads.xid_events == []:
                reads.xid_events = None
                reads.unavailable["xid_events"] = f"waiting for NVML events failed: {why}"

    def _record(self, pynvml: Any, event: Any) -> None:
        try:
            index = pynvml.nvmlDeviceGetIndex(event.device)
        except pynvml.NVMLError:
            return  # a GPU lost since: its own reads say so
        reads = self.reads.get(index)
        if reads is not None and reads.xid_events is not None:
            reads.xid_events.append(int(event.eventData))


def _free(pynvml: Any, event_set: Any) -> None:
    try:
        pynvml.nvmlEventSetFree(event_set)
    except pynvml.NVMLError:
        pass  # the events are read; a failing free changes nothing in them
