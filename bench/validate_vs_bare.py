"""What bench_validate_torch.py and bench_validate_jax.py share: `envcheck validate NAME
--devices cpu` of a real env against a bare fit script run by the env's own interpreter,
whole processes, side by side (see either script's docstring for what each measures).

envcheck's bytecode is compiled first, as an installed wheel has it. One warm-up each, then
``--runs`` rounds, each running every command once, so noise hits them alike. For context (no
target), `validate --devices cpu:0,cpu:1` is timed too. Target: validate median <= 1.2x the
bare fit's median. Prints a markdown table and writes it, with the command line, to
bench/results/validate_<framework>.md. Timing only, no assertions.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from _common import envcheck_cmd, machine, timed

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 1.2


@dataclass(frozen=True)
class Bench:
    framework: str  # "torch", "jax": the results file's suffix
    title: str  # the results file's heading
    preset: str
    env: str  # default env name
    bare: str  # the bare fit script, in bench/
    multi: str  # what the two-device validate adds, for the table
    multi_check: str  # its name in an error
    build: Callable[[dict], str]  # the report's build, described


def checked_report(bench: Bench, out: str, multi: bool) -> dict:
    """The one report of `validate --json`, after checking it really fitted (and ran on two devices)."""
    report = json.loads(out)["reports"][0]
    checks = {c["id"]: c for c in report["checks"]}
    if report["verdict"] not in ("ready", "degraded") or checks["smoke"]["status"] != "pass":
        sys.exit(f"validate did not pass its smoke fit: {report['verdict']}, {checks['smoke']}")
    if multi and checks["multi-replica"]["status"] != "pass":
        sys.exit(f"validate's {bench.multi_check} check did not pass: {checks['multi-replica']}")
    return report


def main(bench: Bench, doc: str) -> None:
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--home", default=str(Path.home() / ".cache" / f"envcheck-{bench.framework}"))
    parser.add_argument("--env", default=bench.env)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "envcheck"), quiet=1)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ENVCHECK_HOME")}
    python = Path(args.home) / "envs" / args.env / "bin" / "python"
    bare = ROOT / "bench" / bench.bare
    result = ROOT / "bench" / "results" / f"validate_{bench.framework}.md"
    if not python.exists():
        sys.exit(f"no env {args.env} in {args.home}: envcheck --home {args.home} env create "
                 f"{args.env} --preset {bench.preset}")
    v_name = f"envcheck validate {args.env} --devices cpu --json"
    b_name = f"{args.env} python bench/{bench.bare} cpu"
    n_name = f"{b_name}, then os._exit (context: no {bench.framework} teardown, as the smoke runner ends)"
    d_name = f"envcheck validate {args.env} --devices cpu:0,cpu:1 --json (context: {bench.multi})"
    commands = {
        v_name: envcheck_cmd() + ["--home", args.home, "validate", args.env, "--devices", "cpu", "--json"],
        b_name: [str(python), str(bare), "cpu"],
        n_name: [str(python), "-c", "import os, runpy, sys; sys.argv = [%r, 'cpu']; runpy.run_path(%r, "
                 "run_name='__main__'); sys.stdout.flush(); os._exit(0)" % (str(bare), str(bare))],
        d_name: envcheck_cmd() + ["--home", args.home, "validate", args.env, "--devices", "cpu:0,cpu:1",
                                  "--json"],
    }
    # The bare script gets what the smoke runner gets from envcheck: no user site.
    bare_env = {**env, "PYTHONNOUSERSITE": "1"}
    envs = {v_name: env, b_name: bare_env, n_name: bare_env, d_name: env}

    for name, cmd in commands.items():  # warm-up, and a check that each really does the work
        _, out = timed(cmd, envs[name])
        if name in (v_name, d_name):
            checked_report(bench, out, multi=name == d_name)
    times: dict[str, list[float]] = {name: [] for name in commands}
    inner: dict = {"validate_wall_s": [], "smoke_ms_per_step": [], "bare": [], "multi_detail": []}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            seconds, out = timed(cmd, envs[name])
            times[name].append(seconds)
            if name == v_name:
                report = checked_report(bench, out, multi=False)
                inner["validate_wall_s"].append(report["wall_s"])
                inner["smoke_ms_per_step"].append(report["devices"][0]["ms_per_step"])
                inner["build"] = report["build"]
            elif name == b_name:
                inner["bare"].append(json.loads(out.strip().splitlines()[-1]))
            elif name == d_name:
                inner["multi_detail"].append(checked_report(bench, out, multi=True)["multi_replica"]["detail"])

    medians = {n: statistics.median(v) for n, v in times.items()}
    ratio = medians[v_name] / medians[b_name]
    facts = machine()
    lines = [f"`{' '.join(sys.argv)}` on {facts['node']}: {facts['cpus']} CPUs, load average "
             f"{facts['loadavg']:.2f}, Python {platform.python_version()}, {args.runs} rounds, "
             f"interleaved, 1 warm-up each; the env: {bench.build(inner['build'])}", "",
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
              f"- the {bench.multi_check} check, last round: {inner['multi_detail'][-1]}",
              "", "Commands:", ""]
    lines += [f"- `{name}`: `{' '.join(cmd)}`" for name, cmd in commands.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    result.parent.mkdir(parents=True, exist_ok=True)
    result.write_text(f"# {bench.title}\n\n{text}\n"
                      f"Seconds per round: `{json.dumps({n: [round(v, 3) for v in vs] for n, vs in times.items()})}`\n")
    print(f"wrote {result}")
