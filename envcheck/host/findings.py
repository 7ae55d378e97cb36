"""Level-1 health judged: each GPU's raw reads (``probe.Gpu``, ``health.GpuHealth``,
``level1_reads.GpuReads``, its kernel-log Xids) turned into findings. Pure functions, no I/O
but the device-node check (``devnodes``).

A ``Finding`` is one thing wrong or worth knowing, with its ``effect`` on the GPU's verdict:
``not-ready`` (do not train here), ``degraded`` (trains, slower or at risk), ``info`` (nothing
to fix for training), ``n/a`` (could not be read: unsupported, no permission, an older driver;
never counted as a pass). A check with no finding passed. Every finding says what was
measured, its cause and the action a node admin takes.
"""
from __future__ import annotations

from .devnodes import node_problem
from .health import GpuHealth
from .records import record
from .xid import classify

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (records.py says why)
if TYPE_CHECKING:
    from typing import Any, Callable

    from .level1_reads import GpuReads
    from .probe import Gpu
    from .xid import KernelXid

EFFECTS = ("not-ready", "degraded", "info", "n/a")
GPU_CHECKS = ("nvml", "ecc", "memory-repair", "pcie-link", "pcie-replay", "clocks",
              "temperature", "compute-mode", "persistence", "mig", "processes", "device-node",
              "xid-kernel-log", "xid-events")
# Clock event reasons (nvml.h nvmlClocksEventReason*) that slow a GPU for a fault; SW power
# cap (0x4) is the GPU holding its power limit, normal under load; idle (0x1) is idle.
IDLE = 0x1
SLOWDOWNS = {0x8: ("hw-slowdown", "hardware slowdown (the board asserted it: overheating, "
                   "a power supply fault or a power brake)"),
             0x40: ("hw-thermal", "hardware thermal slowdown (the GPU is too hot)"),
             0x80: ("hw-power-brake", "hardware power brake (an external signal, usually the "
                    "system's power supply, cut the clocks)"),
             0x20: ("sw-thermal", "software thermal slowdown (the driver holds the GPU under "
                    "its temperature limit)")}
REASON_NAMES = {0x1: "idle", 0x2: "applications-clocks", 0x4: "sw-power-cap",
                **{bit: name for bit, (name, _) in SLOWDOWNS.items()}, 0x10: "sync-boost",
                0x100: "display-clocks"}
COMPUTE_MODES = {0: "default", 1: "exclusive-thread", 2: "prohibited", 3: "exclusive-process"}
DRAIN_RESET = "drain the node and reset the GPU (`sudo nvidia-smi -r -i {i}`) or reboot"


@record(frozen=True)
class Finding:
    id: str
    check: str
    effect: str  # one of EFFECTS
    gpu: int | None  # NVML index; None for the node (nvidiactl, nvidia-uvm, the kernel log)
    measured: str
    cause: str
    action: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "check": self.check, "effect": self.effect, "gpu": self.gpu,
                "measured": self.measured, "cause": self.cause, "action": self.action}


def verdict(findings: list[Finding]) -> str:
    """not-ready if any finding is, else degraded if any is, else ready."""
    effects = {f.effect for f in findings}
    return next((e for e in ("not-ready", "degraded") if e in effects), "ready")


def check_states(findings: list[Finding], checks: tuple[str, ...]) -> dict[str, str]:
    """Each check's outcome: "pass", or the worst effect among its findings."""
    states = dict.fromkeys(checks, "pass")
    for f in sorted(findings, key=lambda f: EFFECTS.index(f.effect), reverse=True):
        states[f.check] = f.effect  # the worst comes last
    return states


def reason_names(reasons: int) -> list[str]:
    """Clock event reasons as names, as ``nvidia-smi -q -d PERFORMANCE`` lists them."""
    return [name for bit, name in REASON_NAMES.items() if reasons & bit]


@record
class GpuInput:
    """What the rules read about one GPU."""
    gpu: Gpu
    reads: GpuReads | None
    kernel_xids: list[KernelXid] | None  # None: the kernel log could not be read, because:
    kernel_why: str | None
    dev_dir: str

    @property
    def health(self) -> GpuHealth:
        return self.gpu.health or GpuHealth()

    def why(self, name: str) -> str:
        """Why field ``name`` is None."""
        for missing in (self.gpu.unavailable, self.health.unavailable,
                        self.reads.unavailable if self.reads else {}):
            if name in missing:
                return missing[name]
        return "not read"


def gpu_findings(data: GpuInput) -> list[Finding]:
    """Every finding for one GPU; a GPU NVML can't read gets only its failure and its Xids."""
    gpu = data.gpu
    if gpu.status != "ok" or data.reads is None:
        found = [Finding(f"gpu-{gpu.status}", "nvml", "not-ready", gpu.index,
                         f"NVML: {gpu.problem or 'the GPU did not answer'}",
                         "NVML could not read this GPU", gpu.fix)]
        return found + _kernel_xids(data)
    found = []
    for rule in RULES:
        found += rule(data)
    return found


def _f(data: GpuInput, check: str, fid: str, effect: str, measured: str, cause: str,
       action: str | None = None) -> Finding:
    i = data.gpu.index
    return Finding(fid, check, effect, i, measured, cause,
                   action.replace("{i}", str(i)) if action else None)


def _na(data: GpuInput, check: str, what: str, field: str) -> list[Finding]:
    return [_f(data, check, f"{check}-na", "n/a", f"{what}: n/a ({data.why(field)})",
               f"{what} could not be read, so it is not known to be healthy")]


def _ecc(data: GpuInput) -> list[Finding]:
    vol, agg = data.health.ecc_uncorrected_volatile, data.health.ecc_uncorrected_aggregate
    if vol is None and agg is None:
        return _na(data, "ecc", "uncorrected ECC counters", "ecc_uncorrected_volatile")
    if vol:
        return [_f(data, "ecc", "ecc-uncorrected-volatile", "not-ready",
                   f"{vol} uncorrected ECC errors since the driver loaded",
                   "uncorrectable (double-bit) errors in GPU memory: data was lost",
                   DRAIN_RESET + "; if errors come back, have the GPU replaced")]
    if agg:
        return [_f(data, "ecc", "ecc-uncorrected-aggregate", "degraded",
                   f"{agg} uncorrected ECC errors in the GPU's lifetime, none since the driver "
                   "loaded", "the GPU's memory has failed before: it is at risk",
                   "watch it (`nvidia-smi -q -d ECC`); run `dcgmi diag -r 3`; replace the GPU "
                   "if the count grows")]
    return []


def _memory_repair(data: GpuInput) -> list[Finding]:
    rows, pages = data.reads.remapped_rows, data.reads.retired_pages_pending
    if rows is not None:
        if rows["failure"]:
            return [_f(data, "memory-repair", "row-remap-failure", "not-ready",
                       "row remapping failed (no spare row left)",
                       "the GPU's memory has more bad rows than it can repair",
                       "drain the node and have the GPU replaced")]
        if rows["pending"]:
            return [_f(data, "memory-repair", "row-remap-pending", "not-ready",
                       "a row remapping is pending", "a bad memory row is marked for "
                       "remapping, which happens only at the next GPU reset",
                       DRAIN_RESET + " to apply it")]
        return []
    if pages is not None:
        return [_f(data, "memory-repair", "retired-pages-pending", "not-ready",
                   "retired pages are pending", "bad memory pages are marked for retirement, "
                   "which happens only at the next GPU reset", DRAIN_RESET + " to apply it")] \
            if pages else []
    return _na(data, "memory-repair", "row remapping and page retirement", "remapped_rows")


def _pcie_link(data: GpuInput) -> list[Finding]:
    r = data.reads
    if r.pcie_width is None or r.pcie_max_width is None:
        return _na(data, "pcie-link", "PCIe link width", "pcie_width")
    found = []
    if r.pcie_width < r.pcie_max_width:
        found.append(_f(data, "pcie-link", "pcie-width-below-max", "degraded",
                        f"PCIe link x{r.pcie_width} of x{r.pcie_max_width}",
                        "the link trained narrower than it can: a card not fully seated, a "
                        "riser or slot fault, or the slot's wiring (bifurcation)",
                        "reseat the GPU and its riser, check the slot's BIOS setting; drain "
                        "the node if host-device bandwidth matters to its jobs"))
    if r.pcie_gen is not None and r.pcie_max_gen and r.pcie_gen < r.pcie_max_gen:
        found += _pcie_gen(data, r.pcie_gen, r.pcie_max_gen)
    return found


def _pcie_gen(data: GpuInput, gen: int, max_gen: int) -> list[Finding]:
    """A lower generation is normal at idle (the GPU saves power); under load it is not."""
    reasons, util = data.reads.clock_event_reasons, data.health.utilization_gpu_pct
    if (reasons is not None and reasons & IDLE) or util == 0:
        return []
    measured = f"PCIe Gen{gen} of Gen{max_gen}"
    if util is None:
        return [_f(data, "pcie-link", "pcie-gen-below-max", "info", measured + ", load unknown",
                   "the link runs at a lower generation; at idle this is normal power saving")]
    return [_f(data, "pcie-link", "pcie-gen-below-max", "degraded",
               f"{measured} at {util}% utilisation",
               "the link runs at a lower generation under load: a riser, slot or BIOS limit",
               "check the slot's PCIe generation setting in the BIOS and reseat the GPU")]


def _pcie_replay(data: GpuInput) -> list[Finding]:
    before, after = data.reads.pcie_replay_counter, data.reads.pcie_replay_counter_after
    if before is None or after is None:
        return _na(data, "pcie-replay", "PCIe replay counter", "pcie_replay_counter")
    if after > before:
        return [_f(data, "pcie-replay", "pcie-replay-rising", "degraded",
                   f"PCIe replay counter rose from {before} to {after} during the check",
                   "PCIe transfers are failing and being retried now: a bad link (seating, "
                   "riser, cable, slot)", "reseat the GPU and its riser; drain the node if "
                   "the counter keeps rising")]
    return []


def _clocks(data: GpuInput) -> list[Finding]:
    reasons = data.reads.clock_event_reasons
    if reasons is None:
        return _na(data, "clocks", "clock event reasons", "clock_event_reasons")
    return [_f(data, "clocks", f"clocks-{name}", "degraded",
               f"clock event reason active: {name}", cause,
               "check cooling (fans, airflow, inlet temperature) and power delivery; "
               "`nvidia-smi -q -d PERFORMANCE` shows the reasons")
            for bit, (name, cause) in SLOWDOWNS.items() if reasons & bit]


def _temperature(data: GpuInput) -> list[Finding]:
    temp, slow = data.health.temperature_c, data.reads.temperature_slowdown_c
    shut = data.reads.temperature_shutdown_c
    if temp is None or slow is None:
        return _na(data, "temperature", "temperature against the slowdown threshold",
                   "temperature_c" if temp is None else "temperature_slowdown_c")
    if shut is not None and temp >= shut:
        return [_f(data, "temperature", "temperature-at-shutdown", "not-ready",
                   f"{temp} C, shutdown threshold {shut} C", "the GPU is hot enough to be shut "
                   "down", "drain the node and fix its cooling (fans, airflow, inlet air)")]
    if temp >= slow:
        return [_f(data, "temperature", "temperature-at-slowdown", "degraded",
                   f"{temp} C, slowdown threshold {slow} C",
                   "the GPU is at the temperature where it slows its clocks",
                   "fix the cooling (fans, airflow, inlet air) before long jobs")]
    return []


def _compute_mode(data: GpuInput) -> list[Finding]:
    mode = data.reads.compute_mode
    if mode is None:
        return _na(data, "compute-mode", "compute mode", "compute_mode")
    name = COMPUTE_MODES.get(mode, str(mode))
    if mode == 2:
        return [_f(data, "compute-mode", "compute-mode-prohibited", "not-ready",
                   "compute mode: prohibited", "no process may create a CUDA context on it",
                   "`sudo nvidia-smi -i {i} -c DEFAULT` (or ask the admin who set it)")]
    if mode in (1, 3):
        return [_f(data, "compute-mode", f"compute-mode-{name}", "info", f"compute mode: {name}",
                   "only one process at a time may use this GPU: a second rank or a "
                   "DataLoader worker touching CUDA on it fails",
                   "one process per GPU; `sudo nvidia-smi -i {i} -c DEFAULT` to share it")]
    return []


def _persistence(data: GpuInput) -> list[Finding]:
    mode = data.gpu.persistence_mode
    if mode is None:
        return _na(data, "persistence", "persistence mode", "persistence_mode")
    if mode == "disabled":
        return [_f(data, "persistence", "persistence-off", "info", "persistence mode: off",
                   "the driver tears the GPU down when no process uses it: every job's first "
                   "CUDA call waits for it to initialise again",
                   "run nvidia-persistenced, or `sudo nvidia-smi -i {i} -pm 1`")]
    return []


def _mig(data: GpuInput) -> list[Finding]:
    gpu = data.gpu
    if gpu.mig_mode is None:
        why = data.why("mig_mode")
        return [] if why == "not supported on this GPU" else _na(data, "mig", "MIG mode",
                                                                 "mig_mode")
    if gpu.mig_mode != "enabled":
        return []
    if not gpu.mig_devices:
        return [_f(data, "mig", "mig-no-instances", "not-ready", "MIG on, no MIG instance",
                   "in MIG mode CUDA sees only MIG instances, and this GPU has none",
                   "create instances (`sudo nvidia-smi mig -i {i} -cgi PROFILE -C`) or turn "
                   "MIG off (`sudo nvidia-smi -i {i} -mig 0`, then reset the GPU)")]
    return [_f(data, "mig", "mig-enabled", "info",
               f"MIG on, {len(gpu.mig_devices)} instance(s)",
               "frameworks see each MIG instance as a separate, smaller GPU (name it in "
               "CUDA_VISIBLE_DEVICES as MIG-...); one process uses one instance, and there is "
               "no NCCL or peer-to-peer between instances, so data parallel across them fails")]


def _processes(data: GpuInput) -> list[Finding]:
    procs, gpu = data.health.processes, data.gpu
    found = []
    if procs is None:
        found += _na(data, "processes", "processes on the GPU", "processes")
    elif procs:
        named = ", ".join(f"pid {p.pid} ({p.name or 'name unknown'}, "
                          f"{'?' if p.used_memory_mib is None else p.used_memory_mib} MiB)"
                          for p in procs)
        kill = " ".join(str(p.pid) for p in procs)
        return found + [_f(data, "processes", "gpu-in-use", "degraded",
                           f"{len(procs)} process(es) on the GPU: {named}",
                           "memory and compute already taken by other processes",
                           f"stop them (`kill {kill}`) or train on another GPU")]
    used, total = gpu.memory_used_mib, gpu.memory_total_mib
    if used is not None and total and used > 1024 + total // 50:
        found.append(_f(data, "processes", "memory-held", "degraded",
                        f"{used} MiB of {total} MiB in use with no process NVML can list",
                        "another container or PID namespace holds GPU memory",
                        "find it on the host (`nvidia-smi`) and stop it, or train on another "
                        "GPU"))
    return found


def _device_node(data: GpuInput) -> list[Finding]:
    minor = data.reads.minor_number
    if minor is None:
        return _na(data, "device-node", "the GPU's device node", "minor_number")
    problem = node_problem(data.dev_dir, f"nvidia{minor}", open_it=False)
    if problem is None:
        return []
    path = f"{data.dev_dir.rstrip('/')}/nvidia{minor}"
    missing = problem == "missing"
    return [_f(data, "device-node", "device-node-missing" if missing else "device-node-no-access",
               "not-ready", f"{path}: {problem}",
               "CUDA opens this node to use the GPU; NVML answering is not enough",
               (f"`sudo nvidia-modprobe -c={minor}` on the host; in a container, start it with "
                "this GPU (`--gpus`, the device plugin)") if missing else
               "give this user access (group video or render), or the container's device "
               "cgroup this GPU")]


def _kernel_xids(data: GpuInput) -> list[Finding]:
    if data.kernel_xids is None:
        return [_f(data, "xid-kernel-log", "xid-kernel-log-na", "n/a",
                   f"Xids since boot: n/a ({data.kernel_why})",
                   "the kernel log, or this GPU's lines in it, could not be read, so past Xid "
                   "errors on this GPU are not known")]
    return xid_findings(data.gpu.index, "xid-kernel-log", [x.code for x in data.kernel_xids],
                        "in the kernel log since boot", [x.line for x in data.kernel_xids])


def _xid_events(data: GpuInput) -> list[Finding]:
    events = data.reads.xid_events
    if events is None:
        return _na(data, "xid-events", "NVML Xid events", "xid_events")
    return xid_findings(data.gpu.index, "xid-events", events, "reported by NVML during the check")


def xid_findings(index: int | None, check: str, codes: list[int], where: str,
                 lines: list[str] | None = None) -> list[Finding]:
    """One finding per Xid number: how many, where seen, the first line, its class."""
    found = []
    for code in dict.fromkeys(codes):
        effect, cause, action = classify(code, index)
        count = codes.count(code)
        measured = f"Xid {code} {where}" + (f" ({count} times)" if count > 1 else "")
        if lines:
            measured += f": {lines[codes.index(code)]}"
        found.append(Finding(f"xid-{code}", check, effect, index, measured, cause, action))
    return found


RULES: tuple[Callable[[GpuInput], list[Finding]], ...] = (
    _ecc, _memory_repair, _pcie_link, _pcie_replay, _clocks, _temperature, _compute_mode,
    _persistence, _mig, _processes, _device_node, _kernel_xids, _xid_events)
