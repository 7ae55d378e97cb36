#!/usr/bin/env python3
"""Benchmark `envcheck env create --preset tensorflow-cpu` against the raw tools (issue 2).

Three methods, the same requirement list, the same interpreter, the same index settings:

  envcheck   envcheck --home H env create NAME --preset tensorflow-cpu   (uv backend)
  raw-uv     uv venv + uv pip install --compile-bytecode --index-strategy unsafe-best-match ...
  venv-pip   python -m venv + ENV/bin/python -m pip install --compile ...   (pip reads its config)

Caches are warmed first (one untimed run of each method); then ``--repeat`` rounds, each
round running all three methods, in a rotated order so machine noise hits them alike.
Every env is made in a fresh temp dir and deleted afterwards (deletion is not timed).
Once, at the end, the last env of each method is checked: bytecode compiled (a .pyc for
the .py files of site-packages) and ``import tensorflow`` works.

Targets: envcheck <= 1.25 x raw uv; envcheck >= 3 x faster than venv + pip.

    python bench/bench_create.py [--repeat 3] [--uv-cache DIR] [--keep-cache]

Writes bench/results/create.json and prints a markdown table. Timing only, no assertions.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import machine

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
PRESET = "tensorflow-cpu"
METHODS = ("envcheck", "raw-uv", "venv-pip")
# What envcheck's installers strip from the environment; the raw baselines get the same.
STRIPPED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV", "PYTHONDONTWRITEBYTECODE")


def base_environ(uv_cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in STRIPPED}
    env["UV_CACHE_DIR"] = str(uv_cache)  # one shared uv cache for envcheck and raw uv
    return env


def envcheck_cmd() -> list[str]:
    """The console script of the interpreter that runs this file (no pyenv shim in between)."""
    script = Path(sys.executable).parent / "envcheck"
    return [str(script)] if script.exists() else [sys.executable, "-m", "envcheck"]


def uv_bin() -> str:
    sys.path.insert(0, str(REPO))
    from envcheck.envs.installers import UvInstaller

    found = UvInstaller.binary()
    if not found:
        sys.exit("uv is not available")
    return found


def preset_requirements() -> list[str]:
    sys.path.insert(0, str(REPO))
    from envcheck.paths import Home
    from envcheck.envs.presets import resolve_preset

    with tempfile.TemporaryDirectory(prefix="envcheck-bench-home-") as empty:  # no user presets
        return list(resolve_preset(Home(empty), PRESET).packages)


def index_args() -> tuple[list[str], bool]:
    """The index options envcheck derives from the user's pip configuration (same code path)."""
    sys.path.insert(0, str(REPO))
    from envcheck.envs.indexes import settings_from_pip_config

    settings = settings_from_pip_config()
    return settings.args(), bool(settings.extra_index_urls and not settings.no_index)


def interpreter() -> str:
    """The interpreter envcheck picks for the preset (recorded in its manifest)."""
    sys.path.insert(0, str(REPO))
    from envcheck.envs.presets import resolve_preset
    from envcheck.paths import Home
    from envcheck.envs.pythons import find_python

    with tempfile.TemporaryDirectory(prefix="envcheck-bench-home-") as empty:
        preset = resolve_preset(Home(empty), PRESET)
    return str(find_python(preset.requires_python, None, needed_by=f"preset {PRESET}").path)


class Bench:
    def __init__(self, args):
        self.args = args
        self.uv_cache = Path(args.uv_cache).resolve()
        self.uv_cache.mkdir(parents=True, exist_ok=True)
        self.env = base_environ(self.uv_cache)
        self.uv = uv_bin()
        self.python = interpreter()
        self.reqs = preset_requirements()
        self.index, best_match = index_args()
        self.uv_strategy = ["--index-strategy", "unsafe-best-match"] if best_match else []
        self.scratch = Path(tempfile.mkdtemp(prefix="envcheck-bench-create-"))
        self.commands: dict[str, list[str]] = {}

    # Each method: build commands for a fresh dir, run them; return (seconds, env dir, phases).
    def plan(self, method: str, work: Path) -> tuple[list[list[str]], Path]:
        if method == "envcheck":
            env_dir = work / "home" / "envs" / "bench"
            return [[*envcheck_cmd(), "--home", str(work / "home"), "env", "create", "bench",
                     "--preset", PRESET]], env_dir
        env_dir = work / "env"
        py = str(env_dir / "bin" / "python")
        if method == "raw-uv":
            return [[self.uv, "venv", "--quiet", "--python", self.python, str(env_dir)],
                    [self.uv, "pip", "install", "--quiet", "--python", py, "--compile-bytecode",
                     *self.uv_strategy, *self.index, *self.reqs]], env_dir
        if method == "venv-pip":
            # pip reads the user's pip configuration itself (mirrors, find-links), as an admin's would.
            return [[self.python, "-m", "venv", str(env_dir)],
                    [py, "-m", "pip", "install", "--quiet", "--compile", "--disable-pip-version-check",
                     *self.reqs]], env_dir
        raise ValueError(method)

    def run_once(self, method: str, keep: bool = False) -> tuple[float, list[float], Path, Path]:
        work = Path(tempfile.mkdtemp(prefix=f"{method}-", dir=self.scratch))
        cmds, env_dir = self.plan(method, work)
        self.commands.setdefault(method, [shlex.join(c).replace(str(work), "$TMP") for c in cmds])
        env = dict(self.env)
        if method == "raw-uv":
            env.update(UV_PYTHON_DOWNLOADS="never", UV_NO_CONFIG="1")  # as envcheck runs uv
        phases = []
        start = time.perf_counter()
        for cmd in cmds:
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, cwd=work)
            phases.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                sys.exit(f"{method} failed ({proc.returncode}): {shlex.join(cmd)}\n{proc.stdout[-4000:]}")
        total = time.perf_counter() - start
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
        return total, phases, env_dir, work

    def verify(self, env_dir: Path) -> dict:
        """Bytecode compiled (checked before any import can write it) and tensorflow imports."""
        sp = next((env_dir / "lib").glob("python*/site-packages"))
        tag = sys.implementation.cache_tag
        py_files = pyc_missing = 0
        for py in sp.rglob("*.py"):
            py_files += 1
            if not (py.parent / "__pycache__" / f"{py.stem}.{tag}.pyc").exists():
                pyc_missing += 1
        tf_py = tf_missing = 0
        for py in (sp / "tensorflow").rglob("*.py"):
            tf_py += 1
            if not (py.parent / "__pycache__" / f"{py.stem}.{tag}.pyc").exists():
                tf_missing += 1
        env = {k: v for k, v in self.env.items() if k != "UV_CACHE_DIR"}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["TF_CPP_MIN_LOG_LEVEL"] = "3"
        proc = subprocess.run([str(env_dir / "bin" / "python"), "-c",
                               "import tensorflow as tf; print(tf.__version__)"],
                              env=env, capture_output=True, text=True)
        packages = sorted(p.name[: -len(".dist-info")] for p in sp.glob("*.dist-info"))
        return {"site_packages_py": py_files, "site_packages_py_without_pyc": pyc_missing,
                "tensorflow_py": tf_py, "tensorflow_py_without_pyc": tf_missing,
                "import_tensorflow_ok": proc.returncode == 0,
                "tensorflow_version": proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout.strip() else None,
                "import_error": None if proc.returncode == 0 else proc.stderr[-1500:],
                "dists": packages}

    def main(self) -> dict:
        log = lambda msg: print(msg, file=sys.stderr, flush=True)
        log(f"scratch {self.scratch}; uv cache {self.uv_cache}; python {self.python}")
        warm = {}
        for method in METHODS:
            log(f"warm-up {method} ...")
            t, phases, _, _ = self.run_once(method)
            warm[method] = round(t, 3)
            log(f"  {t:.1f}s (untimed)")
        times: dict[str, list[float]] = {m: [] for m in METHODS}
        phase_times: dict[str, list[list[float]]] = {m: [] for m in METHODS}
        last: dict[str, Path] = {}
        for rnd in range(self.args.repeat):
            order = METHODS[rnd % 3:] + METHODS[:rnd % 3]
            final = rnd == self.args.repeat - 1
            for method in order:
                t, phases, env_dir, work = self.run_once(method, keep=final)
                times[method].append(t)
                phase_times[method].append(phases)
                if final:
                    last[method] = (env_dir, work)
                log(f"round {rnd + 1}/{self.args.repeat} {method}: {t:.2f}s "
                    f"(phases {', '.join(f'{p:.2f}' for p in phases)})")
        checks = {}
        for method, (env_dir, work) in last.items():
            log(f"verifying {method} env ...")
            checks[method] = self.verify(env_dir)
            shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(self.scratch, ignore_errors=True)
        if not self.args.keep_cache and self.args.uv_cache_was_temp:
            shutil.rmtree(self.uv_cache, ignore_errors=True)

        med = {m: statistics.median(v) for m, v in times.items()}
        ratio_uv = med["envcheck"] / med["raw-uv"]
        speedup_pip = med["venv-pip"] / med["envcheck"]
        dists = {m: c.pop("dists") for m, c in checks.items()}
        result = {
            "schema": "envcheck.bench.create/1",
            "preset": PRESET,
            "requirements": self.reqs,
            "python": self.python,
            "machine": machine(),
            "uv": subprocess.run([self.uv, "--version"], capture_output=True, text=True).stdout.strip(),
            "pip_in_venv": "bundled by ensurepip of " + self.python,
            "repeat": self.args.repeat,
            "commands": self.commands,
            "warmup_seconds": warm,
            "seconds": {m: [round(x, 3) for x in v] for m, v in times.items()},
            "phase_seconds": {m: [[round(x, 3) for x in p] for p in v] for m, v in phase_times.items()},
            "median_seconds": {m: round(v, 3) for m, v in med.items()},
            "ratio_envcheck_over_raw_uv": round(ratio_uv, 3),
            "speedup_envcheck_over_venv_pip": round(speedup_pip, 2),
            "targets": {"envcheck_le_1.25x_raw_uv": ratio_uv <= 1.25,
                        "envcheck_ge_3x_faster_than_venv_pip": speedup_pip >= 3.0},
            "verify": checks,
            "same_distributions": {m: dists[m] == dists["raw-uv"] for m in METHODS},
            "distributions": dists,
        }
        return result


def table(r: dict) -> str:
    med = r["median_seconds"]
    lines = [
        f"### env create --preset {r['preset']} (warm cache, median of {r['repeat']}, {r['machine']['cpus']} CPUs)",
        "",
        "| method | median s | runs s | vs envcheck | pyc missing (site-packages) | import tensorflow |",
        "|---|---:|---|---:|---:|---|",
    ]
    for m in METHODS:
        v = r["verify"][m]
        lines.append(f"| {m} | {med[m]:.2f} | {', '.join(f'{x:.2f}' for x in r['seconds'][m])} | "
                     f"{med[m] / med['envcheck']:.2f}x | {v['site_packages_py_without_pyc']}/{v['site_packages_py']} | "
                     f"{'ok ' + str(v['tensorflow_version']) if v['import_tensorflow_ok'] else 'FAILED'} |")
    t = r["targets"]
    lines += [
        "",
        f"- envcheck / raw uv = **{r['ratio_envcheck_over_raw_uv']:.3f}** (target <= 1.25: "
        f"{'met' if t['envcheck_le_1.25x_raw_uv'] else 'MISSED'})",
        f"- venv+pip / envcheck = **{r['speedup_envcheck_over_venv_pip']:.2f}x** (target >= 3x: "
        f"{'met' if t['envcheck_ge_3x_faster_than_venv_pip'] else 'MISSED'})",
        f"- same distributions as raw uv: {r['same_distributions']}",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds (default 3)")
    ap.add_argument("--uv-cache", help="shared UV_CACHE_DIR (default: a temp dir, deleted after)")
    ap.add_argument("--keep-cache", action="store_true", help="keep a temp uv cache")
    ap.add_argument("--out", default=str(RESULTS / "create.json"))
    args = ap.parse_args()
    args.uv_cache_was_temp = args.uv_cache is None
    if args.uv_cache is None:
        args.uv_cache = tempfile.mkdtemp(prefix="envcheck-bench-uvcache-")
    result = Bench(args).main()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    print(f"\n(JSON: {out})")


if __name__ == "__main__":
    main()
