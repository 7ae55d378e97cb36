#!/usr/bin/env python3
"""`envcheck fleet preflight` on a local Ray cluster: does it name a slowed node, leave a healthy
fleet alone, give its verdict within --budget, and what does its collective cost against a bare
torch.distributed script over the same Ray nodes?

    python bench/bench_preflight.py [--trials 20] [--seed 31] [--homes DIR] [--rounds 7]

Starts a Ray cluster on this machine (tests/ray_cluster.py): a head and four workers w1..w4,
each with its own env home holding a real CPU PyTorch env ``torch`` (tests/torch_homes.py;
``--homes`` reuses a folder of home1..home4 made that way). Every Ray process is stopped by pid
at the end.

1. Named and healthy (``--trials`` each, interleaved: a slowed trial, then a healthy one): in a
   slowed trial, a node drawn at random (``--seed``) gets a slowdown drawn from 25% to 50%: its
   Ray processes (raylet, workers, what they start) go under a CPU quota of the cgroup v1 ``cpu``
   controller of (1 - slowdown) of one CPU (tests/cpu_quota.py), never a flag of envcheck's.
   Named: that node's verdict is straggler (and which other nodes were named, if any). Healthy:
   no node named. Each trial is one `envcheck fleet preflight --env torch --json` (default
   budget, 60 s): its own `seconds` is the verdict's time, kept for part 2.
2. The verdict within --budget: every trial's `seconds` against its budget (60 s, 4 nodes).
3. The collective (alone with ``--trials 0``): ``--rounds`` interleaved rounds over the four
   nodes (warm Ray workers, one driver): envcheck's round (`envcheck preflight collective` on
   every node through the fleet's own dispatch, each node its rank's variables) against a bare
   script doing the same all-reduce (torch.distributed over gloo, the same bytes and the same
   number of calls as envcheck's last round made) run in each node's env interpreter by a Ray
   task pinned to the node; each timed from sending the tasks to the last answer. Target:
   envcheck <= 1.3x bare.

Writes bench/results/preflight.md (a section for BENCHMARKS.md) and bench/results/preflight.json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import machine

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from cpu_quota import CpuQuota, quota_missing  # noqa: E402
from ray_cluster import RayCluster  # noqa: E402
from torch_homes import torch_homes_at  # noqa: E402

RESULTS = ROOT / "bench" / "results"
WORKERS = ("w1", "w2", "w3", "w4")
SLOWDOWN = (0.25, 0.50)
TARGET_TRIALS = 19  # of 20
TARGET_COLLECTIVE = 1.3
BARE = r'''
import datetime, os, sys, time
import torch
import torch.distributed as dist
nbytes, calls = int(sys.argv[1]), int(sys.argv[2])
if os.environ["MASTER_ADDR"].startswith("127."):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="env://", rank=int(os.environ["RANK"]),
                        world_size=int(os.environ["WORLD_SIZE"]), timeout=datetime.timedelta(seconds=60))
buffer = torch.zeros(nbytes // 4, dtype=torch.float32)
started = time.perf_counter()
for _ in range(calls):
    dist.all_reduce(buffer)
print(time.perf_counter() - started)
dist.barrier()
dist.destroy_process_group()
'''


def run_preflight(cluster: RayCluster, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "envcheck", "fleet", "preflight", "--env", "torch", "--json",
                           "--address", cluster.address, *args], capture_output=True, text=True, cwd=cluster.work)
    try:
        return json.loads(done.stdout)
    except ValueError:
        sys.exit(f"preflight exited {done.returncode} without a document:\n{done.stderr[-3000:]}")


def trial(cluster: RayCluster, slowed: str | None, slowdown: float) -> dict:
    by_label = {}
    if slowed is None:
        doc = run_preflight(cluster)
        throttled = None
    else:
        with CpuQuota(1.0 - slowdown, slowed) as quota:
            quota.add(cluster.nodes[slowed].pids())
            doc = run_preflight(cluster)
            throttled = quota.throttled()
    by_label = {n["labels"]["node"]: n for n in doc["nodes"]}
    named = sorted(label for label, n in by_label.items() if n["verdict"] not in ("healthy", "unjudged"))
    return {"slowed": slowed, "slowdown": round(slowdown, 3), "named": named, "seconds": doc["seconds"],
            "budget": doc["budget"], "phases": doc["phases"], "throttled_periods": throttled,
            "ratios": {label: n["ratios"] for label, n in by_label.items()},
            "hit": (named == [slowed]) if slowed else not named, "found": slowed in named if slowed else None}


def collective_rounds(cluster: RayCluster, homes: list[Path], rounds: int) -> dict:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from envcheck.fleet import cluster as fleet_cluster
    from envcheck.fleet.dispatch import dispatch
    from envcheck.fleet.aggregate import node_report
    from ray_cluster import free_port

    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    nodes = [n for n in fleet_cluster.alive_nodes(ray) if n.labels.get("node") in WORKERS]
    nodes.sort(key=lambda n: n.labels["node"])
    pythons = {n.id: str(homes[WORKERS.index(n.labels["node"])] / "envs" / "torch" / "bin" / "python") for n in nodes}
    script = cluster.work / "bare_allreduce.py"
    script.write_text(BARE)

    @ray.remote(num_cpus=0, max_retries=0)
    def bare(python: str, variables: dict, nbytes: int, calls: int) -> float:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update(variables)
        done = subprocess.run([python, str(script), str(nbytes), str(calls)], capture_output=True, text=True,
                              env=env, cwd="/")
        if done.returncode:
            raise RuntimeError(done.stderr[-1000:])
        return float(done.stdout.split()[-1])

    def ranks() -> dict[str, dict[str, str]]:
        port = str(free_port())
        return {n.id: {"RANK": str(i), "WORLD_SIZE": str(len(nodes)), "MASTER_ADDR": nodes[0].address,
                       "MASTER_PORT": port} for i, n in enumerate(nodes)}

    work = {"nbytes": 8 << 20, "calls": 40}

    def envcheck_round() -> float:
        started = time.perf_counter()
        outcomes = dispatch(ray, nodes, "preflight", ["collective", "--env", "torch", "--timeout", "60"], {},
                            timeout=90, holds_gpus=True, busy_after=30, per_node=ranks(), version=False)
        seconds = time.perf_counter() - started
        figure = node_report("preflight", outcomes[0]).report["allreduce"]
        work.update(nbytes=figure["bytes"], calls=2 + figure["reps"] * len(figure["samples"]))
        return seconds

    def bare_round() -> float:
        started = time.perf_counter()
        variables = ranks()
        ray.get([bare.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n.id, soft=False)).remote(
            pythons[n.id], variables[n.id], work["nbytes"], work["calls"]) for n in nodes])
        return time.perf_counter() - started

    envcheck_round(), bare_round()  # warm-up: the nodes' workers, the interpreters' files cached
    times: dict[str, list[float]] = {"envcheck": [], "bare": []}
    for _ in range(rounds):
        times["envcheck"].append(envcheck_round())
        times["bare"].append(bare_round())
    ray.shutdown()
    medians = {k: statistics.median(v) for k, v in times.items()}
    return {"rounds": times, "median": medians, "ratio": medians["envcheck"] / medians["bare"], "work": work}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--homes", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    missing = quota_missing()
    if missing:
        sys.exit(f"can't slow a node here: {missing}")
    homes = torch_homes_at(args.homes or Path(tempfile.mkdtemp(prefix="pf-homes-")), len(WORKERS))
    rng = random.Random(args.seed)
    cluster = RayCluster()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVCHECK_")}
    results: dict = {"machine": machine(), "seed": args.seed, "trials": [], "slowdown_range": SLOWDOWN}
    try:
        cluster.start_head(dict(env))
        for name, home in zip(WORKERS, homes):
            cluster.add_worker(name, dict(env, ENVCHECK_HOME=str(home)), {"node": name})
        run_preflight(cluster)  # warm-up: the interpreters' files in the page cache
        for k in range(args.trials):
            slowed, slowdown = rng.choice(WORKERS), rng.uniform(*SLOWDOWN)
            for kind in ("slowed", "healthy"):
                found = trial(cluster, slowed if kind == "slowed" else None, slowdown if kind == "slowed" else 0.0)
                results["trials"].append({"kind": kind, "trial": k + 1, **found})
                print(json.dumps({"kind": kind, **{key: found[key] for key in ("slowed", "slowdown", "named",
                                                                                 "seconds", "hit")}}), flush=True)
        results["collective"] = collective_rounds(cluster, homes, args.rounds)
        print(json.dumps({"collective": results["collective"]["median"],
                          "ratio": results["collective"]["ratio"]}), flush=True)
    finally:
        left = cluster.stop()
        results["left_running"] = sorted(left)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "preflight.json").write_text(json.dumps(results, indent=1))
    (RESULTS / "preflight.md").write_text(report(results))
    print(report(results))


def report(results: dict) -> str:
    slowed = [t for t in results["trials"] if t["kind"] == "slowed"]
    healthy = [t for t in results["trials"] if t["kind"] == "healthy"]
    seconds = [t["seconds"] for t in results["trials"]]
    c = results.get("collective") or {}
    lines = [] if not results["trials"] else [  # --trials 0: the collective alone
             f"- Slowed node named (and no other): {sum(t['hit'] for t in slowed)} of {len(slowed)} "
             f"(named at all: {sum(t['found'] for t in slowed)}); target >= {TARGET_TRIALS} of 20",
             f"- Healthy fleet called healthy: {sum(t['hit'] for t in healthy)} of {len(healthy)}; target >= "
             f"{TARGET_TRIALS} of 20",
             f"- Seed {results['seed']}, slowdowns drawn from {SLOWDOWN[0]:.0%} to {SLOWDOWN[1]:.0%}: "
             + ", ".join(f"{t['slowed']} {t['slowdown']:.0%}" + ("" if t["hit"] else f" (named {t['named']})")
                         for t in slowed),
             "- Healthy trials that named a node: " + (", ".join(f"trial {t['trial']}: {t['named']}" for t in healthy
                                                                if not t["hit"]) or "none"),
             f"- Verdict time (4 nodes, budget 60 s): median {statistics.median(seconds):.1f} s, max "
             f"{max(seconds):.1f} s; within budget in {sum(s <= 60 for s in seconds)} of {len(seconds)} runs"]
    if c:
        lines.append(f"- Collective over 4 nodes, {c['work']['calls']} all-reduces of {c['work']['nbytes'] >> 20} MiB: "
                     f"envcheck median {c['median']['envcheck']:.2f} s, bare torch.distributed script "
                     f"{c['median']['bare']:.2f} s: {c['ratio']:.2f}x (target <= {TARGET_COLLECTIVE}x)")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
