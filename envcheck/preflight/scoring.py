"""Each figure judged against the fleet itself: the median of its model across the fleet and the
spread around it, not only a table.

A figure (``Sample``: a node's device, a probe, its model) is grouped with the same probe on
every device of the same model (a node's all-reduce with the nodes of the same devices). Where
the group spans two nodes or more, a figure is ``slow`` when it is below the group's median by
more than ``tolerance`` AND by more than the spread says is noise: its modified z-score,
0.6745 x (median - value) / MAD (median absolute deviation), above ``NOISE_Z`` (Iglewicz and
Hoaglin's 3.5 for outliers); a group whose values are all equal has no spread, so any value
below the median by more than the tolerance is out of it. A model on one node only is judged
against level 3's table alone (its absolute verdict: ``pass`` ok, ``degraded`` slow, ``n/a``
unjudged) and said so (``basis``). The absolute verdict and expectation stay beside every
figure. Higher is better for every figure (TFLOPS, GB/s).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

NOISE_Z = 3.5
Z_SCALE = 0.6745  # the MAD of a normal distribution is 0.6745 standard deviations


@dataclass(frozen=True)
class Sample:
    node: str
    device: str  # "gpu:0", "cpu:0", or "node" for the all-reduce inside the node
    figure: str  # matmul_fp32, copy_h2d, ..., allreduce
    model: str
    value: float
    unit: str
    absolute: str = "n/a"  # level 3's verdict: pass, degraded, n/a
    expectation: float | None = None


@dataclass(frozen=True)
class Score:
    sample: Sample
    verdict: str  # ok | slow | unjudged
    basis: str  # fleet | table | none
    median: float | None = None
    ratio: float | None = None
    mad: float | None = None
    z: float | None = None
    nodes: int = 1  # nodes in its group

    def to_json(self) -> dict[str, Any]:
        s = self.sample
        return {"device": s.device, "figure": s.figure, "model": s.model, "value": s.value, "unit": s.unit,
                "median": _round(self.median), "ratio": _round(self.ratio), "mad": _round(self.mad),
                "z": None if self.z is None else (round(self.z, 2) if self.z != float("inf") else "inf"),
                "nodes": self.nodes, "verdict": self.verdict, "basis": self.basis,
                "absolute": s.absolute, "expectation": s.expectation}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0


def score(samples: Iterable[Sample], tolerance: float) -> list[Score]:
    """Every sample judged (see the module docstring), in the order given."""
    samples = list(samples)
    groups: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    for sample in samples:
        groups[(sample.model, sample.figure)].append(sample)
    scored = []
    for sample in samples:
        group = groups[(sample.model, sample.figure)]
        nodes = len({s.node for s in group})
        if nodes < 2:
            verdict = {"pass": "ok", "degraded": "slow"}.get(sample.absolute, "unjudged")
            scored.append(Score(sample, verdict, "table" if verdict != "unjudged" else "none", nodes=nodes))
            continue
        values = [s.value for s in group]
        middle = median(values)
        spread = median([abs(v - middle) for v in values])
        below = middle - sample.value
        z = (Z_SCALE * below / spread if spread > 0 else (float("inf") if below > 0 else 0.0))
        ratio = sample.value / middle if middle > 0 else None
        slow = ratio is not None and ratio < 1.0 - tolerance and z > NOISE_Z
        scored.append(Score(sample, "slow" if slow else "ok", "fleet", middle, ratio, spread, z, nodes))
    return scored


def node_verdict(scores: list[Score]) -> str:
    """straggler (a figure slow), healthy (judged, none slow), unjudged (nothing to judge by)."""
    if any(s.verdict == "slow" for s in scores):
        return "straggler"
    return "healthy" if any(s.verdict == "ok" for s in scores) else "unjudged"


def ratios(scores: list[Score]) -> dict[str, float]:
    """{figure: the node's worst ratio to its model's median} over the fleet-judged figures."""
    found: dict[str, float] = {}
    for s in scores:
        if s.ratio is not None:
            name = s.sample.figure
            found[name] = round(min(found.get(name, s.ratio), s.ratio), 4)
    return found


def differences(facts: dict[str, dict[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """Configuration that differs across nodes: {what: {value: [node ids]}} for each of
    ``facts[node]``'s keys (driver, env digest, NCCL, GPU clocks...) with more than one value;
    a node that did not say (None) is left out."""
    seen: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for node, found in facts.items():
        for what, value in found.items():
            if value is not None:
                seen[what][str(value)].append(node)
    return {what: dict(values) for what, values in seen.items() if len(values) > 1}
