#!/usr/bin/env python3
"""Issue 30's targets on a real Slurm cluster on this machine (tests/slurm_cluster.py: Debian's
slurm-wlm, one slurmctld, a slurmd per node, each node with its own fake NVML; no hooks in
slurm.conf, so nothing but the bench runs envcheck).

    python bench/bench_slurm.py [--runs 15] [--cycles 1000] [--fleet-runs 10]

1. `envcheck slurm healthcheck --json` on a node of 8 stand-in A100s (`g8`) against `envcheck
   gpu --level 1 --json` (the read itself) in the same environment, interleaved rounds after a
   warm-up: medians, and their ratio (target <= 1.3x; both far under Slurm's 60 s).
2. `--cycles` health checks of the healthy `g8` in a row, as its wrapper runs them (drains for
   real): how many drained it, or exited non-zero (target 0); then each fault of the health
   table injected in turn (the fake NVML, the device seam, the kernel log): the health check
   must drain `g8` with that fault's own reason (`sinfo -R`), and once the fault is cleared,
   resume it.
3. Inside one allocation of `n1`-`n3` (three nodes of 2 stand-in A100s each): `envcheck fleet
   doctor --engine slurm --json` against a bare `srun --ntasks-per-node=1 envcheck doctor
   --json` on the same nodes, interleaved; as the nodes come (doctor works about 0.4 s) and with
   each node's doctor working 2 s more (NVML's driver-version call answering after 2 s: waiting,
   not computing). Targets: at most 0.15 s over bare srun for the short run, at most 1.2x once
   each node works 2 s or more.

Writes bench/results/slurm.md (the BENCHMARKS.md section) and bench/results/slurm.json. Every
daemon is stopped by pid at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from _common import envcheck_cmd, machine

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fake_nvml import A100, FakeNvml  # noqa: E402
from slurm_cluster import SlurmCluster, slurm_missing  # noqa: E402

RESULTS = ROOT / "bench" / "results"
HEALTHY = [A100] * 8
XID = "[ 99.0] NVRM: Xid (PCI:0000:13:00): {code}, pid=4242, name=python, Ch 00000010"
# The health table's not-ready faults: (name, the reason's "where id", how to inject it).
FAULTS = [
    ("uncorrected ECC, volatile", "gpu3 ecc-uncorrected-volatile", {"gpu": (3, "ecc=2/2")}),
    ("row remapping pending", "gpu3 row-remap-pending", {"gpu": (3, "remap=0/1/1/0")}),
    ("row remapping failed", "gpu3 row-remap-failure", {"gpu": (3, "remap=0/9/0/1")}),
    ("retired pages pending", "gpu3 retired-pages-pending", {"gpu": (3, "remap=na,retired=1")}),
    ("temperature at shutdown", "gpu3 temperature-at-shutdown", {"gpu": (3, "temp=95")}),
    ("compute mode prohibited", "gpu3 compute-mode-prohibited", {"gpu": (3, "cmode=2")}),
    ("GPU lost (NVML)", "gpu3 gpu-lost", {"env": {"FAKE_NVML_ERROR_nvmlDeviceGetMemoryInfo": "15:3"}}),
    ("NVML: driver/library mismatch", "node nvml-version-mismatch", {"env": {"FAKE_NVML_INIT_ERROR": "18"}}),
    ("GPU device node missing", "gpu3 device-node-missing", {"unlink": "nvidia3"}),
    ("/dev/nvidiactl missing", "node nvidiactl-missing", {"unlink": "nvidiactl"}),
    ("/dev/nvidia-uvm missing", "node nvidia-uvm-missing", {"unlink": "nvidia-uvm"}),
    *[(f"Xid {code} in the kernel log", f"gpu3 xid-{code}", {"xid": code})
      for code in (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)],
    ("Xid 79 from NVML's events", "gpu3 xid-79", {"gpu": (3, "xid=79")}),
    ("NVML hangs (read past the budget)", "node level1-timeout",
     {"env": {"FAKE_NVML_HANG_nvmlDeviceGetHandleByIndex_v2": "60"}, "args": ["--budget", "3"]}),
    ("GRES: a GPU gone from NVML", "node gres-count", {"gpus": 7}),
]


def run(cmd: list[str], env: dict[str, str], timeout: float = 120) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    return time.perf_counter() - started, done


def node_env(cluster: SlurmCluster, name: str, **extra: str) -> dict[str, str]:
    return {**cluster.environ(), **cluster.node_environ(name), "SLURMD_NODENAME": name, **extra}


def part1(cluster: SlurmCluster, runs: int) -> dict:
    env = node_env(cluster, "g8")
    commands = {"envcheck slurm healthcheck --json": [*envcheck_cmd(), "slurm", "healthcheck", "--json"],
                "envcheck gpu --level 1 --json": [*envcheck_cmd(), "gpu", "--level", "1", "--json"]}
    times = {name: [] for name in commands}
    for name, cmd in commands.items():  # warm-up
        run(cmd, env)
    for _ in range(runs):
        for name, cmd in commands.items():
            seconds, done = run(cmd, env)
            assert done.returncode == 0, done.stdout + done.stderr
            times[name].append(seconds)
    medians = {name: statistics.median(values) for name, values in times.items()}
    ratio = medians["envcheck slurm healthcheck --json"] / medians["envcheck gpu --level 1 --json"]
    return {"times": times, "medians": medians, "ratio": ratio}


def inject(cluster: SlurmCluster, how: dict) -> tuple[dict[str, str], list[str]]:
    """Apply a fault to g8; the extra environment and arguments of the health check."""
    node = cluster.nodes["g8"]
    gpus = list(HEALTHY)
    if "gpu" in how:
        index, spec = how["gpu"]
        gpus[index] = f"{A100},{spec}"
    if "gpus" in how:
        gpus = gpus[:how["gpus"]]
    if "unlink" in how:
        (node.dev / how["unlink"]).unlink()
    if "xid" in how:
        with open(node.kernel_log, "a") as log:
            log.write(XID.format(code=how["xid"]) + "\n")
    return {"FAKE_NVML_GPUS": ";".join(gpus), **how.get("env", {})}, how.get("args", [])


def clear(cluster: SlurmCluster, how: dict) -> None:
    node = cluster.nodes["g8"]
    if "unlink" in how:
        (node.dev / how["unlink"]).symlink_to("/dev/null")
    if "xid" in how:
        node.kernel_log.write_text("[    0.000000] Linux version 6.8.0\n")


def part2(cluster: SlurmCluster, cycles: int) -> dict:
    cmd = [*envcheck_cmd(), "slurm", "healthcheck", "--json"]
    env = node_env(cluster, "g8")
    drains = failures = 0
    why: Counter = Counter()  # each non-zero exit: its problems, else its error line
    started = time.perf_counter()
    for _ in range(cycles):
        _, done = run(cmd, env)
        doc = json.loads(done.stdout) if done.stdout.strip() else {}
        if done.returncode != 0:
            failures += 1
            said = ", ".join(f"{p['id']} ({p['measured']})" for p in doc.get("problems", []))
            why[f"exit {done.returncode}: {said or done.stderr.strip()[-300:]}"] += 1
        drains += (doc.get("action") or {}).get("kind") in ("drain", "update")
    healthy_s = time.perf_counter() - started
    left = cluster.reasons().get("g8")
    faults = []
    for name, expected, how in FAULTS:
        extra, args = inject(cluster, how)
        _, done = run([*cmd, *args], {**env, **extra})
        reason = cluster.reasons().get("g8") or ""
        where, _, fid = expected.partition(" ")
        prefix = f"envcheck: {fid}: " if where == "node" else f"envcheck: {where} {fid}: "
        clear(cluster, how)
        _, after = run(cmd, env)
        resumed = "g8" not in cluster.reasons()
        faults.append({"fault": name, "expected": prefix.strip(), "reason": reason, "exit": done.returncode,
                       "drained": reason.startswith(prefix), "resumed": resumed})
        if not resumed:  # leave the node clean for the next fault, and say so
            cluster.run("scontrol", "update", "NodeName=g8", "State=RESUME")
    return {"cycles": cycles, "drains": drains, "nonzero": failures, "why": dict(why), "reason_left": left,
            "healthy_s": healthy_s, "faults": faults}


INNER = "--inner"


def part3(cluster: SlurmCluster, runs: int) -> dict:
    """Runs this script inside `salloc -w n[1-3]` (``inner``), for each workload."""
    found = {}
    for label, extra in (("as the nodes come", {}), ("each node works 2 s more", {"FAKE_NVML_HANG_nvmlSystemGetDriverVersion": "2"})):
        for name in ("n1", "n2", "n3"):
            cluster.set_node(name, **({"FAKE_NVML_HANG_nvmlSystemGetDriverVersion": ""} | extra))
        done = cluster.run("salloc", "--nodes=3", "--nodelist=n1,n2,n3", "--quiet", sys.executable, __file__, INNER,
                           str(runs), timeout=3600)
        assert done.returncode == 0, done.stderr[-3000:]
        found[label] = json.loads(done.stdout)
    for name in ("n1", "n2", "n3"):
        cluster.set_node(name, FAKE_NVML_HANG_nvmlSystemGetDriverVersion="")
    return found


def inner(runs: int) -> None:
    """In the allocation: the fleet against bare srun, interleaved; JSON on stdout."""
    env = dict(os.environ)
    bare = ["srun", "--nodes=3", "--ntasks-per-node=1", *envcheck_cmd(), "doctor", "--json"]
    fleet = [*envcheck_cmd(), "fleet", "doctor", "--engine", "slurm", "--json"]
    commands = {"bare srun envcheck doctor --json": bare, "envcheck fleet doctor --engine slurm --json": fleet}
    times = {name: [] for name in commands}
    for cmd in commands.values():
        run(cmd, env)
    for _ in range(runs):
        for name, cmd in commands.items():
            seconds, done = run(cmd, env)
            if name.startswith("envcheck fleet"):
                nodes = json.loads(done.stdout)["nodes"]
                assert len(nodes) == 3 and all(n["report"] for n in nodes), done.stderr
            times[name].append(seconds)
    print(json.dumps(times))


def report(one: dict, two: dict, three: dict, runs: int, fleet_runs: int) -> str:
    lines = ["## Issue 30: Slurm's health check, job hooks and the fleet over srun", "",
             f"`python bench/bench_slurm.py --runs {runs} --cycles {two['cycles']} --fleet-runs {fleet_runs}` on "
             f"{os.cpu_count()} CPUs "
             "(a real slurm-wlm 22.05 cluster on this machine, tests/slurm_cluster.py; medians of interleaved runs).", "",
             "| command (`g8`: 8 stand-in A100s) | median s | ratio |", "|---|---:|---:|"]
    base = one["medians"]["envcheck gpu --level 1 --json"]
    for name, median in one["medians"].items():
        lines.append(f"| `{name}` | {median:.3f} | {median / base:.2f}x |")
    verdict = "met" if one["ratio"] <= 1.3 else "MISSED"
    lines += ["", f"Target: the health check at most 1.3x the read itself: {one['ratio']:.2f}x, {verdict}; "
                  "Slurm kills a health check at 60 s.", "",
              f"{two['cycles']} healthy cycles of `envcheck slurm healthcheck` on `g8` "
              f"({two['healthy_s']:.0f} s): {two['drains']} drains, {two['nonzero']} non-zero exits, "
              f"reason left in `sinfo -R`: {two['reason_left'] or 'none'} (target: 0 false drains, "
              f"{'met' if not two['drains'] and not two['nonzero'] and not two['reason_left'] else 'MISSED'}).", "",
              *([f"- {count} x {said}" for said, count in two["why"].items()] + [""] if two["why"] else []),
              "| fault injected | reason expected to start with | drained so | resumed once cleared |",
              "|---|---|:---:|:---:|"]
    for f in two["faults"]:
        lines.append(f"| {f['fault']} | `{f['expected']}` | {'yes' if f['drained'] else 'NO: ' + (f['reason'] or 'none')} | "
                     f"{'yes' if f['resumed'] else 'NO'} |")
    missed = [f["fault"] for f in two["faults"] if not (f["drained"] and f["resumed"])]
    lines += ["", f"Every fault drained with its own reason and resumed: {'met' if not missed else 'MISSED: ' + ', '.join(missed)}.",
              "", "| workload (3 nodes, one allocation) | bare `srun envcheck doctor --json` s | "
                  "`envcheck fleet doctor --engine slurm --json` s | over | ratio | target |", "|---|---:|---:|---:|---:|---|"]
    for label, times in three.items():
        bare = statistics.median(times["bare srun envcheck doctor --json"])
        fleet = statistics.median(times["envcheck fleet doctor --engine slurm --json"])
        if bare >= 2.0:
            target = f"<= 1.2x: {'met' if fleet / bare <= 1.2 else 'MISSED'}"
        else:
            target = f"<= 0.15 s over: {'met' if fleet - bare <= 0.15 else 'MISSED'}"
        lines.append(f"| {label} | {bare:.3f} | {fleet:.3f} | {fleet - bare:+.3f} | {fleet / bare:.2f}x | {target} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == INNER:
        inner(int(sys.argv[2]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--fleet-runs", type=int, default=10)
    options = parser.parse_args()
    missing = slurm_missing()
    if missing:
        sys.exit(f"bench_slurm: {missing}")
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="bench-slurm-"))
    nvml = FakeNvml(work)
    cluster = SlurmCluster(work / "cluster", hooks=())
    cluster.add_node("g8", HEALTHY)
    for name in ("n1", "n2", "n3"):
        cluster.add_node(name, [A100, A100])
    try:
        cluster.start(nvml.lib_dir())
        one = part1(cluster, options.runs)
        two = part2(cluster, options.cycles)
        three = part3(cluster, options.fleet_runs)
    finally:
        left = cluster.stop()
    if left:
        sys.exit(f"bench_slurm: Slurm processes left running: {left}")
    RESULTS.mkdir(exist_ok=True)
    text = report(one, two, three, options.runs, options.fleet_runs)
    (RESULTS / "slurm.md").write_text(text)
    (RESULTS / "slurm.json").write_text(json.dumps({"machine": machine(), "healthcheck": one, "cycles": two,
                                                     "fleet": three}, indent=1))
    print(text)


if __name__ == "__main__":
    main()
