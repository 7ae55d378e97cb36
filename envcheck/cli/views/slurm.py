"""Text for `envcheck slurm`: what a hook found on this node and what it did (short: slurmd
keeps a failed health check's output in its log), and the GRES comparison."""
from __future__ import annotations

import shlex
from typing import Any

from ..render import colour


def node_check(result: Any) -> str:
    command = result.schema.split("/")[0].rsplit(".", 1)[-1]
    lines = [f"envcheck slurm {command}: node {result.node} ({result.node_from}), "
             f"{result.slurm.describe()} in Slurm, {result.seconds} s"]
    job = getattr(result, "job", None)
    if job:
        gpus = ", ".join(f"gpu{i}" for i in result.gpus or []) or "none"
        lines.append(f"job {job}: GPUs {gpus} ({result.gpus_from})")
    for problem in result.problems:
        word = colour("not-ready") if problem.effect == "not-ready" else colour(problem.effect)
        seen = f" ({problem.measured})" if problem.measured and problem.measured not in problem.text else ""
        lines.append(f"{word}: {problem.where} {problem.id}{seen}: {problem.text}")
    action = result.action
    if action is not None and action.state is not None:
        said = shlex.join(result.argv)
        lines.append(f"would run: {said}" if result.dry_run else f"ran: {said}")
    elif action is not None:
        lines.append(f"no change in Slurm: {action.why}")
    if getattr(result, "snapshot", None):
        lines.append(f"snapshot: {result.snapshot}")
    lines.append(f"{command}: " + (colour("ready") if not result.blocking else colour("NOT READY")))
    return "\n".join(lines)


def gres_result(result: Any) -> str:
    check = result.check
    if result.write:
        return "\n".join(result.lines)
    slurm = ",".join(g.spelt() for g in check.slurm if g.name == "gpu") or "no gpu"
    models = ", ".join(sorted({g.name or "unknown" for g in check.gpus})) or "none"
    lines = [f"node {check.node}: slurm says {slurm}" + (f" (gres.conf {check.conf.path})" if check.conf.path else
                                                         " (no gres.conf)"),
             f"NVML sees {len(check.gpus)}: {models}"]
    lines += [f"{colour('not-ready')}: {p.id}: {p.measured}" for p in check.problems]
    lines.append("gres: " + (colour("ready") + ": consistent" if check.consistent else
                             colour("NOT READY") + ": `envcheck slurm gres --write` prints the lines NVML sees"))
    return "\n".join(lines)
