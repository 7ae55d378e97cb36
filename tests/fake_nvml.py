"""The fake NVML: builds tests/fakenvml/fake_nvml.c into a libnvidia-ml.so.1 that the real
pynvml loads, and runs envcheck (or any Python) against it in a subprocess.

pynvml keeps the loaded library in module globals, so each case runs in its own process with
LD_LIBRARY_PATH pointing at the fake: exactly how envcheck meets a real driver.

It is registered as a pytest plugin in conftest.py, so the ``fake_nvml`` fixture is everywhere.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Mapping

import pytest

from conftest import Result, clean_env

SOURCE = Path(__file__).resolve().parent / "fakenvml" / "fake_nvml.c"
A100 = "NVIDIA A100-SXM4-80GB,8.0,81920"
T4 = "NVIDIA T4,7.5,15360,mig=na"
# Variables of the calling shell that would change what a case sees.
HOST_VARS = ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")

PROBE_SCRIPT = """
import json
from envcheck.host.probe import host_fingerprint, probe
state = probe()
print(json.dumps({"host": state.to_json(), "usable": [g.index for g in state.usable_gpus],
                  "visible": [g.index for g in state.visible_gpus],
                  "reason": state.no_gpu_reason(), "fingerprint": host_fingerprint(state)}))
"""


class FakeNvml:
    """Builds the fake library (one variant per set of omitted functions) and runs cases."""

    def __init__(self, root: Path):
        self.root = root
        self._built: dict[tuple[str, ...], Path] = {}

    def lib_dir(self, omit: Iterable[str] = ()) -> Path:
        """A folder holding libnvidia-ml.so.1 without the functions in ``omit``."""
        key = tuple(sorted(set(omit)))
        if key not in self._built:
            self._built[key] = self._build(key)
        return self._built[key]

    def _build(self, omit: tuple[str, ...]) -> Path:
        source = SOURCE.read_text()
        unknown = [fn for fn in omit if f"OMIT_{fn}\n" not in source]
        if unknown:
            raise ValueError(f"fake_nvml.c has no OMIT_ guard for {unknown}")
        out = self.root / ("lib-" + ("-".join(omit) or "full"))
        out.mkdir()
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror",
                        "-Wl,-soname,libnvidia-ml.so.1", *[f"-DOMIT_{fn}" for fn in omit],
                        "-o", str(out / "libnvidia-ml.so.1"), str(SOURCE)], check=True)
        return out

    def env(self, gpus: Iterable[str] = (A100,), omit: Iterable[str] = (),
            lib_dir: Path | None = None, **extra: str | int) -> dict[str, str]:
        """A full environment for a subprocess: the fake library, these GPUs, ``extra`` vars
        (FAKE_NVML_*, CUDA_*); nothing about GPUs is inherited from the calling shell. The
        level-1 health seams point at a healthy node (every device node present, an empty
        kernel log) unless ``extra`` sets them."""
        env = {k: v for k, v in clean_env().items()
               if k not in HOST_VARS and not k.startswith("FAKE_NVML_")}
        env["LD_LIBRARY_PATH"] = str(lib_dir or self.lib_dir(omit))
        env["FAKE_NVML_GPUS"] = ";".join(gpus)
        env.update(self.healthy_seams())
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def healthy_seams(self) -> dict[str, str]:
        """ENVCHECK_TEST_DEV_DIR with /dev/nvidia0..63, nvidiactl and nvidia-uvm, and an empty
        ENVCHECK_TEST_KERNEL_LOG: a node level 1 finds nothing wrong with."""
        dev, log = self.root / "dev-healthy", self.root / "kern-healthy.log"
        if not dev.is_dir():
            dev.mkdir()
            for name in [f"nvidia{m}" for m in range(64)] + ["nvidiactl", "nvidia-uvm"]:
                (dev / name).touch()
            log.write_text("[    0.000000] Linux version 6.8.0\n")
        return {"ENVCHECK_TEST_DEV_DIR": str(dev), "ENVCHECK_TEST_KERNEL_LOG": str(log)}

    def probe(self, env: Mapping[str, str]) -> dict:
        """Run envcheck.host.probe.probe() in a fresh process; its JSON-able results."""
        proc = subprocess.run([sys.executable, "-c", PROBE_SCRIPT], capture_output=True,
                              text=True, env=dict(env), timeout=60)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def cli(self, env: Mapping[str, str], *args: str) -> Result:
        """Run ``envcheck ARGS`` in a subprocess with exactly ``env``."""
        proc = subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True,
                              text=True, env=dict(env), timeout=60)
        return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def fake_nvml(tmp_path_factory: pytest.TempPathFactory) -> FakeNvml:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the fake libnvidia-ml.so.1")
    return FakeNvml(tmp_path_factory.mktemp("fakenvml"))


def real_nvml_loadable() -> bool:
    """Whether the dynamic loader finds a libnvidia-ml.so.1 without LD_LIBRARY_PATH help."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    code = "import ctypes; ctypes.CDLL('libnvidia-ml.so.1')"
    return subprocess.run([sys.executable, "-c", code], env=env,
                          capture_output=True).returncode == 0
