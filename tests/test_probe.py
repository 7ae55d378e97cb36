"""envcheck.host.probe against the real pynvml bindings loading a fake libnvidia-ml.so.1."""
from __future__ import annotations

from pathlib import Path

import pytest

from envcheck.host.probe import Gpu, HostState, decode_cuda_version
from envcheck.host.visibility import mark_visible
from fake_nvml import A100, T4, FakeNvml, real_nvml_loadable

pytestmark = pytest.mark.timeout(120)


def test_one_gpu_every_field(fake_nvml: FakeNvml) -> None:
    gpu_spec = (A100 + ",uuid=GPU-4f1c2d3e-aaaa-bbbb-cccc-0123456789ab"
                ",pci=00000000:3B:00.0,free=80000,mig=0")
    out = fake_nvml.probe(fake_nvml.env([gpu_spec], FAKE_NVML_DRIVER="535.104.05",
                                        FAKE_NVML_CUDA=12020,
                                        FAKE_NVML_NVML_VERSION="12.535.104.05"))
    host = out["host"]
    assert host["nvml"] == {"status": "ok", "message": None, "fix": None}
    assert (host["driver_version"], host["cuda_driver_version"], host["nvml_version"]) == (
        "535.104.05", "12.2", "12.535.104.05")
    [gpu] = host["gpus"]
    assert gpu["name"] == "NVIDIA A100-SXM4-80GB"
    assert gpu["uuid"] == "GPU-4f1c2d3e-aaaa-bbbb-cccc-0123456789ab"
    assert (gpu["memory_total_mib"], gpu["memory_free_mib"], gpu["memory_used_mib"]) == (
        81920, 80000, 1920)
    assert gpu["compute_capability"] == "8.0"
    assert gpu["pci_bus_id"] == "00000000:3B:00.0"
    assert (gpu["mig_mode"], gpu["persistence_mode"]) == ("disabled", "enabled")
    assert (gpu["status"], gpu["visible"], gpu["cuda_index"], gpu["unavailable"]) == (
        "ok", True, 0, {})
    assert out["usable"] == [0] and out["reason"] is None and host["warnings"] == []


@pytest.mark.parametrize("value, text", [(12020, "12.2"), (11080, "11.8"), (12060, "12.6"),
                                         (13000, "13.0"), (9020, "9.2")])
def test_cuda_driver_version_decoding(value: int, text: str) -> None:
    assert decode_cuda_version(value) == text


def test_nvml_shut_down_after_every_probe(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    env = fake_nvml.env(FAKE_NVML_TRACE=trace, FAKE_NVML_ERROR_nvmlDeviceGetCount_v2=999)
    assert fake_nvml.probe(env)["host"]["nvml"]["status"] == "error"
    calls = trace.read_text().split()
    assert calls[0] == "nvmlInitWithFlags" and calls[-1] == "nvmlShutdown"


def test_no_gpu(fake_nvml: FakeNvml) -> None:
    out = fake_nvml.probe(fake_nvml.env([]))
    nvml = out["host"]["nvml"]
    assert nvml["status"] == "no-gpu" and "no GPU" in nvml["message"]
    assert "lspci" in nvml["fix"]
    assert out["host"]["driver_version"] == "550.54.15"
    assert out["reason"] == [nvml["message"], nvml["fix"]]


def test_eight_mixed_gpus_in_nvml_order(fake_nvml: FakeNvml) -> None:
    out = fake_nvml.probe(fake_nvml.env([A100, T4] * 4))
    gpus = out["host"]["gpus"]
    assert [g["index"] for g in gpus] == list(range(8))
    assert [g["compute_capability"] for g in gpus] == ["8.0", "7.5"] * 4
    assert len({g["uuid"] for g in gpus}) == 8
    assert out["usable"] == list(range(8))
    [warning] = out["host"]["warnings"]
    assert "different models" in warning and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in warning


def test_pci_bus_order_silences_the_mixed_model_warning(fake_nvml: FakeNvml) -> None:
    out = fake_nvml.probe(fake_nvml.env([A100, T4], CUDA_DEVICE_ORDER="PCI_BUS_ID"))
    assert out["host"]["warnings"] == []
    assert out["host"]["cuda_device_order"] == "PCI_BUS_ID"


def test_identical_gpus_need_no_order_warning(fake_nvml: FakeNvml) -> None:
    assert fake_nvml.probe(fake_nvml.env([A100] * 8))["host"]["warnings"] == []


@pytest.mark.parametrize("code, status, in_message, in_fix", [
    (9, "driver-not-loaded", "not loaded", "modprobe nvidia"),
    (18, "version-mismatch", "version mismatch", "reboot"),
    (4, "no-permission", "permission", "/dev/nvidia"),
    (15, "gpu-lost", "fallen off the bus", "dmesg"),
    (999, "error", "unknown", "nvidia-smi"),
    (1, "error", "Uninitialized", "nvidia-smi"),
    (17, "error", "(NVML error 17)", "nvidia-smi"),
])
def test_init_failure_is_an_explained_state(fake_nvml: FakeNvml, code: int, status: str,
                                            in_message: str, in_fix: str) -> None:
    out = fake_nvml.probe(fake_nvml.env(FAKE_NVML_INIT_ERROR=code))
    nvml = out["host"]["nvml"]
    assert nvml["status"] == status
    assert in_message in nvml["message"] and in_fix in nvml["fix"]
    assert out["host"]["gpus"] == [] and out["usable"] == []
    assert out["reason"] == [nvml["message"], nvml["fix"]]


def test_library_not_found(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    if real_nvml_loadable():
        pytest.skip("a real libnvidia-ml.so.1 is installed; the loader would find it")
    out = fake_nvml.probe(fake_nvml.env(lib_dir=tmp_path))
    nvml = out["host"]["nvml"]
    assert nvml["status"] == "no-library"
    assert "libnvidia-ml.so.1" in nvml["message"] and "--gpus all" in nvml["fix"]


def test_device_count_failure_after_init(fake_nvml: FakeNvml) -> None:
    out = fake_nvml.probe(fake_nvml.env(FAKE_NVML_ERROR_nvmlDeviceGetCount_v2=1))
    assert out["host"]["nvml"]["status"] == "error"
    assert "Uninitialized" in out["host"]["nvml"]["message"]
    assert out["host"]["driver_version"] == "550.54.15"


def test_a_lost_gpu_is_marked_and_the_others_stand(fake_nvml: FakeNvml) -> None:
    out = fake_nvml.probe(fake_nvml.env([A100, A100, A100],
                                        FAKE_NVML_ERROR_nvmlDeviceGetMemoryInfo="15:1"))
    host = out["host"]
    assert host["nvml"]["status"] == "ok"
    ok0, lost, ok2 = host["gpus"]
    assert lost["status"] == "lost" and "fallen off the bus" in lost["problem"]
    assert "nvidia-smi -r -i 1" in lost["fix"] and "dmesg" in lost["fix"]
    assert lost["name"] == "NVIDIA A100-SXM4-80GB" and lost["memory_total_mib"] is None
    assert ok0["status"] == ok2["status"] == "ok" and ok2["memory_total_mib"] == 81920
    assert out["usable"] == [0, 2]


def test_every_gpu_lost_means_no_usable_gpu(fake_nvml: FakeNvml) -> None:
    out = fake_nvml.probe(fake_nvml.env([A100, T4],
                                        FAKE_NVML_ERROR_nvmlDeviceGetHandleByIndex_v2=15))
    assert [g["status"] for g in out["host"]["gpus"]] == ["lost", "lost"]
    assert out["usable"] == []
    message, fix = out["reason"]
    assert "GPU 0" in message and "reboot" in fix


def test_gpu_without_permission(fake_nvml: FakeNvml) -> None:
    out = fake_nvml.probe(fake_nvml.env([A100, T4],
                                        FAKE_NVML_ERROR_nvmlDeviceGetHandleByIndex_v2="4:0"))
    gpus = out["host"]["gpus"]
    assert gpus[0]["status"] == "no-permission" and "/dev/nvidia" in gpus[0]["fix"]
    assert out["usable"] == [1]


def test_not_supported_fields_are_na(fake_nvml: FakeNvml) -> None:
    out = fake_nvml.probe(fake_nvml.env([T4 + ",persist=na"]))
    [gpu] = out["host"]["gpus"]
    assert gpu["mig_mode"] is None and gpu["persistence_mode"] is None
    assert gpu["unavailable"] == {"mig_mode": "not supported on this GPU",
                                  "persistence_mode": "not supported on this GPU"}
    assert gpu["status"] == "ok" and out["usable"] == [0]


def test_a_failing_field_is_na_not_a_failed_gpu(fake_nvml: FakeNvml) -> None:
    out = fake_nvml.probe(fake_nvml.env([A100, T4], FAKE_NVML_ERROR_nvmlDeviceGetName="999:1"))
    gpus = out["host"]["gpus"]
    assert gpus[1]["name"] is None and "999" in gpus[1]["unavailable"]["name"]
    assert gpus[1]["compute_capability"] == "7.5" and out["usable"] == [0, 1]


def test_function_missing_from_an_older_driver_is_na(fake_nvml: FakeNvml) -> None:
    out = fake_nvml.probe(fake_nvml.env(omit=["nvmlDeviceGetCudaComputeCapability"]))
    host = out["host"]
    assert host["nvml"]["status"] == "ok"
    [gpu] = host["gpus"]
    assert gpu["compute_capability"] is None
    assert "older driver" in gpu["unavailable"]["compute_capability"]
    assert gpu["memory_total_mib"] == 81920 and out["usable"] == [0]


def test_cuda_version_falls_back_to_v1(fake_nvml: FakeNvml) -> None:
    env = fake_nvml.env(omit=["nvmlSystemGetCudaDriverVersion_v2"], FAKE_NVML_CUDA=11040)
    host = fake_nvml.probe(env)["host"]
    assert host["cuda_driver_version"] == "11.4" and host["warnings"] == []


def test_cuda_version_na_when_the_driver_has_neither(fake_nvml: FakeNvml) -> None:
    env = fake_nvml.env(omit=["nvmlSystemGetCudaDriverVersion_v2",
                              "nvmlSystemGetCudaDriverVersion"])
    host = fake_nvml.probe(env)["host"]
    assert host["nvml"]["status"] == "ok" and host["cuda_driver_version"] is None
    assert any("cuda_driver_version is N/A" in w for w in host["warnings"])


def test_mig_instances_are_listed(fake_nvml: FakeNvml) -> None:
    out = fake_nvml.probe(fake_nvml.env([A100 + ",mig=1,uuid=GPU-11112222-3333"]))
    [gpu] = out["host"]["gpus"]
    assert gpu["mig_mode"] == "enabled" and gpu["mig_devices"] == ["MIG-11112222-3333"]


def test_invalid_utf8_from_nvml_is_decoded_with_replacement(fake_nvml: FakeNvml) -> None:
    """Bytes that are not UTF-8 (here 0xff 0xfe, and 0xc3 before an ASCII byte) in the name,
    UUID, MIG UUIDs and driver version: shown as U+FFFD; `gpu --json` stays valid JSON.
    (A str environment value carries raw bytes to the fake library as surrogate escapes.)"""
    env = fake_nvml.env(["NVIDIA \udcff\udcfeA100,8.0,81920,mig=1,uuid=GPU-\udcc3(-42"],
                        FAKE_NVML_DRIVER="550.\udcff1")

    host = fake_nvml.probe(env)["host"]
    as_json = fake_nvml.cli(env, "gpu", "--json")
    as_text = fake_nvml.cli(env, "gpu")

    [gpu] = host["gpus"]
    assert (gpu["name"], gpu["uuid"], gpu["mig_devices"]) == (
        "NVIDIA \ufffd\ufffdA100", "GPU-\ufffd(-42", ["MIG-\ufffd(-42"])
    assert host["driver_version"] == "550.\ufffd1" and gpu["status"] == "ok"
    assert as_json.code == 0 and as_json.json()["gpus"][0]["name"] == gpu["name"], as_json.err
    assert as_text.code == 0 and "NVIDIA \ufffd\ufffdA100" in as_text.out, as_text.err


def test_cuda_visible_devices_marks_gpus(fake_nvml: FakeNvml) -> None:
    out = fake_nvml.probe(fake_nvml.env([A100] * 4, CUDA_VISIBLE_DEVICES="3,1"))
    gpus = out["host"]["gpus"]
    assert [(g["visible"], g["cuda_index"]) for g in gpus] == [
        (False, None), (True, 1), (False, None), (True, 0)]
    assert out["visible"] == [1, 3] and out["usable"] == [1, 3]


def test_empty_cuda_visible_devices_hides_every_gpu(fake_nvml: FakeNvml) -> None:
    out = fake_nvml.probe(fake_nvml.env([A100], CUDA_VISIBLE_DEVICES=""))
    assert out["usable"] == [] and out["host"]["nvml"]["status"] == "ok"
    assert "CUDA_VISIBLE_DEVICES" in out["reason"][0] and "unset" in out["reason"][1]


def test_fingerprint_names_driver_gpus_and_visibility(fake_nvml: FakeNvml) -> None:
    env = fake_nvml.env([A100, T4], CUDA_VISIBLE_DEVICES="0")
    first = fake_nvml.probe(env)["fingerprint"]
    assert first == {"driver_version": "550.54.15",
                     "gpu_uuids": ["GPU-fa4e0000-0000-0000-0000-000000000000",
                                   "GPU-fa4e0000-0000-0000-0000-000000000001"],
                     "cuda_visible": ["GPU-fa4e0000-0000-0000-0000-000000000000"]}
    upgraded = fake_nvml.probe({**env, "FAKE_NVML_DRIVER": "560.28.03"})["fingerprint"]
    assert upgraded != first
    # what the variables mean, not how they are spelt: envcheck run's PCI order is no change
    assert fake_nvml.probe({**env, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})["fingerprint"] == first
    assert fake_nvml.probe({**env, "CUDA_VISIBLE_DEVICES": "GPU-fa4e0000-0000-0000-0000-000000000000"})[
        "fingerprint"] == first
    swapped = fake_nvml.probe({**env, "CUDA_VISIBLE_DEVICES": "1,0"})["fingerprint"]
    assert swapped["cuda_visible"] == ["GPU-fa4e0000-0000-0000-0000-000000000001",
                                       "GPU-fa4e0000-0000-0000-0000-000000000000"]


# CUDA_VISIBLE_DEVICES rules, on Gpu records as probe() builds them.

def _gpus(count: int = 3) -> list[Gpu]:
    return [Gpu(i, uuid=f"GPU-{i}{i}{i}{i}aaaa-{i}", mig_devices=[f"MIG-{i}{i}bb-{i}"])
            for i in range(count)]


def _marks(gpus: list[Gpu]) -> list[int | None]:
    return [g.cuda_index if g.visible else None for g in gpus]


def test_unset_shows_every_gpu_in_nvml_order() -> None:
    gpus = _gpus()
    assert mark_visible(gpus, None) == [] and _marks(gpus) == [0, 1, 2]


@pytest.mark.parametrize("value, marks", [
    ("1", [None, 0, None]),
    ("2,0", [1, None, 0]),
    (" 0 , 2 ", [0, None, 1]),
    ("GPU-2222", [None, None, 0]),
    ("GPU-1111aaaa-1,GPU-0000", [1, 0, None]),
    ("MIG-00bb", [0, None, None]),
    ("MIG-GPU-1111aaaa-1/1/0", [None, 0, None]),
    ("", [None, None, None]),
])
def test_cuda_visible_devices_entries(value: str, marks: list[int | None]) -> None:
    gpus = _gpus()
    assert mark_visible(gpus, value) == []
    assert _marks(gpus) == marks


@pytest.mark.parametrize("value, marks, bad", [
    ("0,2,-1,1", [0, None, 1], "'-1'"),      # CUDA's documented example
    ("7", [None, None, None], "'7'"),
    ("GPU-", [None, None, None], "'GPU-'"),  # ambiguous prefix
    ("abc,0", [None, None, None], "'abc'"),
    ("GPU-9999", [None, None, None], "'GPU-9999'"),
])
def test_cuda_stops_at_the_first_bad_entry(value: str, marks: list[int | None], bad: str) -> None:
    gpus = _gpus()
    [warning] = mark_visible(gpus, value)
    assert _marks(gpus) == marks
    assert bad in warning and "CUDA ignores" in warning


def test_duplicate_entry_is_warned() -> None:
    gpus = _gpus()
    [warning] = mark_visible(gpus, "1,1,0")
    assert _marks(gpus) == [1, 0, None] and "twice" in warning


def test_reason_names_the_failed_visible_gpu_not_visibility() -> None:
    gpus = _gpus(2)
    gpus[0].status, gpus[0].problem, gpus[0].fix = "lost", "fell off the bus", "reboot"
    mark_visible(gpus, "0")
    state = HostState("ok", gpus=gpus, cuda_visible_devices="0")
    assert state.no_gpu_reason() == ("no visible GPU answers: GPU 0: fell off the bus", "reboot")


def test_usable_needs_visible_and_healthy() -> None:
    gpus = _gpus()
    gpus[0].status = "lost"
    mark_visible(gpus, "0,1")
    state = HostState("ok", gpus=gpus, cuda_visible_devices="0,1")
    assert [g.index for g in state.visible_gpus] == [0, 1]
    assert [g.index for g in state.usable_gpus] == [1]
    assert state.no_gpu_reason() is None
