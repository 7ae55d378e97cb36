"""How long level-1 health takes on 8 GPUs against `envcheck gpu --json` on the same host,
measured side by side (issue 20's target: at most 1.3x).

    python bench/bench_health.py [--runs 15] [--gpus 8]

`envcheck gpu --level 1 --json` is the target's command. Both run against the fake libnvidia-ml.so.1 of the tests (8 A100s), built here with gcc, with
envcheck's bytecode compiled first, as an installed wheel has it. Level 1 reads the device
nodes and the kernel log through its test seams: a /dev stand-in with every node and a kernel
log of a few thousand lines with some Xids in it, as a long-running node's log has. Whole
processes, alternating so machine noise hits them alike; then the same two reads inside one
process (probe() against level1()), which leaves the interpreter's start and imports out.
Prints markdown tables on stdout.
"""
from __future__ import annotations

import argparse
import json
import compileall
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import interleaved, table, wall_ms

ROOT = Path(__file__).resolve().parent.parent
FAKE_SOURCE = ROOT / "tests" / "fakenvml" / "fake_nvml.c"
A100 = "NVIDIA A100-SXM4-80GB,8.0,81920,retired=na"
LEVEL1 = ("import json, sys; from envcheck.host.level1 import level1; "
          "sys.stdout.write(json.dumps(level1().to_json()))")
IN_PROCESS = """
import json, statistics, sys, time
from envcheck.host.level1 import level1
from envcheck.host.probe import probe
runs = int(sys.argv[1])
times = {"probe()": [], "level1()": []}
for _ in range(runs):
    for name, fn in (("probe()", probe), ("level1()", level1)):
        start = time.perf_counter()
        json.dumps(fn().to_json())
        times[name].append((time.perf_counter() - start) * 1000)
print(json.dumps(times))
"""


def build_fake_nvml(folder: Path) -> Path:
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libnvidia-ml.so.1", "-o",
                    str(folder / "libnvidia-ml.so.1"), str(FAKE_SOURCE)], check=True)
    return folder


def seams(folder: Path, gpus: int) -> dict[str, str]:
    dev = folder / "dev"
    dev.mkdir()
    for name in [f"nvidia{i}" for i in range(gpus)] + ["nvidiactl", "nvidia-uvm"]:
        (dev / name).touch()
    lines = [f"[{n / 10:12.6f}] usb 1-{n % 9}: new high-speed USB device number {n}"
             for n in range(4000)]
    lines[1000] = "[  100.000000] NVRM: Xid (PCI:0000:10:00): 13, pid=4242, name=python3"
    lines[3000] = "[  300.000000] NVRM: Xid (PCI:0000:11:00): 31, pid=4243, name=python3"
    log = folder / "kern.log"
    log.write_text("\n".join(lines) + "\n")
    return {"ENVCHECK_TEST_DEV_DIR": str(dev), "ENVCHECK_TEST_KERNEL_LOG": str(log)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--gpus", type=int, default=8)
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "envcheck"), quiet=1)
    base_env = {k: v for k, v in os.environ.items()
                if k not in ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**base_env, "LD_LIBRARY_PATH": str(build_fake_nvml(Path(tmp))),
               "FAKE_NVML_GPUS": ";".join([A100] * args.gpus), **seams(Path(tmp), args.gpus)}
        envcheck = str(Path(sys.executable).parent / "envcheck")
        commands = {
            "`envcheck gpu --json`": [envcheck, "gpu", "--json"],
            "`envcheck gpu --level 1 --json` (the target)": [envcheck, "gpu", "--level", "1", "--json"],
            "level 1 (`level1().to_json()`, whole process)": [sys.executable, "-c", LEVEL1],
            "`python -c pass`": [sys.executable, "-c", "pass"],
        }
        # the second must exit 0: a healthy node (a command that fails would time its error)
        times = interleaved({name: (lambda cmd=cmd: wall_ms(cmd, env))
                             for name, cmd in commands.items()}, args.runs)
        inner = subprocess.run([sys.executable, "-c", IN_PROCESS, str(args.runs)], env=env,
                               capture_output=True, text=True, check=True)

    in_process = json.loads(inner.stdout)
    print(f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{args.gpus} fake GPUs, {args.runs} runs each, alternating\n")
    print(table(times, "`envcheck gpu --json`", "× envcheck gpu"))
    print()
    print("| in one process | runs | median ms | min ms | max ms | × probe() |")
    print("|---|---:|---:|---:|---:|---:|")
    base = statistics.median(in_process["probe()"])
    for name, values in in_process.items():
        median = statistics.median(values)
        print(f"| `{name}` | {len(values)} | {median:.2f} | {min(values):.2f} | "
              f"{max(values):.2f} | {median / base:.2f} |")


if __name__ == "__main__":
    main()
