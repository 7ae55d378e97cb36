"""CUDA 11 from pip wheels: the libraries TensorFlow 2.5-2.11 opens, found with no system CUDA.

The tensorflow-gpu-cuda11-wheels preset's ``nvidia-*-cu11`` packages are really installed
(about 1.7 GB from the package index) into an env made by `envcheck env create`; TensorFlow
itself is left out (it adds nothing to what is probed and needs a Python <= 3.10), so the
env is the preset's own wheels and ``[gpu]`` table, read from the preset file. Then the
``libraries`` check of `validate` must pass, and a command started by `envcheck run` must
load them too, on a machine where the base interpreter can load none of them.
"""
from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

from envcheck.validation.libraries import load_errors

PRESET = Path(__file__).resolve().parent.parent / "presets" / "tensorflow-gpu-cuda11-wheels.toml"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_the_cuda11_wheels_preset_loads_its_libraries_with_no_system_cuda(tmp_path: Path, cli):
    real = tomllib.loads(PRESET.read_text())
    libraries = real["gpu"]["libraries"]
    system = load_errors(Path(sys.executable), libraries)
    if not all(system.values()):  # the check would pass without the wheels: nothing to prove
        pytest.skip(f"this machine has system CUDA libraries: {[n for n, e in system.items() if not e]}")
    wheels = [p for p in real["packages"] if p.startswith("nvidia-")]
    assert len(wheels) >= 7
    preset = tmp_path / "cuda11-wheels.toml"
    preset.write_text(
        'title = "the CUDA 11 wheels of tensorflow-gpu-cuda11-wheels"\nkind = "gpu"\n'
        f'framework = "tensorflow"\npackages = {json.dumps(wheels)}\n\n'
        f'[gpu]\ncuda = "{real["gpu"]["cuda"]}"\ncudnn = "{real["gpu"]["cudnn"]}"\n'
        f"libraries = {json.dumps(libraries)}\n")

    made = cli("env", "create", "w", "--preset-file", str(preset), "--for-another-host", timeout=1500)
    assert made.code == 0, made.err
    validated = cli("validate", "w", "--no-smoke", "--json")
    [report] = validated.json()["reports"]
    check = next(c for c in report["checks"] if c["id"] == "libraries")
    assert check["status"] == "pass", check
    assert check["summary"] == f"all {len(libraries)} CUDA/cuDNN libraries load"
    assert "the env's CUDA wheels" in check["detail"]

    probe = "import ctypes, sys; [ctypes.CDLL(name) for name in sys.argv[1:]]"
    ran = cli("run", "--env", "w", "--gpus", "none", "--", "python", "-c", probe, *libraries)
    assert ran.code == 0, ran.err
