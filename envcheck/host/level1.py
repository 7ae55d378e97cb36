"""Level-1 health: is each GPU fit to train on, from reads only (NVML and the OS; no framework,
no CUDA context). What ``dcgmi diag -r 1`` and the GPU operator's validator look at, and more.

``level1(environ=None, *, window_s=0.0, nvml=None, watch=False) -> HealthReport``
    One NVML session (the probe's: ``probe(health=True, during=...)``) reads every GPU's facts,
    its raw health, the level-1 reads (``level1_reads``) and NVML's critical-Xid events (for
    ``window_s`` seconds; 0: those already queued); then the device nodes (``devnodes``) and
    the kernel log's Xids since boot (``xid``) are read and everything is judged
    (``findings``). Never raises for NVML trouble: a failed NVML is a node finding. ``nvml``:
    the bindings (``pynvml``, or ``nvml_direct`` on the gate's fast path). ``watch``: the
    session stays open, its Xid events registered, until ``close()`` (at exit at the latest):
    ``catch_up()`` takes in the events and replay counters since and judges the GPUs again
    (a validation, after its run: Xids and replays while the framework ran are found too).
``HealthReport``
    ``host`` (the ``HostState`` read on the way: use it as the command's probe), ``gpus``
    (``GpuVerdict`` per NVML GPU: ``index``, ``verdict``, ``findings``, ``checks``: each of
    ``findings.GPU_CHECKS`` -> "pass" or its worst finding's effect), ``node``
    (findings about the whole node: ``/dev/nvidiactl``, ``/dev/nvidia-uvm``, the kernel log,
    Xids of GPUs NVML no longer lists, NVML itself); ``verdict`` (the worst over the visible
    GPUs and the node), ``node_verdict`` (as the fleet counts nodes: "no-gpu" without GPUs),
    ``gpus_to_drain()``, ``findings`` (all), ``to_json()`` (``envcheck.health/1``),
    ``gpu_section(index)`` (one GPU's versioned ``health`` section, for
    ``envcheck.validation/1``), ``envelope()``.

A GPU's verdict counts the node's findings too (without ``/dev/nvidia-uvm`` no GPU trains).
Where NVML fails for a reason other than no driver (a GPU lost, no permission, a version
mismatch...) and so lists no GPU, each GPU device node (``/dev/nvidia<minor>``, numbered by
its minor) is a GPU NVML can't reach: not-ready, to drain. "no-gpu" is a node without a driver
or without a GPU to judge, never one whose GPUs fail.
n/a findings never make a GPU ready or not: they are listed, and the check is not a pass.

Test seams (not user options): ``ENVCHECK_TEST_DEV_DIR``, a folder read instead of ``/dev``
(``devnodes.py``), and ``ENVCHECK_TEST_KERNEL_LOG``, a file read instead of the kernel log
(``xid.py``).
"""
from __future__ import annotations

import os
from ..results import Result, envelope, node
from .devnodes import CONTROL, UVM, dev_dir, gpu_minors, node_problem
from .findings import (COMPUTE_MODES, GPU_CHECKS, Finding, GpuInput, check_states,
                       gpu_findings, reason_names, verdict, xid_findings)
from .level1_reads import Level1Session
from .probe import Gpu, probe
from .records import new, record
from .xid import kernel_xids, pci_key

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (records.py says why)
if TYPE_CHECKING:
    from typing import Any, Mapping

    from .probe import HostState
    from .xid import KernelXid

SCHEMA = "envcheck.health/1"
SECTION_VERSION = 1  # of the per-GPU section, which travels inside other documents
LEVEL = 1
NODE_CHECKS = ("nvml", "device-nodes", "kernel-log")
# NVML's answers that say there is no GPU to judge: no library or no driver loaded (nothing of
# NVIDIA's answers), or a driver that lists none. Any other failure with device nodes present
# leaves GPUs that NVML can't reach (``_unlisted_gpus``).
NO_GPU_STATUSES = ("no-library", "driver-not-loaded", "no-gpu")
# The GPU's status (``probe.GPU_STATUSES``) for NVML's node-wide failure.
UNREACHED = {"gpu-lost": "lost", "no-permission": "no-permission"}


@record
class GpuVerdict:
    index: int
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    visible: bool
    verdict: str
    findings: list[Finding]
    checks: dict[str, str]
    readings: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"version": SECTION_VERSION, "level": LEVEL, "gpu": self.index, "name": self.name,
                "uuid": self.uuid, "pci_bus_id": self.pci_bus_id, "visible": self.visible,
                "verdict": self.verdict, "checks": dict(self.checks),
                "findings": [f.to_json() for f in self.findings],
                "readings": self.readings}


@record
class HealthReport(Result):
    schema = SCHEMA
    host: HostState
    gpus: list[GpuVerdict] = new(list)
    node: list[Finding] = new(list)
    kernel_log: str = "read"  # "read", or why it was not

    @property
    def verdict(self) -> str:
        """The worst of the node's and the visible GPUs' verdicts; "no-gpu" where there is no
        GPU to judge and nothing wrong with the node (no driver and no device nodes: a host
        without an NVIDIA GPU, a state, not a failure). GPUs NVML can't reach are judged
        (not-ready), and so is a half-installed driver (device nodes without NVML)."""
        verdicts = {verdict(self.node), *(g.verdict for g in self.gpus if g.visible)}
        worst = next(v for v in ("not-ready", "degraded", "ready") if v in verdicts)
        return "no-gpu" if worst == "ready" and not self.gpus else worst

    @property
    def node_verdict(self) -> str:
        """The node's level-1 verdict, the one word every view and the fleet say: ``verdict``."""
        return self.verdict

    def gpus_to_drain(self) -> list[dict[str, Any]]:
        """Each GPU whose verdict is not-ready: its index, UUID and first not-ready finding."""
        return [{"gpu": g.index, "uuid": g.uuid,
                 "finding": next((f.id for f in g.findings if f.effect == "not-ready"), None)}
                for g in self.gpus if g.verdict == "not-ready"]

    def node_health(self) -> dict[str, Any]:
        """The node's health as a result envelope's ``node`` carries it."""
        return {"verdict": self.node_verdict, "drain": self.gpus_to_drain()}

    @property
    def findings(self) -> list[Finding]:
        return self.node + [f for g in self.gpus for f in g.findings]

    @property
    def watching(self) -> bool:
        """Read with ``watch=True`` and not closed: NVML's events still come in."""
        judged = getattr(self, "_judged", None)
        return judged is not None and judged[0].watching

    def catch_up(self) -> bool:
        """With ``watch``: the Xid events and replay counters since the read (or the last
        catch-up) taken in, and every GPU judged again. True when a GPU's findings changed."""
        if not self.watching:
            return False
        before = [g.findings for g in self.gpus]
        self._judged[0].catch_up()
        _judge_gpus(self)
        return [g.findings for g in self.gpus] != before

    def close(self) -> bool:
        """``catch_up`` one last time, then stop watching (NVML shut down). Idempotent."""
        changed = self.catch_up()
        judged = getattr(self, "_judged", None)
        if judged is not None:
            judged[0].close()
        return changed

    def gpu_section(self, index: int) -> dict[str, Any] | None:
        """The ``health`` section of GPU ``index`` (versioned), or None for no such GPU."""
        return next((g.to_json() for g in self.gpus if g.index == index), None)

    def envelope(self) -> dict:
        worst = self.verdict
        facts = node(self.host.facts(), self.node_health())
        if worst == "ready":
            return envelope("ready", node_facts=facts)
        if worst == "no-gpu":  # `gpu` is ready with a usable GPU: none here
            first = next(f for f in self.node if f.id == NO_GPU)
            return envelope("not-ready", first.measured, first.action, node_facts=facts)
        first = next(f for f in self.findings if f.effect == worst)
        where = "node" if first.gpu is None else f"GPU {first.gpu}"
        return envelope(worst, f"{where}: {first.measured}", first.action, node_facts=facts)

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict in ("not-ready", "no-gpu") else 0

    def body(self) -> dict[str, Any]:
        return {
            "host": self.host.facts(),  # what `envcheck gpu --json` says (its envelope aside), read in the same session
            "level": LEVEL,
            "verdict": self.verdict,
            "node": {"verdict": "no-gpu" if self.verdict == "no-gpu" else verdict(self.node),
                     "checks": check_states(self.node, NODE_CHECKS),
                     "findings": [f.to_json() for f in self.node],
                     "kernel_log": self.kernel_log},
            "gpus": [g.to_json() for g in self.gpus],
            "summary": [{"gpu": g.index, "verdict": g.verdict,
                         "findings": [f.id for f in g.findings]} for g in self.gpus],
            "drain": [d["gpu"] for d in self.gpus_to_drain()],
        }


def level1(environ: Mapping[str, str] | None = None, *, window_s: float = 0.0,
           nvml: Any = None, watch: bool = False) -> HealthReport:
    """Read and judge level-1 health; see the module docstring. ``nvml``: the bindings
    (default ``pynvml``; the gate's fast path passes ``nvml_direct``, the same answers for a
    fraction of the import). ``watch``: keep watching NVML's critical-Xid events and the PCIe
    replay counters after the read, in the same NVML session, until ``close()`` (at the
    latest when the process exits): ``catch_up()`` judges the GPUs again with what came since
    (a validation calls it after its run)."""
    env = os.environ if environ is None else environ
    session = Level1Session(window_s, watch=watch)
    host = probe(env, health=True, during=session, nvml=nvml)
    xids, why_not = kernel_xids(env)
    folder = dev_dir(env)
    report = HealthReport(host, kernel_log="read" if why_not is None else why_not)
    report.node = _node_findings(host, folder, xids, why_not)
    report._judged = (session, xids, why_not, folder, host.gpus or _unlisted_gpus(host, folder))
    _judge_gpus(report)
    if session.watching:
        import atexit

        atexit.register(session.close)
    return report


def _judge_gpus(report: HealthReport) -> None:
    """Each GPU's findings, verdict, checks and readings, from the session's reads."""
    session, xids, why_not, folder, gpus = report._judged
    report.gpus = []
    for gpu in gpus:
        mine, why = _kernel_xids_of(gpu, xids, why_not)
        reads = session.reads.get(gpu.index) if gpu.status == "ok" else None
        found = gpu_findings(GpuInput(gpu, reads, mine, why, folder))
        blocking = [f for f in report.node if f.effect in ("not-ready", "degraded")]
        report.gpus.append(GpuVerdict(
            gpu.index, gpu.name, gpu.uuid, gpu.pci_bus_id, gpu.visible,
            verdict(found + blocking), found, _checks(found, reads is not None),
            _readings(gpu, reads, mine)))


def _unlisted_gpus(host: HostState, folder: str) -> list[Gpu]:
    """Where NVML failed for a reason other than no GPU to judge (``NO_GPU_STATUSES``): a GPU
    per device node ``nvidia<minor>``, with NVML's failure as its problem."""
    if host.ok or host.nvml_status in NO_GPU_STATUSES:
        return []
    status = UNREACHED.get(host.nvml_status, "error")
    return [Gpu(minor, status=status, fix=host.fix,
                problem=f"{host.message} (NVML lists no GPU; its device node "
                        f"{folder.rstrip('/')}/nvidia{minor} exists)")
            for minor in gpu_minors(folder)]


def _kernel_xids_of(gpu: Gpu, xids: list[KernelXid] | None,
                    why_not: str | None) -> tuple[list[KernelXid] | None, str | None]:
    """The GPU's Xids from the kernel log, by its PCI address, or None and why not."""
    if xids is not None and gpu.pci_bus_id is None:
        return None, "NVML gave no PCI address for this GPU, so the kernel log's Xids can't be matched to it"
    return (None if xids is None else [x for x in xids if x.pci == pci_key(gpu.pci_bus_id)]), why_not


def _checks(found: list[Finding], read: bool) -> dict[str, str]:
    """Each check's outcome; a GPU NVML could not read passes nothing: n/a but for NVML itself
    and the kernel log."""
    states = check_states(found, GPU_CHECKS)
    if not read:
        states.update({c: "n/a" for c, state in states.items()
                       if state == "pass" and c not in ("nvml", "xid-kernel-log")})
    return states


def _node_findings(host: HostState, folder: str, xids: list[KernelXid] | None,
                   why_not: str | None) -> list[Finding]:
    found = []
    problems = {name: node_problem(folder, name, open_it=True) for name in (CONTROL, UVM)}
    if host.nvml_status in NO_GPU_STATUSES and not host.gpus and not gpu_minors(folder) \
            and all(p == "missing" for p in problems.values()):
        found.append(_no_gpu(host))
        problems = {}
    elif not host.ok:
        found.append(Finding(f"nvml-{host.nvml_status}", "nvml", "not-ready", None,
                             f"NVML: {host.message}", "NVML could not be read", host.fix))
    for name, problem in problems.items():
        if problem is not None:
            found.append(_node_finding(folder, name, problem))
    if why_not is not None:
        found.append(Finding("kernel-log-na", "kernel-log", "n/a", None,
                             f"Xids since boot: n/a ({why_not})",
                             "the kernel log could not be read, so past Xid errors are not "
                             "known"))
    known = {pci_key(g.pci_bus_id) for g in host.gpus}
    for pci in dict.fromkeys(x.pci for x in xids or [] if x.pci not in known):
        lost = [x for x in xids if x.pci == pci]
        found += [Finding(f.id, "kernel-log", f.effect, None,
                          f"PCI {pci}, a GPU NVML does not list: {f.measured}", f.cause,
                          f.action)
                  for f in xid_findings(None, "kernel-log", [x.code for x in lost],
                                        "in the kernel log since boot", [x.line for x in lost])]
    return found


NO_GPU = "no-gpu"


def _no_gpu(host: HostState) -> Finding:
    """A host without an NVIDIA GPU: no driver (or one that lists none) and no device node.
    Said once, as information, with what to do if a GPU was expected."""
    why = host.message if host.nvml_status != "no-gpu" else "the NVIDIA driver lists no GPU"
    return Finding(NO_GPU, "nvml", "info", None, f"no NVIDIA GPU here: {why}",
                   "no NVIDIA driver and no GPU device node: a host without an NVIDIA GPU",
                   f"if this host should have an NVIDIA GPU: {host.fix or 'install the NVIDIA driver'}")


def _node_finding(folder: str, name: str, problem: str) -> Finding:
    path = f"{folder.rstrip('/')}/{name}"
    if name == UVM:
        cause = ("CUDA's unified-memory device is absent: every CUDA call fails although NVML "
                 "and nvidia-smi answer" if problem == "missing" else
                 "CUDA's unified-memory device can't be opened: every CUDA call fails")
        action = ("`sudo nvidia-modprobe -u -c=0` (loads nvidia-uvm and creates the node); in "
                  "a container, start it with the NVIDIA runtime") if problem == "missing" else (
            "give this user access to it (permissions, the container's device cgroup)")
    else:
        cause = "the driver's control device, which every CUDA process opens"
        action = ("`sudo nvidia-modprobe -c=0`; in a container, start it with the NVIDIA "
                  "runtime (`--gpus`)") if problem == "missing" else (
            "give this user access to it (group video, the container's device cgroup)")
    fid = f"{name}-missing" if problem == "missing" else f"{name}-no-access"
    return Finding(fid, "device-nodes", "not-ready", None, f"{path}: {problem}", cause, action)


def _readings(gpu: Gpu, reads: Any, xids: list[KernelXid] | None) -> dict[str, Any]:
    """The raw values behind the verdict, and why each missing one is missing."""
    health = gpu.health
    data: dict[str, Any] = {
        "status": gpu.status,
        "memory_used_mib": gpu.memory_used_mib, "memory_total_mib": gpu.memory_total_mib,
        "persistence_mode": gpu.persistence_mode, "mig_mode": gpu.mig_mode,
        "mig_devices": len(gpu.mig_devices),
        "kernel_xids": None if xids is None else [x.code for x in xids],
    }
    unavailable = dict(gpu.unavailable)
    if health is not None:
        data.update(temperature_c=health.temperature_c,
                    utilization_gpu_pct=health.utilization_gpu_pct,
                    ecc_uncorrected_volatile=health.ecc_uncorrected_volatile,
                    ecc_uncorrected_aggregate=health.ecc_uncorrected_aggregate,
                    processes=None if health.processes is None else [
                        {"pid": p.pid, "name": p.name, "used_memory_mib": p.used_memory_mib}
                        for p in health.processes])
        unavailable.update(health.unavailable)
    if reads is not None:
        data.update({k: v for k, v in vars(reads).items() if k != "unavailable"})
        if reads.clock_event_reasons is not None:
            data["clock_event_reasons"] = reason_names(reads.clock_event_reasons)
        if reads.compute_mode is not None:
            data["compute_mode"] = COMPUTE_MODES.get(reads.compute_mode, reads.compute_mode)
        unavailable.update(reads.unavailable)
    data["unavailable"] = unavailable
    return data
