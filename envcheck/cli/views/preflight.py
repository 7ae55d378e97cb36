"""Text for `envcheck fleet preflight` (a row per node and device figure, the collective, the
halving, what differs, the verdict) and for the node's own `envcheck preflight ...`."""
from __future__ import annotations

from typing import Any

from ..render import colour, table

COLOURS = {"healthy": "ready", "unjudged": "degraded", "straggler": "not-ready", "bad-link": "not-ready",
           "lost": "not-ready", "failed": "not-ready"}


def _verdict(word: str) -> str:
    return colour(COLOURS.get(word, word)).replace(COLOURS.get(word, word), word)


def fleet_preflight(result: Any) -> str:
    lines = [f"envcheck fleet preflight at {result.address} ({result.engine}), env {result.env}: "
             f"{len(result.nodes)} node(s), budget {result.budget:g} s, tolerance {result.tolerance:.0%}"]
    rows = [("NODE", "HOST", "VERDICT", "DEVICE", "FIGURE", "VALUE", "MEDIAN", "RATIO", "JUDGED BY", "TABLE",
             "FIGURE VERDICT")]
    for n in result.nodes:
        name, host, verdict = n.node.short_id, n.host, _verdict(n.verdict)
        if not n.scores:
            rows.append((name, host, verdict, "-", "-", "-", "-", "-", "-", "-", "-"))
        for s in n.scores:
            rows.append((name, host, verdict, s["device"], s["figure"], f"{s['value']:g} {s['unit']}",
                         "-" if s["median"] is None else f"{s['median']:g}",
                         "-" if s["ratio"] is None else f"{s['ratio']:.0%}", s["basis"], s["absolute"],
                         {"slow": colour("not-ready").replace("not-ready", "slow")}.get(s["verdict"], s["verdict"])))
            name = host = verdict = ""
    lines += table(rows)
    lines += [""] + _collective(result)
    bad = result.flagged
    if bad:
        lines += ["", "named:"]
        for n in bad:
            lines.append(f"  {n.node.describe()}: {n.verdict}: {n.cause}" + (f"; fix: {n.fix}" if n.fix else ""))
            for device, said in n.causes.items():
                lines += [f"    {device} likely: {c}" for c in said]
    for what, values in result.differences.items():
        lines.append(f"differs: {what}: " + "; ".join(f"{v} on {', '.join(i[:8] for i in ids)}"
                                                      for v, ids in values.items()))
    lines += [f"note: {note}" for note in result.notes]
    lines += [f"left out: {n.describe()}: {n.left_out_why()}" for n in result.left_out]
    if bad:
        lines.append(f"exclude: {result.exclude('slurm')} (--exclude slurm|ray|hostlist prints it alone)")
    answer = result.envelope()
    word = {"ready": "healthy", "degraded": "healthy, some unjudged", "not-ready": "NOT HEALTHY"}[answer["verdict"]]
    lines.append(f"preflight: {colour(answer['verdict']).replace(answer['verdict'], word)}: "
                 f"{sum(n.verdict == 'healthy' for n in result.nodes)} of {len(result.nodes)} node(s) healthy, "
                 f"{len(bad)} named, in {result.seconds:.1f} s")
    return "\n".join(lines)


def _collective(result: Any) -> list[str]:
    c = result.collective
    if not c:
        return ["collective: not run (fewer than two nodes measured)"]
    state = "ok" if c["ok"] else f"FAILED: {c['why']}"
    busbw = f"busbw {c['busbw']:g} GB/s, algbw {c['algbw']:g} GB/s" if c.get("busbw") else "no bandwidth"
    lines = [f"collective across {len(c['nodes'])} nodes: {state}; {busbw}; {c['seconds']:.1f} s"]
    halving = result.halving
    if halving and len(halving.rounds) > 1:
        for k, tests in enumerate(halving.rounds[1:], 2):
            said = "; ".join(f"{'+'.join(n[:8] for n in t.nodes)} {'ok' if t.ok else 'bad'}" for t in tests)
            lines.append(f"  halving round {k} of at most {halving.max_rounds}: {said}")
    return lines


def node_facts(result: Any) -> str:
    lines = [f"env {result.env_name}: " + (result.problem or f"digest {(result.identity or {}).get('digest')}, "
                                           f"framework {result.framework}"),
             f"machine: boot id {result.boot_id}, host {result.hostname}"]
    lines += [f"{name}: {d.get('model')}" for name, d in result.devices.items()]
    lines.append(f"free ports: {', '.join(map(str, result.ports))}")
    return "\n".join(lines)


def measurement(result: Any) -> str:
    if result.error:
        return f"env {result.env_name}: {colour('not-ready')}: {result.error}"
    doc = result.document or {}
    lines = []
    for name, device in result.devices.items():
        for figure, found in (device.get("figures") or {}).items():
            if found.get("value") is not None:
                lines.append(f"{name} {figure}: {found['value']:g} {found['unit']} ({found.get('timing', '')})")
    reduce = doc.get("allreduce")
    if reduce and reduce.get("value") is not None:
        lines.append(f"all-reduce busbw: {reduce['value']:g} GB/s ({reduce.get('how')})")
    lines.append(f"in {result.seconds:.1f} s")
    return "\n".join(lines)


def mark(result: Any) -> str:
    return f"preflight verdict recorded: {result.verdict}" + (
        " (" + ", ".join(f"{k} {v:.0%}" for k, v in result.ratios.items()) + ")" if result.ratios else "")
