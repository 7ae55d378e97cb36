"""diagnose: every catalogue entry recognised from its real message; the CLI on files and stdin."""
from __future__ import annotations

from pathlib import Path

import pytest

from envcheck.validation.diagnose import catalogue, diagnose

# (entry id, the message exactly as reference/diagnosis-catalogue.md quotes it)
MESSAGES = [
    ("cuda-library-not-found", "Could not load dynamic library 'libcudart.so.11.0'; dlerror: "
     "libcudart.so.11.0: cannot open shared object file: No such file or directory"),
    ("gpu-libraries-missing", "Cannot dlopen some GPU libraries. Please make sure the missing "
     "libraries mentioned above are installed properly if you would like to use GPU. ... "
     "Skipping registering GPU devices..."),
    ("driver-library-mismatch", "Failed to initialize NVML: Driver/library version mismatch"),
    ("driver-library-mismatch", "nvidia-container-cli: initialization error: nvml error: "
     "driver/library version mismatch"),
    ("kernel-dso-mismatch", "kernel version 384.130.0 does not match DSO version 375.66.0 -- "
     "cannot find working devices in this configuration"),
    ("driver-too-old", "CUDA driver version is insufficient for CUDA runtime version"),
    ("no-kernel-image", "RuntimeError: CUDA error: no kernel image is available for execution on "
     "the device"),
    ("no-kernel-image", "UserWarning: NVIDIA GeForce RTX 3090 with CUDA capability sm_86 is not "
     "compatible with the current PyTorch installation. The current PyTorch install supports CUDA "
     "capabilities sm_37 sm_50 sm_60 sm_70."),
    ("torch-cpu-build", "AssertionError: Torch not compiled with CUDA enabled"),
    ("tf-windows-no-gpu", "TF ≥ 2.11 on native Windows: `tf.config.list_physical_devices('GPU')` "
     "returns `[]`"),
    ("tf-windows-no-gpu", "`tf.test.is_built_with_cuda()` is False"),
    ("cudnn-version-mismatch", "Loaded runtime CuDNN library: 8.0.5 but source was compiled with: "
     "8.1.0. CuDNN library needs to have matching major version and equal or higher minor "
     "version. If using a binary install, upgrade your CuDNN library."),
    ("cudnn-init-failed", "Failed to get convolution algorithm. This is probably because cuDNN "
     "failed to initialize, so try looking to see if a warning log message was printed above."),
    ("gpu-memory-exhausted", "Allocator (GPU_0_bfc) ran out of memory ..."),
    ("xla-toolchain-missing", "Not found: ./bin/ptxas not found"),
    ("xla-toolchain-missing", "libdevice not found at ./libdevice.10.bc"),
    ("xla-toolchain-missing", "Can't find libdevice directory ${CUDA_DIR}/nvvm/libdevice"),
    ("xla-toolchain-missing", "No PTX compilation provider is available. Neither ptxas/nvlink nor "
     "nvjtlink is available."),
    ("no-cuda-device", "failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is "
     "detected"),
    ("no-cuda-device", "no cuda-capable device is detected"),
    ("libcuda-missing-in-container", "ImportError: libcuda.so.1: cannot open shared object file: "
     "No such file or directory"),
    ("wsl-libcuda", "Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot "
     "open shared object file: No such file or directory"),
    ("fabric-manager", "CUDA initialization: Unexpected error from cudaGetDeviceCount(). ... "
     "Error 802: system not yet initialized"),
    ("nccl-shared-memory", "RuntimeError: NCCL error in: .../ProcessGroupNCCL.cpp:..., unhandled "
     "system error"),
    ("nccl-shared-memory", "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-... "),
    ("nccl-p2p-hang", "DDP / NCCL all-reduce hangs with no error (P2P)"),
    ("nccl-p2p-hang", "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
     "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600017 milliseconds "
     "before timing out."),
    ("nccl-windows", "No OpKernel was registered to support Op 'NcclAllReduce' ... Registered "
     "kernels: <no registered kernels>"),
    ("cuda-compiler-missing", "CUDA_HOME does not exist, unable to compile CUDA op(s)"),
    ("cuda-compiler-missing", "[FAIL] nvcc missing"),
    ("cuda-compiler-missing", "Installed CUDA version 12.1 does not match the version torch was "
     "compiled with 11.8"),
    ("tensorrt-not-found", "TF-TRT Warning: Could not find TensorRT"),
    ("nvidia-smi-cuda-version", "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      "
     "CUDA Version: 12.4     |"),
]

CLEAN_LOG = """\
2026-03-01 10:00:01.000000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:2021] Created device /job:localhost/replica:0/task:0/device:GPU:0 with 78911 MB memory:  -> device: 0, name: NVIDIA A100-SXM4-80GB, pci bus id: 0000:3b:00.0, compute capability: 8.0
Epoch 1/2
32/32 [==============================] - 2s 5ms/step - loss: 0.6931
Epoch 2/2
32/32 [==============================] - 0s 3ms/step - loss: 0.5120
torch.cuda.is_available(): True; torch.version.cuda: 12.8
"""


@pytest.mark.parametrize("expected, message", MESSAGES)
def test_each_real_message_is_recognised_as_its_cause(expected, message):
    findings = diagnose(f"some preamble\n{message}\n")
    assert [f.id for f in findings] == [expected]
    assert findings[0].line == message.strip() and findings[0].line_number == 2
    assert findings[0].cause and findings[0].fix and findings[0].links


def test_every_catalogue_entry_is_covered():
    entries = catalogue()
    assert sorted(e.number for e in entries if e.number) == list(range(1, 21))
    assert [e.severity for e in entries if e.number is None] == ["info", "info"]
    assert {e.id for e in entries} == {expected for expected, _ in MESSAGES}
    assert all(link.startswith("https://") for e in entries for link in e.links)


def test_clean_log_gives_nothing():
    assert diagnose(CLEAN_LOG) == []
    assert diagnose("") == []


def test_each_cause_once_in_order_of_first_appearance():
    log = "\n".join([
        "start",
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",
        "W gpu_device.cc:1850] Cannot dlopen some GPU libraries.",
        "Skipping registering GPU devices...",
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    ])
    findings = diagnose(log)
    assert [(f.id, f.line_number) for f in findings] == [("no-kernel-image", 2),
                                                         ("gpu-libraries-missing", 3)]


# --- the CLI ------------------------------------------------------------------------------------

LOG = "\n".join(["loading", MESSAGES[5][1], "TF-TRT Warning: Could not find TensorRT", ""])


def test_cli_on_a_file(cli, tmp_path: Path):
    log = tmp_path / "train.log"
    log.write_text(LOG)
    result = cli("diagnose", str(log))
    assert result.code == 0, result.err
    assert "[error] #5 driver-too-old" in result.out
    assert "  line 2: CUDA driver version is insufficient for CUDA runtime version" in result.out
    assert "  fix: Upgrade the NVIDIA driver" in result.out
    assert "[info] tensorrt-not-found" in result.out


def test_cli_json_on_stdin(cli):
    result = cli("diagnose", "-", "--json", input=LOG)
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["schema"] == "envcheck.diagnosis/1"
    assert [(f["id"], f["severity"], f["line_number"]) for f in doc["findings"]] == [
        ("driver-too-old", "error", 2), ("tensorrt-not-found", "info", 3)]
    assert {"id", "number", "title", "severity", "cause", "fix", "links", "line_number",
            "line"} <= set(doc["findings"][0])


def test_cli_clean_log(cli, tmp_path: Path):
    log = tmp_path / "ok.log"
    log.write_text(CLEAN_LOG)
    result = cli("diagnose", str(log))
    assert result.code == 0 and "no known GPU failure found" in result.out
    assert cli("diagnose", str(log), "--json").json()["findings"] == []


def test_cli_binary_bytes_are_tolerated(cli, tmp_path: Path):
    log = tmp_path / "mixed.log"
    log.write_bytes(b"\xff\xfe junk\nAssertionError: Torch not compiled with CUDA enabled\n")
    result = cli("diagnose", str(log), "--json")
    assert result.code == 0 and result.json()["findings"][0]["id"] == "torch-cpu-build"


@pytest.mark.parametrize("target", ["missing.log", "."])
def test_cli_unreadable_file_exits_2(cli, tmp_path: Path, target):
    result = cli("diagnose", str(tmp_path / target))
    assert result.code == 2 and "cannot read" in result.err


def test_missing_cuda_runtime_as_an_import_error_is_entry_1_not_14():
    found = diagnose("ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory")
    assert [f.number for f in found] == [1]
    found = diagnose("ImportError: libcuda.so.1: cannot open shared object file: No such file or directory")
    assert [f.number for f in found] == [14]
