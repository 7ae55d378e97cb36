"""Level 3's figures judged: what the smoke runner measured per device (``data/smoke_figures.py``:
host<->device copy bandwidth, matmul TFLOPS, allocating most of the free memory, and the
multi-device check's all-reduce bus bandwidth) against ``data/gpu_expectations.json`` and the
GPU as NVML reads it (model name, PCIe link maximum, NVLink links and version, free memory).
The all-reduce's expectation is its interconnect's: NVLink where every GPU has it active, else
the PCIe links' (the copy figure's expectation x the table's ``pcie_efficiency``).

Each figure gets its expectation (or None, with why) and a verdict: ``pass``, ``degraded``
(below the expectation: usable, slower; never not-ready) or ``n/a`` (no expectation: a CPU,
a model not in the table, pageable host memory, not measured; never a pass). A degraded one
says its cause and the action a node admin takes. Pure functions: no I/O but reading the table.

Entry point: ``judge(smoke.figures, gpu_facts(ctx.devices, ctx.host, ctx.health),
smoke.multi_figures)``, then ``figure_checks(figures)`` for the report's checks and
``[f.to_json() for f in figures]`` for its JSON.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ..data import load
from .reports import Check

if TYPE_CHECKING:
    from ..host.level1 import HealthReport
    from ..host.probe import HostState
    from .devices import Device

VERDICTS = ("pass", "degraded", "n/a")
NO_CPU_EXPECTATION = "a CPU has no expectation"
GIB = 1 << 30
SLACK_BYTES = GIB  # a framework's own context and libraries: free in NVML, not in the framework
COPY_ACTION = ("compare the link with its maximum (`nvidia-smi -q -d PCIE`): a link trained "
               "narrower or slower than it can is reseated or its slot/riser replaced; a GPU on "
               "the far CPU socket is used from its own NUMA node (`nvidia-smi topo -m`)")
MATMUL_ACTION = ("look for throttling and clocks held low (`nvidia-smi -q -d PERFORMANCE,CLOCK`) "
                 "and other processes on the GPU (`nvidia-smi`), then rerun; a GPU that stays "
                 "slow: drain the node and reset the GPU (`nvidia-smi -r`) or replace it")
ALLREDUCE_ACTION = ("check the links: `nvidia-smi nvlink -s` (every link up, at its speed) and "
                    "`nvidia-smi topo -m` (NV# between the GPUs, or PIX/PXB rather than SYS); "
                    "unset NCCL_P2P_DISABLE / NCCL_SHM_DISABLE; run nccl-tests' all_reduce_perf "
                    "to confirm; drain the node if a link is down")
MEMORY_ACTION = ("find what holds the GPU's memory (`nvidia-smi --query-compute-apps=pid,"
                 "process_name,used_memory --format=csv`) and stop it; with nothing there, "
                 "drain the node and reset the GPU (`nvidia-smi -r`)")
LABELS = {"copy_h2d": "copy host->device", "copy_d2h": "copy device->host",
          "matmul_fp32": "matmul fp32", "matmul_fp16": "matmul fp16", "matmul_bf16": "matmul bf16",
          "memory": "memory allocated", "allreduce": "all-reduce busbw"}
CHECKS = {"figure-copy": ("copy_h2d", "copy_d2h"),
          "figure-matmul": ("matmul_fp32", "matmul_fp16", "matmul_bf16"),
          "figure-memory": ("memory",), "figure-allreduce": ("allreduce",)}


@dataclass(frozen=True)
class GpuFacts:
    """What NVML says of the GPU behind a framework device ("gpu:0")."""
    name: str | None = None  # as NVML reports it: "NVIDIA A100-SXM4-80GB"
    pcie_max_gen: int | None = None
    pcie_max_width: int | None = None
    memory_free_bytes: int | None = None
    nvlink_links: int | None = None  # active NVLink links (0: none); None: not read
    nvlink_version: int | None = None  # NVML's nvmlNvlinkVersion_t

    @classmethod
    def from_host(cls, gpu: Any, reads: Any = None) -> GpuFacts:
        """From ``host.probe.Gpu`` and, if read, ``host.level1_reads.GpuReads``."""
        free = getattr(gpu, "memory_free_mib", None)
        return cls(name=getattr(gpu, "name", None),
                   pcie_max_gen=getattr(reads, "pcie_max_gen", None),
                   pcie_max_width=getattr(reads, "pcie_max_width", None),
                   memory_free_bytes=None if free is None else int(free) << 20,
                   nvlink_links=getattr(reads, "nvlink_links", None),
                   nvlink_version=getattr(reads, "nvlink_version", None))


@dataclass(frozen=True)
class Figure:
    device: str  # "gpu:0", "cpu:0", or "gpu:0,gpu:1" for the all-reduce
    name: str  # copy_h2d, copy_d2h, matmul_fp32|fp16|bf16, memory, allreduce
    value: float | None
    unit: str
    expectation: float | None  # what a healthy device measures, in ``unit``
    verdict: str  # one of VERDICTS
    why: str  # how the expectation was found, or why there is none
    cause: str | None = None  # a degraded figure's cause
    action: str | None = None
    floor: float | None = None  # below this it is degraded
    facts: dict = field(default_factory=dict)  # the runner's figure as measured

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "name": self.name, "value": self.value,
                "unit": self.unit, "expectation": self.expectation, "floor": self.floor,
                "verdict": self.verdict, "why": self.why, "cause": self.cause,
                "action": self.action, "facts": self.facts}

    def words(self) -> str:
        value = "n/a" if self.value is None else f"{self.value:g} {self.unit}"
        expected = f" (expected {self.expectation:g})" if self.expectation is not None else ""
        return f"{self.device} {LABELS.get(self.name, self.name)} {value}{expected}"


def gpu_facts(devices: Iterable[Device], host: HostState | None,
              health: HealthReport | None = None) -> dict[str, GpuFacts]:
    """What NVML says of each GPU device, by the runner's name for it: ``devices`` are
    ``validation.devices.Device`` (``runner_name``, ``nvml_index``), ``host`` the
    ``HostState`` (its ``gpus``: model name, free memory), ``health`` the level-1
    ``HealthReport`` if read (each GPU's ``readings``: the PCIe link's maximum)."""
    by_index = {g.index: g for g in getattr(host, "gpus", None) or []}
    readings = {g.index: g.readings or {} for g in getattr(health, "gpus", None) or []}
    found = {}
    for device in devices:
        index = getattr(device, "nvml_index", None)
        if index is None or index not in by_index:
            continue
        gpu, read = by_index[index], readings.get(index, {})
        free = gpu.memory_free_mib
        found[device.runner_name] = GpuFacts(gpu.name, read.get("pcie_max_gen"),
                                             read.get("pcie_max_width"),
                                             None if free is None else int(free) << 20,
                                             read.get("nvlink_links"), read.get("nvlink_version"))
    return found


def table() -> dict[str, Any]:
    return load("gpu_expectations.json")


def model_of(name: str | None, facts: Mapping[str, Any] | None = None) -> dict | None:
    """The table's entry for an NVML model name (the first pattern that matches), or None."""
    for model in (facts or table())["models"]:
        if name and re.search(model["pattern"], name, re.IGNORECASE):
            return model
    return None


def judge(devices: Mapping[str, Mapping | None], gpus: Mapping[str, GpuFacts] | None = None,
          multi: Mapping | None = None, facts: Mapping[str, Any] | None = None) -> list[Figure]:
    """Every figure judged. ``devices``: device -> the runner's "figures" of that device (None:
    not measured, e.g. its fit failed); ``gpus``: device -> what NVML says of its GPU;
    ``multi``: the multi-replica result's "figures" ({"allreduce": ...}) or None."""
    facts = facts or table()
    gpus = gpus or {}
    found: list[Figure] = []
    for device, figures in devices.items():
        if not figures or "error" in figures and len(figures) == 1:
            why = (figures or {}).get("error") or "not measured (the device's fit did not pass)"
            found.append(Figure(device, "figures", None, "", None, "n/a", why.splitlines()[0]))
            continue
        gpu = gpus.get(device) or GpuFacts()
        for name, figure in figures.items():
            found.append(_judge_one(device, name, figure, gpu, facts))
    if multi and multi.get("allreduce"):
        names = ",".join(devices) or "devices"
        on_cpu = not devices or any(not d.startswith("gpu:") for d in devices)
        found.append(_allreduce(names, multi["allreduce"], None if on_cpu else
                                [gpus.get(d) or GpuFacts() for d in devices], facts))
    return found


def _na(device: str, name: str, figure: Mapping, why: str) -> Figure:
    return Figure(device, name, figure.get("value"), figure.get("unit", ""), None, "n/a", why,
                  facts=dict(figure))


def _judge_one(device: str, name: str, figure: Mapping, gpu: GpuFacts,
               facts: Mapping[str, Any]) -> Figure:
    if figure.get("skipped"):
        return _na(device, name, figure, figure["skipped"])
    if not device.startswith("gpu:"):
        return _na(device, name, figure, NO_CPU_EXPECTATION
                   + (f"; the measurement failed: {figure['error']}" if figure.get("error") else ""))
    if name == "memory":
        return _memory(device, figure, gpu, facts)
    if figure.get("value") is None:
        return Figure(device, name, None, figure.get("unit", ""), None, "degraded",
                      "the measurement failed", f"{LABELS.get(name, name)} failed on {device}: "
                      f"{figure.get('error') or 'no value'}", MATMUL_ACTION, facts=dict(figure))
    if name.startswith("copy_"):
        return _copy(device, name, figure, gpu, facts)
    if name.startswith("matmul_"):
        return _matmul(device, name, figure, gpu, facts)
    return _na(device, name, figure, "no expectation for this figure")


def _rated(device: str, name: str, figure: Mapping, expectation: float, degraded_below: float,
           why: str, cause: str, action: str) -> Figure:
    floor = round(expectation * degraded_below, 3)
    value = figure["value"]
    if value >= floor:
        return Figure(device, name, value, figure["unit"], round(expectation, 3), "pass", why,
                      floor=floor, facts=dict(figure))
    return Figure(device, name, value, figure["unit"], round(expectation, 3), "degraded", why,
                  f"{cause}: {value:g} {figure['unit']}, below {floor:g} "
                  f"({degraded_below:.0%} of the {expectation:.3g} expected)", action,
                  floor=floor, facts=dict(figure))


def _copy(device: str, name: str, figure: Mapping, gpu: GpuFacts,
          facts: Mapping[str, Any]) -> Figure:
    if not str(figure.get("host_memory") or "").startswith("pinned"):
        return _na(device, name, figure, f"copied from {figure.get('host_memory') or 'unknown'} "
                   "host memory: the link's expectation is for pinned memory")
    if not gpu.pcie_max_gen or not gpu.pcie_max_width:
        return _na(device, name, figure, "the PCIe link's maximum generation and width were "
                   "not read (NVML), so the link has no expectation")
    pcie = facts["pcie"]
    lane = pcie["per_lane_gb_s"].get(str(gpu.pcie_max_gen))
    if lane is None:
        return _na(device, name, figure, f"PCIe gen {gpu.pcie_max_gen} is not in the table")
    theoretical = lane * gpu.pcie_max_width
    expectation = theoretical * pcie["healthy_fraction"]
    why = (f"PCIe gen{gpu.pcie_max_gen} x{gpu.pcie_max_width}: {theoretical:.3g} GB/s "
           f"theoretical, {pcie['healthy_fraction']:.0%} of it from pinned memory")
    return _rated(device, name, figure, expectation, pcie["degraded_below"], why,
                  f"{LABELS[name]} on {device} is slow for its link", COPY_ACTION)


def _matmul(device: str, name: str, figure: Mapping, gpu: GpuFacts,
            facts: Mapping[str, Any]) -> Figure:
    model = model_of(gpu.name, facts)
    if model is None:
        return _na(device, name, figure, f"model not in the table ({gpu.name or 'unknown'})")
    dtype = name.split("_", 1)[1]
    peak = model.get(dtype)
    if peak is None:
        return _na(device, name, figure, f"the {model['model']} has no {dtype} tensor-core peak")
    matmul = facts["matmul"]
    fraction = (model.get("healthy_fraction") or {}).get(dtype, matmul["healthy_fraction"][dtype])
    why = (f"{model['model']}: {peak:g} TFLOPS {dtype} dense peak (datasheet), "
           f"{fraction:.0%} of it in a large matmul")
    return _rated(device, name, figure, peak * fraction, matmul["degraded_below"], why,
                  f"{dtype} matmul on {device} ({gpu.name}) is slow", MATMUL_ACTION)


def _memory(device: str, figure: Mapping, gpu: GpuFacts, facts: Mapping[str, Any]) -> Figure:
    got, asked = figure.get("allocated_bytes"), figure.get("asked_bytes")
    if got is None or asked is None:
        return Figure(device, "memory", None, "GB", None, "degraded", "the measurement failed",
                      f"could not read {device}'s free memory: {figure.get('error') or 'no value'}",
                      MEMORY_ACTION, facts=dict(figure))
    free, limit = figure.get("free_bytes") or 0, figure.get("limit_bytes")
    why = f"{figure.get('fraction', 0.9):.0%} of the {free / 1e9:.3g} GB free ({figure.get('source')})"
    if limit is not None:
        why += f", within the framework's own cap of {limit / 1e9:.3g} GB"
    expectation = round(asked / 1e9, 3)
    if got < asked:
        return Figure(device, "memory", figure.get("value"), "GB", expectation, "degraded", why,
                      f"{device} gave only {got / 1e9:.3g} of the {asked / 1e9:.3g} GB asked"
                      + (f": {figure['error']}" if figure.get("error") else ""),
                      MEMORY_ACTION, floor=expectation, facts=dict(figure))
    nvml = gpu.memory_free_bytes
    if nvml is not None and limit is None and free < nvml - SLACK_BYTES:
        return Figure(device, "memory", figure.get("value"), "GB", expectation, "degraded", why,
                      f"the framework sees {free / 1e9:.3g} GB free on {device}, NVML "
                      f"{nvml / 1e9:.3g} GB: memory NVML calls free can't be had",
                      MEMORY_ACTION, floor=expectation, facts=dict(figure))
    return Figure(device, "memory", figure.get("value"), "GB", expectation, "pass", why,
                  floor=expectation, facts=dict(figure))


def _allreduce(devices: str, figure: Mapping, gpus: list[GpuFacts] | None,
               facts: Mapping[str, Any]) -> Figure:
    """The all-reduce's busbw against its interconnect's expectation; ``gpus`` None: a CPU
    device took part (no expectation)."""
    if figure.get("skipped") or figure.get("value") is None:
        return _na(devices, "allreduce", figure, figure.get("skipped") or figure.get("error")
                   or "not measured")
    if gpus is None:
        return _na(devices, "allreduce", figure, NO_CPU_EXPECTATION)
    expectation, why = _interconnect(gpus, facts)
    if expectation is None:
        return _na(devices, "allreduce", figure, why)
    rule = facts["allreduce"]
    return _rated(devices, "allreduce", figure, expectation, rule["degraded_below"], why,
                  f"all-reduce over {devices} is slow for its interconnect", ALLREDUCE_ACTION)


def _interconnect(gpus: list[GpuFacts], facts: Mapping[str, Any]) -> tuple[float | None, str]:
    """(busbw expected of the GPUs' all-reduce, how it was found), or (None, why none): NVLink
    when every GPU has links active (the fewest count), else PCIe (the slowest link)."""
    rule = facts["allreduce"]
    links = [g.nvlink_links for g in gpus]
    if all(links) and len(gpus) > 2 and not all(_on_nvswitch_board(g.name, rule["nvlink"]) for g in gpus):
        return None, (f"NVLink on each of {len(gpus)} GPUs, but not on a known NVSwitch board: the links "
                      "may join pairs or a mesh (their topology is not read), so no expectation")
    if all(links):
        versions = {g.nvlink_version for g in gpus}
        per_link = [rule["nvlink"]["per_link_gb_s"].get(str(v)) for v in versions]
        if None in per_link:
            return None, f"NVLink version {sorted(versions, key=str)} is not in the table"
        fewest, fraction = min(links), rule["nvlink"]["healthy_fraction"]
        one_way = fewest * min(per_link)
        return one_way * fraction, (f"NVLink: {fewest} links per GPU, {one_way:.3g} GB/s per "
                                    f"direction, {fraction:.0%} of it as busbw")
    if any(link is None for link in links):
        unread = next(i for i, link in enumerate(links) if link is None)
        return None, (f"GPU {unread} of the all-reduce: its NVLink links were not read (NVML), so "
                      "its interconnect has no expectation")
    pcie = facts["pcie"]
    widths = [(pcie["per_lane_gb_s"].get(str(g.pcie_max_gen)), g.pcie_max_width) for g in gpus]
    if any(lane is None or not width for lane, width in widths):
        return None, ("the GPUs have no NVLink, and a PCIe link's maximum generation and width "
                      "were not read (NVML), so the link has no expectation")
    theoretical = min(lane * width for lane, width in widths)
    efficiency = rule["pcie_efficiency"]
    expectation = theoretical * pcie["healthy_fraction"] * efficiency
    return expectation, (f"PCIe (no NVLink on every GPU): the slowest link {theoretical:.3g} GB/s "
                         f"theoretical, {pcie['healthy_fraction']:.0%} of it copied, "
                         f"{efficiency:.0%} of that as all-reduce busbw")


def _on_nvswitch_board(name: str | None, nvlink: Mapping[str, Any]) -> bool:
    """Is a GPU of this NVML name one of an HGX/DGX board's, every GPU reaching every other
    through NVSwitch (``nvswitch_boards``, names as NVML gives them; ``not_boards`` wins)?"""
    return bool(name) and any(part in name for part in nvlink["nvswitch_boards"]) \
        and not any(part in name for part in nvlink["not_boards"])


def figure_checks(figures: list[Figure]) -> list[Check]:
    """One check per kind of figure (copy, matmul, memory, all-reduce): warn when any is
    degraded, pass when some passed and none is degraded, skip (n/a) otherwise."""
    checks = []
    for check, names in CHECKS.items():
        mine = [f for f in figures if f.name in names]
        if not mine:
            continue
        bad = [f for f in mine if f.verdict == "degraded"]
        shown = "; ".join(f.words() for f in mine if f.value is not None) or "nothing measured"
        if bad:
            more = [f.cause or "" for f in bad[1:]]
            checks.append(Check(check, "warn", f"degraded: {bad[0].cause}",
                                "; ".join([shown] + more), bad[0].action))
        elif any(f.verdict == "pass" for f in mine):
            checks.append(Check(check, "pass", shown,
                                "; ".join(f"{f.device} {f.name}: {f.why}" for f in mine)))
        else:
            reasons = sorted({f.why for f in mine})
            measured = f"{shown} (n/a: {reasons[0]})" if shown != "nothing measured" else f"n/a: {reasons[0]}"
            checks.append(Check(check, "skip", measured, "; ".join([shown] + reasons[1:])))
    unmeasured = [f for f in figures if f.name == "figures"]
    if unmeasured:
        checks.append(Check("figures", "skip", f"n/a: {unmeasured[0].device}: {unmeasured[0].why}"))
    return checks
