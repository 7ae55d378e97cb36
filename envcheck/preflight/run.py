"""One preflight, as a list of small steps: the nodes asked (at least two), their facts, the env's
digest compared (refused, naming the nodes, before any probe), the budget checked against the
turns the machines need, the probes in turns (nodes with one boot id probed in turn, not
together), one collective across the nodes that measured, the halving when it fails or is slow,
every node scored against its model's median and spread, and each node's verdict recorded on it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from . import budget as plan
from .halving import Halving, Trial
from .reading import NodeFacts, best_of, causes, configuration, document_of, facts_of, samples, test_of
from .result import NodeVerdict, PreflightResult
from .rounds import Rounds
from .scoring import differences, node_verdict, ratios, score

NODE_MARGIN_S = 2.0  # of a round's share, kept for envcheck's own start and answer on the node
COLLECTIVE_WAIT = 2.0  # a collective's share: at most this many times the slowest node's probes
UNSAFE = re.compile(r"[^A-Za-z0-9_.:,=/+@-]")


@dataclass(frozen=True)
class Options:
    env: str = "auto"
    budget: float = 60.0
    tolerance: float = 0.15
    engine: str = "ray"
    address: str | None = None
    nodes: str | None = None
    include_head: bool = False
    partition: str | None = None
    nodelist: str | None = None
    min_busbw: float | None = None


def fits(budget: float, turns: int, why: str) -> None:
    least = plan.smallest(turns)
    if budget < least:
        raise UsageError(f"--budget {budget:g}s is too small for one round ({why}: the facts, {turns} turn(s) of "
                         f"probes, one collective, the verdicts recorded)", f"give --budget {least:.0f}s or more")


def preflight(options: Options) -> PreflightResult:
    clock = plan.Clock(options.budget)
    fits(options.budget, 1, "two nodes on two machines at least")
    with Rounds.open(options.engine, address=options.address, nodes=options.nodes, include_head=options.include_head,
                     partition=options.partition, nodelist=options.nodelist) as rounds:
        if len(rounds.nodes) < 2:
            raise UsageError(f"{len(rounds.nodes)} node(s) to ask: a preflight compares nodes with each other and "
                             "needs two or more", "ask more nodes (--nodes, --nodelist, --partition), or use "
                             "`envcheck validate --level 3` on one node")
        phases = {"connected": round(clock.elapsed(), 3)}
        facts = ask_facts(rounds, options, clock)
        phases["facts"] = round(clock.elapsed(), 3)
        env = same_env(facts)
        verdicts = {f.node.id: NodeVerdict(f.node, (f.document or {}).get("hostname") or f.report.hostname,
                                           (f.document or {}).get("boot_id"), f.report.envcheck_version,
                                           models={d: str(v.get("model")) for d, v in f.devices.items()})
                    for f in facts.values()}
        for f in facts.values():
            if f.silent:
                verdicts[f.node.id].verdict, verdicts[f.node.id].cause = "lost", f.report.problem
                verdicts[f.node.id].fix = f.report.fix
        turns = machine_turns([f for f in facts.values() if not f.silent])
        fits(options.budget, len(turns), f"{len(rounds.nodes)} nodes, the most on one machine {len(turns)}, "
                                         "probed in turn")
        first = probe_turns(rounds, turns, env, clock, verdicts)
        phases["probes"] = round(clock.elapsed(), 3)
        probes, notes = confirmed(rounds, facts, first, env, options.tolerance, clock, verdicts)
        phases["second probes"] = round(clock.elapsed(), 3)
        collective, halving = collectives(rounds, facts, list(probes), env, options.min_busbw, clock,
                                          max((v.probe_seconds or 0.0) for v in verdicts.values()))
        phases["collectives"] = round(clock.elapsed(), 3)
        judge(verdicts, probes, options.tolerance, halving)
        notes += [] if collective else ["fewer than two nodes measured: no collective across nodes"]
        notes += record(rounds, verdicts, clock, f"{rounds.engine}:{rounds.where}")
        phases["recorded"] = round(clock.elapsed(), 3)
        models = model_summary(verdicts)
        notes += [f"{m}: on one node only, judged against level 3's table alone" for m, s in models.items()
                  if s["nodes"] == 1]
        return PreflightResult(rounds.engine, rounds.where, env, options.budget, options.tolerance,
                               list(verdicts.values()), collective, halving, models,
                               differences({i: configuration(facts[i], probes.get(i)) for i in facts}),
                               clock.elapsed(), options.min_busbw, rounds.left_out, notes, phases)


def ask_facts(rounds: Rounds, options: Options, clock: plan.Clock) -> dict[str, NodeFacts]:
    timeout = min(clock.share(plan.TURN_S + plan.COLLECTIVE_S + plan.RECORD_S), 2 * plan.FACTS_S)
    reports = rounds.ask(rounds.nodes, "facts", ["--env", options.env], max(timeout, 1.0), version=True)
    found = {r.node.id: facts_of(r) for r in reports}
    broken = [f for f in found.values() if f.document is None and not f.silent]
    if broken:
        raise UsageError("envcheck could not answer on " + "; ".join(
            f"node {f.node.describe()}: {f.report.verdict}: {f.problem}" for f in broken),
            broken[0].report.fix or "install this envcheck on every node")
    return found


def same_env(facts: dict[str, NodeFacts]) -> str:
    """The env's name, once it is the same on every node that answered: refused (bad input),
    naming the nodes, where it is missing or can't be probed, or its digests differ."""
    told = [f for f in facts.values() if f.document is not None]
    missing = [f for f in told if f.problem]
    if missing:
        raise UsageError("the env can't be probed on " + "; ".join(f"node {f.node.describe()}: {f.problem}"
                                                                    for f in missing),
                         "create the same env on every node (one lock: envcheck env create NAME --lock FILE)")
    names = {f.document.get("env") for f in told}
    by_digest: dict[str, list[NodeFacts]] = {}
    for f in told:
        by_digest.setdefault(f.digest(), []).append(f)
    if len(by_digest) > 1 or len(names) > 1:
        said = "; ".join(f"{digest[:19]} on " + ", ".join(f"{f.node.short_id} (env {f.document.get('env')})"
                                                          for f in found) for digest, found in by_digest.items())
        raise UsageError(f"the env differs between nodes: {said}", "make it from one lock on every node "
                         "(envcheck env lock, then envcheck env create NAME --lock FILE), then run preflight again")
    return names.pop() if names else "auto"


def machine_turns(facts: list[NodeFacts]) -> list[list[Any]]:
    """Turns of probes: turn k holds the k-th node of every machine (boot id)."""
    machines: dict[str, list[Any]] = {}
    for f in facts:
        machines.setdefault(f.boot_id, []).append(f.node)
    most = max((len(nodes) for nodes in machines.values()), default=0)
    return [[nodes[k] for nodes in machines.values() if len(nodes) > k] for k in range(most)]


def probe_turns(rounds: Rounds, turns: list[list[Any]], env: str, clock: plan.Clock,
                verdicts: dict[str, NodeVerdict] | None) -> dict[str, dict[str, Any]]:
    """Each turn's probes; {node id: its probe document} for the nodes that measured; a node
    that did not is lost or failed (``verdicts``; None: a second probe, whose failure is none)."""
    found = {}
    for k, turn in enumerate(turns):
        later = (len(turns) - k - 1) * plan.TURN_S + plan.COLLECTIVE_S + plan.RECORD_S
        timeout = max(clock.share(later), plan.TURN_S / 2)
        for r in rounds.ask(turn, "probe", ["--env", env, "--timeout", f"{timeout - NODE_MARGIN_S:.1f}"], timeout,
                            holds_gpus=True):
            doc = document_of(r, "envcheck.preflight-probe/1")
            if doc is not None and not doc.get("error"):
                found[r.node.id] = doc
            if verdicts is None:
                continue
            verdict = verdicts[r.node.id]
            verdict.probe_seconds, verdict.turn = r.seconds, k
            if doc is None or doc.get("error"):
                silent = doc is None and r.verdict in ("lost", "unreachable")  # busy: its GPUs held, said
                verdict.verdict = "lost" if silent else "failed"
                verdict.cause = f"its probes: {(doc or {}).get('error') or r.problem or r.verdict}"
                verdict.fix = r.fix
            else:
                verdict.build = doc.get("build")
    return found


def confirmed(rounds: Rounds, facts: dict[str, NodeFacts], probes: dict[str, dict[str, Any]], env: str,
              tolerance: float, clock: plan.Clock, verdicts: dict[str, NodeVerdict]) -> tuple[dict, list[str]]:
    """A node with a slow figure is probed a second time (in turn again), and each of its figures
    is the better of its two probes: a fault holds, a moment's noise on the machine does not.
    Without time left for it, the first probe stands, said."""
    scores = score([s for node, probe in probes.items() for s in samples(node, probe)], tolerance)
    suspects = sorted({s.sample.node for s in scores if s.verdict == "slow"})
    if not suspects:
        return probes, []
    turns = machine_turns([facts[n] for n in suspects])
    if clock.share(plan.COLLECTIVE_S + plan.RECORD_S) < len(turns) * plan.TURN_S:
        return probes, [f"no time left to probe {len(suspects)} slow node(s) a second time: their first probe stands"]
    again = probe_turns(rounds, turns, env, clock, None)
    for node in suspects:
        verdicts[node].probes = 2 if node in again else 1
    return {n: best_of(p, again[n]) if n in again else p for n, p in probes.items()}, []


class Ports:
    """A free port for each collective's rank 0: from its node's facts, never one already taken
    on the same machine."""

    def __init__(self, facts: dict[str, NodeFacts]):
        self.facts, self.used = facts, set()

    def take(self, node: str) -> str:
        f = self.facts[node]
        for port in f.ports:
            if (f.boot_id, port) not in self.used:
                self.used.add((f.boot_id, port))
                return str(port)
        raise UsageError(f"node {f.node.short_id} has no free port left for a collective", "run preflight again")


def run_groups(rounds: Rounds, facts: dict[str, NodeFacts], ports: Ports, groups: list[tuple[str, ...]], env: str,
               timeout: float, min_busbw: float | None) -> list[Trial]:
    """One collective per group, all at once; each group's outcome."""
    per_node = {}
    for group in groups:
        master, port = facts[group[0]].node.address, ports.take(group[0])
        for rank, node in enumerate(group):
            per_node[node] = {"RANK": str(rank), "WORLD_SIZE": str(len(group)), "MASTER_ADDR": master,
                              "MASTER_PORT": port}
    nodes = [facts[n].node for group in groups for n in group]
    reports = {r.node.id: r for r in rounds.ask(nodes, "collective", ["--env", env, "--timeout",
                                                                       f"{timeout - NODE_MARGIN_S:.1f}"],
                                                timeout, per_node=per_node, holds_gpus=True)}
    return [test_of(group, reports, min_busbw) for group in groups]


def collectives(rounds: Rounds, facts: dict[str, NodeFacts], measured: list[str], env: str,
                min_busbw: float | None, clock: plan.Clock,
                probe_s: float) -> tuple[dict[str, Any] | None, Halving | None]:
    """The collective across the nodes that measured, then the halving while it finds a fault.
    Each round's share: what is left over the rounds that may follow, at most ``COLLECTIVE_WAIT``
    times the slowest node's probes (which started the same interpreter and all-reduced inside
    the node), at least ``COLLECTIVE_S``: a collective that takes longer is stuck."""
    if len(measured) < 2:
        return None, None
    most = plan.halving_rounds(len(measured)) + 1
    halving, ports = Halving(measured, most), Ports(facts)

    def share() -> float:
        left = clock.left() - plan.RECORD_S
        fair = min(left / max(most - len(halving.rounds), 1), COLLECTIVE_WAIT * probe_s)
        return min(max(plan.COLLECTIVE_S, fair), left)

    [first] = run_groups(rounds, facts, ports, [tuple(measured)], env, max(share(), 1.0), min_busbw)
    halving.first(first)
    while True:
        groups = halving.next_round()
        if not groups:
            break
        if share() < plan.COLLECTIVE_S / 2:
            halving.give_up("the budget ran out")
            break
        halving.record(run_groups(rounds, facts, ports, groups, env, share(), min_busbw))
    busbw = first.busbw
    return {"nodes": list(first.nodes), "ok": first.ok, "why": first.why, "busbw": busbw,
            "algbw": round(busbw * len(first.nodes) / (2 * (len(first.nodes) - 1)), 3) if busbw else None,
            "seconds": first.seconds, "min_busbw": min_busbw}, halving


def judge(verdicts: dict[str, NodeVerdict], probes: dict[str, dict[str, Any]], tolerance: float,
          halving: Halving | None) -> None:
    """Each measured node's figures scored against its model's across the fleet; what the halving
    named laid over (a node named as lost, else as a bad link)."""
    scores = score([s for node, probe in probes.items() for s in samples(node, probe)], tolerance)
    for node, probe in probes.items():
        mine = [s for s in scores if s.sample.node == node]
        v = verdicts[node]
        v.scores, v.ratios, v.verdict = [s.to_json() for s in mine], ratios(mine), node_verdict(mine)
        slow = [s for s in mine if s.verdict == "slow"]
        if slow:
            v.cause = "; ".join(_slow_words(s) for s in slow[:3])
            v.causes = causes(probe, {s.sample.device for s in slow})
            v.fix = "drain it (or exclude it from the job: --exclude) and look at its likely causes"
        elif v.verdict == "unjudged":
            v.cause = "alone with its model, and level 3's table has no expectation for it"
    for named in (halving.named if halving else []):
        for node in named.nodes:
            v = verdicts[node]
            if v.verdict == "straggler" and not named.silent:
                # its own probes were slow: that explains a collective slow with it; its link is not shown at fault
                v.cause = f"{v.cause}; the collective across nodes failed with it: {_named_words(named, node)}"
                continue
            before = f"; its probes: {v.cause}" if v.verdict == "straggler" and v.cause else ""
            v.verdict = "lost" if named.silent else "bad-link"
            v.cause = _named_words(named, node) + before
            v.fix = ("check the node: it stopped answering (its processes, its network)" if named.silent else
                     "test its network link (NCCL's all_reduce_perf between it and a good node), reseat or replace it")


def _slow_words(s: Any) -> str:
    sample = s.sample
    place = f"on {sample.device}" if sample.device != "node" else "inside the node"
    if s.basis == "table":
        return (f"{sample.figure} {place}: {sample.value:g} {sample.unit}, below level 3's table "
                f"(expected {sample.expectation}; alone with its model {sample.model})")
    return (f"{sample.figure} {place}: {sample.value:g} {sample.unit}, {s.ratio:.0%} of the median of "
            f"{s.nodes} nodes' {sample.model} ({s.median:g})")


def _named_words(named: Any, node: str) -> str:
    others = [n[:8] for n in named.nodes if n != node]
    if named.kind == "pair":
        return f"the collective's fault: the link between it and {', '.join(others)} ({named.why})"
    if named.kind == "between":
        return f"the collective's fault lies between {len(named.nodes)} nodes and {len(named.against)} others ({named.why})"
    if named.kind == "somewhere":
        return f"the collective's fault is in a group of {len(named.nodes)} nodes with it ({named.why})"
    return f"named by the halving: {named.why}"


def record(rounds: Rounds, verdicts: dict[str, NodeVerdict], clock: plan.Clock, where: str) -> list[str]:
    """Each node that answered keeps its verdict (``envcheck preflight record``); what failed, said."""
    nodes = [v.node for v in verdicts.values() if v.verdict != "lost"]
    per_node = {v.node.id: {"ENVCHECK_PREFLIGHT_VERDICT": v.verdict,
                            "ENVCHECK_PREFLIGHT_RATIOS": ",".join(f"{k}:{r:g}" for k, r in v.ratios.items()),
                            "ENVCHECK_PREFLIGHT_FLEET": UNSAFE.sub("_", where)[:200]}
                for v in verdicts.values() if v.verdict != "lost"}
    timeout = min(max(clock.left(), 2.0), 2 * plan.RECORD_S)
    notes = []
    for r in rounds.ask(nodes, "record", [], timeout, per_node=per_node):
        ok = document_of(r, "envcheck.preflight-mark/1") is not None
        verdicts[r.node.id].recorded = ok
        if not ok:
            notes.append(f"node {r.node.short_id}: its verdict was not recorded: {r.problem or r.verdict}")
    return notes


def model_summary(verdicts: dict[str, NodeVerdict]) -> dict[str, dict[str, Any]]:
    """Each device model: on how many nodes, and what its figures were judged against."""
    found: dict[str, dict[str, Any]] = {}
    for v in verdicts.values():
        for s in v.scores:
            if s["device"] == "node":
                continue
            entry = found.setdefault(s["model"], {"nodes": set(), "judged": set()})
            entry["nodes"].add(v.node.id)
            entry["judged"].add({"fleet": "the fleet's median", "table": "level 3's table"}.get(s["basis"], "nothing"))
    return {m: {"nodes": len(e["nodes"]), "judged against": sorted(e["judged"])} for m, e in found.items()}
