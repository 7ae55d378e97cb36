"""diagnose: every catalogue entry recognised from its real message, in time linear in the log
and memory bounded whatever its size; the CLI on files and stdin with linters' exit codes."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.errors import UsageError
from envcheck.validation import diagnose as diagnose_module
from envcheck.validation.diagnose import catalogue, diagnose, diagnose_file, diagnose_stream
from test_diagnose_codes import WORDINGS
from test_diagnose_families import FAMILY_MESSAGES

try:  # the regex parser, only to check that every pattern's match has a bounded length
    from re import _parser as sre_parse
except ImportError:  # Python < 3.11
    import sre_parse

# (entry id, the message exactly as reference/diagnosis-catalogue.md quotes it)
MESSAGES = [
    ("cuda-runtime-library-not-found", "Could not load dynamic library 'libcudart.so.11.0'; dlerror: "
     "libcudart.so.11.0: cannot open shared object file: No such file or directory"),
    ("gpu-libraries-missing", "Cannot dlopen some GPU libraries. Please make sure the missing "
     "libraries mentioned above are installed properly if you would like to use GPU. ... "
     "Skipping registering GPU devices..."),
    ("driver-library-mismatch", "Failed to initialize NVML: Driver/library version mismatch"),
    ("driver-library-mismatch", "nvidia-container-cli: initialization error: nvml error: "
     "driver/library version mismatch"),
    ("kernel-dso-mismatch", "kernel version 384.130.0 does not match DSO version 375.66.0 -- "
     "cannot find working devices in this configuration"),
    ("cuda-insufficient-driver", "CUDA driver version is insufficient for CUDA runtime version"),
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
    ("nccl-system-error", "RuntimeError: NCCL error in: .../ProcessGroupNCCL.cpp:..., unhandled "
     "system error"),
    ("nccl-shared-memory", "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-... "),
    ("nccl-p2p-hang", "DDP / NCCL all-reduce hangs with no error (P2P)"),
    ("nccl-failed-or-timed-out", "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed "
     "out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
     "corrupted/incomplete data."),
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

# Messages as TensorFlow, JAX and PyTorch print them, quoted from the issue threads each entry links
# (issue 9 point 12, issue 11 point 7).
REAL_LOG_MESSAGES = [
    ("gpu-memory-exhausted", "2017-08-12 08:25:16.508376: E tensorflow/stream_executor/cuda/"
     "cuda_driver.cc:924] failed to allocate 1.51G (1617277696 bytes) from device: "
     "CUDA_ERROR_OUT_OF_MEMORY"),
    ("gpu-memory-exhausted", "2019-07-21 23:23:06.228049: E tensorflow/stream_executor/cuda/"
     "cuda_driver.cc:828] failed to allocate 32.00M (33554432 bytes) from device: "
     "CUDA_ERROR_OUT_OF_MEMORY: out of memory"),
    ("dnn-library-not-found", "2023-04-06 12:44:35.571376: W tensorflow/core/framework/op_kernel.cc:"
     "1830] OP_REQUIRES failed at conv_ops_fused_impl.h:625 : UNIMPLEMENTED: DNN library is not "
     "found."),
    ("dnn-library-not-found", "RuntimeError: Unimplemented: DNN library is not found.: while running "
     "replica 0 and partition 0 of a replicated computation (other replicas may have failed as "
     "well)."),
    ("nccl-system-error", "2021-08-31 15:14:17.616013: W tensorflow/core/framework/op_kernel.cc:1767]"
     " OP_REQUIRES failed at nccl_ops.cc:104 : Internal: NCCL: unhandled system error. Set "
     "NCCL_DEBUG=WARN for detail."),
    ("nccl-system-error", "NCCL error: unhandled system error"),
    ("nccl-system-error", "RuntimeError: NCCL Error 2: unhandled system error"),
    ("cuda-system-driver-mismatch", "2022-02-25 21:03:36.870592: E tensorflow/stream_executor/cuda/"
     "cuda_driver.cc:271] failed call to cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: system has "
     "unsupported display driver / cuda driver combination"),
    ("cuda-system-driver-mismatch", "UserWarning: CUDA initialization: Unexpected error from "
     "cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that "
     "might have already set an error? Error 803: system has unsupported display driver / cuda "
     "driver combination (Triggered internally at  /opt/conda/conda-bld/pytorch_1646755903507/work/"
     "c10/cuda/CUDAFunctions.cpp:112.)"),
    ("cuda-forward-compat-unsupported", "/opt/conda/lib/python3.8/site-packages/torch/cuda/__init__.py"
     ":52: UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run "
     "some cuda functions before calling NumCudaDevices() that might have already set an error? "
     "Error 804: forward compatibility was attempted on non supported HW (Triggered internally at  "
     "/opt/conda/conda-bld/pytorch_1623448278899/work/c10/cuda/CUDAFunctions.cpp:115.)"),
    ("torch-cuda-out-of-memory", "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate "
     "1.69 GiB (GPU 0; 14.56 GiB total capacity; 649.97 MiB already allocated; 1.31 GiB free; 1.01 "
     "GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting "
     "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
     "PYTORCH_CUDA_ALLOC_CONF"),
    ("torch-cuda-out-of-memory", "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate "
     "1.70 GiB. GPU 0 has a total capacty of 6.00 GiB of which 0 bytes is free. Of the allocated "
     "memory 2.93 GiB is allocated by PyTorch, and 2.30 GiB is reserved by PyTorch but unallocated."),
    ("cuda-out-of-memory", "RuntimeError: CUDA error: out of memory"),  # no allocator detail: ambiguous
    ("nccl-cuda-error", "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:911,"
     " unhandled cuda error, NCCL version 2.7.8"),
    ("nccl-cuda-error", "ncclUnhandledCudaError: Call to CUDA function failed."),
    ("no-nvidia-driver", "RuntimeError: Found no NVIDIA driver on your system. Please check that you "
     "have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx"),
    ("no-nvidia-driver", "UserWarning: CUDA initialization: Found no NVIDIA driver on your system. "
     "Please check that you have an NVIDIA GPU and installed a driver"),
    ("cuda-unknown-error", "/home/u/envs/t/lib/python3.10/site-packages/torch/cuda/__init__.py:174: "
     "UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set "
     "up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start. Setting "
     "the available devices to be zero. (Triggered internally at /pytorch/c10/cuda/"
     "CUDAFunctions.cpp:109.)"),
    ("cuda-unknown-error", "RuntimeError: CUDA error: unknown error"),
    ("cuda-unknown-error", "2018-12-08 22:20:54.515356: E tensorflow/stream_executor/cuda/"
     "cuda_driver.cc:300] failed call to cuInit: CUDA_ERROR_UNKNOWN: unknown error"),
    ("cuda-driver-init-failed", "/data/home/envs/wenet/lib/python3.8/site-packages/torch/cuda/"
     "__init__.py:52: UserWarning: CUDA initialization: CUDA driver initialization failed, you "
     "might not have a CUDA gpu. (Triggered internally at  /opt/conda/conda-bld/"
     "pytorch_1631630839582/work/c10/cuda/CUDAFunctions.cpp:115.)"),
    ("driver-too-old", "UserWarning: CUDA initialization: The NVIDIA driver on your system is too "
     "old (found version 10010). Please update your GPU driver by downloading and installing a new "
     "version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: "
     "https://pytorch.org to install a PyTorch version that has been compiled with your version of "
     "the CUDA driver. (Triggered internally at  /pytorch/c10/cuda/CUDAFunctions.cpp:100.)"),
    ("cuda-initialization-error", "UserWarning: CUDA initialization: Unexpected error from "
     "cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that "
     "might have already set an error? Error 3: initialization error"),  # the code inside the wrapper
    ("torch-cuda-init-failed", "torch.cuda.is_available() returns False"),
]

CLEAN_LOG = """\
2026-03-01 10:00:01.000000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:2021] Created device /job:localhost/replica:0/task:0/device:GPU:0 with 78911 MB memory:  -> device: 0, name: NVIDIA A100-SXM4-80GB, pci bus id: 0000:3b:00.0, compute capability: 8.0
Epoch 1/2
32/32 [==============================] - 2s 5ms/step - loss: 0.6931
Epoch 2/2
32/32 [==============================] - 0s 3ms/step - loss: 0.5120
torch.cuda.is_available(): True; torch.version.cuda: 12.8
"""


@pytest.mark.parametrize("expected, message", MESSAGES + REAL_LOG_MESSAGES)
def test_each_real_message_is_recognised_as_its_cause(expected, message):
    findings = diagnose(f"some preamble\n{message}\n")
    assert [f.id for f in findings] == [expected]
    assert findings[0].line == message.strip() and findings[0].line_number == 2
    assert findings[0].cause and findings[0].fix and findings[0].links


def test_every_catalogue_entry_is_covered():
    """Every hand-written entry is recognised from a real message or a documented wording in the
    tests (the generated entries, one per code, are held by test_diagnose_codes.py)."""
    entries = catalogue()
    assert sorted(e.number for e in entries if e.number) == list(range(1, 21))
    assert {"tensorrt-not-found", "nvidia-smi-cuda-version"} <= {e.id for e in entries if e.severity == "info"}
    real = MESSAGES + REAL_LOG_MESSAGES + [(expected, m) for _, expected, m, _ in FAMILY_MESSAGES] + WORDINGS
    hand = {e["id"] for e in json.loads((Path(diagnose_module.__file__).parents[2] / "data" / "catalogue.json")
                                        .read_text("utf-8"))["entries"] if e["patterns"]}
    assert hand <= {expected for expected, _ in real}, hand - {expected for expected, _ in real}
    assert all(link.startswith("https://") for e in entries for link in e.links)
    assert all(e.cause and e.fix and e.title for e in entries)


@pytest.mark.parametrize("message", [
    "CUDA_ERROR_OUT_OF_MEMORY", "DNN library is not found.", "NCCL error: unhandled system error",
    "failed call to cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    "CUDA out of memory. Tried to allocate 20.00 MiB",
    "no kernel image is available for execution on the device",
    "NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1207, unhandled system error",
    "ncclUnhandledCudaError", "Found no NVIDIA driver on your system", "CUDA unknown error",
    "RuntimeError: CUDA error: unknown error", "UserWarning: CUDA initialization: whatever it says",
])
def test_the_messages_issues_9_and_11_name_are_errors_with_a_fix(message):
    """Issue 9 point 12 and issue 11 point 7: these said "no known GPU failure"."""
    findings = diagnose(message)
    assert len(findings) == 1 and findings[0].severity == "error" and findings[0].fix


def test_a_generic_entry_gives_way_to_the_specific_cause_on_its_line():
    found = diagnose("UserWarning: CUDA initialization: Found no NVIDIA driver on your system.\n"
                     "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount()."
                     " Error 3: initialization error\n")
    assert [(f.id, f.line_number) for f in found] == [("no-nvidia-driver", 1),
                                                      ("cuda-initialization-error", 2)]
    assert diagnose("UserWarning: CUDA initialization: something new")[0].id == "torch-cuda-init-failed"


def test_one_line_gives_one_cause_the_code_inside_the_wrapper():
    """Issue 29 point 3: NCCL reporting a CUDA failure is one finding, the CUDA code's."""
    line = ("ncclUnhandledCudaError: Call to CUDA function failed. "
            "Last error: Cuda failure 999 'unknown error'")
    [found] = diagnose(line)
    assert found.id == "cuda-unknown-error" and found.code["name"] in ("cudaErrorUnknown", "CUDA_ERROR_UNKNOWN")
    assert [f.id for f in diagnose("NCCL error in: ProcessGroupNCCL.cpp:1207, unhandled cuda error")] == [
        "nccl-cuda-error"]


def test_every_pattern_is_bounded_and_every_match_holds_a_literal():
    """What streaming relies on: no match is longer than the overlap between the pieces of a
    long line, no repetition is unbounded (no backtracking blow-up), and the literal pre-filter
    never hides a match."""
    for entry in catalogue():
        for pattern in entry.patterns:
            _, high = sre_parse.parse(pattern.pattern).getwidth()
            assert high <= diagnose_module.OVERLAP, (entry.id, pattern.pattern, high)
    for _, message in MESSAGES + REAL_LOG_MESSAGES:
        for entry in catalogue():
            for pattern in entry.patterns:
                match = pattern.search(message)
                if match:
                    text = match.group().lower().encode()
                    assert any(lit in text for lit in entry.literals), (entry.id, match.group())


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


# --- the CLI: linters' exit codes ------------------------------------------------------------

TOO_OLD = "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 10010)."
LOG = "\n".join(["loading", TOO_OLD, "TF-TRT Warning: Could not find TensorRT", ""])


def test_cli_on_a_file_exits_1_when_it_finds_an_error(cli, tmp_path: Path):
    log = tmp_path / "train.log"
    log.write_text(LOG)
    result = cli("diagnose", str(log))
    assert result.code == 1, result.err
    assert "1. [error] driver-too-old: the NVIDIA driver is older" in result.out
    assert f"  line 2: {TOO_OLD}" in result.out
    assert "  fix: Upgrade the NVIDIA driver" in result.out
    assert "2. [info] tensorrt-not-found" in result.out
    assert f"1 error and 1 info in {log} (3 lines)" in result.out


def test_cli_json_on_stdin(cli):
    result = cli("diagnose", "-", "--json", input=LOG)
    assert result.code == 1, result.err
    doc = result.json()
    assert doc["schema"] == "envcheck.diagnosis/1" and doc["source"] == "-"
    assert [(f["id"], f["severity"], f["line_number"]) for f in doc["findings"]] == [
        ("driver-too-old", "error", 2), ("tensorrt-not-found", "info", 3)]
    assert {"id", "number", "title", "severity", "cause", "fix", "links", "line_number",
            "line"} <= set(doc["findings"][0])
    assert (doc["lines_read"], doc["bytes_read"]) == (3, len(LOG.encode()))


def test_cli_clean_log_exits_0(cli, tmp_path: Path):
    log = tmp_path / "ok.log"
    log.write_text(CLEAN_LOG)
    result = cli("diagnose", str(log))
    assert result.code == 0 and "no known GPU failure found" in result.out
    result = cli("diagnose", str(log), "--json")
    assert result.code == 0 and result.json()["findings"] == []


def test_cli_info_findings_alone_exit_0(cli):
    result = cli("diagnose", "-", input="TF-TRT Warning: Could not find TensorRT\n")
    assert result.code == 0 and "1. [info] tensorrt-not-found" in result.out
    assert result.out.rstrip().endswith("0 errors and 1 info in stdin (1 line)")


def test_cli_numbers_every_finding(cli):
    """Issue 18 point 5: the findings are numbered 1..n, not only those with a reference number."""
    log = "\n".join(["NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
                     "TF-TRT Warning: Could not find TensorRT",
                     "Failed to initialize NVML: Driver/library version mismatch"])
    result = cli("diagnose", "-", input=log)
    heads = [line.split(":")[0] for line in result.out.splitlines() if line[:3].rstrip(". ").isdigit()]
    assert heads == ["1. [error] nvidia-driver-not-loaded", "2. [info] tensorrt-not-found",
                     "3. [error] driver-library-mismatch"], result.out
    assert result.code == 1 and "2 errors and 1 info in stdin (3 lines)" in result.out


def test_cli_binary_bytes_are_tolerated(cli, tmp_path: Path):
    log = tmp_path / "mixed.log"
    log.write_bytes(b"\xff\xfe junk\nAssertionError: Torch not compiled with CUDA enabled\n")
    result = cli("diagnose", str(log), "--json")
    assert result.code == 1 and result.json()["findings"][0]["id"] == "torch-cpu-build"


@pytest.mark.parametrize("target", ["missing.log", "."])
def test_cli_unreadable_file_exits_2(cli, tmp_path: Path, target):
    result = cli("diagnose", str(tmp_path / target))
    assert result.code == 2 and "cannot read" in result.err and not result.out


def test_cli_help_states_the_exit_codes(cli):
    result = cli("diagnose", "--help")
    text = " ".join(result.out.split())
    assert result.code == 0 and "Exit 1 when an error was found, 0 when none was, 2 when" in text


def test_a_result_maps_to_the_exit_code():
    assert diagnose_stream(io.BytesIO(CLEAN_LOG.encode()), "x").exit_code == 0
    assert diagnose_stream(io.BytesIO(LOG.encode()), "x").exit_code == 1
    doc = diagnose_stream(io.BytesIO(LOG.encode()), "x").to_json()
    assert list(doc)[:2] == ["schema", "source"] and json.dumps(doc)


# --- linear time, bounded memory --------------------------------------------------------------

def test_a_300_kb_line_of_near_misses_is_diagnosed():
    """Issue 10 point 19. On this 400 KB line of near misses the quadratic patterns took about
    4 s (5.6 s on the issue's 300 KB line). Linear time is held structurally (every repetition
    bounded: ``test_every_pattern_is_bounded_and_every_match_holds_a_literal``) and measured in
    ``bench/bench_diagnose.py``, not timed here; this checks the answer on such a line."""
    line = ("NCCL error in: " * 27_000 + "kernel version " * 1_000
            + " RuntimeError: CUDA error: no kernel image is available for execution on the device")
    assert len(line) > 300_000
    findings = diagnose(f"start\n{line}\nend\n")
    assert [(f.id, f.line_number) for f in findings] == [("no-kernel-image", 2)]
    assert len(findings[0].line) <= diagnose_module.LINE_SHOWN + 2
    assert findings[0].line.endswith("no kernel image is available for execution on the device")


@pytest.mark.parametrize("before_cut", [0, 1, 30, 62, 63])
def test_a_match_across_the_cut_of_a_very_long_line_is_found(before_cut):
    """A line longer than a window is read in overlapping pieces: the message may straddle a cut."""
    message = "CUDA driver version is insufficient for CUDA runtime version"
    cut = 2 * diagnose_module.WINDOW  # where _windows cuts the first piece of a long line
    line = "x" * (cut - before_cut) + message + "y" * diagnose_module.WINDOW
    findings = diagnose("first line\n" + line + "\nlast line\n")
    assert [(f.id, f.line_number) for f in findings] == [("cuda-insufficient-driver", 2)]
    assert message in findings[0].line


def test_input_past_the_limit_is_refused_with_its_fix(monkeypatch):
    class Zeros:  # /dev/zero: endless, and no newline ever
        def read(self, n):
            return bytes(n)

    monkeypatch.setattr(diagnose_module, "MAX_BYTES", 8 * diagnose_module.WINDOW)
    with pytest.raises(UsageError) as caught:
        diagnose_stream(Zeros(), "-")
    assert caught.value.exit_code == 2 and "larger than" in caught.value.message
    assert "tail -c" in caught.value.fix


def _peak_rss_of_diagnose(log: Path) -> int:
    """Peak RSS (bytes) of `envcheck diagnose LOG --json`, from a wrapper process whose only
    child it is."""
    code = ("import resource, subprocess, sys\n"
            "subprocess.run([sys.executable, '-m', 'envcheck', 'diagnose', sys.argv[1], '--json'],"
            " stdout=subprocess.DEVNULL, check=False)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True,
                         check=True).stdout
    return int(out) * 1024


def test_an_80_mb_log_is_streamed_in_bounded_memory(tmp_path: Path):
    """The growth from a small log to an 80 MB one is bounded (16 MiB), and the whole peak is far
    below the log's size. (The log was 50 MB while the catalogue had 52 entries; with every code of
    every enumeration, about 620 entries and 1,100 keys, the fixed footprint grew by about 3 MB,
    past half of 50 MB, so the log grew instead of the bound.)"""
    lines = CLEAN_LOG.encode() * 2000
    big, small = tmp_path / "big.log", tmp_path / "small.log"
    with big.open("wb") as fh:
        while fh.tell() < 80_000_000:
            fh.write(lines)
        fh.write(b"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    small.write_bytes(lines)
    found = diagnose_file(str(big))
    assert [f.id for f in found.findings] == ["torch-cuda-out-of-memory"]
    assert found.bytes_read == big.stat().st_size
    peak_big, peak_small = _peak_rss_of_diagnose(big), _peak_rss_of_diagnose(small)
    assert peak_big < big.stat().st_size / 2, peak_big
    assert peak_big - peak_small < 16 << 20, (peak_big, peak_small)


def test_missing_cuda_runtime_as_an_import_error_is_entry_1_not_14():
    found = diagnose("ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory")
    assert [f.number for f in found] == [1]
    found = diagnose("ImportError: libcuda.so.1: cannot open shared object file: No such file or directory")
    assert [f.number for f in found] == [14]
