"""Level-1 health (``host.level1.HealthReport``) as a validation sees it: the GPUs an env would
use, the ``health`` check that carries their first finding into the verdict and the result
envelope, and the versioned ``health`` section of a report (``envcheck.validation/1``,
``envcheck.gate/1``).

A finding counts for an env when it is on a GPU the env would use, or on the node (without
``/dev/nvidia-uvm`` no GPU trains) while it uses one: not-ready makes the env not-ready,
degraded degraded; info and n/a are listed and change nothing. An env that uses no GPU (a
CPU build, ``--devices cpu``, compat failed) gets its section, and no verdict from it.

The section (``SECTION_VERSION``)::

    {"version": 1, "level": N, "verdict": "ready"|"degraded"|"not-ready"|null (no GPU used),
     "host_verdict": the worst over the visible GPUs and the node, or "no-gpu"
                     (``HealthReport.node_verdict``),
     "used_gpus": [NVML index...], "node": {"checks", "findings", "kernel_log"},
     "gpus": [host.level1's per-GPU section (its own "version"), ...],
     "drain": [{"gpu", "uuid", "finding"}...]: the GPUs whose level-1 verdict is not-ready}

Import-light (no dataclasses of its own, ``reports`` imported on use): the gate's stored-pass
answer builds the section too.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see above)
if TYPE_CHECKING:
    from ..host.findings import Finding
    from ..host.level1 import HealthReport
    from .reports import Check

SECTION_VERSION = 1
CHECK_ID = "health"  # the check's id in a report (the gate never answers from a failed one)
ORDER = ("not-ready", "degraded")
WORST_FIRST = ("not-ready", "degraded", "ready", "no-gpu")  # a node's health over several sections


def counted(health: HealthReport, used: list[int]) -> list[Finding]:
    """The findings that count for an env using GPUs ``used``, the worst first."""
    if not used:
        return []
    mine = [f for g in health.gpus if g.index in used for f in g.findings]
    found = [f for f in health.node + mine if f.effect in ORDER]
    return sorted(found, key=lambda f: ORDER.index(f.effect))


def env_verdict(health: HealthReport, used: list[int]) -> str | None:
    """ready, degraded or not-ready for an env using ``used``; None when it uses no GPU."""
    if not used:
        return None
    found = counted(health, used)
    return found[0].effect if found else "ready"


def section(health: HealthReport, used: list[int], level: int) -> dict:
    """The versioned ``health`` section (see the module docstring)."""
    node_json = health.body()["node"]
    return {"version": SECTION_VERSION, "level": level, "verdict": env_verdict(health, used),
            "host_verdict": health.node_verdict, "used_gpus": list(used), "node": node_json,
            "gpus": [health.gpu_section(g.index) for g in health.gpus], "drain": health.gpus_to_drain()}


def node_health(sections: list[dict | None]) -> dict | None:
    """The node's level-1 health, as a result envelope's ``node`` carries it, from the
    ``health`` sections a command's answer holds (None: not read; a stored report's section
    is read tolerantly): the worst of their ``host_verdict``, and every GPU they drain. None
    when no section says."""
    from ..results import HEALTH_VERDICTS

    found = [s for s in sections if isinstance(s, dict) and s.get("host_verdict") in HEALTH_VERDICTS]
    if not found:
        return None
    drain: dict[tuple, dict] = {}
    for s in found:
        for d in s.get("drain") or []:
            if isinstance(d, dict):
                drain.setdefault((d.get("gpu"), d.get("uuid")), {k: d.get(k) for k in ("gpu", "uuid", "finding")})
    return {"verdict": min((s["host_verdict"] for s in found), key=WORST_FIRST.index),
            "drain": list(drain.values())}


def where(finding: Finding) -> str:
    return "node" if finding.gpu is None else f"GPU {finding.gpu}"


def problem(finding: Finding) -> str:
    """One line: where, what was measured, its cause."""
    return f"{where(finding)}: {finding.measured} ({finding.cause})"


def health_check(health: HealthReport, used: list[int]) -> Check | None:
    """The ``health`` check of an env using GPUs ``used`` (None when it uses none): its first
    finding's cause as the summary, its action as the fix; the others in the detail."""
    from .reports import Check

    if not used:
        return None
    found = counted(health, used)
    na = [f for g in health.gpus if g.index in used for f in g.findings if f.effect == "n/a"]
    gpus = ", ".join(str(i) for i in used)
    unread = f"; n/a: {', '.join(f'{f.check} (GPU {f.gpu})' for f in na)}" if na else ""
    if not found:
        return Check(CHECK_ID, "pass", f"level 1 on GPU(s) {gpus}: no fault{unread}",
                     "; ".join(f"{where(f)}: {f.measured}" for f in na))
    first = found[0]
    others = "; ".join(problem(f) for f in found[1:])
    return Check(CHECK_ID, "fail" if first.effect == "not-ready" else "warn", problem(first),
                 others + unread, first.action)
