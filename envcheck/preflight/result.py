"""The preflight's answer: ``envcheck.preflight/1``, the exclude lists and the exit code.

Per node: its engine's facts, host and machine (boot id), its verdict (``preflight_mark.VERDICTS``)
with the cause and the fix, each figure with its model's median, its ratio to it, the spread and
its verdict (``scoring.Score``), level 3's expectation beside, the likely causes of a straggler
GPU (its level-1 findings), and whether its verdict was recorded on it. The fleet: the
collective's nodes, wall time and bus bandwidth, the halving's rounds and what they named, each
model and what it was judged against, and the configuration that differs across nodes.

Exit 0 when every node is healthy (or had nothing to judge it against: the envelope is then
degraded, said); 1 when a straggler, a bad link or a lost or failed node is named; 2 when nothing
was measured (bad input raises before any result).

The exclude lists (``exclude``), to paste into a job's launch: ``slurm``, a Slurm host list
(``srun --exclude=``: the node names on Slurm, the short host names on Ray); ``ray``, a Ray
label selector excluding the flagged node ids (``{"ray.io/node-id": "!in(ID,...)"}``, as
``.options(label_selector=...)`` takes it); ``hostlist``, one host per line. A host is listed
once however many flagged nodes share it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import UsageError
from ..results import Result, envelope
from .halving import Halving

FLAGGED = ("straggler", "bad-link", "lost", "failed")
EXCLUDES = ("slurm", "ray", "hostlist")
RAY_NODE_ID = "ray.io/node-id"


@dataclass
class NodeVerdict:
    node: Any  # fleet.cluster.Node
    hostname: str | None = None
    boot_id: str | None = None
    version: str | None = None
    verdict: str = "unjudged"
    cause: str | None = None
    fix: str | None = None
    scores: list[dict[str, Any]] = field(default_factory=list)
    ratios: dict[str, float] = field(default_factory=dict)
    causes: dict[str, list[str]] = field(default_factory=dict)  # device -> likely causes
    models: dict[str, str] = field(default_factory=dict)  # device -> model
    build: dict[str, Any] | None = None
    probe_seconds: float | None = None
    probes: int = 1  # 2: a slow figure was probed a second time, each figure the better of the two
    turn: int | None = None  # its turn of probes (nodes of one machine each have their own)
    recorded: bool | None = None  # None: not asked (lost)

    @property
    def flagged(self) -> bool:
        return self.verdict in FLAGGED

    @property
    def host(self) -> str:
        """The short host name, else the node's address."""
        return (self.hostname or self.node.address).split(".")[0]

    def to_json(self) -> dict[str, Any]:
        return {**self.node.to_json(), "hostname": self.hostname, "boot_id": self.boot_id,
                "envcheck_version": self.version, "verdict": self.verdict, "cause": self.cause, "fix": self.fix,
                "devices": self.models, "figures": self.scores, "ratios": self.ratios, "causes": self.causes,
                "build": self.build, "probe_seconds": self.probe_seconds, "probes": self.probes, "turn": self.turn,
                "recorded": self.recorded}


@dataclass
class PreflightResult(Result):
    schema: ClassVar[str] = "envcheck.preflight/1"
    engine: str
    address: str
    env: str
    budget: float
    tolerance: float
    nodes: list[NodeVerdict]
    collective: dict[str, Any] | None
    halving: Halving | None
    models: dict[str, dict[str, Any]]
    differences: dict[str, dict[str, list[str]]]
    seconds: float
    min_busbw: float | None = None
    left_out: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # seconds from the start as each phase ended

    @property
    def measured(self) -> bool:
        return any(n.scores for n in self.nodes)

    @property
    def flagged(self) -> list[NodeVerdict]:
        return [n for n in self.nodes if n.flagged]

    @property
    def exit_code(self) -> int:
        if not self.measured and not self.flagged:
            return 2
        return 1 if self.flagged else 0

    def envelope(self) -> dict:
        bad = self.flagged
        if bad:
            first = bad[0]
            return envelope("not-ready", f"{len(bad)} of {len(self.nodes)} node(s) named: node "
                            f"{first.node.describe()}: {first.verdict}: {first.cause}", first.fix, [])
        if not self.measured:
            return envelope("not-ready", "nothing was measured", None, [])
        unjudged = [n for n in self.nodes if n.verdict == "unjudged"]
        if unjudged:
            return envelope("degraded", f"{len(unjudged)} node(s) measured with nothing to judge them against "
                            f"(alone with their model, and no expectation in level 3's table): "
                            f"{', '.join(n.node.short_id for n in unjudged)}", None, [self.env])
        return envelope("ready", None, None, [self.env])

    def exclude(self, form: str) -> str:
        """The flagged nodes as ``form`` (``EXCLUDES``; see the module docstring)."""
        bad = self.flagged
        if form == "ray":
            if self.engine != "ray":
                raise UsageError("--exclude ray lists Ray node ids: this preflight ran over Slurm",
                                 "use --exclude slurm or --exclude hostlist")
            ids = [n.node.id for n in bad]
            return json.dumps({RAY_NODE_ID: f"!in({', '.join(ids)})"} if ids else {})
        hosts = list(dict.fromkeys(n.node.id if self.engine == "slurm" and form == "slurm" else n.host
                                   for n in bad))
        if form == "slurm":
            from ..slurm.names import fold

            return fold(hosts)
        return "\n".join(hosts)

    def body(self) -> dict[str, Any]:
        return {"engine": self.engine, "address": self.address, "env": self.env, "budget": self.budget,
                "tolerance": self.tolerance, "min_busbw": self.min_busbw, "seconds": round(self.seconds, 3),
                "phases": self.phases,
                "summary": self.summary(), "nodes": [n.to_json() for n in self.nodes],
                "collective": self.collective, "halving": self.halving.to_json() if self.halving else None,
                "models": self.models, "differences": self.differences,
                "exclude": {"slurm": self.exclude("slurm"), "hostlist": self.exclude("hostlist").splitlines(),
                            "ray": json.loads(self.exclude("ray")) if self.engine == "ray" else None},
                "left_out": [{**n.to_json(), "why": n.left_out_why()} for n in self.left_out],
                "notes": self.notes}

    def summary(self) -> dict[str, Any]:
        from ..usecases.preflight_mark import VERDICTS

        counts = {v.replace("-", "_"): sum(n.verdict == v for n in self.nodes) for v in VERDICTS}
        return {"nodes": len(self.nodes), **counts, "named": [n.node.id for n in self.flagged],
                "within_budget": self.seconds <= self.budget}
