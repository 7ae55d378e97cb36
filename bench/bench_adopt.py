#!/usr/bin/env python3
"""Envs people already have (issue 28): three figures, each side by side with its floor, whole
processes, interleaved rounds after one warm-up each.

    python bench/bench_adopt.py [--runs 7] [--venv DIR] [--only validate|adopt|check]

1. `envcheck validate --python VENV --devices cpu --json` on a venv of the user's own with a CPU
   torch installed by pip (``--venv``; made once when absent: `pip install torch==2.13.0`, the
   CPU build on this machine's disk, and numpy) against bench/bare_fit_torch.py run by the venv's own
   interpreter. Target: <= 1.2x.
2. `envcheck env adopt NAME VENV300` of a venv holding 300 distributions (tiny wheels built
   here, installed by uv) against `VENV300/bin/python -c "import importlib.metadata as m;
   list(m.distributions())"`, the floor of reading it. Target: <= 1.5x. After each adopt the
   env is forgotten again (`env remove`, not timed): a path is adopted once.
3. `envcheck check --env NAME --json` answered from a stored pass for the adopted venv of 1,
   and for an env envcheck made (a tiny preset), each against `python -c pass` of envcheck's
   interpreter. Target: the adopted env's ratio the same as the managed one's (within 10%).

Prints markdown and writes bench/results/adopt.md (with ``--only PART``, that part alone:
bench/results/adopt-PART.md). Timing only, no assertions.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import envcheck_cmd, interleaved, machine, table, wall_ms

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from wheelhouse import build_wheel  # noqa: E402  (the tests' tiny wheels)

PARTS = ("validate", "adopt", "check")  # the three figures, in the order below
TINY = ('title = "tiny"\ndescription = ""\nkind = "cpu"\nframework = "torch"\nrequires-python = ">=3.8"\n'
        'packages = ["torch==2.13.0"]\n')


def run(cmd: list, env: dict | None = None) -> str:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return done.stdout


def torch_venv(folder: Path) -> Path:
    if not (folder / "bin" / "python").exists():
        run([sys.executable, "-m", "venv", folder])
        run([folder / "bin" / "python", "-m", "pip", "install", "-q", "torch==2.13.0", "numpy"])
    return folder


def many_venv(folder: Path, count: int = 300) -> Path:
    if not (folder / "bin" / "python").exists():
        wheels = folder.parent / "wheels300"
        names = [f"pkg{i:03d}" for i in range(count)]
        for name in names:
            build_wheel(wheels, name, "1.0")
        run([sys.executable, "-m", "uv", "venv", "-q", "--python", sys.executable, folder])
        run([sys.executable, "-m", "uv", "pip", "install", "-q", "--python", folder / "bin" / "python",
             "--no-index", "--find-links", wheels, *names])
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--venv", default=str(Path.home() / ".cache" / "envcheck-bench-user-venv"))
    parser.add_argument("--only", choices=PARTS, help="run this part alone (default: all three)")
    args = parser.parse_args()
    parts = [args.only] if args.only else list(PARTS)
    compileall.compile_dir(str(ROOT / "envcheck"), quiet=1)
    scratch = Path(tempfile.mkdtemp(prefix="envcheck-bench-adopt-"))
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ENVCHECK_HOME", "VIRTUAL_ENV")}
    env = {**base, "ENVCHECK_HOME": str(scratch / "home")}
    venv = torch_venv(Path(args.venv)) if "validate" in parts or "check" in parts else None
    many = many_venv(Path(args.venv).parent / "envcheck-bench-300") if "adopt" in parts else None
    out = [f"`{' '.join(sys.argv)}` on {machine()['node']}: {machine()['cpus']} CPUs, load average "
           f"{machine()['loadavg']:.2f}, {args.runs} rounds, interleaved, 1 warm-up each", ""]

    if "validate" in parts:
        # 1. validate --python against the bare fit in the venv's own interpreter
        bare = ROOT / "bench" / "bare_fit_torch.py"
        validate = envcheck_cmd() + ["validate", "--python", str(venv), "--devices", "cpu", "--json"]
        report = json.loads(run(validate, env))["reports"][0]
        if report["verdict"] not in ("ready", "degraded") or report["devices"][0]["status"] != "pass":
            sys.exit(f"validate --python did not fit: {report['verdict']}")
        v_name, b_name = "envcheck validate --python VENV --devices cpu --json", "VENV/bin/python bench/bare_fit_torch.py cpu"
        times = interleaved({v_name: lambda: wall_ms(validate, env),
                             b_name: lambda: wall_ms([str(venv / "bin" / "python"), str(bare), "cpu"],
                                                     {**base, "PYTHONNOUSERSITE": "1"})}, args.runs)
        ratio1 = statistics.median(times[v_name]) / statistics.median(times[b_name])
        out += ["### 1. validate --python on a user's venv with CPU torch", "", table(times, b_name, "× bare fit"), "",
                f"- **{ratio1:.2f}x** the bare fit (target <= 1.2x: {'met' if ratio1 <= 1.2 else 'MISSED'})", ""]

    if "adopt" in parts:
        # 2. env adopt of 300 distributions against listing them
        def adopt() -> float:  # each adopt, then the env forgotten again (untimed): a path is adopted once
            took = wall_ms(envcheck_cmd() + ["env", "adopt", "m", str(many)], env)
            run(envcheck_cmd() + ["env", "remove", "m", "--yes"], env)
            return took

        listing = [str(many / "bin" / "python"), "-c", "import importlib.metadata as m; list(m.distributions())"]
        a_name, l_name = "envcheck env adopt NAME VENV300", "VENV300/bin/python -c 'list(importlib.metadata.distributions())'"
        times = interleaved({a_name: adopt, l_name: lambda: wall_ms(listing, base)}, args.runs)
        ratio2 = statistics.median(times[a_name]) / statistics.median(times[l_name])
        run(envcheck_cmd() + ["env", "adopt", "m", str(many)], env)
        count = len(json.loads(run(envcheck_cmd() + ["env", "show", "m", "--json"], env))["env"]["packages"])
        out += ["### 2. env adopt of a venv of 300 distributions", "", table(times, l_name, "× listing"), "",
                f"- {count} distributions read; **{ratio2:.2f}x** the listing (target <= 1.5x: "
                f"{'met' if ratio2 <= 1.5 else 'MISSED'})", ""]

    if "check" in parts:
        # 3. the gate's stored pass: adopted against managed, each against python -c pass
        run(envcheck_cmd() + ["env", "adopt", "mine", str(venv)], env)
        (scratch / "home" / "presets").mkdir(parents=True, exist_ok=True)
        (scratch / "home" / "presets" / "tiny.toml").write_text(TINY)
        run(envcheck_cmd() + ["env", "create", "made", "--preset", "tiny"], env)
        for name in ("mine", "made"):
            run(envcheck_cmd() + ["validate", name, "--no-smoke"], env)
            answer = json.loads(run(envcheck_cmd() + ["check", "--env", name, "--json"], env))
            if not answer["cached"]:
                sys.exit(f"check --env {name} did not answer from the stored pass")
        p_name = f"{Path(sys.executable).name} -c pass"
        timers = {f"envcheck check --env mine --json (adopted)": lambda: wall_ms(envcheck_cmd() + ["check", "--env", "mine", "--json"], env),
                  f"envcheck check --env made --json (managed)": lambda: wall_ms(envcheck_cmd() + ["check", "--env", "made", "--json"], env),
                  p_name: lambda: wall_ms([sys.executable, "-c", "pass"], base)}
        times = interleaved(timers, max(args.runs, 15))
        medians = {n: statistics.median(v) for n, v in times.items()}
        adopted, managed = (medians[n] / medians[p_name] for n in list(timers)[:2])
        out += ["### 3. check from a stored pass: adopted and managed", "", table(times, p_name, "× python -c pass"), "",
                f"- adopted **{adopted:.2f}x**, managed **{managed:.2f}x** `python -c pass` (target: the same; "
                f"{'met' if adopted <= managed * 1.1 else 'MISSED'}: {adopted / managed:.2f} of it)", ""]
    text = "\n".join(out)
    print(text)
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / (f"adopt-{args.only}.md" if args.only else "adopt.md")).write_text(text + "\n")


if __name__ == "__main__":
    main()
