"""Issue 18 points 4 and 5: each failure family diagnose missed, recognised from the real message as
users pasted it (log prefixes kept), with the cause its thread settled on; prefixes and syslog's
#012 tolerated; endless input without newlines refused quickly in bounded memory."""
from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest

from envcheck.errors import UsageError
from envcheck.validation import diagnose as diagnose_module
from envcheck.validation.diagnose import catalogue, diagnose, diagnose_stream

ROOT = Path(__file__).resolve().parent.parent

# (family, entry id, the message as pasted in the thread, the thread) — the lines the patterns were
# written from; tests/data/diagnose_fresh_sample.json holds the lines they were measured on.
FAMILY_MESSAGES = [
    ("container", "container-toolkit-missing", 'docker: Error response from daemon: could not select device '
     'driver "" with capabilities: [[gpu]].', "https://github.com/NVIDIA/nvidia-docker/issues/1352"),
    ("container", "container-toolkit-missing", 'Error response from daemon: could not select device driver '
     '"nvidia" with capabilities: [[gpu]]', "https://github.com/infiniflow/ragflow/issues/9573"),
    ("container", "nvml-library-missing", "nvidia-container-cli list\nnvidia-container-cli: initialization error: "
     "load library failed: libnvidia-ml.so.1: cannot open shared object file: no such file or directory",
     "https://github.com/NVIDIA/libnvidia-container/issues/231"),
    ("container", "container-lost-gpu", "root@098b49afe624:/# nvidia-smi \nFailed to initialize NVML: Unknown Error",
     "https://github.com/NVIDIA/nvidia-docker/issues/1671"),
    ("container", "driver-too-old", "docker: Error response from daemon: OCI runtime create failed: "
     "container_linux.go:370: starting container process caused: process_linux.go:459: container init caused: "
     "Running hook #0:: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: requirement "
     "error: unsatisfied condition: cuda>=11.0, please update your driver to a newer version, or use an earlier "
     "cuda container: unknown.", "https://github.com/NVIDIA/nvidia-docker/issues/1442"),
    ("hardware", "gpu-fallen-off-bus", "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n               NVRM: "
     "(PCI ID: 10de:26b5) installed in this system has\n               NVRM: fallen off the bus and is not "
     "responding to commands.", "https://github.com/NVIDIA/NVSentinel/issues/155"),
    ("hardware", "gpu-fallen-off-bus", "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
     "https://github.com/NVIDIA/NVSentinel/issues/155"),
    ("hardware", "gpu-ecc-uncorrectable", "F tensorflow/stream_executor/lib/statusor.cc:34] Attempting to fetch "
     "value instead of handling error Internal: failed initializing StreamExecutor for CUDA device ordinal 0: "
     "Internal: failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error "
     "encountered", "https://github.com/nagadit/DeepFaceLab_Linux/issues/89"),
    ("hardware", "gpu-ecc-uncorrectable", "RuntimeError: CUDA error: uncorrectable ECC error encountered",
     "https://github.com/vllm-project/vllm/issues/5222"),
    ("hardware", "xid-94", "NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained ECC "
     "error", "https://github.com/leptonai/gpud/pull/1174"),
    ("hardware", "xid-13", "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', "
     "name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter",
     "https://github.com/leptonai/gpud/pull/46"),
    ("nvidia-smi", "nvidia-driver-not-loaded", "NVIDIA-SMI has failed because it couldn't communicate with the "
     "NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.",
     "https://github.com/ci-for-research/self-hosted-runners/issues/40"),
    ("nvidia-smi", "nvidia-driver-not-loaded", "NVIDIA-SMI has failed because it couldn‘t communicate with the "
     "NVIDIA driver.", "https://github.com/qixuema/envs/issues/4"),
    ("kernel", "driver-library-mismatch", "Jun 30 11:07:05 gpu-0 kernel: NVRM: API mismatch: the client has the "
     "version 535.54.03, but#012NVRM: this kernel module has the version 530.30.02.  Please#012NVRM: make sure "
     "that this kernel module and all NVIDIA driver#012NVRM: components have the same version.",
     "https://github.com/stackhpc/ansible-slurm-appliance/issues/287"),
    ("kernel", "driver-library-mismatch", "[    9.424670] NVRM: API mismatch: the client 'kwin_wayland' (pid 1005)",
     "https://github.com/Frogging-Family/nvidia-all/issues/394"),
    ("jax", "cudnn-version-mismatch", "CUDA backend failed to initialize: Found cuDNN version 8600, but JAX was "
     "built against version 8906, which is newer. The copy of cuDNN that is installed must be at least as new as "
     "the version against which JAX was built. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)",
     "https://github.com/MIT-REALM/gcbfplus/issues/1"),
    ("jax", "cudnn-library-not-found", "CUDA backend failed to initialize: Unable to load cuDNN. Is it installed? "
     "(Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)", "https://github.com/jax-ml/jax/issues/20519"),
    ("jax", "jax-cuda-backend-failed", "E   RuntimeError: Backend 'cuda' failed to initialize: Unable to use CUDA "
     "because of the following issues with CUDA components:", "https://github.com/rgommers/pixi-dev-scipystack/issues/1"),
    ("jax", "jax-cpu-build", "WARNING:2025-06-15 17:04:55,449:jax._src.xla_bridge:791: An NVIDIA GPU may be "
     "present on this machine, but a CUDA-enabled jaxlib is not installed. Falling back to cpu.",
     "https://github.com/sanchit-gandhi/whisper-jax/issues/211"),
    ("jax", "xla-out-of-memory", "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
     "trying to allocate 7406166528 bytes.", "https://github.com/google-deepmind/alphafold/issues/1023"),
    ("jax", "xla-out-of-memory", "[1] 2019-06-13 01:17:08.886805: E external/org_tensorflow/tensorflow/compiler/"
     "xla/python/local_client.cc:672] Execution of replica 0 failed: Resource exhausted: Out of memory while "
     "trying to allocate 5520758552 bytes.", "https://github.com/jax-ml/jax/issues/788"),
    ("cublas-cudnn", "cublas-execution-failed", "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when "
     "calling `cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`",
     "https://github.com/facebookresearch/SparseConvNet/issues/208"),
    ("cublas-cudnn", "cublas-init-failed", "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling "
     "`cublasCreate(handle)` error in some models", "https://github.com/EleutherAI/lm-evaluation-harness/issues/1689"),
    ("cublas-cudnn", "cudnn-init-failed", "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED",
     "https://github.com/NVIDIA/TensorRT/issues/2911"),
    ("cublas-cudnn", "cudnn-init-failed", "2023-09-11 18:02:05.062414: E external/xla/xla/stream_executor/cuda/"
     "cuda_dnn.cc:439] Could not create cudnn handle: CUDNN_STATUS_NOT_INITIALIZED",
     "https://github.com/jax-ml/jax/issues/17553"),
    ("cublas-cudnn", "cudnn-internal-error", "RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR",
     "https://github.com/yukkyo/PyTorch-FilterResponseNormalizationLayer/issues/4"),
    ("kernel-fault", "cuda-device-assert", "/opt/conda/conda-bld/pytorch_1720538643151/work/aten/src/ATen/native/"
     "cuda/Indexing.cu:1231: indexSelectSmallIndex: block: [31,0,0], thread: [29,0,0] Assertion `srcIndex < "
     "srcSelectDimSize` failed.", "https://github.com/EleutherAI/lm-evaluation-harness/issues/2293"),
    ("kernel-fault", "cuda-device-assert", "RuntimeError: copy_if failed to synchronize: cudaErrorAssert: "
     "device-side assert triggered", "https://github.com/cfzd/Ultra-Fast-Lane-Detection/issues/84"),
    ("kernel-fault", "cuda-illegal-address", "RuntimeError: CUDA error: an illegal memory access was encountered",
     "https://github.com/3dlg-hcvc/multi3drefer/issues/14"),
    ("kernel-fault", "cuda-illegal-address", "RuntimeError: cuda runtime error (77) : an illegal memory access was "
     "encountered at /pytorch/aten/src/THC/generic/THCTensorCopy.c:20",
     "https://github.com/laughtervv/DepthAwareCNN/issues/12"),
    ("nccl", "nccl-network-error", "ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: "
     "Connect to 10.0.0.2<45763> failed : Software caused connection abort",
     "https://github.com/NVIDIA/nccl-tests/issues/166"),
    ("nccl", "nccl-network-error", "*server name* [0] include/socket.h:185 WARN Call to connect failed : "
     "Connection refused", "https://github.com/NVIDIA/nccl/issues/111"),
    ("nccl", "nccl-ib-error", "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion "
     "from peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid "
     "fd00:1148:9000:5000:4:200:3:ff22 remoteGidsfd00:1148:9000:5000:4:200:3:ff1f",
     "https://github.com/NVIDIA/nccl/issues/1405"),
    ("nccl", "nccl-p2p-hang", "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] "
     "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, "
     "NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.",
     "https://github.com/hiyouga/LlamaFactory/issues/7396"),
    ("tensorflow", "gpu-too-old-for-build", "I external/org_tensorflow/tensorflow/core/common_runtime/gpu/"
     "gpu_device.cc:1007] Ignoring visible gpu device (device: 0, name: GRID K520, pci bus id: 0000:00:03.0) with "
     "Cuda compute capability 3.0. The minimum required Cuda capability is 3.5.",
     "https://github.com/tensorflow/serving/issues/223"),
    ("tensorflow", "ptxas-too-old", "W tensorflow/stream_executor/gpu/asm_compiler.cc:235] Your CUDA software stack "
     "is old. We fallback to the NVIDIA driver for some compilation. Update your CUDA version to get the best "
     "performance. The ptxas error was: ptxas fatal   : Value 'sm_89' is not defined for option 'gpu-name'",
     "https://github.com/MBoemo/DNAscent/issues/87"),
    ("cuda-stub", "cuda-stub-library", "CUDA API Error at line 28: CUDA driver is a stub library",
     "https://github.com/xmake-io/xmake/issues/4686"),
    ("cuda-stub", "cuda-stub-library", "AttributeError: /scratch/yhao24/opt/cuda-12.1/lib64/stubs/libcuda.so: "
     "undefined symbol: _undef", "https://github.com/numba/numba/issues/8985"),
    ("cudnn-library", "cudnn-library-not-found", "W tensorflow/stream_executor/platform/default/dso_loader.cc:64] "
     "Could not load dynamic library 'libcudnn.so.8'; dlerror: libcudnn.so.8: cannot open shared object file: "
     "No such file or directory", "https://github.com/tensorflow/tensorflow/issues/60854"),
    ("cudnn-library", "cudnn-library-not-found", "Could not load library libcudnn_ops_infer.so.8. Error: "
     "libcudnn_ops_infer.so.8: cannot open shared object file: No such file or directory",
     "https://github.com/jhj0517/Whisper-WebUI/issues/294"),
    ("cudnn-library", "tensorrt-not-found", "2023-02-13 19:39:03.670024: W tensorflow/compiler/xla/stream_executor/"
     "platform/default/dso_loader.cc:64] Could not load dynamic library 'libnvinfer.so.7'; dlerror: "
     "libnvinfer.so.7: cannot open shared object file: No such file or directory; LD_LIBRARY_PATH: "
     "/usr/lib64-nvidia", "https://github.com/googlecolab/colabtools/issues/3408"),
]

# the issue's families, each with at least one real message above
FAMILIES = {"container", "hardware", "nvidia-smi", "kernel", "jax", "cublas-cudnn", "kernel-fault", "nccl",
            "tensorflow", "cuda-stub", "cudnn-library"}


def _last_line(message: str) -> str:
    return message.rsplit("\n", 1)[-1].strip()


@pytest.mark.parametrize("family, expected, message, source", FAMILY_MESSAGES,
                         ids=[f"{f}-{e}-{i}" for i, (f, e, _, _) in enumerate(FAMILY_MESSAGES)])
def test_each_family_is_recognised_from_its_real_message(family, expected, message, source):
    findings = diagnose(f"some preamble\n{message}\n")
    assert [f.id for f in findings] == [expected], source
    assert 2 <= findings[0].line_number <= 1 + message.count("\n") + 1  # a wrapped message: any of its lines
    assert _last_line(message) in findings[0].line or findings[0].line in message
    assert findings[0].cause and findings[0].fix and findings[0].links


def test_every_family_of_the_issue_has_a_real_message_and_every_entry_a_source():
    assert {family for family, *_ in FAMILY_MESSAGES} == FAMILIES
    assert all(source.startswith("https://github.com/") for *_, source in FAMILY_MESSAGES)
    for entry in catalogue():
        assert entry.links and all(link.startswith("https://") for link in entry.links), entry.id


PREFIXES = [
    "2024-05-01 12:00:00.123456: E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:152] ",
    "[rank3]: ", "[1,0]<stderr>: ", "(RayTrainWorker pid=4242) ", "May  1 12:00:00 node7 kernel: [  42.1] ",
    "\x1b[31mE0501 12:00:00.000000 123 log.cc:9]\x1b[0m ", "node-3:1234:5678 [2] ",
]


@pytest.mark.parametrize("prefix", PREFIXES)
def test_the_log_prefixes_tools_add_do_not_hide_a_message(prefix):
    for _, expected, message, _ in FAMILY_MESSAGES[::3]:
        line = _last_line(message)
        assert [f.id for f in diagnose(prefix + line)] == [expected], (prefix, line)


def test_syslog_joins_a_multi_line_message_with_012():
    message = ("NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.#012NVRM: GPU at "
               "PCI:0000:3b:00: GPU-5d0e#012NVRM: GPU Board Serial Number: 0")
    assert [f.id for f in diagnose(f"Mar  3 04:05:06 gpu-12 kernel: {message}")] == ["gpu-fallen-off-bus"]


@pytest.mark.parametrize("line, expected", [
    ("Could not load dynamic library 'libcudnn.so.8'; dlerror: libcudnn.so.8: cannot open shared object file",
     ["cudnn-library-not-found"]),
    ("Could not load dynamic library 'libcuda.so.1'; dlerror: libcuda.so.1: cannot open shared object file",
     ["libcuda-missing-in-container"]),
    ("Could not load dynamic library 'libcusolver.so.11'; dlerror: libcusolver.so.11: cannot open shared "
     "object file", ["cuda-library-not-found"]),
    ("NVRM: Xid (PCI:0000:3b:00): 48, pid=77, DBE (Double Bit Error) ECC Error", ["gpu-ecc-uncorrectable"]),
    ("Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR", ["cudnn-init-failed"]),
    ("CUDA backend failed to initialize: Found CUDA version 12010, but JAX was built against version 12020",
     ["jax-cuda-backend-failed"]),
])
def test_a_generic_entry_gives_way_to_the_one_naming_the_cause(line, expected):
    assert [f.id for f in diagnose(line)] == expected


def test_the_cudnn_fix_names_cudnn_and_the_presets_that_ship_it():
    fix = next(e.fix for e in catalogue() if e.id == "cudnn-library-not-found")
    assert "cuDNN" in fix
    named = [name for name in ("tensorflow-gpu-cuda12", "tensorflow-gpu-cuda11-wheels", "pytorch-cuda12",
                               "pytorch-cuda11") if f"--preset {name}`" in fix]
    assert len(named) == 4, fix
    for name in named:  # each exists and ships cuDNN inside the env
        preset = tomllib.loads((ROOT / "presets" / f"{name}.toml").read_text())
        in_env = not preset["gpu"]["libraries"] or any(p.startswith("nvidia-cudnn") for p in preset["packages"])
        assert preset["kind"] == "gpu" and preset["gpu"]["cudnn"] and in_env, name


def test_every_match_of_every_real_line_holds_a_literal():
    """The literal pre-filter never hides a match of the new messages either."""
    sample = json.loads((ROOT / "tests" / "data" / "diagnose_fresh_sample.json").read_text("utf-8"))["lines"]
    lines = [m for _, _, m, _ in FAMILY_MESSAGES] + [s["line"] for s in sample]
    for entry in catalogue():
        for pattern in entry.patterns:
            for line in lines:
                match = pattern.search(line)
                if match:
                    text = match.group().lower().encode()
                    assert any(lit in text for lit in entry.literals), (entry.id, match.group())


def test_the_fresh_sample_is_not_the_lines_the_patterns_were_written_from():
    sample = json.loads((ROOT / "tests" / "data" / "diagnose_fresh_sample.json").read_text("utf-8"))["lines"]
    written_from = {m for _, _, m, _ in FAMILY_MESSAGES} | {_last_line(m) for _, _, m, _ in FAMILY_MESSAGES}
    assert not written_from & {s["line"] for s in sample}


# --- endless input without newlines (issue 18 point 5) ------------------------------------------

def test_a_run_without_line_breaks_is_refused_and_progress_bars_are_not(monkeypatch):
    class NoNewline:
        def read(self, n):
            return b"\0" * n

    monkeypatch.setattr(diagnose_module, "MAX_RUN", 4 * diagnose_module.WINDOW)
    with pytest.raises(UsageError) as caught:
        diagnose_stream(NoNewline(), "-")
    assert caught.value.exit_code == 2 and "without a line break" in caught.value.message
    assert "strings" in caught.value.fix

    bar = b"12/99 [>....] - loss: 0.5\r" * (10 * diagnose_module.WINDOW // 26)  # \r, never \n
    log = bar + b"CUDA driver version is insufficient for CUDA runtime version\n"
    assert [f.id for f in diagnose_stream(io.BytesIO(log), "-").findings] == ["cuda-insufficient-driver"]


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_an_endless_stream_without_newlines_ends_with_an_answer_under_2_gb(tmp_path: Path):
    """`diagnose -` fed bytes without a newline through a pipe, for as long as it reads, under a
    2 GB address-space limit: it stops at MAX_RUN with exit 2 and the one-line error. The timeout
    only guards against a hang; it is not a speed assertion."""
    proc = subprocess.Popen([sys.executable, "-m", "envcheck", "diagnose", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_limit_address_space,
                            env={**os.environ, "ENVCHECK_HOME": str(tmp_path)})

    def feed() -> None:
        chunk = b"x" * 65536
        try:
            while True:
                proc.stdin.write(chunk)
        except (BrokenPipeError, ValueError, OSError):
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        proc.wait(timeout=300)  # a hang guard only
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        writer.join(timeout=30)
        try:
            proc.stdin.close()
        except OSError:
            pass
    out, err = proc.stdout.read(), proc.stderr.read().decode()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == 2, err
    assert err.count("\n") == 1 and "without a line break" in err and "fix:" in err, err
    assert not out
