"""``envcheck gpu``: output, JSON schema and exit codes, against the fake NVML."""
from __future__ import annotations

from pathlib import Path

import pytest

from fake_nvml import A100, T4, FakeNvml, real_nvml_loadable

pytestmark = pytest.mark.timeout(120)

HOST_KEYS = {"schema", "nvml", "driver_version", "cuda_driver_version", "nvml_version",
             "cuda_visible_devices", "cuda_device_order", "gpus", "warnings",
             "envelope"}  # the result envelope every readiness answer carries (test_envelope.py)
GPU_KEYS = {"index", "name", "uuid", "memory_total_mib", "memory_free_mib", "memory_used_mib",
            "compute_capability", "pci_bus_id", "mig_mode", "persistence_mode", "mig_devices",
            "status", "problem", "fix", "unavailable", "visible", "cuda_index"}


def test_table_like_nvidia_smi(fake_nvml: FakeNvml) -> None:
    result = fake_nvml.cli(fake_nvml.env([A100], FAKE_NVML_CUDA=12020), "gpu")
    assert result.code == 0, result.err
    header, columns, row = result.out.splitlines()
    assert "Driver Version: 550.54.15" in header and "CUDA Version: 12.2" in header
    assert columns.split()[:3] == ["GPU", "Name", "CC"]
    assert row.split()[:3] == ["0", "NVIDIA", "A100-SXM4-80GB"]
    assert "8.0" in row and "300 / 81920 MiB" in row and "GPU-fa4e0000" in row
    assert row.endswith("yes (cuda:0)")


def test_json_schema(fake_nvml: FakeNvml) -> None:
    result = fake_nvml.cli(fake_nvml.env([A100, T4], CUDA_DEVICE_ORDER="PCI_BUS_ID"),
                           "gpu", "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert set(doc) == HOST_KEYS and doc["schema"] == "envcheck.host/1"
    assert set(doc["nvml"]) == {"status", "message", "fix"}
    assert [set(g) for g in doc["gpus"]] == [GPU_KEYS, GPU_KEYS]
    assert doc["gpus"][1]["mig_mode"] is None
    assert doc["warnings"] == []


def test_hidden_gpu_shown_as_not_visible(fake_nvml: FakeNvml) -> None:
    result = fake_nvml.cli(fake_nvml.env([A100, A100], CUDA_VISIBLE_DEVICES="1"), "gpu")
    assert result.code == 0, result.err
    rows = result.out.splitlines()[2:4]
    assert rows[0].endswith("no") and rows[1].endswith("yes (cuda:0)")


def test_mixed_models_warning_printed(fake_nvml: FakeNvml) -> None:
    result = fake_nvml.cli(fake_nvml.env([A100, T4]), "gpu")
    assert result.code == 0
    assert "warning: GPUs of different models" in result.out


@pytest.mark.parametrize("code, status, fix", [
    (9, "driver-not-loaded", "modprobe nvidia"),
    (18, "version-mismatch", "reboot"),
    (999, "error", "nvidia-smi"),
])
def test_nvml_failure_exits_1_with_reason_and_fix(fake_nvml: FakeNvml, code: int, status: str,
                                                   fix: str) -> None:
    env = fake_nvml.env(FAKE_NVML_INIT_ERROR=code)
    result = fake_nvml.cli(env, "gpu")
    assert result.code == 1
    assert result.out.strip() == f"NVML: {status}"
    assert "envcheck: no usable GPU:" in result.err and fix in result.err
    assert "Traceback" not in result.err
    doc = fake_nvml.cli(env, "gpu", "--json").json()
    assert doc["nvml"]["status"] == status and doc["gpus"] == []


def test_no_library_exits_1(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    if real_nvml_loadable():
        pytest.skip("a real libnvidia-ml.so.1 is installed; the loader would find it")
    result = fake_nvml.cli(fake_nvml.env(lib_dir=tmp_path), "gpu")
    assert result.code == 1 and "--gpus all" in result.err and "Traceback" not in result.err


def test_zero_gpus_exits_1_and_json_still_printed(fake_nvml: FakeNvml) -> None:
    result = fake_nvml.cli(fake_nvml.env([]), "gpu", "--json")
    assert result.code == 1
    assert result.json()["nvml"]["status"] == "no-gpu" and result.err == ""


def test_lost_gpu_shown_and_others_still_usable(fake_nvml: FakeNvml) -> None:
    env = fake_nvml.env([A100, A100], FAKE_NVML_ERROR_nvmlDeviceGetMemoryInfo="15:0")
    result = fake_nvml.cli(env, "gpu")
    assert result.code == 0, result.err
    assert "yes (cuda:0), lost" in result.out
    assert "GPU 0: lost: the GPU has fallen off the bus" in result.out
    assert "nvidia-smi -r -i 0" in result.out


def test_every_gpu_lost_exits_1(fake_nvml: FakeNvml) -> None:
    env = fake_nvml.env([A100], FAKE_NVML_ERROR_nvmlDeviceGetHandleByIndex_v2=15)
    result = fake_nvml.cli(env, "gpu")
    assert result.code == 1 and "GPU 0" in result.err and "dmesg" in result.err


def test_hiding_every_gpu_exits_1(fake_nvml: FakeNvml) -> None:
    result = fake_nvml.cli(fake_nvml.env([A100], CUDA_VISIBLE_DEVICES="-1"), "gpu")
    assert result.code == 1
    assert "CUDA_VISIBLE_DEVICES='-1' hides every GPU" in result.err


def test_missing_function_rendered_na(fake_nvml: FakeNvml) -> None:
    env = fake_nvml.env(omit=["nvmlDeviceGetCudaComputeCapability"])
    result = fake_nvml.cli(env, "gpu")
    assert result.code == 0, result.err
    row = result.out.splitlines()[2]
    assert row.split()[3] == "N/A"
    assert "compute_capability N/A (this driver's NVML lacks the function" in result.out


def test_bad_usage_exits_2(fake_nvml: FakeNvml) -> None:
    result = fake_nvml.cli(fake_nvml.env(), "gpu", "--no-such-flag")
    assert result.code == 2 and "no-such-flag" in result.err


def test_gpu_command_imports_nothing_heavy(fake_nvml: FakeNvml) -> None:
    env = {**fake_nvml.env(), "PYTHONPROFILEIMPORTTIME": "1"}
    result = fake_nvml.cli(env, "gpu", "--json")
    assert result.code == 0
    imported = {line.split("|")[-1].strip().split(".")[0]
                for line in result.err.splitlines() if line.startswith("import time:")}
    assert "pynvml" in imported
    assert not imported & {"packaging", "virtualenv", "filelock", "tensorflow", "torch", "jax",
                           "numpy", "tomllib", "tomli"}
