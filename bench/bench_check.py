#!/usr/bin/env python3
"""How long the pre-training gate takes when it answers from a stored validation:
`envcheck check --env NAME --json` against asking TensorFlow itself, whole processes, side by side.

    python bench/bench_check.py [--home ~/.cache/envcheck-tf] [--env tf] [--runs 15]

The env must be a real envcheck env with TensorFlow (make one with
`envcheck --home H env create tf --preset tensorflow-cpu`). Once, before timing, this stores a
validation report (`envcheck validate NAME --no-smoke`) and confirms that `check --env NAME`
and `check --env auto` both answer `"cached": true`. envcheck's bytecode is compiled first, as
an installed wheel has it. Then one warm-up of each command, and `--runs` rounds, each round
running every command once, so machine noise hits them alike.

Targets: `check --env NAME` <= 100 ms median, and >= 30x faster than
`ENV/bin/python -c "import tensorflow as tf; tf.config.list_physical_devices('GPU')"`.
`check --env auto` (selection involved) is reported separately. Issue 9 point 5: `check --env NAME`
<= 2x `python -c pass` of the same interpreter (the one the console script runs under).
Beside it, `python -c 'import re, json'`: what the generated console script (`import re`) and a
JSON answer cost before any of envcheck's code runs (issue 18 point 3).

Besides wall time, each run's CPU time (user + system, from RUSAGE_CHILDREN) is recorded:
on a shared, loaded machine it moves far less than wall time.

Prints a markdown table and writes bench/results/check.json. Timing only, no assertions.
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
from pathlib import Path

from _common import envcheck_cmd, interleaved, machine, table, wall_ms

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
TF_CODE = "import tensorflow as tf; tf.config.list_physical_devices('GPU')"
TARGET_MS = 100.0
TARGET_RATIO = 30.0
TARGET_PASS_RATIO = 2.0  # issue 9 point 5: the gate within 2x a bare interpreter start


def gate_json(cmd: list[str], env: dict[str, str]) -> dict:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", default=str(Path.home() / ".cache" / "envcheck-tf"))
    parser.add_argument("--env", default="tf")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "envcheck"), quiet=1)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ENVCHECK_HOME")}
    envcheck = envcheck_cmd() + ["--home", args.home]
    tf_python = str(Path(args.home) / "envs" / args.env / "bin" / "python")
    if not Path(tf_python).exists():
        sys.exit(f"no env {args.env} in {args.home}: envcheck --home {args.home} env create "
                 f"{args.env} --preset tensorflow-cpu")

    subprocess.run(envcheck + ["validate", args.env, "--no-smoke", "--json"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    answers = {}
    for which in (args.env, "auto"):
        answer = gate_json(envcheck + ["check", "--env", which, "--json"], env)
        answers[which] = {k: answer.get(k) for k in ("env", "ready", "cached", "reason")}
        if answer.get("cached") is not True:
            sys.exit(f"check --env {which} did not answer from the stored report: {answers[which]}")

    check_name = f"envcheck check --env {args.env} --json"
    auto_name = "envcheck check --env auto --json"
    pass_name = "python -c pass (envcheck's interpreter)"
    # what any console script that answers in JSON pays before envcheck's own code: pip's and
    # uv's generated script imports re, and the answer is read and printed with json
    floor_name = "python -c 'import re, json' (the console script's and JSON's floor)"
    tf_name = "tf python -c \"import tensorflow as tf; tf.config.list_physical_devices('GPU')\""
    commands = {
        check_name: envcheck + ["check", "--env", args.env, "--json"],
        auto_name: envcheck + ["check", "--env", "auto", "--json"],
        pass_name: [sys.executable, "-c", "pass"],
        floor_name: [sys.executable, "-c", "import re, json"],
        tf_name: [tf_python, "-c", TF_CODE],
    }
    load_before = os.getloadavg()[0]
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    times = interleaved({name: (lambda cmd=cmd, name=name: wall_ms(cmd, env, cpu=cpu[name]))
                         for name, cmd in commands.items()}, args.runs)
    medians = {name: statistics.median(v) for name, v in times.items()}
    ratio_tf = medians[tf_name] / medians[check_name]
    ratio_pass = medians[check_name] / medians[pass_name]

    header = (f"{platform.node()}: {os.cpu_count()} CPUs, load avg {load_before:.2f} -> {os.getloadavg()[0]:.2f}, "
              f"Python {platform.python_version()}, {args.runs} rounds, interleaved, 1 warm-up each")
    print(header + "\n")
    cpu_median = {name: f"{statistics.median(values[-args.runs:]):.0f}" for name, values in cpu.items()}
    print(table({f"`{n}`": v for n, v in times.items()}, f"`{check_name}`", "× `check --env`",
                {"median CPU ms": {f"`{n}`": c for n, c in cpu_median.items()}}))
    print()
    print(f"- `check --env {args.env}`: median {medians[check_name]:.0f} ms "
          f"(target <= {TARGET_MS:.0f} ms: {'met' if medians[check_name] <= TARGET_MS else 'MISSED'})")
    print(f"- TensorFlow / check: {ratio_tf:.1f}x "
          f"(target >= {TARGET_RATIO:.0f}x: {'met' if ratio_tf >= TARGET_RATIO else 'MISSED'})")
    print(f"- check / `python -c pass` (same interpreter): {ratio_pass:.2f}x "
          f"(target <= {TARGET_PASS_RATIO:.0f}x: {'met' if ratio_pass <= TARGET_PASS_RATIO else 'MISSED'})")
    print(f"- `python -c 'import re, json'` / `python -c pass`: {medians[floor_name] / medians[pass_name]:.2f}x "
          f"(envcheck's own part: {medians[check_name] - medians[floor_name]:.1f} ms)")
    print(f"- `check --env auto`: median {medians[auto_name]:.0f} ms "
          f"({medians[auto_name] / medians[check_name]:.2f}x `check --env {args.env}`)")

    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "schema": "envcheck.bench.check/1",
        "machine": machine(loadavg_start=load_before),
        "home": args.home, "env": args.env, "runs": args.runs,
        "answers": answers,
        "commands": {name: cmd for name, cmd in commands.items()},
        "ms": {name: [round(v, 2) for v in values] for name, values in times.items()},
        "median_ms": {name: round(v, 2) for name, v in medians.items()},
        "min_ms": {name: round(min(v), 2) for name, v in times.items()},
        "cpu_ms": {name: [round(v, 2) for v in values] for name, values in cpu.items()},
        "median_cpu_ms": {name: round(statistics.median(v), 2) for name, v in cpu.items()},
        "ratio_tf_over_check": round(ratio_tf, 2),
        "ratio_check_over_pass": round(ratio_pass, 3),
        "ratio_floor_over_pass": round(medians[floor_name] / medians[pass_name], 3),
        "ratio_auto_over_check": round(medians[auto_name] / medians[check_name], 3),
        "targets": {"check_median_ms": TARGET_MS, "tf_over_check": TARGET_RATIO,
                    "check_over_pass": TARGET_PASS_RATIO},
        "met": {"check_median_ms": medians[check_name] <= TARGET_MS,
                "tf_over_check": ratio_tf >= TARGET_RATIO,
                "check_over_pass": ratio_pass <= TARGET_PASS_RATIO},
    }
    (RESULTS / "check.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nwrote {RESULTS / 'check.json'}")


if __name__ == "__main__":
    main()
