"""How long "which GPUs does this machine have?" takes: `envcheck gpu --json` against asking
TensorFlow (`tf.config.list_physical_devices('GPU')`), whole processes, measured side by side.

    python bench/bench_gpu.py --tf-python /tmp/tfenv/bin/python [--runs 15]

envcheck runs against the fake libnvidia-ml.so.1 of the tests (one GPU), built here with gcc,
and with its bytecode compiled first, as an installed wheel has it. Runs alternate between the
commands so that machine noise hits both alike. Prints a markdown table on stdout.
"""
from __future__ import annotations

import argparse
import compileall
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import interleaved, table, wall_ms

ROOT = Path(__file__).resolve().parent.parent
FAKE_SOURCE = ROOT / "tests" / "fakenvml" / "fake_nvml.c"
TF_CODE = "import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))"


def build_fake_nvml(folder: Path) -> Path:
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libnvidia-ml.so.1", "-o",
                    str(folder / "libnvidia-ml.so.1"), str(FAKE_SOURCE)], check=True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tf-python", required=True, help="python of an env with TensorFlow")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "envcheck"), quiet=1)
    base_env = {k: v for k, v in os.environ.items()
                if k not in ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")}
    with tempfile.TemporaryDirectory() as tmp:
        fake_env = {**base_env, "LD_LIBRARY_PATH": str(build_fake_nvml(Path(tmp))),
                    "FAKE_NVML_GPUS": "NVIDIA A100-SXM4-80GB,8.0,81920"}
        envcheck = str(Path(sys.executable).parent / "envcheck")
        commands = {
            "envcheck gpu --json": ([envcheck, "gpu", "--json"], fake_env),
            "python -c pass": ([sys.executable, "-c", "pass"], base_env),
            "tf.config.list_physical_devices('GPU')": ([args.tf_python, "-c", TF_CODE],
                                                       base_env),
        }
        times = interleaved({name: (lambda cmd=cmd, env=env: wall_ms(cmd, env))
                             for name, (cmd, env) in commands.items()}, args.runs)
    print(f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{args.runs} runs each, alternating\n")
    print(table({f"`{n}`": v for n, v in times.items()}, "`envcheck gpu --json`", "× envcheck gpu"))


if __name__ == "__main__":
    main()
