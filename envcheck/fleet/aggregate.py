"""The fleet's answer: one ``envcheck.fleet/1`` document, a record per node and a summary.

Per node: its engine's facts (``cluster.Node``: Ray's id, address, labels, GPU count and
accelerator type; or Slurm's name, address, partitions, ``Gres=`` count and type, state and
reason), the envcheck it ran and that envcheck's version, its exit code, a verdict and the
node's own document. Verdicts: the node's own ``ready``, ``degraded`` or ``not-ready`` (its
document's result envelope, ``reading``); ``busy`` (its GPUs held by other work past the bound),
``no-envcheck``, ``error`` (its envcheck did not answer the question, or is too old to answer
with the result envelope), ``unreachable`` (the task never started there) and ``lost`` (it
started, then the node died or gave no answer in time).

A node counts as ready when its envcheck exited 0 with a ready or degraded verdict, as the
same command on that node would. Exit 0 when every node asked is ready, or at least
``min_ready`` of them; 1 otherwise, and when no node was asked.

The summary: the count of each verdict, the distinct driver versions and GPU models the nodes
measured, the distinct envcheck versions (and each node whose version differs from this
envcheck's), the envs ready on every node asked (``None`` for ``gpu``, which doesn't
speak of envs), and each env the nodes' commands looked at grouped by its digests, with the
nodes and packages that differ (``envs.compare_envs``). The fleet's own envelope (``envelope()``): not-ready with fewer ready nodes
than needed, degraded when enough are but one is degraded or not ready, else ready.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..results import Result, envelope
from .cluster import Node
from .dispatch import Outcome
from .envs import compare_envs
from .health import HEALTH_VERDICTS
from .reading import OK_VERDICTS, Reading, read

VERDICTS = ("ready", "degraded", "not-ready", "busy", "no-envcheck", "error", "unreachable", "lost")
FIXES = {  # a node that gave no answer, by engine and outcome
    "ray": {"busy": "wait for the jobs holding them (`ray status`), or allow more --busy-after",
            "unreachable": "check the node with `ray status`",
            "lost": "check the node with `ray status` and its raylet log"},
    "slurm": {"busy": "wait for the jobs holding them (`squeue -w {node}`), or allow more --busy-after",
              "unreachable": "check the node with `scontrol show node {node}` and its slurmd log",
              "lost": "check the node with `scontrol show node {node}` and its slurmd log"},
}


@dataclass
class NodeReport:
    node: Node
    verdict: str
    problem: str | None = None
    fix: str | None = None
    exit_code: int | None = None
    envcheck: str | None = None  # the command that ran, e.g. /usr/local/bin/envcheck
    envcheck_version: str | None = None
    hostname: str | None = None
    driver_version: str | None = None
    gpu_models: list[str] = field(default_factory=list)
    ready_envs: list[str] | None = None
    seconds: float | None = None
    report: dict[str, Any] | None = None
    health: str = "unknown"  # the node's level-1 verdict, from its envelope (fleet.health)
    drain: list[dict[str, Any]] = field(default_factory=list)  # its GPUs to drain
    envs: list[dict[str, Any]] | None = None  # the envs its command looked at, as EnvInfo.identity

    @property
    def ready(self) -> bool:
        return self.exit_code == 0 and self.verdict in OK_VERDICTS

    def to_json(self) -> dict[str, Any]:
        return {**self.node.to_json(), "hostname": self.hostname, "envcheck": self.envcheck,
                "envcheck_version": self.envcheck_version, "exit_code": self.exit_code,
                "verdict": self.verdict, "ready": self.ready, "problem": self.problem,
                "fix": self.fix, "driver_version": self.driver_version,
                "gpu_models": self.gpu_models, "ready_envs": self.ready_envs,
                "seconds": self.seconds, "health": self.health, "drain": self.drain,
                "report": self.report}


def node_report(command: str, outcome: Outcome) -> NodeReport:
    """What one node answered, read."""
    answer = outcome.answer
    if answer is None:
        fix = FIXES[outcome.node.engine][outcome.state].format(node=outcome.node.id)
        return NodeReport(outcome.node, outcome.state, outcome.cause, fix, seconds=outcome.seconds,
                          ready_envs=None if command == "gpu" else [])
    reading: Reading = read(command, answer)
    host = answer.get("host") or {}
    return NodeReport(
        outcome.node, reading.verdict, reading.problem, reading.fix,
        exit_code=answer.get("exit_code"), envcheck=answer.get("envcheck"),
        envcheck_version=answer.get("version"), hostname=answer.get("hostname"),
        driver_version=host.get("driver_version"),
        gpu_models=sorted({g.get("name") for g in host.get("gpus") or [] if g.get("name")}),
        ready_envs=reading.ready_envs, seconds=outcome.seconds, report=answer.get("document"),
        health=reading.health, drain=reading.drain, envs=reading.envs)


@dataclass
class FleetResult(Result):
    schema: ClassVar[str] = "envcheck.fleet/1"
    command: str
    args: list[str]
    address: str
    envcheck_version: str  # this envcheck's, the driver's
    timeout: float
    nodes: list[NodeReport] = field(default_factory=list)
    left_out: list[Node] = field(default_factory=list)  # the head without GPUs; Slurm's drained and down nodes
    min_ready: int | None = None
    engine: str = "ray"

    @property
    def ready_count(self) -> int:
        return sum(n.ready for n in self.nodes)

    @property
    def needed(self) -> int:
        return len(self.nodes) if self.min_ready is None else self.min_ready

    @property
    def ok(self) -> bool:
        return bool(self.nodes) and self.ready_count >= self.needed

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    @property
    def other_versions(self) -> list[NodeReport]:
        """Nodes whose envcheck answered with another version than this one."""
        return [n for n in self.nodes if n.envcheck_version and n.envcheck_version != self.envcheck_version]

    def envs_ready_everywhere(self) -> list[str] | None:
        if self.command == "gpu":
            return None
        sets = [set(n.ready_envs or []) for n in self.nodes]
        return sorted(set.intersection(*sets)) if sets else []

    def envelope(self) -> dict:
        """Not-ready when too few nodes are ready; degraded when enough are, but a node is
        degraded or (``min_ready``) not ready; else ready. The problem: how many are ready and
        the first node that isn't, with its fix. The envs: those ready on every node."""
        envs = self.envs_ready_everywhere()
        counted = f"{self.ready_count} of {len(self.nodes)} node(s) ready, {self.needed} needed"
        bad = next((n for n in self.nodes if not n.ready), None)
        problem = fix = None
        if bad is not None:
            why = f": {bad.problem}" if bad.problem else ""
            problem = f"{counted}; node {bad.node.describe()}: {bad.verdict}{why}"
            fix = bad.fix
        if not self.ok:
            return envelope("not-ready", problem or f"{counted}: no node was asked", fix, envs)
        degraded = bad is not None or any(n.verdict == "degraded" for n in self.nodes)
        return envelope("degraded" if degraded else "ready", problem, fix, envs)

    def summary(self) -> dict[str, Any]:
        counts = {v.replace("-", "_"): sum(n.verdict == v for n in self.nodes) for v in VERDICTS}
        return {"nodes": len(self.nodes), **counts, "ready_nodes": self.ready_count,
                "needed": self.needed, "ok": self.ok,
                "driver_versions": sorted({n.driver_version for n in self.nodes if n.driver_version}),
                "gpu_models": sorted({m for n in self.nodes for m in n.gpu_models}),
                "envcheck_versions": sorted({n.envcheck_version for n in self.nodes if n.envcheck_version}),
                "other_versions": [{"node_id": n.node.id, "version": n.envcheck_version}
                                   for n in self.other_versions],
                "envs_ready_everywhere": self.envs_ready_everywhere(),
                "health": {v.replace("-", "_"): sum(n.health == v for n in self.nodes) for v in HEALTH_VERDICTS},
                "drain": [{"node_id": n.node.id, "address": n.node.address, "hostname": n.hostname, **d}
                          for n in self.nodes for d in n.drain],
                "envs": compare_envs(self.nodes)}

    def body(self) -> dict[str, Any]:
        return {"command": self.command, "args": self.args, "engine": self.engine, "address": self.address,
                "envcheck_version": self.envcheck_version, "timeout": self.timeout,
                "min_ready": self.min_ready, "summary": self.summary(),
                "nodes": [n.to_json() for n in self.nodes],
                "left_out": [{**n.to_json(), "why": n.left_out_why()} for n in self.left_out]}
