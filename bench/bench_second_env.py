#!/usr/bin/env python3
"""The second env of a preset, against a raw uv install of the same packages (issue 21).

    python bench/bench_second_env.py [--repeat 3] [--preset tensorflow-cpu]

One home, one uv cache (envcheck's, in the home; raw uv is pointed at it too, so both install
warm). First, untimed: the first env, ``envcheck env create first --preset P``. Then
``--repeat`` rounds, interleaved, each:

  envcheck   envcheck --home H env create second --preset P   (an intact env of the same preset
             content and interpreter exists: its files are linked, not installed), then removed
  raw-uv     uv venv D && uv pip install --compile-bytecode <the preset's packages>   (the same
             interpreter, index settings and cache), then removed

Also timed once each: ``envcheck env create ... --no-link`` (the install it replaces) and
``envcheck env verify second`` of the linked env. Checks after the last round: the linked env
imports its framework, is clean by ``env verify --hashes``, and names its own path in its scripts.

Target: envcheck / raw-uv <= 0.3. Prints a table; raw samples to bench/results/second_env.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import envcheck_cmd, machine
from bench_create import STRIPPED, index_args, interpreter, uv_bin

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
TARGET = 0.3


def run(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--preset", default="tensorflow-cpu")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="envcheck-bench-second-"))
    home = scratch / "home"
    cache = home / "cache" / "uv"
    env = {k: v for k, v in os.environ.items() if k not in STRIPPED}
    env.update(UV_CACHE_DIR=str(cache))
    envcheck = [*envcheck_cmd(), "--home", str(home), "-q"]
    sys.path.insert(0, str(HERE.parent))
    from envcheck.envs.presets import resolve_preset
    from envcheck.paths import Home

    reqs = list(resolve_preset(Home(home), args.preset).packages)
    python = interpreter()
    index, best_match = index_args()
    strategy = ["--index-strategy", "unsafe-best-match"] if best_match else []
    uv = uv_bin()
    try:
        print(f"first env (untimed): {run([*envcheck, 'env', 'create', 'first', '--preset', args.preset], env):.1f} s",
              file=sys.stderr)
        raw_env = dict(env, UV_PYTHON_DOWNLOADS="never", UV_NO_CONFIG="1")

        def raw() -> float:
            target = scratch / "raw"
            py = str(target / "bin" / "python")
            seconds = run([uv, "venv", "--quiet", "--python", python, str(target)], raw_env)
            seconds += run([uv, "pip", "install", "--quiet", "--python", py, "--compile-bytecode", *strategy,
                            *index, *reqs], raw_env)
            shutil.rmtree(target)
            return seconds

        def linked(keep: bool = False) -> float:
            seconds = run([*envcheck, "env", "create", "second", "--preset", args.preset], env)
            data = json.loads((home / "envs" / "second" / "envcheck.json").read_text())
            if data.get("linked_from") != "first":
                sys.exit(f"env second was not linked from env first: {data.get('linked_from')}")
            if not keep:
                run([*envcheck, "env", "remove", "second", "--yes"], env)
            return seconds

        raw(), linked()  # one warm-up each
        times: dict[str, list[float]] = {"envcheck (linked)": [], "raw uv": []}
        for round_ in range(args.repeat):
            order = [("envcheck (linked)", linked), ("raw uv", raw)]
            for name, timer in order if round_ % 2 == 0 else reversed(order):
                times[name].append(timer())
        no_link = run([*envcheck, "env", "create", "installed", "--preset", args.preset, "--no-link"], env)
        run([*envcheck, "env", "remove", "installed", "--yes"], env)
        linked(keep=True)
        verify = run([*envcheck, "env", "verify", "second"], env)
        hashes = run([*envcheck, "env", "verify", "second", "--hashes"], env)
        second = home / "envs" / "second"
        imports = subprocess.run([str(second / "bin" / "python"), "-c", "import sys; print(sys.prefix)"],
                                 capture_output=True, text=True)
        files = sum(len(f) for _, _, f in os.walk(second))
        med = {k: statistics.median(v) for k, v in times.items()}
        ratio = med["envcheck (linked)"] / med["raw uv"]
        print(f"\npreset {args.preset}: {len(reqs)} requirement(s), {files} files in the env; "
              f"{args.repeat} rounds interleaved after one warm-up each; load avg {os.getloadavg()[0]:.2f}\n")
        print("| method | median s | min s | max s |\n|---|---:|---:|---:|")
        for name, values in times.items():
            print(f"| {name} | {med[name]:.2f} | {min(values):.2f} | {max(values):.2f} |")
        print(f"| envcheck --no-link (once) | {no_link:.2f} | | |")
        print(f"| env verify second (once, quick) | {verify:.2f} | | |")
        print(f"| env verify second --hashes (once) | {hashes:.2f} | | |")
        print(f"\nlinked / raw uv: {ratio:.3f}x (target <= {TARGET}x: {'met' if ratio <= TARGET else 'MISSED'}); "
              f"the linked env's interpreter answers: {imports.stdout.strip() == str(second)}")
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "second_env.json").write_text(json.dumps(
            {"machine": machine(), "preset": args.preset, "times": times, "no_link": no_link, "verify": verify,
             "verify_hashes": hashes, "ratio": ratio}, indent=2))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
