"""Text for `envcheck fleet`: a row per node, each node that is not ready with its first fix,
then what the nodes have in common and the fleet's answer."""
from __future__ import annotations

from typing import Any

from ..render import colour, table


def fleet(result: Any) -> str:
    lines = [f"envcheck fleet {result.command} at {result.address}: {len(result.nodes)} node(s) asked"]
    rows = [("NODE", "ADDRESS", "LABELS", f"{result.engine.upper()} GPUS", "ENVCHECK", "EXIT", "VERDICT")]
    rows += [_row(n) for n in result.nodes]
    lines += table(rows) if result.nodes else ["no node to ask"]
    bad = [n for n in result.nodes if not n.ready]
    if bad:
        lines += ["", "not ready:"]
        for n in bad:
            why = n.problem or n.verdict
            lines.append(f"  {n.node.describe()}: {why}" + (f"; fix: {n.fix}" if n.fix else ""))
    if result.command == "labels":
        lines += ["", "labels:"] + [f"  {n.node.short_id}: {_labels(n)}" for n in result.nodes]
    lines += [""] + _common(result)
    lines += [f"left out: {n.describe()}: {n.left_out_why()}" for n in result.left_out]
    verdict = colour("ready") if result.ok else colour("NOT READY")
    lines.append(f"fleet: {verdict}: {result.ready_count} of {len(result.nodes)} node(s) ready, "
                 f"{result.needed} needed")
    return "\n".join(lines)


def _labels(n: Any) -> str:
    found = (n.report or {}).get("labels")
    if not isinstance(found, dict):
        return "none (no answer)"
    return ", ".join(f"{k}={v}" for k, v in found.items()) or "none"


def _row(n: Any) -> tuple[str, ...]:
    labels = ",".join(f"{k}={v}" for k, v in n.node.own_labels.items()) or "-"
    gpus = f"{n.node.gpus} {n.node.accelerator_type or ''}".strip()
    exit_code = "-" if n.exit_code is None else str(n.exit_code)
    return (n.node.short_id + (" (head)" if n.node.is_head else ""), n.node.address, labels, gpus,
            n.envcheck_version or "-", exit_code, colour(n.verdict))


def _common(result: Any) -> list[str]:
    summary = result.summary()
    lines = [f"drivers: {', '.join(summary['driver_versions']) or 'none measured'}",
             f"GPU models: {', '.join(summary['gpu_models']) or 'none'}"]
    if result.other_versions:
        others = ", ".join(f"{n.node.short_id} runs {n.envcheck_version}" for n in result.other_versions)
        lines.append(f"envcheck versions differ: {others} (this envcheck: {result.envcheck_version})")
    health = summary.get("health") or {}
    counted = ", ".join(f"{count} {verdict.replace('_', '-')}" for verdict, count in health.items() if count)
    if counted:
        lines.append(f"GPU health (level 1) of the nodes: {counted}")
    lines += [f"drain: node {d['node_id'][:8]} ({d['hostname'] or d['address']}) GPU {d['gpu']}"
              + (f" {d['uuid']}" if d.get("uuid") else "") + (f": {d['finding']}" if d.get("finding") else "")
              for d in summary.get("drain") or []]
    envs = summary["envs_ready_everywhere"]
    if envs is not None:
        lines.append(f"envs ready on every node: {', '.join(envs) or 'none'}")
    for name, compared in (summary.get("envs") or {}).items():
        lines += _env_lines(name, compared)
    return lines


def _env_lines(name: str, compared: dict[str, Any]) -> list[str]:
    """An env that is not the same on every node: its digests, and what differs where."""
    if compared["same"]:
        (digest,) = compared["digests"]
        return [f"env {name}: the same on every node ({digest[:19]})"]
    lines = [f"env {name}: " + "; ".join(f"{digest[:19]} on {len(ids)} node(s) ({', '.join(i[:8] for i in ids)})"
                                          for digest, ids in compared["digests"].items())]
    if compared["missing"]:
        lines.append(f"  missing on: {', '.join(i[:8] for i in compared['missing'])}")
    for node in compared["differ"]:
        changes = ", ".join(f"{p} {v['node'] or 'absent'} (others {v['others'] or 'absent'})"
                            for p, v in node["packages"].items())
        lines.append(f"  node {node['node_id'][:8]} ({node['hostname'] or '-'}) differs: {changes}")
    return lines
