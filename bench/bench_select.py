#!/usr/bin/env python3
"""How long `envcheck select --json` takes over 100 envs, against the loop an admin would write
(each env's own interpreter asked for its framework version), whole processes, side by side.

    python bench/bench_select.py [--envs 100] [--runs 10] [--home DIR] [--keep]

The 100 envs are real envcheck envs, made cheaply: tiny local wheels whose metadata say
``tensorflow`` 2.21.0 (a GPU build), ``tensorflow-cpu`` 2.21.0 or ``torch`` 2.13.0 (built with
tests/wheelhouse.py), one env per kind created by `envcheck env create --preset NAME --no-index
--find-links WHEELS` from a user preset in H/presets, then copied with `cp -a` into H/envs/NAME
with the copy's envcheck.json "name" rewritten. Mix: 40% tensorflow (GPU build), 40%
tensorflow-cpu, 20% torch (excluded by the default framework). Every third env gets a stored
validation report (`envcheck validate NAME --no-smoke`), since select reads stored reports.

Measured, interleaved (one warm-up each, then ``--runs`` rounds):
  - `envcheck select --json` on this host as it is (here: whatever NVML says);
  - the same against the fake libnvidia-ml.so.1 of the tests with one A100 (GPU-tier path:
    compat judged per GPU env), when gcc is available;
  - the admin's loop: for each of the 100 envs, ``ENV/bin/python -c "import importlib.metadata
    ..."`` printing the framework version (one process per env, sequentially).

Target: `envcheck select --json` over 100 envs <= 300 ms median.
Prints a markdown table and writes bench/results/select.json. Timing only, no assertions.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import envcheck_cmd, interleaved, machine, table, wall_ms

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
FAKE_SOURCE = ROOT / "tests" / "fakenvml" / "fake_nvml.c"
TARGET_MS = 300.0
STANDIN = "raise ImportError('stand-in {name}: metadata only, not importable')\n"
# kind -> (requirement of its preset, share of the envs)
KINDS = {"tfgpu": ("tensorflow==2.21.0", 0.4), "tfcpu": ("tensorflow-cpu==2.21.0", 0.4),
         "torch": ("torch==2.13.0", 0.2)}
ADMIN_CODE = ("import importlib.metadata as m\n"
              "for d in ('tensorflow', 'tensorflow-cpu', 'torch'):\n"
              "    try: print(d, m.version(d))\n"
              "    except m.PackageNotFoundError: pass\n")
STRIPPED = ("PYTHONPATH", "ENVCHECK_HOME", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


def build_wheels(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from wheelhouse import build_wheel

    for requirement, _ in KINDS.values():
        name, version = requirement.split("==")
        build_wheel(folder, name, version,
                    files={f"{name.replace('-', '_')}_standin/__init__.py": STANDIN.format(name=name)})
    return folder


def make_envs(home: Path, wheels: Path, count: int, env: dict[str, str]) -> dict[str, list[str]]:
    """`count` envs in `home`: one real env per kind, the rest `cp -a` copies; names by kind."""
    envcheck = envcheck_cmd() + ["--home", str(home)]
    (home / "presets").mkdir(parents=True, exist_ok=True)
    names: dict[str, list[str]] = {}
    start = 0
    for kind, (requirement, share) in KINDS.items():
        n = round(count * share) if kind != "torch" else count - start
        (home / "presets" / f"bench-{kind}.toml").write_text(
            f'title = "bench {kind}"\ndescription = ""\nkind = "cpu"\nframework = "tensorflow"\n'
            f'requires-python = ">=3.8"\npackages = ["{requirement}"]\n')
        kind_names = [f"{kind}-{i:03d}" for i in range(start, start + n)]
        first = kind_names[0]
        subprocess.run(envcheck + ["env", "create", first, "--preset", f"bench-{kind}", "--no-index",
                                   "--find-links", str(wheels)], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        for name in kind_names[1:]:
            target = home / "envs" / name
            subprocess.run(["cp", "-a", str(home / "envs" / first), str(target)], check=True)
            manifest = target / "envcheck.json"
            data = json.loads(manifest.read_text())
            data["name"] = name
            manifest.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        names[kind] = kind_names
        start += n
    return names


def admin_loop_ms(pythons: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    for python in pythons:
        subprocess.run([python, "-c", ADMIN_CODE], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=100)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--home", help="build the envs here (default: a temp dir, deleted after)")
    parser.add_argument("--keep", action="store_true", help="keep the temp home")
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "envcheck"), quiet=1)
    env = {k: v for k, v in os.environ.items() if k not in STRIPPED}
    tmp = Path(tempfile.mkdtemp(prefix="envcheck-bench-select-"))
    home = Path(args.home) if args.home else tmp / "home"
    try:
        t0 = time.perf_counter()
        names = make_envs(home, build_wheels(tmp / "wheels"), args.envs, env)
        envcheck = envcheck_cmd() + ["--home", str(home)]
        all_names = [n for kind in names.values() for n in kind]
        validated = all_names[::3]
        for name in validated:
            subprocess.run(envcheck + ["validate", name, "--no-smoke", "--json"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        build_s = time.perf_counter() - t0

        select = envcheck + ["select", "--json"]
        first = json.loads(subprocess.run(select, env=env, capture_output=True, text=True).stdout)
        summary = {"ranked": len(first["ranking"]), "excluded": len(first["excluded"]),
                   "selected": first["selected"], "host": first["host"],
                   "with_stored_verdict": sum(1 for r in first["ranking"] if r.get("validated"))}

        pythons = [str(home / "envs" / n / "bin" / "python") for n in all_names]
        commands = {"`envcheck select --json` (this host)": lambda: wall_ms(select, env, check=False),
                    "`python -c pass` (envcheck's interpreter)":
                        lambda: wall_ms([sys.executable, "-c", "pass"], env)}
        fake_env = None
        if shutil.which("gcc"):
            subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libnvidia-ml.so.1", "-o",
                            str(tmp / "libnvidia-ml.so.1"), str(FAKE_SOURCE)], check=True)
            fake_env = {**env, "LD_LIBRARY_PATH": str(tmp), "FAKE_NVML_GPUS": "NVIDIA A100-SXM4-80GB,8.0,81920",
                        "FAKE_NVML_DRIVER": "550.54.15", "FAKE_NVML_CUDA": "12040"}
            fake = json.loads(subprocess.run(select, env=fake_env, capture_output=True, text=True).stdout)
            summary["fake_a100"] = {"selected": fake["selected"], "host": fake["host"],
                                    "gpu_tier": sum(1 for r in fake["ranking"] if r["tier"] == "gpu")}
            commands["`envcheck select --json` (fake NVML, 1 A100)"] = lambda: wall_ms(select, fake_env, check=False)
        commands[f"admin loop: {len(pythons)} × `ENV/bin/python -c 'importlib.metadata.version(...)'`"] = \
            lambda: admin_loop_ms(pythons, env)
        times = interleaved(commands, args.runs)
    finally:
        if not args.keep and not args.home:
            shutil.rmtree(tmp, ignore_errors=True)

    reference = "`envcheck select --json` (this host)"
    medians = {name: statistics.median(v) for name, v in times.items()}
    admin = next(n for n in times if n.startswith("admin loop"))
    print(f"{platform.node()}: {os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.2f}, "
          f"Python {platform.python_version()}, {len(all_names)} envs "
          f"({', '.join(f'{len(v)} {k}' for k, v in names.items())}; {len(validated)} with a stored report; "
          f"built in {build_s:.1f} s), {args.runs} rounds, interleaved, 1 warm-up each\n")
    print(f"select: {summary['ranked']} ranked, {summary['excluded']} excluded, selected {summary['selected']}"
          + (f"; fake A100: {summary['fake_a100']['gpu_tier']} in the GPU tier, selected "
             f"{summary['fake_a100']['selected']}" if "fake_a100" in summary else "") + "\n")
    print(table(times, reference, "× `select --json`"))
    print()
    for name in times:
        if name.startswith("`envcheck select"):
            print(f"- {name}: median {medians[name]:.0f} ms (target <= {TARGET_MS:.0f} ms: "
                  f"{'met' if medians[name] <= TARGET_MS else 'MISSED'})")
    print(f"- admin loop / select: {medians[admin] / medians[reference]:.1f}x")

    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "schema": "envcheck.bench.select/1",
        "machine": machine(),
        "envs": {k: len(v) for k, v in names.items()}, "validated": len(validated),
        "build_s": round(build_s, 2), "runs": args.runs, "selection": summary,
        "admin_code": ADMIN_CODE,
        "ms": {name: [round(v, 2) for v in values] for name, values in times.items()},
        "median_ms": {name: round(v, 2) for name, v in medians.items()},
        "ratio_admin_over_select": round(medians[admin] / medians[reference], 2),
        "target_ms": TARGET_MS,
        "met": {name: medians[name] <= TARGET_MS for name in times if name.startswith("`envcheck select")},
    }
    (RESULTS / "select.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nwrote {RESULTS / 'select.json'}")


if __name__ == "__main__":
    main()
