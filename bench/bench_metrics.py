"""The exporter's cost (issue 22): a scrape of `envcheck serve` with 20 envs and 8 GPUs, its
memory over 1,000 scrapes, and the one-shot `envcheck metrics` against `envcheck env list
--json` followed by `envcheck gpu --json`, all on the fake libnvidia-ml.so.1 of the tests
(8 A100s), side by side on the same host.

    python bench/bench_metrics.py [--runs 30] [--scrapes 1000] [--rss-every N] [--keep]

The home: one env made by envcheck from a user preset (a stand-in ``tensorflow`` wheel built
here), copied 19 times (``cp -a``, the manifest's name rewritten), each with a stored ready
report of this host (8 devices' seconds per step, a multi-device efficiency) written by
envcheck's own types in a process that reads the fake NVML.

Measured:
  scrape     GET /metrics on a running `envcheck serve --no-revalidate` (a new connection
             each, as Prometheus's first scrape), wall time in this process; interleaved with
             `envcheck gpu --json` (a whole process) so that noise hits both alike
  memory     the exporter's VmRSS after scrape 100 and after scrape ``--scrapes``
  one-shot   `envcheck metrics` vs `envcheck env list --json` + `envcheck gpu --json` run one
             after the other (one timing of the pair), interleaved

Targets: scrape p50 <= 50 ms; RSS <= 60 MB after 1,000 scrapes, no growth from 100 to 1,000;
one-shot no slower than the pair. Prints markdown and writes bench/results/metrics.json.
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
import time
import urllib.request
from pathlib import Path

from _common import envcheck_cmd, interleaved, machine, table, wall_ms

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
FAKE_SOURCE = ROOT / "tests" / "fakenvml" / "fake_nvml.c"
N_ENVS, N_GPUS = 20, 8
A100 = "NVIDIA A100-SXM4-80GB,8.0,81920"
PRESET = 'title = "bench"\ndescription = ""\nkind = "cpu"\nframework = "tensorflow"\nrequires-python = ">=3.8"\n' \
         'packages = ["tensorflow==2.21.0"]\n'
REPORTS = """
import sys
from datetime import datetime, timezone
from envcheck.host.probe import probe
from envcheck.paths import Home
from envcheck.usecases.session import env_store
from envcheck.validation.reports import Check, Report, fingerprint, store_report
home = Home(sys.argv[1]); host = probe()
devices = [{"device": f"gpu:{g.index}", "status": "ok", "ms_per_step": 20.0 + g.index} for g in host.gpus]
for info in env_store(home).list():
    store_report(home, Report(info.name, "ready", [Check("smoke", "pass", "fit")], devices,
                              {"status": "ok", "scaling_efficiency": 0.91}, None, {}, host.to_json(),
                              fingerprint(info, host), datetime.now(timezone.utc).isoformat(), 1.0, True,
                              gpus_usable=len(host.gpus), depth="smoke"))
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def make_home(tmp: Path, env: dict[str, str]) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from wheelhouse import STANDIN, build_wheel

    wheels = tmp / "wheels"
    build_wheel(wheels, "tensorflow", "2.21.0", files={"tensorflow_standin/__init__.py": STANDIN.format(name="tf")})
    home = tmp / "home"
    (home / "presets").mkdir(parents=True)
    (home / "presets" / "bench.toml").write_text(PRESET)
    subprocess.run([*envcheck_cmd(), "--home", str(home), "-q", "env", "create", "env00", "--preset", "bench",
                    "--no-index", "--find-links", str(wheels)], env=env, check=True, stdout=subprocess.DEVNULL)
    for i in range(1, N_ENVS):
        name = f"env{i:02d}"
        subprocess.run(["cp", "-a", str(home / "envs" / "env00"), str(home / "envs" / name)], check=True)
        manifest = home / "envs" / name / "envcheck.json"
        data = json.loads(manifest.read_text())
        data["name"] = name
        manifest.unlink()
        manifest.write_text(json.dumps(data))
    subprocess.run([sys.executable, "-c", REPORTS, str(home)], env=env, check=True)
    return home


def start_serve(env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([*envcheck_cmd(), "serve", "--port", "0", "--no-revalidate"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    if "127.0.0.1:" not in line:
        sys.exit(f"envcheck serve did not start: {line}")
    return proc, int(line.split("127.0.0.1:")[1].split("/")[0])


def scrape_ms(port: int) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        body = r.read()
    if b"envcheck_env_ready" not in body:
        sys.exit("a scrape without envcheck_env_ready")
    return (time.perf_counter() - start) * 1000


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pair_ms(env: dict[str, str]) -> float:
    return wall_ms([*envcheck_cmd(), "env", "list", "--json"], env) + wall_ms([*envcheck_cmd(), "gpu", "--json"], env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--scrapes", type=int, default=1000)
    parser.add_argument("--rss-every", type=int, default=0, help="also read the RSS every N scrapes")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home")
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "envcheck"), quiet=1)
    tmp = Path(tempfile.mkdtemp(prefix="bench-metrics-"))
    try:
        lib = tmp / "lib"
        lib.mkdir()
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libnvidia-ml.so.1", "-o",
                        str(lib / "libnvidia-ml.so.1"), str(FAKE_SOURCE)], check=True)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "ENVCHECK_HOME")}
        env.update(LD_LIBRARY_PATH=str(lib), FAKE_NVML_GPUS=";".join([A100] * N_GPUS), FAKE_NVML_DRIVER="550.54.15",
                   FAKE_NVML_CUDA="12040")
        log("making the home (20 envs, stored reports)")
        env["ENVCHECK_HOME"] = str(make_home(tmp, env))
        exporter, port = start_serve(env)
        try:
            scrapes = interleaved({"scrape (GET /metrics)": lambda: scrape_ms(port),
                                   "`envcheck gpu --json`": lambda: wall_ms([*envcheck_cmd(), "gpu", "--json"], env)},
                                  args.runs)
            log(f"scraping {args.scrapes} times for memory")
            rss = {}
            for i in range(1, args.scrapes + 1):
                scrape_ms(port)
                if i in (1, 100, 200, 500) or i % 1000 == 0 or i == args.scrapes \
                        or (args.rss_every and i % args.rss_every == 0):
                    rss[i] = rss_mb(exporter.pid)
        finally:
            exporter.terminate()
            exporter.wait(timeout=30)
        one_shot = interleaved({"`envcheck metrics`": lambda: wall_ms([*envcheck_cmd(), "metrics"], env),
                                "`env list --json` + `gpu --json`": lambda: pair_ms(env)}, args.runs)
    finally:
        if args.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    p50 = statistics.median(scrapes["scrape (GET /metrics)"])
    print(f"{N_ENVS} envs, {N_GPUS} fake GPUs; {args.runs} runs each, alternating; load {os.getloadavg()[0]:.2f}\n")
    print(table(scrapes, "`envcheck gpu --json`", "× gpu --json"))
    print(f"\nscrape p50 {p50:.1f} ms (target <= 50)")
    print(f"exporter RSS: {rss[100]:.1f} MB after 100 scrapes, {rss[args.scrapes]:.1f} MB after {args.scrapes} "
          f"(growth {rss[args.scrapes] - rss[100]:+.1f} MB; target <= 60 MB, no growth)")
    print("RSS (MB) after scrape N: " + ", ".join(f"{n}: {mb:.1f}" for n, mb in sorted(rss.items())) + "\n")
    print(table(one_shot, "`env list --json` + `gpu --json`", "× the pair"))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "metrics.json").write_text(json.dumps({
        "machine": machine(envs=N_ENVS, gpus=N_GPUS), "scrape_ms": scrapes["scrape (GET /metrics)"],
        "gpu_json_ms": scrapes["`envcheck gpu --json`"], "scrape_p50_ms": p50, "rss_mb": rss,
        "one_shot_ms": one_shot}, indent=2))


if __name__ == "__main__":
    main()
