#!/usr/bin/env python3
"""How long `envcheck validate NAME --devices cpu` of a JAX CPU env takes to a verdict,
against a bare script that imports jax and fits the same model (bench/bare_fit_jax.py)
with the env's own interpreter: whole processes, side by side.

    python bench/bench_validate_jax.py [--home ~/.cache/envcheck-jax] [--env jx] [--runs 7]

The env must be a real envcheck env with JAX (make one with
`envcheck --home H env create jx --preset jax-cpu`). bench/bare_fit_jax.py fits what
envcheck/frameworks/jax/smoke.py fits for one CPU device, as one jitted train step:
8 -> 32 -> ReLU -> 1, a hand-written Adam(0.01), MSE, 12 steps of 32 samples of the same
seeded data. envcheck's
bytecode is compiled first, as an installed wheel has it. One warm-up each, then ``--runs``
rounds, each running every command once, so noise hits them alike. For context (no target),
`validate --devices cpu:0,cpu:1` is timed too: two host devices (XLA_FLAGS), a fit on
each, and the jitted data-parallel fit over a Mesh of both.

Target: validate median <= 1.2x the bare fit's median. Prints a markdown table and writes it,
with the command line, to bench/results/validate_jax.md. Timing only, no assertions.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import statistics
import sys
from pathlib import Path

from _common import envcheck_cmd, machine, timed

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "bench" / "results" / "validate_jax.md"
BARE = ROOT / "bench" / "bare_fit_jax.py"
TARGET_RATIO = 1.2


def checked_report(out: str, multi: bool) -> dict:
    """The one report of `validate --json`, after checking it really fitted (and ran data parallel)."""
    report = json.loads(out)["reports"][0]
    checks = {c["id"]: c for c in report["checks"]}
    if report["verdict"] not in ("ready", "degraded") or checks["smoke"]["status"] != "pass":
        sys.exit(f"validate did not pass its smoke fit: {report['verdict']}, {checks['smoke']}")
    if multi and checks["multi-replica"]["status"] != "pass":
        sys.exit(f"validate's data-parallel check did not pass: {checks['multi-replica']}")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", default=str(Path.home() / ".cache" / "envcheck-jax"))
    parser.add_argument("--env", default="jx")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "envcheck"), quiet=1)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ENVCHECK_HOME")}
    python = Path(args.home) / "envs" / args.env / "bin" / "python"
    if not python.exists():
        sys.exit(f"no env {args.env} in {args.home}: envcheck --home {args.home} env create "
                 f"{args.env} --preset jax-cpu")
    v_name = f"envcheck validate {args.env} --devices cpu --json"
    b_name = f"{args.env} python bench/bare_fit_jax.py cpu"
    n_name = f"{b_name}, then os._exit (context: no interpreter teardown, as the smoke runner ends)"
    d_name = f"envcheck validate {args.env} --devices cpu:0,cpu:1 --json (context: 2 host devices + jitted data parallel)"
    commands = {
        v_name: envcheck_cmd() + ["--home", args.home, "validate", args.env, "--devices", "cpu", "--json"],
        b_name: [str(python), str(BARE), "cpu"],
        n_name: [str(python), "-c", "import os, runpy, sys; sys.argv = [%r, 'cpu']; runpy.run_path(%r, "
                 "run_name='__main__'); sys.stdout.flush(); os._exit(0)" % (str(BARE), str(BARE))],
        d_name: envcheck_cmd() + ["--home", args.home, "validate", args.env, "--devices", "cpu:0,cpu:1",
                                  "--json"],
    }
    # The bare script gets what the smoke runner gets from envcheck: no user site.
    bare_env = {**env, "PYTHONNOUSERSITE": "1"}
    envs = {v_name: env, b_name: bare_env, n_name: bare_env, d_name: env}

    for name, cmd in commands.items():  # warm-up, and a check that each really does the work
        _, out = timed(cmd, envs[name])
        if name in (v_name, d_name):
            checked_report(out, multi=name == d_name)
    times: dict[str, list[float]] = {name: [] for name in commands}
    inner: dict = {"validate_wall_s": [], "smoke_ms_per_step": [], "bare": [], "multi_detail": []}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            seconds, out = timed(cmd, envs[name])
            times[name].append(seconds)
            if name == v_name:
                report = checked_report(out, multi=False)
                inner["validate_wall_s"].append(report["wall_s"])
                inner["smoke_ms_per_step"].append(report["devices"][0]["ms_per_step"])
                inner["build"] = report["build"]
            elif name == b_name:
                inner["bare"].append(json.loads(out.strip().splitlines()[-1]))
            elif name == d_name:
                inner["multi_detail"].append(checked_report(out, multi=True)["multi_replica"]["detail"])

    medians = {n: statistics.median(v) for n, v in times.items()}
    ratio = medians[v_name] / medians[b_name]
    facts = machine()
    lines = [f"`{' '.join(sys.argv)}` on {facts['node']}: {facts['cpus']} CPUs, load average "
             f"{facts['loadavg']:.2f}, Python {platform.python_version()}, {args.runs} rounds, "
             "interleaved, 1 warm-up each; the env: jax "
             f"{inner['build']['version']}, jaxlib {inner['build']['jaxlib_version']} "
             f"(backend {inner['build']['default_backend']})", "",
             "| command | runs | median s | min s | max s | × bare fit |", "|---|---:|---:|---:|---:|---:|"]
    for name, values in times.items():
        lines.append(f"| `{name}` | {len(values)} | {medians[name]:.2f} | {min(values):.2f} | "
                     f"{max(values):.2f} | {medians[name] / medians[b_name]:.2f} |")
    bare_import = statistics.median(b["import_s"] for b in inner["bare"])
    bare_fit = statistics.median(b["fit_s"] for b in inner["bare"])
    lines += ["",
              f"- inside: validate's own wall_s median {statistics.median(inner['validate_wall_s']):.2f} s, "
              f"smoke {statistics.median(inner['smoke_ms_per_step']):.3f} ms/step; bare: import "
              f"{bare_import:.2f} s + data/model/fit {bare_fit:.3f} s",
              f"- validate / bare: **{ratio:.2f}x** (target <= {TARGET_RATIO}x: "
              f"{'met' if ratio <= TARGET_RATIO else 'MISSED'}); validate / bare without teardown: "
              f"{medians[v_name] / medians[n_name]:.2f}x",
              f"- the data-parallel check, last round: {inner['multi_detail'][-1]}",
              "", "Commands:", ""]
    lines += [f"- `{name}`: `{' '.join(cmd)}`" for name, cmd in commands.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(f"# validate of a JAX CPU env vs a bare fit\n\n{text}\n"
                      f"Seconds per round: `{json.dumps({n: [round(v, 3) for v in vs] for n, vs in times.items()})}`\n")
    print(f"wrote {RESULT}")


if __name__ == "__main__":
    main()
