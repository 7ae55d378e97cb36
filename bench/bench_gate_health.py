#!/usr/bin/env python3
"""The gate with a GPU requirement, level-1 reads included, against `python -c pass` of its
interpreter, on the stand-in NVML (tests/fakenvml) when nothing changed (issue 20's target:
<= 2.5x). Whole processes, interleaved.

    python bench/bench_gate_health.py [--runs 30] [--baseline DIR]

Builds, in a temporary folder: the fake libnvidia-ml.so.1 (one A100), a healthy /dev stand-in
and kernel log (the level-1 seams), a home with env `pt` (a torch 2.10 stand-in: a CUDA 12.8
build, installed offline from wheels built here) whose stored report is made a pass on one GPU
(fingerprint kept), then times `envcheck check --env pt --require-gpu --json` (answered by the
stored-pass path, level 1 read in it), `python -c pass` and `python -c 'import re, json'`.
``--baseline DIR``: also time the same command with ``PYTHONPATH=DIR`` (e.g. the committed
envcheck unpacked with ``git archive HEAD envcheck | tar -x -C DIR``), the gate before level 1.

Prints the medians and ratios; writes nothing else. Timing only, no assertions but the answer's.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import interleaved, wall_ms

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from wheelhouse import STANDIN, build_wheel  # noqa: E402

PRESET = """title = "pt"
kind = "gpu"
framework = "torch"
packages = ["torch==2.10.0"]

[gpu]
cuda = "12.8"
cudnn = "9.10"
libraries = []
"""
TARGET = 2.5


def setup(root: Path) -> dict[str, str]:
    wheels = root / "wheels"
    build_wheel(wheels, "torch", "2.10.0",
                requires=["nvidia-cuda-runtime-cu12==12.8.90", "nvidia-cudnn-cu12==9.10.2.21"],
                files={"torch_standin/__init__.py": STANDIN.format(name="torch")})
    for name, version in (("nvidia-cuda-runtime-cu12", "12.8.90"), ("nvidia-cudnn-cu12", "9.10.2.21")):
        build_wheel(wheels, name, version)
    lib = root / "lib"
    lib.mkdir()
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libnvidia-ml.so.1", "-o",
                    str(lib / "libnvidia-ml.so.1"), str(ROOT / "tests" / "fakenvml" / "fake_nvml.c")], check=True)
    dev = root / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm"):
        (dev / name).touch()
    (root / "kern.log").write_text("[    0.000000] Linux version 6.8.0\n")
    home = root / "home"
    (home / "presets").mkdir(parents=True)
    (home / "presets" / "pt.toml").write_text(PRESET)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "ENVCHECK_HOME", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
    env.update(LD_LIBRARY_PATH=str(lib), FAKE_NVML_GPUS="NVIDIA A100-SXM4-80GB,8.0,81920,retired=na",
               FAKE_NVML_DRIVER="570.124.06", FAKE_NVML_CUDA="12080", ENVCHECK_TEST_DEV_DIR=str(dev),
               ENVCHECK_TEST_KERNEL_LOG=str(root / "kern.log"), ENVCHECK_HOME=str(home))
    envcheck = [sys.executable, "-m", "envcheck"]
    subprocess.run(envcheck + ["env", "create", "pt", "--preset", "pt", "--no-index", "--find-links", str(wheels)],
                   env=env, check=True, capture_output=True)
    subprocess.run(envcheck + ["validate", "pt", "--no-smoke"], env=env, capture_output=True)
    path = home / "envs" / "pt" / "envcheck-report.json"
    data = json.loads(path.read_text())
    for check in data["checks"]:
        check["status"], check["fix"] = "pass", None
    data.update(verdict="ready", gpus_usable=1)
    path.write_text(json.dumps(data))
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--baseline", default=None)
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "envcheck"), quiet=1)
    root = Path(tempfile.mkdtemp(prefix="envcheck-bench-gate-"))
    try:
        env = setup(root)
        gate = [sys.executable, "-m", "envcheck", "check", "--env", "pt", "--require-gpu", "--json"]
        answer = json.loads(subprocess.run(gate, env=env, capture_output=True, text=True).stdout)
        if not (answer.get("cached") and answer.get("ready") and (answer.get("health") or {}).get("verdict") == "ready"):
            sys.exit(f"the gate did not answer a stored pass with level 1 read: {answer}")
        timers = {"gate": lambda: wall_ms(gate, env),
                  "pass": lambda: wall_ms([sys.executable, "-c", "pass"], env),
                  "re, json": lambda: wall_ms([sys.executable, "-c", "import re, json"], env)}
        if args.baseline:
            compileall.compile_dir(args.baseline, quiet=1)
            base = dict(env, PYTHONPATH=args.baseline)
            timers["baseline gate"] = lambda: wall_ms(gate, base, check=False)
        times = interleaved(timers, args.runs)
        med = {name: statistics.median(values) for name, values in times.items()}
        print(f"load avg {os.getloadavg()[0]:.2f}, {args.runs} rounds interleaved, Python {sys.version.split()[0]}")
        print(f"command: {' '.join(gate[1:])}  (fake NVML, 1 A100, level-1 seams)")
        for name, value in med.items():
            print(f"  {name}: median {value:.1f} ms (min {min(times[name]):.1f})")
        ratio = med["gate"] / med["pass"]
        print(f"gate / python -c pass: {ratio:.2f}x (target <= {TARGET}x: {'met' if ratio <= TARGET else 'MISSED'})")
        if args.baseline:
            print(f"baseline gate / python -c pass: {med['baseline gate'] / med['pass']:.2f}x; "
                  f"level 1 adds {med['gate'] - med['baseline gate']:.1f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
