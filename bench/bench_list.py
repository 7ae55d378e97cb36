#!/usr/bin/env python3
"""Benchmark `envcheck env list --json` over 100 real envs (issue 2: target <= 300 ms).

Two homes of 100 envs each, made cheaply but real:

  small   one env created by envcheck from a user preset (``six``), copied 99 times (cp -a)
  tf      one env created by envcheck from the tensorflow-cpu preset, hard-link copied 99
          times (cp -al: ~30 dist-info folders per env, next to no disk)

Each copy gets its manifest's "name" rewritten (a new file replaces the hard link).

Measured, whole process, wall time (``--runs`` runs after 2 warm-ups, median):
  envcheck --home H env list --json      (the console script; and through PATH, e.g. a pyenv shim)
compared with what an admin would otherwise loop over the 100 envs:
  uv pip list --python ENV/bin/python --format json       (``--loop-runs`` loops)
  python -m pip --python ENV/bin/python list --format json  (``--pip-runs`` loops; slow)
plus, to split start-up from work, EnvStore.list() timed inside one process.

    python bench/bench_list.py [--runs 20] [--loop-runs 3] [--pip-runs 1] [--keep]

Writes bench/results/list.json and prints a markdown table. Timing only, no assertions.
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
N_ENVS = 100
TARGET_S = 0.300
SMALL_PRESET = """\
title = "bench: one small package"
kind = "cpu"
framework = "none"
packages = ["six"]
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def envcheck_cmd() -> list[str]:
    script = Path(sys.executable).parent / "envcheck"
    return [str(script)] if script.exists() else [sys.executable, "-m", "envcheck"]


def uv_bin() -> str:
    sys.path.insert(0, str(REPO))
    from envcheck.envs.installers import UvInstaller

    return UvInstaller.binary() or sys.exit("uv is not available")


def make_home(root: Path, kind: str, env: dict[str, str]) -> Path:
    home = root / kind
    (home / "presets").mkdir(parents=True)
    if kind == "small":
        (home / "presets" / "bench-small.toml").write_text(SMALL_PRESET)
        preset = "bench-small"
    else:
        preset = "tensorflow-cpu"
    seed = "env-000"
    t0 = time.perf_counter()
    subprocess.run([*envcheck_cmd(), "--home", str(home), "env", "create", seed, "--preset", preset],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    log(f"{kind}: created {seed} with envcheck in {time.perf_counter() - t0:.1f}s; copying x{N_ENVS - 1}")
    envs = home / "envs"
    copy_flag = "-a" if kind == "small" else "-al"
    for i in range(1, N_ENVS):
        name = f"env-{i:03d}"
        subprocess.run(["cp", copy_flag, str(envs / seed), str(envs / name)], check=True)
        manifest = envs / name / "envcheck.json"
        data = json.loads(manifest.read_text())
        data["name"] = name
        tmp = manifest.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, manifest)  # a new inode: the seed's (hard-linked) manifest is untouched
    return home


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {cmd}\n{proc.stderr.decode()[-3000:]}")
    return dt, proc.stdout


def summary(values: list[float]) -> dict:
    values = sorted(values)
    return {"median": round(statistics.median(values), 4), "min": round(values[0], 4),
            "max": round(values[-1], 4), "runs": len(values)}


def bench_home(home: Path, args, env: dict[str, str], uv: str) -> dict:
    out: dict = {"home": str(home)}
    envs = sorted((home / "envs").iterdir())
    pkgs_per_env = len(list(next((envs[0] / "lib").glob("python*/site-packages")).glob("*.dist-info")))
    out["envs"], out["dist_info_per_env"] = len(envs), pkgs_per_env

    variants = {"envcheck (console script)": [*envcheck_cmd(), "--home", str(home), "env", "list", "--json"]}
    on_path = shutil.which("envcheck")
    if on_path and Path(on_path).resolve() != Path(envcheck_cmd()[0]).resolve():
        variants[f"envcheck via PATH ({on_path})"] = [on_path, "--home", str(home), "env", "list", "--json"]
    variants["python -I -c pass (interpreter floor)"] = [sys.executable, "-I", "-c", "pass"]
    out["commands"] = {k: " ".join(v) for k, v in variants.items()}
    out["envcheck_list"] = {}
    for label, cmd in variants.items():
        for _ in range(2):
            timed(cmd, env)
        runs = []
        for _ in range(args.runs):
            dt, stdout = timed(cmd, env)
            runs.append(dt)
        if "envcheck" in label:
            data = json.loads(stdout)
            ready = sum(e["state"] == "ready" for e in data["envs"])
            assert len(data["envs"]) == N_ENVS and ready == N_ENVS, (len(data["envs"]), ready)
            assert all(len(e["packages"]) == pkgs_per_env for e in data["envs"])
        out["envcheck_list"][label] = summary(runs)
        log(f"  {label}: median {statistics.median(runs) * 1000:.0f} ms")

    # In one process: the store's own work, without interpreter start-up and imports.
    code = ("import sys, time, statistics; sys.path.insert(0, %r)\n"
            "from envcheck.paths import Home; from envcheck.envs.store import EnvStore\n"
            "s = EnvStore(Home(%r)); s.list(); r = []\n"
            "for _ in range(%d):\n t = time.perf_counter(); x = [e.to_json() for e in s.list()]; "
            "r.append(time.perf_counter() - t)\n"
            "print(statistics.median(r))") % (str(REPO), str(home), args.runs)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    out["in_process_store_list_median_s"] = round(float(proc.stdout.strip()), 4)
    log(f"  in-process EnvStore.list(): {float(proc.stdout) * 1000:.1f} ms")

    loops = {"uv pip list loop": lambda e: [uv, "pip", "list", "--python", str(e / "bin" / "python"),
                                            "--format", "json"],
             "pip list loop": lambda e: [sys.executable, "-m", "pip", "--python", str(e / "bin" / "python"),
                                         "list", "--format", "json", "--disable-pip-version-check"]}
    reps = {"uv pip list loop": args.loop_runs, "pip list loop": args.pip_runs}
    out["alternatives"] = {}
    out["alternative_commands"] = {k: " ".join(f(Path("ENV"))) + "   (for ENV in 100 envs, one after another)"
                                   for k, f in loops.items()}
    for label, make in loops.items():
        if reps[label] <= 0:
            continue
        timed(make(envs[0]), env)  # warm
        runs = []
        for _ in range(reps[label]):
            t0 = time.perf_counter()
            for e in envs:
                _, stdout = timed(make(e), env)
            runs.append(time.perf_counter() - t0)
        assert len(json.loads(stdout)) >= pkgs_per_env - 1, stdout[:200]
        out["alternatives"][label] = summary(runs)
        log(f"  {label}: median {statistics.median(runs):.2f} s for {len(envs)} envs")
    return out


def table(r: dict) -> str:
    lines = [f"### env list --json over {N_ENVS} envs (whole-process wall time; target <= {TARGET_S * 1000:.0f} ms)", "",
             "| home | command | median | min | max | runs | vs envcheck |", "|---|---|---:|---:|---:|---:|---:|"]
    for kind, h in r["homes"].items():
        base = h["envcheck_list"]["envcheck (console script)"]["median"]
        rows = list(h["envcheck_list"].items()) + list(h["alternatives"].items())
        for label, s in rows:
            fmt = (lambda x: f"{x * 1000:.0f} ms") if s["median"] < 5 else (lambda x: f"{x:.2f} s")
            lines.append(f"| {kind} ({h['dist_info_per_env']} dists/env) | {label} | {fmt(s['median'])} | "
                         f"{fmt(s['min'])} | {fmt(s['max'])} | {s['runs']} | {s['median'] / base:.2f}x |")
        lines.append(f"| {kind} | EnvStore.list() in-process (no start-up) | "
                     f"{h['in_process_store_list_median_s'] * 1000:.1f} ms | | | | |")
    lines.append("")
    for kind, h in r["homes"].items():
        med = h["envcheck_list"]["envcheck (console script)"]["median"]
        lines.append(f"- {kind}: envcheck env list --json median {med * 1000:.0f} ms -> target "
                     f"{'met' if med <= TARGET_S else 'MISSED'}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="timed runs of envcheck env list (default 20)")
    ap.add_argument("--loop-runs", type=int, default=3, help="timed loops of uv pip list over 100 envs")
    ap.add_argument("--pip-runs", type=int, default=1, help="timed loops of pip list over 100 envs (0: skip)")
    ap.add_argument("--homes", default="small,tf", help="which homes: small,tf")
    ap.add_argument("--uv-cache", default=str(Path(tempfile.gettempdir()) / "envcheck-bench-uvcache"),
                    help="UV_CACHE_DIR for creating the seed envs (shared with bench_create)")
    ap.add_argument("--keep", action="store_true", help="keep the homes (printed)")
    ap.add_argument("--out", default=str(RESULTS / "list.json"))
    args = ap.parse_args()

    env = dict(os.environ, UV_CACHE_DIR=args.uv_cache)
    uv = uv_bin()
    root = Path(tempfile.mkdtemp(prefix="envcheck-bench-list-"))
    result = {"schema": "envcheck.bench.list/1", "cpus": os.cpu_count(), "runs": args.runs,
              "uv": subprocess.run([uv, "--version"], capture_output=True, text=True).stdout.strip(),
              "homes": {}}
    try:
        for kind in args.homes.split(","):
            home = make_home(root, kind, env)
            log(f"{kind}: measuring {home}")
            result["homes"][kind] = bench_home(home, args, env, uv)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(table(result), flush=True)
        print(f"\n(JSON: {out})", flush=True)
    finally:
        if args.keep:
            log(f"kept {root}")
        else:
            log(f"deleting {root} (100 hard-link copies of an env take a while)")
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
