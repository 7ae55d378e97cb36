"""The nodes' answers to a preflight's rounds, read: each node's facts (``NodeFacts``), its probes
as samples to score (``samples``), a straggler GPU's likely causes (``causes``), a collective's
outcome as a halving ``Trial`` (``test_of``) and the configuration the fleet compares
(``configuration``). A node's answer is its document as ``fleet.aggregate.node_report`` read it:
no document is a node that did not answer (``lost``), or whose envcheck could not (``failed``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..fleet.aggregate import NodeReport
from .halving import Trial
from .scoring import Sample

SILENT = ("lost", "unreachable", "busy")  # verdicts of a node whose task gave no answer
CPU_CAUSE = ("the CPU gave less than its siblings: a CPU quota or cgroup limit on the node's processes, other "
             "processes on its cores, or frequency scaling (look at the node's cgroup, `top`, its CPU governor)")


@dataclass
class NodeFacts:
    report: NodeReport
    document: dict[str, Any] | None = None
    problem: str | None = None  # why the env can't be probed there
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)

    @property
    def node(self) -> Any:
        return self.report.node

    @property
    def silent(self) -> bool:
        return self.document is None and self.report.verdict in SILENT

    @property
    def boot_id(self) -> str:
        """The machine: its boot id, else (a node that did not say) its own id, alone."""
        return (self.document or {}).get("boot_id") or f"node:{self.node.id}"

    @property
    def identity(self) -> dict[str, Any] | None:
        return (self.document or {}).get("identity")

    def digest(self) -> str:
        """The env's content digest (issue 21's), else its packages, as the fleet compares them."""
        found = self.identity or {}
        if found.get("digest"):
            return str(found["digest"])
        packages = found.get("packages") or {}
        return "packages:" + ",".join(f"{k}=={v}" for k, v in sorted(packages.items()))


def facts_of(report: NodeReport) -> NodeFacts:
    document = report.report if isinstance(report.report, dict) and str(report.report.get("schema", "")).startswith(
        "envcheck.preflight-facts/") else None
    if document is None:
        return NodeFacts(report, None, report.problem)
    devices = document.get("devices") if isinstance(document.get("devices"), dict) else {}
    ports = [p for p in document.get("ports") or [] if isinstance(p, int)]
    return NodeFacts(report, document, document.get("problem"), devices, ports)


def document_of(report: NodeReport, schema: str) -> dict[str, Any] | None:
    found = report.report
    return found if isinstance(found, dict) and found.get("schema") == schema else None


def _signature(devices: dict[str, Any]) -> str:
    models = sorted({str(d.get("model")) for d in devices.values()})
    return f"{len(devices)} x {' + '.join(models)}"


def samples(node: str, probe: dict[str, Any]) -> list[Sample]:
    """Every figure a node's probe measured: per device, and its all-reduce inside the node."""
    judged = {(j.get("device"), j.get("name")): j for j in probe.get("absolute") or [] if isinstance(j, dict)}
    found = []
    devices = probe.get("devices") or {}
    for device, facts in devices.items():
        for name, figure in (facts.get("figures") or {}).items():
            if isinstance(figure, dict) and isinstance(figure.get("value"), (int, float)):
                j = judged.get((device, name), {})
                found.append(Sample(node, device, name, str(facts.get("model")), float(figure["value"]),
                                    figure.get("unit", ""), j.get("verdict", "n/a"), j.get("expectation")))
    reduce = probe.get("allreduce")
    if isinstance(reduce, dict) and isinstance(reduce.get("value"), (int, float)):
        j = next((v for (d, name), v in judged.items() if name == "allreduce"), {})
        found.append(Sample(node, "node", "allreduce", _signature(devices), float(reduce["value"]),
                            reduce.get("unit", "GB/s"), j.get("verdict", "n/a"), j.get("expectation")))
    return found


def best_of(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """A node probed twice: each figure the higher of its two (the second probe's facts, its
    findings after the run, otherwise)."""
    def better(a: Any, b: Any) -> Any:
        va = a.get("value") if isinstance(a, dict) else None
        vb = b.get("value") if isinstance(b, dict) else None
        return a if isinstance(va, (int, float)) and (not isinstance(vb, (int, float)) or va >= vb) else b

    merged = dict(second)
    merged["devices"] = {}
    for device, facts in (second.get("devices") or {}).items():
        earlier = ((first.get("devices") or {}).get(device) or {}).get("figures") or {}
        figures = facts.get("figures") or {}
        merged["devices"][device] = {**facts, "figures": {name: better(earlier.get(name), fig)
                                                          for name, fig in figures.items()}}
    merged["allreduce"] = better(first.get("allreduce"), second.get("allreduce"))
    chosen = {(d, n) for d, f in merged["devices"].items() for n, fig in f["figures"].items()
              if fig is ((first.get("devices") or {}).get(d) or {}).get("figures", {}).get(n)}
    if merged["allreduce"] is first.get("allreduce"):
        chosen |= {(j.get("device"), "allreduce") for j in first.get("absolute") or []}
    earlier = {(j.get("device"), j.get("name")): j for j in first.get("absolute") or []}
    merged["absolute"] = [earlier.get((j.get("device"), j.get("name")), j)
                          if (j.get("device"), j.get("name")) in chosen else j for j in second.get("absolute") or []]
    return merged


def causes(probe: dict[str, Any], slow_devices: set[str]) -> dict[str, list[str]]:
    """Each slow device's likely causes: a GPU's level-1 findings (clock event reasons, a PCIe
    link below its maximum, ECC, Xid...), read after its probes; a CPU's, in words."""
    found = {}
    devices = probe.get("devices") or {}
    if "node" in slow_devices:  # its all-reduce inside the node
        gpus = [d for d, facts in devices.items() if facts.get("kind") != "cpu"]
        found["node"] = [CPU_CAUSE] if not gpus else [
            "the all-reduce between its GPUs was slow: look at how they are linked (`nvidia-smi topo -m`, "
            "NVLink errors: `nvidia-smi nvlink -e`) and at each GPU's PCIe link"]
    for device, facts in devices.items():
        if device not in slow_devices:
            continue
        if facts.get("kind") == "cpu":
            found[device] = [CPU_CAUSE]
            continue
        said = [f"{f.get('measured')}: {f.get('cause')}" for f in facts.get("findings") or [] if isinstance(f, dict)]
        found[device] = said or ["level 1 finds nothing on this GPU: look at its clocks under load "
                                 "(`nvidia-smi -q -d PERFORMANCE,CLOCK`) and other processes on it"]
    return found


def test_of(group: tuple[str, ...], reports: dict[str, NodeReport], min_busbw: float | None) -> Trial:
    """A collective's outcome as the halving reads it: ok when every rank measured (and, with
    ``min_busbw``, fast enough); else why, with the nodes that gave no answer at all."""
    silent = tuple(n for n in group if reports[n].report is None and reports[n].verdict in SILENT)
    seconds = max((reports[n].seconds or 0.0) for n in group)
    docs = {n: document_of(reports[n], "envcheck.preflight-collective/1") for n in group}
    failed = [n for n in group if docs[n] is None or docs[n].get("error")]
    if silent:
        first = reports[silent[0]]
        return Trial(group, False, f"node {first.node.short_id} gave no answer: {first.problem}", None, seconds, silent)
    if failed:
        first = failed[0]
        why = (docs[first] or {}).get("error") or reports[first].problem or reports[first].verdict
        return Trial(group, False, f"node {reports[first].node.short_id}: {why}", None, seconds)
    figure = docs[group[0]].get("allreduce") or {}
    busbw = figure.get("value")
    if min_busbw is not None and isinstance(busbw, (int, float)) and busbw < min_busbw:
        return Trial(group, False, f"bus bandwidth {busbw:g} GB/s, below --min-busbw {min_busbw:g}", busbw, seconds)
    return Trial(group, True, None, busbw, seconds)


def configuration(facts: NodeFacts, probe: dict[str, Any] | None) -> dict[str, Any]:
    """What the fleet compares of one node's configuration (``scoring.differences``)."""
    document = facts.document or {}
    build = (probe or {}).get("build") or {}
    identity = facts.identity or {}
    clocks = sorted({f"SM/memory {d['readings'].get('clocks_sm_app_mhz')}/{d['readings'].get('clocks_mem_app_mhz')}"
                     f" MHz applications, {d['readings'].get('clocks_sm_max_mhz')}/"
                     f"{d['readings'].get('clocks_mem_max_mhz')} MHz max" for d in facts.devices.values()
                     if isinstance(d.get("readings"), dict) and "clocks_sm_app_mhz" in d["readings"]})
    return {"driver_version": document.get("driver_version"), "env_digest": identity.get("digest"),
            "lock_digest": identity.get("lock"), "framework_version": build.get("version"),
            "nccl_version": build.get("nccl_version"), "envcheck_version": facts.report.envcheck_version,
            "gpu_clocks": "; ".join(clocks) or None}
