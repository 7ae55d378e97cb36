#!/usr/bin/env python3
"""How long `envcheck validate NAME --devices cpu` takes to a verdict, against a bare script that
imports TensorFlow and fits the same model (bench/bare_fit.py), whole processes, side by side;
and how much memory envcheck's own process takes while it validates.

    python bench/bench_validate.py [--home ~/.cache/envcheck-tf] [--env tf] [--runs 5]

The env must be a real envcheck env with TensorFlow (make one with
`envcheck --home H env create tf --preset tensorflow-cpu`). bench/bare_fit.py, run by the env's
own python, fits what envcheck/data/smoke_runner.py fits for one CPU device: Dense(32, relu) ->
Dense(1), Adam(0.01), MSE, 12 steps of 32 samples of the same seeded synthetic data, inside
tf.device('/CPU:0'). envcheck's bytecode is compiled first, as an installed wheel has it. One
warm-up each, then ``--runs`` rounds, each running both commands, so noise hits them alike.

Peak RSS of envcheck's OWN process (not the TensorFlow child it starts): measured in extra,
untimed runs, two ways:
  - getrusage(RUSAGE_SELF).ru_maxrss, written at exit by a wrapper that runs envcheck's
    `__main__` in-process (`runpy.run_module('envcheck')`); RUSAGE_CHILDREN of the same
    process gives the smoke runner's peak, for comparison;
  - VmHWM of the console-script process read from /proc/PID/status every 5 ms until it exits.

Targets: validate median <= 1.2x the bare fit's median; envcheck's own peak RSS < 80 MB.
Prints a markdown table and writes bench/results/validate.json. Timing only, no assertions.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import envcheck_cmd, machine, timed

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BARE = ROOT / "bench" / "bare_fit.py"
TARGET_RATIO = 1.2
TARGET_RSS_MB = 80.0
WRAPPER = """
import atexit, os, resource, runpy, sys
def _peak():
    with open(os.environ['BENCH_RSS_OUT'], 'w') as f:
        f.write('%d %d' % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                           resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
atexit.register(_peak)
sys.argv = ['envcheck'] + sys.argv[1:]
runpy.run_module('envcheck', run_name='__main__')
"""


def rss_self(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(envcheck's own peak RSS, its children's peak RSS) in MB, from getrusage at exit."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as out:
        subprocess.run([sys.executable, "-c", WRAPPER, *args], env={**env, "BENCH_RSS_OUT": out.name},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        own, children = (int(v) for v in Path(out.name).read_text().split())
    return own / 1024, children / 1024  # ru_maxrss is in KiB on Linux


def rss_polled(cmd: list[str], env: dict[str, str]) -> float:
    """VmHWM (MB) of the process `cmd` starts, polled until it exits."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    status = Path(f"/proc/{proc.pid}/status")
    while proc.poll() is None:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except (OSError, ValueError):
            pass
        time.sleep(0.005)
    return peak / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", default=str(Path.home() / ".cache" / "envcheck-tf"))
    parser.add_argument("--env", default="tf")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rss-runs", type=int, default=3)
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "envcheck"), quiet=1)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ENVCHECK_HOME")}
    tf_python = str(Path(args.home) / "envs" / args.env / "bin" / "python")
    if not Path(tf_python).exists():
        sys.exit(f"no env {args.env} in {args.home}: envcheck --home {args.home} env create "
                 f"{args.env} --preset tensorflow-cpu")
    validate_args = ["--home", args.home, "validate", args.env, "--devices", "cpu", "--json"]
    validate = envcheck_cmd() + validate_args
    # The bare script gets what the smoke runner gets from envcheck: no user site, quiet TF logs.
    bare_env = {**env, "PYTHONNOUSERSITE": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    bare = [tf_python, str(BARE), "cpu:0"]
    # The same script, ending with os._exit as the smoke runner does (no TensorFlow teardown):
    # reported for context; the target compares against the plain script.
    bare_noexit = [tf_python, "-c", "import os, runpy, sys; sys.argv = [%r, 'cpu:0']; "
                   "runpy.run_path(%r, run_name='__main__'); sys.stdout.flush(); os._exit(0)"
                   % (str(BARE), str(BARE))]
    v_name = f"envcheck validate {args.env} --devices cpu --json"
    b_name = "tf python bench/bare_fit.py cpu:0"
    n_name = "tf python bench/bare_fit.py cpu:0, then os._exit (no TF teardown)"

    # warm-up (and a check that both really do the work)
    _, out = timed(validate, env)
    report = json.loads(out)["reports"][0]
    smoke = next(c for c in report["checks"] if c["id"] == "smoke")
    if report["verdict"] not in ("ready", "degraded") or smoke["status"] != "pass":
        sys.exit(f"validate did not pass its smoke fit: {report['verdict']}, {smoke}")
    timed(bare, bare_env)
    timed(bare_noexit, bare_env)

    times: dict[str, list[float]] = {v_name: [], b_name: [], n_name: []}
    inner: dict[str, list] = {"validate_wall_s": [], "smoke_ms_per_step": [], "bare": [], "bare_noexit": []}
    for _ in range(args.runs):
        seconds, out = timed(validate, env)
        times[v_name].append(seconds)
        report = json.loads(out)["reports"][0]
        inner["validate_wall_s"].append(report["wall_s"])
        inner["smoke_ms_per_step"].append(report["devices"][0]["ms_per_step"])
        seconds, out = timed(bare, bare_env)
        times[b_name].append(seconds)
        inner["bare"].append(json.loads(out.strip().splitlines()[-1]))
        seconds, out = timed(bare_noexit, bare_env)
        times[n_name].append(seconds)
        inner["bare_noexit"].append(json.loads(out.strip().splitlines()[-1]))

    rss = [rss_self(validate_args, env) for _ in range(args.rss_runs)]
    polled = [rss_polled(validate, env) for _ in range(args.rss_runs)]
    own = statistics.median(r[0] for r in rss)
    child = statistics.median(r[1] for r in rss)
    medians = {n: statistics.median(v) for n, v in times.items()}
    ratio = medians[v_name] / medians[b_name]

    print(f"{platform.node()}: {os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.2f}, "
          f"Python {platform.python_version()}, {args.runs} rounds, interleaved, 1 warm-up each\n")
    lines = ["| command | runs | median s | min s | max s | × bare fit |", "|---|---:|---:|---:|---:|---:|"]
    for name, values in times.items():
        lines.append(f"| `{name}` | {len(values)} | {medians[name]:.2f} | {min(values):.2f} | "
                     f"{max(values):.2f} | {medians[name] / medians[b_name]:.2f} |")
    print("\n".join(lines))
    bare_import = statistics.median(b["import_s"] for b in inner["bare"])
    bare_fit = statistics.median(b["fit_s"] for b in inner["bare"])
    print(f"\n- inside: validate's own wall_s median {statistics.median(inner['validate_wall_s']):.2f} s; "
          f"bare: import {bare_import:.2f} s + data/model/fit {bare_fit:.2f} s")
    teardown = statistics.median(t - b["total_s"] for t, b in zip(times[b_name], inner["bare"]))
    print(f"- bare script: {teardown:.2f} s of its wall time is outside its own timer "
          f"(interpreter start + TensorFlow teardown at exit; the smoke runner skips teardown with os._exit)")
    print(f"- validate / bare: {ratio:.2f}x (target <= {TARGET_RATIO}x: {'met' if ratio <= TARGET_RATIO else 'MISSED'}); "
          f"validate / bare-without-teardown: {medians[v_name] / medians[n_name]:.2f}x")
    print("\n| envcheck's own process, peak RSS | runs | median MB | max MB |\n|---|---:|---:|---:|")
    print(f"| getrusage(RUSAGE_SELF) at exit (in-process wrapper) | {len(rss)} | {own:.1f} | "
          f"{max(r[0] for r in rss):.1f} |")
    print(f"| VmHWM of the console-script process, polled | {len(polled)} | {statistics.median(polled):.1f} | "
          f"{max(polled):.1f} |")
    print(f"| (for comparison: the TensorFlow smoke-runner child, RUSAGE_CHILDREN) | {len(rss)} | "
          f"{child:.1f} | {max(r[1] for r in rss):.1f} |")
    worst = max(max(r[0] for r in rss), max(polled))
    print(f"\n- envcheck's own peak RSS: {worst:.1f} MB at most (target < {TARGET_RSS_MB:.0f} MB: "
          f"{'met' if worst < TARGET_RSS_MB else 'MISSED'})")

    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "schema": "envcheck.bench.validate/1",
        "machine": machine(),
        "home": args.home, "env": args.env, "runs": args.runs,
        "commands": {v_name: validate, b_name: bare, n_name: bare_noexit},
        "seconds": {n: [round(v, 3) for v in values] for n, values in times.items()},
        "median_s": {n: round(v, 3) for n, v in medians.items()},
        "ratio_validate_over_bare": round(ratio, 3),
        "ratio_validate_over_bare_noexit": round(medians[v_name] / medians[n_name], 3),
        "inner": inner,
        "rss_mb": {"self_getrusage": [round(r[0], 1) for r in rss],
                   "children_getrusage": [round(r[1], 1) for r in rss],
                   "self_vmhwm_polled": [round(v, 1) for v in polled]},
        "targets": {"ratio": TARGET_RATIO, "own_rss_mb": TARGET_RSS_MB},
        "met": {"ratio": ratio <= TARGET_RATIO, "own_rss_mb": worst < TARGET_RSS_MB},
    }
    (RESULTS / "validate.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nwrote {RESULTS / 'validate.json'}")


if __name__ == "__main__":
    main()
