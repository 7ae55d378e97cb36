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
     "host_verdict": the worst over the visible GPUs and the node, or "no-gpu",
     "used_gpus": [NVML index...], "node": {"checks", "findings", "kernel_log"},
     "gpus": [host.level1's per-GPU section (its own "version"), ...],
     "drain": [{"gpu", "uuid", "finding"}...]: the GPUs whose level-1 verdict is not-ready}

Import-light (no dataclasses of its own, ``reports`` imported on use): the gate's stored-pass
answer builds the section too.
"""
from __future__ import annotations

SECTION_VERSION = 1
ORDER = ("not-ready", "degraded")


def host_verdict(health) -> str:
    """The node's level-1 verdict (the fleet counts nodes by it); "no-gpu" where NVML lists none."""
    return health.verdict if health.gpus else "no-gpu"


def counted(health, used: list[int]) -> list:
    """The findings that count for an env using GPUs ``used``, the worst first."""
    if not used:
        return []
    mine = [f for g in health.gpus if g.index in used for f in g.findings]
    found = [f for f in health.node + mine if f.effect in ORDER]
    return sorted(found, key=lambda f: ORDER.index(f.effect))


def env_verdict(health, used: list[int]) -> str | None:
    """ready, degraded or not-ready for an env using ``used``; None when it uses no GPU."""
    if not used:
        return None
    found = counted(health, used)
    return found[0].effect if found else "ready"


def drain(health) -> list[dict]:
    return [{"gpu": g.index, "uuid": g.uuid,
             "finding": next((f.id for f in g.findings if f.effect == "not-ready"), None)}
            for g in health.gpus if g.verdict == "not-ready"]


def section(health, used: list[int], level: int) -> dict:
    """The versioned ``health`` section (see the module docstring)."""
    node_json = health.body()["node"]
    return {"version": SECTION_VERSION, "level": level, "verdict": env_verdict(health, used),
            "host_verdict": host_verdict(health), "used_gpus": list(used), "node": node_json,
            "gpus": [health.gpu_section(g.index) for g in health.gpus], "drain": drain(health)}


def where(finding) -> str:
    return "node" if finding.gpu is None else f"GPU {finding.gpu}"


def problem(finding) -> str:
    """One line: where, what was measured, its cause."""
    return f"{where(finding)}: {finding.measured} ({finding.cause})"


def health_check(health, used: list[int]):
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
        return Check("health", "pass", f"level 1 on GPU(s) {gpus}: no fault{unread}",
                     "; ".join(f"{where(f)}: {f.measured}" for f in na))
    first = found[0]
    others = "; ".join(problem(f) for f in found[1:])
    return Check("health", "fail" if first.effect == "not-ready" else "warn", problem(first),
                 others + unread, first.action)
