"""Issue 29: every code of the GPU stack's published enumerations recognised from its name, its
message in the forms frameworks print it and (where nothing else is on the line) its number, each
finding naming the code; one cause per line; the documented wordings of framework wrappers, Apple
MPS, CPU-only builds, installs, containers, Fabric Manager, MIG and schedulers."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from envcheck.validation.diagnose import catalogue, diagnose
from envcheck.validation.diagnose.catalogue import catalogue_by_id
from envcheck.validation.diagnose.codes import FORMAT_SPEC

DATA = Path(__file__).resolve().parent.parent / "envcheck" / "data"
SPEC = json.loads((DATA / "diagnose_codes.json").read_text("utf-8"))
SKIP = ("success", "in_progress", "not_a_result")


def _enumeration(file: str) -> dict:
    return json.loads((DATA / "enumerations" / file).read_text("utf-8"))


def _failures(file: str) -> list[dict]:
    return [e for e in _enumeration(file)["entries"] if not any(e.get(flag) for flag in SKIP)]


def _one(line: str):
    findings = diagnose(line)
    assert len(findings) == 1, (line, [f.id for f in findings])
    found = findings[0]
    assert found.cause and found.fix and found.links, found.id
    return found


ENUMS = [e["file"] for e in SPEC["enumerations"]]


@pytest.mark.parametrize("file", ENUMS)
def test_every_failure_code_is_recognised_by_its_name_and_named_in_the_finding(file):
    name = _enumeration(file)["name"]
    for code in _failures(file):
        found = _one(f"RuntimeError: operation failed with {code['name']} (see above)")
        assert found.code["name"] == code["name"] and found.code["enumeration"] == name, (code, found.code)
        assert found.code["number"] == code["number"]


# the forms frameworks print a code's message in: (enumeration file, template)
PRINTED = [
    ("cudaError_t.json", "RuntimeError: CUDA error: {message}"),
    ("cudaError_t.json", "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=47 error={number} : {message}"),
    ("cudaError_t.json", "F0101 12:00:00.000000 1 common.cpp:163] Check failed: error == cudaSuccess ({number} vs. 0)  {message}"),
    ("cudaError_t.json", "ggml_cuda_init: failed to initialize CUDA: {message}"),
    ("cudaError_t.json", "onnxruntime::CudaCall CUDA failure {number}: {message} ; GPU=0 ; hostname=h ; expr=cudaSetDevice(0);"),
    ("CUresult.json", "E external/xla/xla/stream_executor/cuda/cuda_driver.cc:152] failed call to cuInit: {name}: {message}"),
    # the driver API's messages (cuGetErrorString) where a tool prints them without the name
    ("CUresult.json", "RuntimeError: Triton Error [CUDA]: {message}"),  # triton's driver.c
    ("CUresult.json", "pycuda._driver.LogicError: cuMemAlloc failed: {message}"),  # pycuda: "<call> failed: <message>"
    ("CUresult.json", "[TRT] [E] 1: [convolutionRunner.cpp::execute::391] Error Code 1: Cuda Driver ({message})"),
    ("cudaError_t.json", "GPUassert: {message} kernel.cu 42"),  # the gpuErrchk macro many CUDA programs copy
    ("hipError_t.json", "ggml_cuda_init: failed to initialize ROCm: {message}"),
    ("hipError_t.json", "RuntimeError: HIP error: {message}"),
    ("nvmlReturn_t.json", "Failed to initialize NVML: {message}"),
    ("cusparseStatus_t.json", "CUSPARSE API failed at line 130 with error: {message} ({number})"),
    ("ncclResult_t.json", "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1207, {message}, NCCL version 2.18.5"),
]


@pytest.mark.parametrize("file, template", PRINTED, ids=[f"{f}:{t[:30]}" for f, t in PRINTED])
def test_every_message_is_recognised_in_the_forms_frameworks_print_it(file, template):
    codes = _failures(file)
    by_message: dict[str, set[str]] = {}
    for code in codes:
        by_message.setdefault((code.get("message") or "").rstrip(".").lower(), set()).add(code["name"])
    for code in codes:
        if not code.get("message") or code["message"] == code["name"]:
            continue
        line = template.format(message=code["message"], number=code["number"], name=code["name"])
        found = _one(line)
        assert found.code is not None, line
        named = found.code["name"]
        same = by_message[code["message"].rstrip(".").lower()]
        assert named in same or named == code["name"] or found.code["message"] and \
            found.code["message"].rstrip(".").lower() == code["message"].rstrip(".").lower(), (line, found.code)


@pytest.mark.parametrize("line, name, number", [
    ("RuntimeError: cuda runtime error (30) : unknown error at /pytorch/THC/THCGeneral.c:66", "cudaErrorUnknown", 999),
    ("THCudaCheck FAIL file=/opt/conda/conda-bld/torch/lib/THC/THCGeneral.c line=70 error=30", "cudaErrorUnknown", 999),
    ("Check failed: error == cudaSuccess (74 vs. 0)", "cudaErrorMisalignedAddress", 716),
    ("RuntimeError: cuda runtime error (77)", "cudaErrorIllegalAddress", 700),
    ("UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Error 804", "cudaErrorCompatNotSupportedOnDevice", 804),
    ("CUDA error = 999 at main.cu:196", "cudaErrorUnknown", 999),
    ("F cudnn.hpp:96] Check failed: status == CUDNN_STATUS_SUCCESS (3 vs. 0)", "CUDNN_STATUS_BAD_PARAM", 2000),
    ("RuntimeError: CURAND failure 105: (see curand.h)", "CURAND_STATUS_LENGTH_NOT_MULTIPLE", 105),
    ("RuntimeError: cusolver error: 7, when calling `cusolverDnCreate(handle)`", "CUSOLVER_STATUS_INTERNAL_ERROR", 7),
])
def test_numbers_count_in_the_numbering_their_wrapper_used_when_no_name_or_message_is_there(line, name, number):
    """cudaError_t was renumbered in CUDA 10.1 (30 is 999 today), cudnnStatus_t in cuDNN 9."""
    found = _one(line)
    assert (found.code["name"], found.code["number"]) == (name, number)


def test_a_name_or_message_decides_before_a_number():
    found = _one("RuntimeError: cuda runtime error (4) : unspecified launch failure at THCCachingHostAllocator.cpp:265")
    assert found.code["name"] in ("cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED")  # 4 was LaunchFailure, is CudartUnloading


def test_every_xid_is_recognised_with_nvidias_meaning_and_action():
    data = _enumeration("xid.json")
    for xid in data["entries"]:
        found = _one(f"[ 8127.1] NVRM: Xid (PCI:0000:3b:00): {xid['number']}, pid=4242, name=python, details")
        assert found.code["enumeration"] == "Xid" and found.code["number"] == xid["number"]
        entry = catalogue_by_id()[found.id]
        if xid.get("description") and found.id == f"xid-{xid['number']}":
            assert xid["description"] in entry.title and (xid["immediate_action"] or "CONTACT_SUPPORT") in entry.fix


def _filled(fmt: str) -> str:
    return FORMAT_SPEC.sub(lambda m: {"s": "eth0", "p": "0x7f00", "c": "x"}.get(m.group()[-1], "12")
                           if not m.group().startswith("<") else "MACRO", fmt.split("\n")[0])


def test_every_nccl_warn_wording_with_text_of_its_own_is_recognised():
    """Printed as `<host>:<pid>:<tid> [<dev>] file.cc:NN NCCL WARN <text>`; a WARN whose format is
    only fields (`%s`) cannot be told from any other text and is left out."""
    for warn in _enumeration("nccl_warn.json")["entries"]:
        literal = max((p.strip() for p in FORMAT_SPEC.split(warn["format"].split("\n")[0])), key=len)
        if len(literal) < 4:
            continue
        line = f"node-1:4242:4300 [0] {warn['file']}:{warn['line']} NCCL WARN {_filled(warn['format'])}"
        found = _one(line)
        assert found.id.startswith("nccl") or found.code, (line, found.id)


@pytest.mark.parametrize("file", ["host_messages.json", "platform_messages.json"])
def test_every_host_and_platform_wording_is_recognised_with_its_cause(file):
    """Every wording, and no other cause on its lines; a first line several messages share
    ("NVRM: The NVIDIA GPU %04x:...") names none of them alone."""
    causes = SPEC["messages"][file]
    for item in _enumeration(file)["entries"]:
        rule = causes[item["name"]]
        if rule is None:  # recognised through the loader's library or a module's errno: tests below
            continue
        cause = rule if isinstance(rule, str) else rule["cause"]
        prefix = "modprobe: nvidia: " if isinstance(rule, dict) and rule.get("requires") else ""
        # printed whole, a line at a time: a message over several lines names its cause once
        log = "\n".join(f"Jan 01 00:00:00 node kernel: {prefix}{_filled(line).replace('eth0', 'nvidia')}"
                        for line in item["message"].split("\n"))
        found = diagnose(log)
        assert found and all(f.id == cause or catalogue_by_id()[f.id].rank >= catalogue_by_id()[cause].rank
                             for f in found), (log, [f.id for f in found])


def test_the_tables_are_generated_from_the_enumerations():
    """Every failure code has an entry (its own or a hand-written cause) with a cause and a fix,
    and every id the tables name exists."""
    ids = catalogue_by_id()
    for file in ENUMS:
        for code in _failures(file):
            found = _one(code["name"])
            assert found.id in ids
            if found.id not in SPEC["causes"] and found.code["meaning"]:
                assert found.code["meaning"] in ids[found.id].cause or found.id in {
                    e for names in SPEC["causes"].values() for e in names} or ids[found.id].cause


@pytest.mark.parametrize("line, expected", [
    ("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory", "cuda-runtime-library-not-found"),
    ("OSError: libcublasLt.so.12: cannot open shared object file: No such file or directory", "cuda-library-not-found"),
    ("Could not load library cudnn_ops_infer64_8.dll. Error code 126", "cudnn-library-not-found"),
    ("RuntimeError: Library cublas64_12.dll is not found or cannot be loaded", "cuda-library-not-found"),
    ("RuntimeError: Library libcublas.so.11 is not found or cannot be loaded", "cuda-library-not-found"),
    ('[ONNXRuntimeError] : 1 : FAIL : LoadLibrary failed with error 126 "" when trying to load '
     '"C:\\WINDOWS\\SYSTEM32\\onnxruntime_providers_cuda.dll"', "onnxruntime-cuda-provider-failed"),
    ("RuntimeError: (PreconditionNotMet) The third-party dynamic library (cudnn64_8.dll) that Paddle depends on is "
     "not configured correctly. (error code is 126)", "cudnn-library-not-found"),
    ("ImportError: libnccl.so.2: cannot open shared object file: No such file or directory", "nccl-library-not-found"),
    ("ImportError: libnvinfer.so.10: cannot open shared object file: No such file or directory", "tensorrt-library-not-found"),
    ("OSError: libtorch_cuda.so: cannot open shared object file: No such file or directory", "extension-built-for-other-torch"),
    ("ImportError: libamdhip64.so.6: cannot open shared object file: No such file or directory", "rocm-library-not-found"),
    ("python: error while loading shared libraries: /usr/lib/x86_64-linux-gnu/libcudnn.so.8: file too short", "library-file-truncated"),
    ("libcufft.so.11: failed to map segment from shared object", "library-mmap-failed"),
    ("ImportError: libGL.so.1: cannot open shared object file: No such file or directory", None),
    ("modprobe: FATAL: Module nvidia not found in directory /lib/modules/6.8.0-45-generic", "kernel-module-not-built-for-running-kernel"),
    ("modprobe: ERROR: could not insert 'nvidia': Key was rejected by service", "secure-boot-module-rejected"),
    ("insmod: ERROR: could not insert module nvidia.ko: Required key not available", "secure-boot-module-rejected"),
    ("modprobe: FATAL: Module snd_hda not found in directory /lib/modules/6.8.0", None),
    ("kernel: NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1b80)", None),  # heads several messages: their next lines decide
    ("insmod: ERROR: could not insert module /opt/lib/modules/4.14/video/nvidia.ko: Invalid module format",
     "kernel-module-not-built-for-running-kernel"),
    ("insmod: ERROR: could not insert module /opt/lib/modules/4.14/video/nvidia.ko: Unknown symbol in module",
     "kernel-module-unknown-symbol"),
    ("nvidia-container-cli: mount error: file creation failed: /var/lib/docker/overlay2/x/merged/usr/bin/nvidia-smi: "
     "file exists: unknown", "container-image-contains-driver-files"),
])
def test_the_loader_and_module_messages_name_the_library_family(line, expected):
    assert [f.id for f in diagnose(line)] == ([expected] if expected else [])


# (entry id, a line in the wording its tool documents or prints): the hand-written entries
WORDINGS = [
    ("ray-gpu-request-unschedulable", "(scheduler +2m13s) Warning: The following resource request cannot be scheduled right "
     "now: {'GPU': 0.125, 'CPU': 0.5}. This is likely due to all cluster resources being claimed by actors."),
    ("nccl-buffer-oom", "VM-0-16-ubuntu:392:494 [2] enqueue.cc:43 NCCL WARN Cuda failure 'out of memory'"),
    ("mps-op-not-implemented", "RuntimeError: MPS: Unsupported Border padding mode"),
    ("mps-ndarray-size-limit", "RuntimeError: Invalid buffer size: 19.45 GB"),
    ("nvml-binding-newer-than-driver", "nvtop: symbol lookup error: nvtop: undefined symbol: nvmlDeviceGetPcieThroughput"),
    ("cuda-library-older-than-build", "ImportError: /site-packages/torch/lib/libtorch_cpu.so: undefined symbol: "
     "cuptiActivityEnableDriverApi, version libcupti.so.12"),
    ("conda-cuda-driver-too-old", "  - package cudatoolkit-11.0.3-h15472ef_6 has constraint __cuda >=11.0 conflicting with __cuda-10.2-0"),
    ("container-started-without-gpus", "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available."),
    ("container-runtime-hook-missing", "error running hook #0: fork/exec /usr/bin/nvidia-cdi-hook: no such file or directory"),
    ("nouveau-bound", "ERROR: The Nouveau kernel driver is currently in use by your system.  This"),
    ("kernel-headers-missing", "ERROR: Unable to find the kernel source tree for the currently running kernel.  Please make"),
    ("dgl-cpu-build", "dgl._ffi.base.DGLError: [14:00:04] /opt/dgl/src/runtime/c_runtime_api.cc:82: Check failed: "
     "allow_missing: Device API cuda is not enabled. Please install the cuda version of dgl."),
    ("extension-built-without-cuda", "RuntimeError: Not compiled with GPU support"),
    ("k8s-insufficient-gpu", "0/8 nodes are available: 8 Insufficient k8s.amazonaws.com/vgpu."),
    ("driver-too-old-for-kernel", "FATAL: modpost: GPL-incompatible module nvidia-uvm.ko uses GPL-only symbol 'radix_tree_preloads'"),
    ("nvidia-module-build-failed", "ERROR: Unable to build the NVIDIA kernel module."),
    ("nvidia-module-build-failed", "/var/lib/dkms/nvidia/465.19.01/build/nvidia/nv-caps.c:598:5: error: implicit declaration "
     "of function 'sys_close' [-Werror=implicit-function-declaration]"),
    ("nvidia-installer-module-load-failed", "ERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most "
     "frequently when this kernel module was built"),
    ("open-kernel-module-geforce-gated", "[    3.513141] NVRM: Open nvidia.ko is only ready for use on Data Center GPUs."),
    ("xgboost-cpu-build", "XGBoostError: [12:54:26] /xgboost/src/learner.cc:180: XGBoost version not compiled with GPU support."),
    ("faiss-cpu-build", "AttributeError: module 'faiss' has no attribute 'StandardGpuResources'"),
    ("rocm-kfd-missing", "Error response from daemon: error gathering device information while adding custom device "
     "\"/dev/kfd\": no such file or directory"),
    ("rocm-libdrm-ids-missing", "/opt/amdgpu/share/libdrm/amdgpu.ids: No such file or directory"),
    ("container-runtime-hook-missing", "2019/07/23 14:19:45 ERROR: inject NVIDIA hook: stat "
     "/usr/bin/nvidia-container-runtime-hook: no such file or directory"),
    ("cdi-hook-failed", "Error: OCI runtime error: crun: {\"msg\":\"error executing hook `/usr/bin/nvidia-ctk` (exit code: 1)\"}"),
    ("cdi-generate-driver-libs-not-found", "ERRO[0000] failed to generate CDI spec: failed to create discoverer for driver "
     "libraries: failed to get libraries for driver version: failed to locate libcuda.so.550.54.15"),
    ("cublas-cublaslt-mismatch", "OSError: /env/lib/python3.8/site-packages/nvidia/cublas/lib/libcublas.so.11: symbol "
     "cublasLtHSHMatmulAlgoInit version libcublasLt.so.11 not defined in file libcublasLt.so.11 with link time reference"),
    ("nvml-binding-newer-than-driver", "AttributeError: /usr/lib/nvidia-430/libnvidia-ml.so.1: undefined symbol: "
     "nvmlDeviceGetComputeRunningProcesses_v2"),
    ("mps-ndarray-size-limit", "RuntimeError: MPSGaph does not support tensor dims larger than INT_MAX"),
    ("nccl-peer-connection-closed", "server1:6601:6625 [0] include/socket.h:385 NCCL WARN Net : Connection closed by remote peer"),
    ("tensorrt-out-of-memory", "[E] [TRT] ../rtSafe/safeRuntime.cpp (25) - Cuda Error in allocate: 2 (out of memory)"),
    ("onnxruntime-arena-oom", "Non-zero status code returned while running ReduceSum node. onnxruntime::BFCArena::"
     "AllocateRawInternal Failed to allocate memory for requested buffer of size 939524096"),
    ("caffe-curand-generator-unavailable", "E0706 15:34:09.373869 10996 common.cpp:126] Cannot create Curand generator. "
     "Curand won't be available."),
    ("ptxas-older-than-ptx", "ptxas add_kernel.ptx, line 5; fatal   : Unsupported .version 8.4; current version is '7.8'"),
    ("bf16-needs-ampere", "ptxas /tmp/compile-ptx-src-38da7f, line 91; error   : Feature '.bf16' requires .target sm_80 or higher"),
    ("cudnn-version-mismatch", "Could not load library cudnn_cnn_infer64_8.dll. Error code 127"),
    ("slurm-gres-type-not-matching-device", "gres/gpu: _normalize_sys_gres_types: Could not find an unused configuration "
     "record with a GRES type that is a substring of system device `nvidia_a100-sxm4-40gb`. Setting system GRES type to NULL"),
    ("container-cli-nvml-not-loaded", "nvidia-container-cli: initialization error: cannot open shared object file: no such "
     "file or directory: unknown."),
    ("k8s-device-plugin-no-nvml", "E0402 22:17:31.198643       1 factory.go:112] Incompatible strategy detected auto"),
    ("cudnn-no-engine", "RuntimeError: GET was unable to find an engine to execute this computation"),
    ("gpu-memory-exhausted", "tensorflow.python.framework.errors_impl.InternalError: Dst tensor is not initialized."),
    ("gsp-heartbeat-timeout", "NVRM: Timeout waiting for RPC from GSP0! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4)."),
    ("podman-too-old-for-cdi", "Error: stat nvidia.com/gpu=0: no such file or directory"),
    ("fabric-manager-failed-to-start", "Job for nvidia-fabricmanager.service failed because the control process exited "
     "with error code."),
    ("slurm-node-configuration-unavailable", "sbatch: error: Batch job submission failed: Requested node configuration "
     "is not available"),
    ("tensorflow-gpu-not-found", "ERROR: No matching distribution found for tensorflow-gpu"),
    ("tensorflow-gpu-package-removed", "ERROR: No matching distribution found for tensorflow-gpu==2.12.0"),
    ("vllm-kv-cache-no-memory", "ValueError: No available memory for the cache blocks. Try increasing "
     "`gpu_memory_utilization` when initializing the engine."),
    ("slurm-gres-device-file-missing", "[2020-10-08T13:33:42.999] error: gres_device_major: stat(/dev/nvidia0): No such "
     "file or directory"),
    ("kernel-module-not-built-for-running-kernel", "modprobe: ERROR: ../libkmod/libkmod-module.c:838 "
     "kmod_module_insert_module() could not find module by name='nvidia'"),
    ("miopen-find-not-executed", "MIOpen Error: /long_pathname/src/ocl/convolutionocl.cpp:500: No invoker was registered "
     "for convolution forward. Was find executed?"),
    ("opencv-dnn-cpu-build", "[ WARN:0] global ./modules/dnn/src/dnn.cpp (1447) setUpNet DNN module was not built with "
     "CUDA backend; switching to CPU"),
    ("rocm-no-gpu-visible", "rocBLAS error: Could not initialize Tensile host: No devices found"),
    ("llamacpp-no-gpu-backend", "AVX = 1 | AVX2 = 1 | AVX512 = 0 | FMA = 1 | NEON = 0 | BLAS = 0 | SSE3 = 1 | VSX = 0 |"),
    ("bf16-needs-ampere", "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmStridedBatchedEx("
     "handle, opa, opb, (int)m, (int)n, (int)k, (void*)&falpha, a, CUDA_R_16BF, (int)lda, stridea, b, CUDA_R_16BF)`"),
    ("xla-out-of-memory", "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for "
     "2.99GiB (3206250496B) on device ordinal 0"),
    ("cuda-out-of-memory", "cupy.cuda.memory.OutOfMemoryError: out of memory to allocate 250092544 bytes (total "
     "10824923136 bytes)"),
    ("cuda-out-of-memory", "[TRT] [E] 2: [globWriter.cpp::HybridGlobWriter::193] Error Code 2: OutOfMemory (no further "
     "information)"),
    ("tf-cudart-not-loaded", "I0000 00:00:1712345678.929972  450463 cudart_stub.cc:31] Could not find cuda drivers on "
     "your machine, GPU will not be used."),
    ("kernel-module-unknown-symbol", "insmod: ERROR: could not insert module nvidia.ko: Unknown symbol in module"),
    ("cuda-library-not-found", "W dso_loader.cc:64] Could not load dynamic library 'libcusparse.so.12'; dlerror: libcusparse.so.12: cannot open shared object file"),
    ("gpu-xid-error", "kernel: NVRM: Xid (PCI:0000:3b:00): 999, unknown to the catalogue"),
    ("cudnn-status-error", "RuntimeError: CUDNN_STATUS_RUNTIME_SOMETHING_NEW"),
    ("ptx-newer-than-driver", "RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain."),
    ("cuda-after-fork", "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method"),
    ("cuda-malloc-async-unsupported", "jaxlib/gpu/solver.cc:50: CUDA operation cudaMallocAsync(&buf, n, stream) failed: operation not supported"),
    ("hip-oom", "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 24 GiB"),
    ("rocm-gfx-arch-not-in-build", "rocBLAS warning: hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"),
    ("hsa-out-of-resources", ":0:rocdevice.cpp:2881: HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources."),
    ("hsa-error", "Call returned HSA_STATUS_ERROR_INVALID_WAVEFRONT"),
    # an ISA the code object does not match: a build without this GPU's gfx target
    ("rocm-gfx-arch-not-in-build", ":0:rocdevice.cpp            :3018: 128688649210d us:  Callback: Queue 0x7f7f4d000000 aborting with error : HSA_STATUS_ERROR_INVALID_ISA: The instruction set architecture is invalid. code: 0x100f"),
    ("rocm-gfx-arch-not-in-build", "RuntimeError: HIP error: no kernel image is available for execution on the device"),
    ("rocblas-tensile-missing-for-arch", "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file or directory for GPU arch : gfx1036"),
    ("miopen-unknown-error", "RuntimeError: miopenStatusUnknownError"),
    ("miopen-kernel-build-failed", "MIOpen Error: /long/path/hipoc_program.cpp:304: Code object build failed. Source: naive_conv.cpp"),
    ("miopen-conv-incorrect-params", "MIOpen(HIP): Error [FindConvFwdAlgorithm] miopenStatusBadParm"),
    ("cublas-invalid-value", " ** On entry to SGEMM  parameter number 10 had an illegal value"),
    ("nvml-device-handle-unknown-error", "Unable to determine the device handle for GPU 0000:41:00.0: Unknown Error"),
    ("gpu-reset-required", "NVRM: GPU0 nvAssertFailedNoLog: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062)"),
    ("nccl-duplicate-gpu", "node:1:2 [0] init.cc:842 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 17000"),
    ("nccl-peer-connection-closed", "node:1:2 [0] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer 10.0.0.2<39810>"),
    ("nccl-ibverbs-not-found", "node:1:2 [0] misc/ibvwrap.cc:66 NCCL WARN Failed to open libibverbs.so[.1]"),
    ("nccl-no-socket-interface", "node:1:2 [0] bootstrap.cc:41 NCCL WARN Bootstrap : no socket interface found"),
    ("nccl-socket-ifname-not-found", "node:1:2 [0] NCCL WARN no device found matching =ens5, verify NCCL_OOB_NET_IFNAME"),
    ("nccl-remote-error", "[rank0]: NET/OFI Request 0x7f00 completed with error. RC: 5. Error: 107 (EP_FAILED). Completed length: 0"),
    ("extension-built-for-other-torch", "ImportError: /site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"),
    ("library-mmap-failed", "OSError: /mnt/noexec/libcudnn_cnn.so.9: failed to map segment from shared object"),
    ("kernel-module-not-built-for-running-kernel", "modprobe: FATAL: Module nvidia-current not found."),
    ("secure-boot-module-rejected", "modprobe: ERROR: could not insert 'nvidia_drm': Key was rejected by service"),
    ("no-nvidia-gpu-present", "NVRM: No NVIDIA graphics adapter found!"),
    ("gpu-needs-legacy-driver", "NVRM: The NVIDIA Quadro K2000 GPU installed in this system is"),
    ("rminitadapter-failed", "NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x25:0xffff:1601)"),
    ("gsp-firmware-init-failed", "NVRM: RmInitAdapter: Cannot initialize GSP firmware RM"),
    ("gsp-heartbeat-timeout", "NVRM: _kgspRpcRecvPoll: GSP RM heartbeat timed out"),
    ("cdi-spec-missing", "Error: crun: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=0"),
    ("wsl-no-gpu-adapter", "nvidia-container-cli: initialization error: WSL environment detected but no adapters were found: unknown."),
    ("container-driver-rpc-failed", "stderr: nvidia-container-cli: initialization error: driver rpc error: timed out: unknown."),
    ("container-image-contains-driver-files", "nvidia-container-cli: mount error: file creation failed: /var/lib/docker/overlay2/ab/merged/usr/bin/nvidia-smi: file exists"),
    ("container-persistenced-socket-conflict", "nvidia-container-cli: mount error: file creation failed: /merged/run/nvidia-persistenced/socket: no such device or address"),
    ("container-toolkit-outdated", "nvidia-container-cli: mount error: stat failed: /usr/lib/firmware/nvidia/550.54.14/gsp.bin: no such file or directory"),
    ("mig-compute-mode-unsupported", "Setting compute mode to EXCLUSIVE_PROCESS is not supported on a MIG enabled GPU"),
    ("slurm-gres-request-missing", "sbatch: error: You must request at least one GPU on the gpu partition"),
    ("k8s-device-plugin-unavailable", "Allocate failed due to rpc error: code = Unavailable desc = connection error, which is unexpected"),
    ("k8s-device-plugin-gpu-id-mismatch", "Allocate failed due to rpc error: code = Unknown desc = invalid allocation request for 'nvidia.com/gpu': unknown device: GPU-1234, which is unexpected"),
    ("triton-shared-memory-exceeded", "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, Hardware limit: 101376."),
    ("nvcc-arch-unsupported", "nvcc fatal   : Unsupported gpu architecture 'compute_120'"),
    ("bitsandbytes-cpu-library", "UserWarning: The installed version of bitsandbytes was compiled without GPU support."),
    ("paddle-cpu-build", "Cannot use GPU because you have installed CPU version PaddlePaddle."),
    ("llamacpp-cpu-build", "warning: not compiled with GPU offload support, --n-gpu-layers option will be ignored"),
    ("ctranslate2-cpu-build", "ValueError: This CTranslate2 package was not compiled with CUDA support"),
    ("onnxruntime-cpu-build", "UserWarning: Specified provider 'CUDAExecutionProvider' is not in available provider names.Available providers: 'CPUExecutionProvider'"),
    ("mps-out-of-memory", "RuntimeError: MPS backend out of memory (MPS allocated: 1.2 GB, other allocations: 3 MB, max allowed: 1.4 GB)."),
    ("mps-float64-unsupported", "TypeError: Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64."),
    ("mps-op-not-implemented", "NotImplementedError: The operator 'aten::upsample_bicubic2d.out' is not currently implemented for the MPS device."),
    ("mps-op-needs-newer-macos", "RuntimeError: MPS does not support cumprod op with int64 input"),
    ("mps-tensor-on-cpu", "RuntimeError: Placeholder storage has not been allocated on MPS device!"),
    ("mps-ndarray-size-limit", "MPSNDArray.mm:788: failed assertion `[MPSNDArray initWithDevice:descriptor:] Error: total bytes of NDArray > 2**32'"),
    ("pip-no-wheel-for-python", "ERROR: No matching distribution found for jaxlib==0.1.69"),
    ("pip-gpu-wheel-not-found", "ERROR: No matching distribution found for torch==2.0.1+cu117"),
    ("nvidia-pip-wheel-platform", "ERROR: Could not find a version that satisfies the requirement nvidia-cublas-cu12 (from versions: none)"),
    ("conda-cudatoolkit-conflict", "  - pytorch==1.12.1 -> cudatoolkit[version='>=11.6,<11.7']"),
    ("conda-python-incompatible", "  - torchaudio -> python[version='>=3.8,<3.9.0a0']"),
    ("uv-resolution-conflict", "  × No solution found when resolving dependencies for split (python_full_version >= '3.12'):"),
    ("wheel-platform-mismatch", "ERROR: torch-2.1.0-cp311-cp311-win_amd64.whl is not a supported wheel on this platform."),
    ("nvml-smi-library-version-mismatch", "Mismatch in versions between nvidia-smi and NVML."),
    ("nvml-insufficient-resources", "Unable to create a GPU instance on GPU 0 using profile 9: Insufficient Resources"),
    ("slurm-gres-conf-syntax", "slurmd: fatal: Invalid GRES record for gpu, count does not match File value"),
    ("slurm-gres-count-mismatch", "Reason=gres/gpu count too low (0 < 4) [slurm@2026-01-01T00:00:00]"),
    ("cublas-internal-error", "RuntimeError: CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasCreate(handle)`"),
    ("cuda-out-of-memory", "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 4,194,304 bytes (allocated so far: 0 bytes)."),
    ("cudnn-execution-failed", "tensorflow.python.framework.errors_impl.InternalError: cuDNN launch failure : input shape ([1,64,64,3])"),
    # from the tools' sources (issue 29 point 2): PyTorch's MPS backend
    ("mps-not-built", "RuntimeError: PyTorch code is not compiled with MPS enabled"),
    ("mps-not-built", "MPS not available because the current PyTorch install was not built with MPS enabled."),
    ("mps-unavailable", "RuntimeError: The MPS backend is supported on MacOS 14.0+. Current OS version can be queried using `sw_vers`"),
    ("mps-unavailable", "RuntimeError: The MPS backend is supported on MacOS 12.3+.Current OS version can be queried using `sw_vers`"),
    ("mps-unavailable", "MPS not available because the current MacOS version is not 12.3+ and/or you do not have an MPS-enabled device on this machine."),
    ("mps-op-cpu-fallback", "UserWarning: The operator 'aten::nonzero' is not currently supported on the MPS backend and will fall back to run on the CPU. This may have performance implications. (Triggered internally at /Users/runner/work/_temp/anaconda/conda-bld/pytorch_1662016319283/work/aten/src/ATen/mps/MPSFallback.mm:11.)"),
    # PyTorch's device and dtype checks
    ("torch-input-weight-device-mismatch", "RuntimeError: Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same or input should be a MKLDNN tensor and weight is a dense tensor"),
    ("torch-input-weight-device-mismatch", "RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same"),
    ("mps-tensor-on-cpu", "RuntimeError: Input type (MPSFloatType) and weight type (torch.FloatTensor) should be the same"),
    ("torch-input-weight-device-mismatch", "Torch(\"Input type (CPUFloatType) and weight type (CUDAFloatType) should be the same or input should be a MKLDNN tensor and weight is a dense tensor"),
    ("torch-input-weight-dtype-mismatch", "RuntimeError: Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be the same"),
    ("torch-input-weight-dtype-mismatch", "RuntimeError: Input type (torch.DoubleTensor) and bias type (torch.FloatTensor) should be the same"),
    ("torch-input-weight-dtype-mismatch", "RuntimeError: Input type (CUDABFloat16Type) and weight type (CUDAFloatType) should be the same"),
    ("torch-tensors-on-different-devices", "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! (when checking argument for argument mat1 in method wrapper_addmm)"),
    ("torch-tensors-on-different-devices", "RuntimeError: Expected all tensors to be on the same device, but got index is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA__index_select)"),
    ("torch-tensors-on-different-devices", "RuntimeError: Expected object of device type cuda but got device type cpu for argument #1 'self' in call to _th_index_select"),
    ("torch-tensors-on-different-devices", "RuntimeError: Expected object of backend CUDA but got backend CPU for argument #2 'weight'"),
    ("torch-load-cuda-checkpoint-without-cuda", "RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False. If you are running on a CPU-only machine, please use torch.load with map_location=torch.device('cpu') to map your storages to the CPU."),
    ("torch-load-device-index-out-of-range", "RuntimeError: Attempting to deserialize object on CUDA device 2 but torch.cuda.device_count() is 1. Please use torch.load with map_location to map your storages to an existing device."),
    ("bf16-needs-ampere", "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly setting the`dtype` flag in CLI, for example: --dtype=half."),
    ("bf16-needs-ampere", "RuntimeError: Current CUDA Device does not support bfloat16. Please switch dtype to float16."),
    ("transformers-bf16-unsupported-setup", "ValueError: Your setup doesn't support bf16/gpu."),
    # installers' resolution wordings
    ("pip-gpu-wheel-not-found", "ERROR: Could not find a version that satisfies the requirement jaxlib==0.4.7+cuda11.cudnn82 (from versions: 0.4.7)"),
    ("pip-gpu-wheel-not-found", "ERROR: No matching distribution found for jaxlib==0.4.20+cuda12.cudnn89"),
    ("pip-gpu-wheel-not-found", "ERROR: No matching distribution found for torch==2.2.0+rocm5.7"),
    ("pip-gpu-wheel-not-found", "  ╰─▶ Because there is no version of torch==2.1.0+cu118 and you require torch==2.1.0+cu118, we can conclude that your requirements are unsatisfiable."),
    ("pip-no-wheel-for-python", "ERROR: Could not find a version that satisfies the requirement torch (from versions: none)"),
    ("pip-no-wheel-for-python", "hint: You're on macOS (`macosx_14_0_arm64`), but `torch` (v2.5.1) only has wheels for the following platform: `manylinux1_x86_64`"),
    ("pip-no-wheel-for-python", "error: Distribution `torch==2.6.0 @ registry+https://download.pytorch.org/whl/cpu` can't be installed because it doesn't have a source distribution or wheel for the current platform"),
    ("conda-cuda-virtual-package-missing", "  - nothing provides __cuda needed by pytorch-2.1.0-py3.10_cuda12.1_cudnn8.9.2_0"),
    ("conda-cuda-virtual-package-missing", "            └─ __cuda >=11.8 , which is missing on the system."),
    ("conda-packages-not-found", "PackagesNotFoundError: The following packages are not available from current channels:"),
    ("conda-resolution-conflict", "UnsatisfiableError: The following specifications were found to be incompatible with each other:"),
    ("conda-resolution-conflict", "The following packages are incompatible"),
    # the CPU-only-build family
    ("bitsandbytes-cpu-library", "WARNING:bitsandbytes.cextension:Could not find the bitsandbytes CUDA binary at PosixPath('/usr/local/lib/python3.12/dist-packages/bitsandbytes/libbitsandbytes_cuda128.so')"),
    ("paddle-cpu-build", "Cannot use GPU because you have installed CPU version of PaddlePaddle."),
    ("llamacpp-deprecated-build-option", "  LLAMA_CUBLAS is deprecated and will be removed in the future."),
    # the development collections' wordings of causes the code's own meaning does not name
    ("trt-freed-after-context-destroyed", "[06/13/2022-14:32:23] [TRT] [E] 1: [defaultAllocator.cpp::deallocate::35] Error Code 1: Cuda Runtime (invalid argument)"),
    ("cuda-launch-config-invalid", "numba.cuda.cudadrv.driver.CudaAPIError: Call to cuLaunchKernel results in CUDA_ERROR_INVALID_VALUE"),
    ("cuda-launch-config-invalid", "pycuda._driver.LogicError: cuFuncSetBlockShape failed: invalid argument"),
    ("nccl-nvls-multicast-failed", "node23:12098:12141 [2] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'"),
    ("nccl-nvls-multicast-failed", "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the operation cannot be performed in the present state'."),
    ("nccl-ib-device-open-failed", "65826-86bd789679-2dxbs:80746:80746 [3] transport/net_ib.cc:149 NCCL WARN NET/IB : Unable to open device mlx5_59"),
    ("nccl-socket-ifname-not-found", "[trainer0|0]:ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)"),
    ("nccl-no-socket-interface", "e66aa18dc444:3171:3171 [0] include/socket.h:311 WARN Socket creation failed : Address family not supported by protocol"),
    ("glibc-too-old-for-library", " W tensorflow/stream_executor/platform/default/dso_loader.cc:55] Could not load dynamic library 'libnvinfer.so.6'; dlerror: /lib/x86_64-linux-gnu/libm.so.6: version `GLIBC_2.27' not found (required by /usr/lib/libnvinfer.so.6)"),
    ("container-toolkit-cgroup-v2-unsupported", "docker: Error response from daemon: OCI runtime create failed: container_linux.go:370: starting container process caused: process_linux.go:459: container init caused: Running hook #0:: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: container error: cgroup subsystem devices not found: unknown."),
    ("slurm-invalid-gres-request", "sbatch: error: Gres format wrong, specify --gres=gpu:TYPE:NUM"),
    ("slurm-gres-request-missing", "sbatch: error: Cannot find GPU specification, you may not submit a job not requesting GPUs in a GPU partition, partition: gpu"),
    ("slurm-gres-type-required", "submitit.core.utils.FailedJobError: sbatch: error: You must always specify a type when requesting gpu GRES sbatch: error: Batch job submission failed: Unspecified error"),
    ("slurm-site-rejects-gres-syntax", "submitit.core.utils.FailedJobError: sbatch: error: Parameter --gres=gpu:1 no longer acceptable, please switch to --gpus=1"),
    ("slurm-step-gres-type-mismatch", "srun: error: Step requested GRES (gpu:(null)) not found in the job"),
    ("no-cuda-device", "W0324 15:29:02.249459  3747 init.cc:182] Compiled with WITH_GPU, but no GPU found in runtime."),
    ("no-cuda-device", "ggml_init_cublas: no CUDA devices found, CUDA will be disabled"),
    ("cuda-after-fork", '"cannot re-initialize cuda in forked subprocess. " + msg)'),
    ("paddle-cpu-build", "2020-09-08 09:14:59 ERROR: You are using paddlepaddle cpu version! Please try to install paddlepaddle-gpu to run model on GPU."),
    ("onnxruntime-cpu-build", "CUDAExecutionProvider not available \u2014 ONNX will fall back to CPU."),
    ("rocm-no-gpu-visible", "There is no device can be used to do the computation"),
    ("gsp-heartbeat-timeout", "[   24.302465] NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 heartbeat 1899482 heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200"),
    ("no-nvidia-gpu-present", "FATAL: Error inserting nvidia_current (/lib/modules/2.6.35-30-generic/updates/dkms/nvidia-current.ko): No such device"),
    ("k8s-device-plugin-gpu-id-mismatch", "Warning  UnexpectedAdmissionError  79s   kubelet  Allocate failed due to rpc error: code = Unknown desc = failed to find gpu id, which is unexpected"),
    ("nccl-memlock-limit-too-low", "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory"),
    ("nccl-memlock-limit-too-low", "machine [0] misc/ibvwrap.cu:269 WARN Call to ibv_create_qp failed"),
    ("nccl-dmabuf-unsupported", "misc/ibvwrap.cc:288 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Operation not supported"),
    ("pinned-host-alloc-failed", "dalle-backend    | 2022-06-19 16:51:08.394675: E external/org_tensorflow/tensorflow/stream_executor/cuda/cuda_driver.cc:802] failed to alloc 245638656 bytes on host: CUDA_ERROR_OUT_OF_MEMORY: out of memory"),
    ("nvrtc-builtins-not-found", "nvrtc: error: failed to open libnvrtc-builtins.so.11.6"),
    ("nvrtc-builtins-not-found", "Exception: Error compiling program: nvrtc: error: failed to load builtins"),
    ("pip-resolution-conflict", "ERROR: Cannot install -r requirements.txt (line 8) and torch==2.5.0 because these package versions have conflicting dependencies."),
    ("pip-resolution-conflict", "torchvision 0.18.1+cu121 requires torch==2.3.1, but you have torch 2.3.0 which is incompatible."),
    ("uv-first-index-strategy", "  ╰─▶ Because there is no version of nvidia-cudnn-cu12{platform_machine == 'x86_64' and sys_platform == 'linux'}==9.1.0.70 and torch==2.4.1 depends on nvidia-cudnn-cu12{platform_machine == 'x86_64' and sys_platform == 'linux'}==9.1.0.70, we can conclude that torch==2.4.1 cannot be used."),
    ("conda-cuda-driver-too-old", "Output in format: Requested package -> Available versionsThe following specifications were found to be incompatible with your CUDA driver:"),
    ("mps-float64-unsupported", "TypeError: Trying to convert ComplexDouble to the MPS backend but it does not have support for that dtype."),
    ("mps-dtype-unsupported", "Trying to convert Float8_e4m3fn to the MPS backend but it does not have support for that dtype."),
    ("mps-not-built", "RuntimeError: PyTorch is not linked with support for mps devices"),
    ("mps-op-not-implemented", "RuntimeError: Conv3D is not supported on MPS"),
    ("lightgbm-cpu-build", "LightGBMError: b'GPU Tree Learner was not enabled in this build. Recompile with CMake option -DUSE_GPU=1'"),
    ("mmcv-cpu-build", "RuntimeError: nms_impl: implementation for device cuda:0 not found."),
    ("extension-built-without-cuda", "RuntimeError: Not compiled with CUDA support"),
    ("extension-built-for-other-torch", "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:"),
    ("tensorrt-engine-built-for-other-gpu", "[TensorRT] ERROR: INVALID_CONFIG: The engine plan file is generated on an incompatible device, expecting compute 6.1 got compute 7.5, please rebuild."),
    ("tensorrt-engine-version-mismatch", "6: The engine plan file is not compatible with this version of TensorRT, expecting library version 8.0.0 got 8.0.1, please rebuild."),
    ("flash-attn-needs-ampere", "RuntimeError: FlashAttention only supports Ampere GPUs or newer."),
    ("vllm-max-len-exceeds-kv-cache", "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (7344). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."),
    ("sglang-kv-pool-no-memory", "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."),
    ("paddle-gpu-oom", "Out of memory error on GPU 0. Cannot allocate 6.933594GB memory on GPU 0, available memory is only 726.750000MB."),
    ("paddle-gpu-oom", "paddle.fluid.core.EnforceNotMet: enforce allocating <= available failed, 7433255387 > 366608128"),
    ("ctranslate2-float16-unsupported-device", "ValueError: Requested float16 compute type, but the target device or backend do not support efficient float16 computation."),
    ("nvenc-driver-too-old", "[hevc_nvenc @ 000001f2768adcc0] Driver does not support the required nvenc API version. Required: 12.2 Found: 12.1"),
    ("nvenc-driver-too-old", "[h264_nvenc @ 0x7ff3e9b83c00] The minimum required Nvidia driver for nvenc is 418.30 or newer"),
    ("nvenc-session-limit", "[h264_nvenc @ 0x46d8300] OpenEncodeSessionEx failed: out of memory (10): (no details)"),
    ("nvcc-arch-unsupported", "     Value 'sm_75' is not defined for option 'gpu-architecture'"),
    ("nvcc-arch-unsupported", "NVRTC compilation error: nvrtc: error: invalid value for --gpu-architecture (-arch)"),
    ("nvml-library-missing", "FATAL ERROR: NVIDIA Management Library (NVML) not found."),
    ("ray-get-gpu-ids-in-driver", "2021-08-31 20:54:35,598\tWARNING worker.py:498 -- `ray.get_gpu_ids()` will always return the empty list when called from the driver. This is because Ray does not manage GPU allocations to the driver process."),
    ("nvidia-installer-module-load-failed", "ERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most frequently when this kernel module was built against the wrong or improperly configured kernel sources, with a version of gcc that differs from the one used to build the target kernel"),
    ("container-cli-nvml-unknown-error", "nvidia-container-cli: detection error: nvml error: unknown error: unknown"),
    # loader wordings: the library that is missing is the one the loader names last
    ("cuda-library-not-found", "OSError: libcusparse.so.10"),
    ("tensorrt-library-not-found", "[cuda_trt_wrapper]: Load libnvinfer.so failed - libmyelin.so.1: cannot open shared object file: No such file or directory."),
    ("libcuda-missing-in-container", "I tensorflow/stream_executor/dso_loader.cc:105] Couldn't open CUDA library libcuda.so.1. LD_LIBRARY_PATH: /usr/local/nvidia/lib:/usr/local/nvidia/lib64:"),
    ("cudnn-library-not-found", "Uncaught exception detected: Unable to open library: libnvinfer_plugin.so.8 due to libcudnn.so.8"),
    ("cuda-library-not-found", "2021-09-13 03:30:26.137816: W external/org_tensorflow/tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic library 'libnvinfer.so.7'; dlerror: libnvrtc.so.11.1: cannot open shared object file: No such file or directory"),
    # catch-alls that list the causes: a Slurm GPU request refused in words of the site's own, and
    # 'invalid device function' with no sign of whether CUDA or HIP printed it
    ("slurm-gpu-request-refused", "sbatch: error: No gpu count given, specify --gres=gpu"),
    ("invalid-device-function", "KERNEL_ERROR: invalid device function in /home/ubuntu/relion2-beta/src/gpu_utils/cuda_ml_optimiser.cu at line 258 (error-code 8)"),
    ("cuda-library-not-found", "[W 06/27/23 16:06:43.025 113508] [cuda_driver.cpp:taichi::lang::CUDADriverBase::load_lib@36] cusparse64_12.dll lib not found."),
    ("cuda-runtime-library-not-found", "ai.djl.util.cuda.CudaUtils               : cudart library not found."),
    ("mps-bfloat16-needs-macos-14", "ERROR: BFloat16 is not supported on MPS"),
    ("mps-bfloat16-needs-macos-14", "TypeError: Trying to convert BFloat16 to the MPS backend but it does not have support for that dtype."),
    ("mxnet-cpu-build", "[16:24:29] /tmp/build/80754af9/libmxnet_1564766659613/work/src/storage/storage.cc:119: Compile with USE_CUDA=1 to enable GPU usage"),
    ("mxnet-cpu-build", "mxnet.base.MXNetError: [16:53:11] src/storage/storage.cc:43: Please compile with CUDA enabled"),
    ("catboost-gpu-library-not-loaded", "CatboostError: catboost/libs/train_lib/train_model.cpp:800: Can't load GPU learning library. Module was not compiled or CUDA version/driver  is incompatible with package"),
    ("mxnet-gpu-oom", "src/storage/./pooled_storage_manager.h:157: cudaMalloc failed: out of memory"),
    ("no-kernel-image", "W1125 07:37:50.996143   570 gpu_resources.cc:96] The GPU architecture in your current machine is Pascal, which is not compatible with Paddle installation with arch: 61 70 75 80 86 90 , it is recommended to install the corresponding wheel package"),
    ("xla-out-of-memory", "E1122 00:10:47.231964  290312 pjrt_stream_executor_client.cc:3077] Execution of replica 0 failed: RESOURCE_EXHAUSTED: Failed to load in-memory CUBIN (compiled for a different GPU?).: CUDA_ERROR_OUT_OF_MEMORY: out of memory"),
    ("gpu-too-old-for-build", "RuntimeError: GPUs with compute capability below 7.0 are not supported."),
    ("onnxruntime-arena-oom", "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running FusedMatMul node. Name:'MatMul_92_FusedMatMulAndScale' Status Message: /onnxruntime_src/onnxruntime/core/framework/bfc_arena.cc:331"),
    ("rocm-no-gpu-visible", "/home/rocm-user/.local/lib/python3.8/site-packages/torch/cuda/__init__.py:88: UserWarning: HIP initialization: Unexpected error from hipGetDeviceCount(). Did you run some cuda functions before calling NumHipDevices() that might have already set an error?"),
    ("hip-invalid-device", "error: 'hipErrorInvalidDevice'(1010) at square.cpp:60"),
    ("cuda-insufficient-driver", "ERROR: Cuda initialization failure with error 35. Please check cuda installation:  http://docs.nvidia.com/cuda/cuda-installation-guide-linux/index.html."),
    ("pinned-host-alloc-failed", "pycuda._driver.LogicError: cuMemHostAlloc failed: OS call failed or operation not supported on this OS"),
    ("pinned-host-alloc-failed", "WARNING: failed to allocate 1024.00 MB of pinned memory: out of memory"),
    ("rocblas-tensile-missing-for-arch", "Error: TensileLibrary.dat not found"),
    ("hsa-memory-access-fault", "Memory access fault by GPU node-2 on address (nil). Reason: unknown"),
    ("gpu-reset-required", "[   84.810006] NVRM: _kgspBootGspRm: unexpected WPR2 already up, cannot proceed with booting GSP"),
    ("nvenc-unsupported-gpu", "[h264_nvenc @ 0x55d754c3ce80] OpenEncodeSessionEx failed: unsupported device (2): (no details)"),
    ("cuda-insufficient-driver", 'time=2024-09-03T16:36:00.853+08:00 level=DEBUG source=gpu.go:537 msg="Unable to load cudart" library=C:\\Users\\asus\\AppData\\Local\\Programs\\Ollama\\lib\\ollama\\cudart64_12.dll error="your nvidia driver is too old or missing.'),
    ("opencv-dnn-cpu-build", "cv2.error: OpenCV(4.4.0) C:\\Users\\appveyor\\AppData\\Local\\Temp\\1\\pip-req-build-52oirelq\\opencv\\modules\\core\\include\\opencv2/core/private.cuda.hpp:106: error: (-216:No CUDA support) The library is compiled without CUDA support in function 'throw_no_cuda'"),
    ("torchvision-cpu-build", "NotImplementedError: Could not run 'torchvision::nms' with arguments from the 'CUDA' backend."),
    ("ptxas-too-old", "2023-09-26 23:49:25.317379: W external/xla/xla/stream_executor/gpu/asm_compiler.cc:231] Falling back to the CUDA driver for PTX compilation; ptxas does not support CC 9.0"),
    ("ptxas-older-than-ptx", "2021-05-20 10:09:06.617783: E external/org_tensorflow/tensorflow/stream_executor/gpu/asm_compiler.cc:93] You are using ptxas 8.x, but TF requires ptxas 9.x (and strongly prefers >= 9.2.88).  Compilation of XLA kernels below will likely fail."),
    ("optix-driver-too-old", "OPTIX_ERROR_UNSUPPORTED_ABI_VERSION (7801)"),
    ("optix-driver-too-old", "Optix call (optixInit()) failed with code 7801 (line 150)"),
    ("mps-out-of-memory", "error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"),
    ("caffe-cpu-build", "F0107 18:26:07.968050  3245 common.cpp:66] Cannot use GPU in CPU-only Caffe: check mode."),
    ("cuda-compiler-missing", "ERROR (theano.sandbox.cuda): nvcc compiler not found on $PATH. Check your nvcc installation and try again."),
    ("cufft-alloc-failed", "Exception: Error initializing FFT: 2"),
    ("cuda-illegal-address", " Exception: Error invoking kernel: Invalid error code (700)"),
    ("onnxruntime-cuda-provider-failed", "[W:onnxruntime:Default, onnxruntime_pybind_state.cc:1139] Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 13.*"),
]

WRAPPERS = [  # (tool, line, the code recognised inside)
    ("TensorFlow", "F tensorflow/stream_executor/cuda/cuda_driver.cc:175] Check failed: err == cudaSuccess || err == cudaErrorInvalidValue Unexpected CUDA error: invalid device ordinal", "invalid device ordinal"),
    ("PyTorch", "torch.AcceleratorError: CUDA error: misaligned address", "misaligned address"),
    ("JAX/XLA", "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to launch CUDA kernel: CUDA_ERROR_LAUNCH_TIMEOUT: the launch timed out and was terminated", "CUDA_ERROR_LAUNCH_TIMEOUT"),
    ("Triton", "triton.runtime.driver: RuntimeError: Triton Error [CUDA]: device-side assert triggered", "device-side assert triggered"),
    ("bitsandbytes", "Error invalid device function at line 90 in file /src/csrc/ops.cu, CUDA error: invalid device function", "invalid device function"),
    ("CTranslate2", "RuntimeError: CUDA failed with error unspecified launch failure", "unspecified launch failure"),
    ("llama.cpp/ggml", "ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected", "no CUDA-capable device is detected"),
    ("cupy", "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorNoKernelImageForDevice: no kernel image is available for execution on the device", "cudaErrorNoKernelImageForDevice"),
    ("TensorRT", "[TRT] [E] 1: [defaultAllocator.cpp::allocate::20] Error Code 1: Cuda Runtime (out of memory)", "out of memory"),
    ("nvcc/ptxas", "ptxas fatal   : Value 'sm_120' is not defined for option 'gpu-name'", None),
]


@pytest.mark.parametrize("expected, line", WORDINGS, ids=[w[0] for w in WORDINGS])
def test_each_documented_wording_is_its_cause(expected, line):
    found = _one(line)
    assert found.id == expected, (line, found.id)


@pytest.mark.parametrize("tool, line, inside", WRAPPERS, ids=[w[0] for w in WRAPPERS])
def test_framework_wrappers_are_recognised_by_the_code_inside(tool, line, inside):
    found = _one(line)
    if inside is not None:
        assert found.code is not None and inside.lower() in (
            (found.code["message"] or "") + " " + found.code["name"]).lower(), (tool, found.code)


def test_an_ambiguous_line_lists_the_causes_and_what_to_look_at_and_asserts_none():
    found = _one("RuntimeError: CUDA error: out of memory")
    assert found.ambiguous and len(found.possible_causes) >= 2 and "nvidia-smi" in found.look_at
    detailed = _one("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 7.79 GiB total capacity)")
    assert not detailed.ambiguous and detailed.id == "torch-cuda-out-of-memory"


@pytest.mark.parametrize("line, possible", [
    ("Check failed: err == CUDNN_STATUS_SUCCESS (1 vs. 0) CUDNN_STATUS_NOT_INITIALIZED",
     {"gpu-memory-exhausted", "cudnn-version-mismatch", "driver-too-old"}),
    ("XlaRuntimeError: FAILED_PRECONDITION: DNN library initialization failed",
     {"gpu-memory-exhausted", "cudnn-version-mismatch", "driver-too-old"}),
    ("cuInit(): forward compatibility was attempted on non supported HW", {"driver-library-mismatch"}),
    ("transport/nvls.cc:165 NCCL WARN Cuda failure 'invalid argument'", {"fabric-manager", "fabric-manager-gpu-reset-needed"}),
    ("CUDA driver version is insufficient for CUDA runtime version",
     {"driver-too-old", "container-started-without-gpus", "cuda-stub-library"}),
    ("cudamat.cudamat.CUDAMatException: CUDA error: no CUDA-capable device is detected",
     {"cuda-visible-devices-hides-gpus", "container-started-without-gpus", "nvidia-driver-not-loaded"}),
    ('"THCudaCheck FAIL file=/tmp/luarocks_cutorch-scm-1-6961/cutorch/lib/THC/generic/THCStorage.c line=147 error=4 : unspecified launch failure"',
     {"kernel-launch-timeout", "gpu-xid-error"}),
])
def test_a_code_the_line_cannot_settle_lists_the_causes_threads_found(line, possible):
    """Issue 29 point 3: cuDNN failing to initialise, CUDA's forward-compatibility error, NVLS
    failing, the runtime finding no usable driver or no device, and a kernel's unspecified launch
    failure are each settled in threads as more than one cause; the finding lists them."""
    found = _one(line)
    assert found.ambiguous and possible <= set(found.possible_ids) and found.look_at


def test_the_most_specific_entry_wins_and_the_others_are_not_printed():
    line = "E cuda_dnn.cc:334] Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR"
    found = _one(line)
    assert found.id == "cudnn-init-failed" and found.code["name"] == "CUDNN_STATUS_INTERNAL_ERROR"
    assert [f.id for f in diagnose("CUDA backend failed to initialize: Found cuDNN version 8600, but JAX was built against version 8906")] == ["cudnn-version-mismatch"]


def test_every_entry_id_is_a_known_kebab_name_and_every_generated_entry_names_its_source():
    for entry in catalogue():
        assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", entry.id), entry.id
        assert entry.links and all(link.startswith("https://") for link in entry.links), entry.id
        assert entry.rank in range(5) and entry.severity in ("error", "info")
        if entry.ambiguous:
            assert entry.possible_causes and entry.look_at, entry.id
            assert all(p in catalogue_by_id() for p in entry.possible_ids), entry.id
        if entry.refines:
            assert entry.refines in catalogue_by_id(), entry.id


@pytest.mark.parametrize("line, possible", [
    ("RuntimeError: NCCL error in: ../ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.14.3",
     {"nccl-shared-memory", "nccl-no-socket-interface", "nccl-ib-error"}),
    ("[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out. Due to the asynchronous "
     "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
     {"nccl-p2p-hang", "nccl-remote-error", "nccl-cuda-error"}),
])
def test_an_nccl_line_that_cannot_tell_which_failure_asserts_none(line, possible):
    """Issue 29 point 3: ncclSystemError is any failed system call (shared memory, a socket, IB),
    and PyTorch's "failed or timed out" is either; the line alone asserts no cause, the WARN
    line before it decides, and a line that names the failure still asserts it."""
    found = diagnose(line)[0]
    assert found.ambiguous and possible <= set(found.possible_ids) and "NCCL WARN" in found.look_at
    specific = diagnose("host:1:2 [0] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x "
                        "(size 9637888)")[0]
    assert specific.id == "nccl-shared-memory" and not specific.ambiguous


@pytest.mark.parametrize("line, expected, name", [
    # cuDNN's allocation failures, 8's name and 9's, are memory, not "failed inside"
    ("Check failed: e == CUDNN_STATUS_SUCCESS (2 vs. 0) cuDNN: CUDNN_STATUS_ALLOC_FAILED", "cudnn-alloc-failed",
     "CUDNN_STATUS_ALLOC_FAILED"),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED", "cudnn-alloc-failed",
     "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED"),
    # NVIDIA's Go bindings (the device plugin) when libnvidia-ml does not load
    ("2022/05/13 23:09:23 Failed to initialize NVML: could not load NVML library.", "nvml-library-missing",
     "NVML_ERROR_LIBRARY_NOT_FOUND"),
    # ncclGetErrorString before 2.15
    ("RuntimeError: NCCL error in: ../ProcessGroupNCCL.cpp:1207, invalid usage, NCCL version 2.10.3", "nccl-invalid-usage",
     "ncclInvalidUsage"),
    # glog's CHECK_EQ around a cuFFT / cuSOLVER call
    ("Check failed: (cufftPlan1d(&plan, n, CUFFT_C2C, 1)) == CUFFT_SUCCESS (2 vs. 0)", "cufft-alloc-failed",
     "CUFFT_ALLOC_FAILED"),
    ("Check failed: (cusolverDnCreate(&h)) == CUSOLVER_STATUS_SUCCESS (3 vs. 0)", "cusolver-invalid-value",
     "CUSOLVER_STATUS_INVALID_VALUE"),
    ("error: cublasLtMatmulAlgoGetHeuristic cuBLAS API failed with status 15", "cublas-not-supported",
     "CUBLAS_STATUS_NOT_SUPPORTED"),
    ("numba.cuda.cudadrv.driver.CudaAPIError: [716] Call to cuMemcpyDtoH results in UNKNOWN_CUDA_ERROR",
     "cuda-misaligned-address", "cudaErrorMisalignedAddress"),
    ("pycuda._driver.LogicError: cuMemcpyHtoDAsync failed: invalid argument", "cuda-invalid-value", "cudaErrorInvalidValue"),
    ("Failed to display compute instances: Insufficient Permissions", "nvml-insufficient-permissions",
     "NVML_ERROR_NO_PERMISSION"),
    # a runtime call's name, then its message
    ("  what():  cudaFree failed with: 4: driver shutting down", "cuda-cudart-unloading", "cudaErrorCudartUnloading"),
    ("cudaDeviceSynchronize() failed with error operation not permitted when stream is capturing",
     "cuda-stream-capture-unsupported", "cudaErrorStreamCaptureUnsupported"),
    # the Python bindings' exception classes (scikit-cuda, libcudnn) and a wrapper that prints the documented sentence
    ("scikits.cuda.cufft.cufftInvalidValue", "cufft-invalid-value", "CUFFT_INVALID_VALUE"),
    ("libcudnn.cudnnStatusArchMismatch", "cudnn-arch-mismatch", "CUDNN_STATUS_ARCH_MISMATCH"),
    ("Message=ErrorInvalidHandle: This indicates that a resource handle passed to the API call was not valid.",
     "cuda-invalid-handle", "CUDA_ERROR_INVALID_HANDLE"),
    ("thread 'main' panicked at 'Failed to initialize nvml: DriverNotLoaded', src/environment/mod.rs:37:31",
     "nvidia-driver-not-loaded", "NVML_ERROR_DRIVER_NOT_LOADED"),
    # a message HIP copied from CUDA: CUDA's code alone, HIP's after HIP's wrapper
    ("transport/p2p.cu:548 NCCL WARN failed to open CUDA IPC handle : 217 peer access is not supported between these "
     "two devices", "cuda-peer-access-unsupported", "cudaErrorPeerAccessUnsupported"),
    ("RuntimeError: HIP error: peer access is not supported between these two devices", "hip-peer-access-unsupported",
     "hipErrorPeerAccessUnsupported"),
    # TF-TRT's stub when libnvinfer did not load
    ("F tensorflow/compiler/tf2tensorrt/stub/nvinfer_stub.cc:49] getInferLibVersion symbol not found.",
     "tensorrt-not-found", None),
])
def test_more_of_the_tools_own_wordings_name_their_cause(line, expected, name):
    found = _one(line)
    assert found.id == expected and (found.code or {}).get("name") == name, (found.id, found.code)


def test_cli_json_names_the_code_and_an_ambiguous_finding_says_what_to_look_at(cli):
    result = cli("diagnose", "-", "--json", input="RuntimeError: cuda runtime error (30) : unknown error at x.c:1\n")
    [found] = result.json()["findings"]
    assert result.code == 1 and found["code"]["name"] == "cudaErrorUnknown" and found["code"]["number"] == 999
    assert found["ambiguous"] is True and found["possible_causes"] and found["look_at"]
    text = cli("diagnose", "-", input="RuntimeError: cuda runtime error (30) : unknown error at x.c:1\n").out
    assert "code: cudaErrorUnknown (999): unknown error" in text
    assert "could be:" in text and "look at:" in text


@pytest.mark.parametrize("line, local", [
    ("ERROR: No matching distribution found for torch==2.0.1+cu118", True),
    ("ERROR: No matching distribution found for jaxlib==0.4.7+cuda11.cudnn82", True),
    ("ERROR: No matching distribution found for torch==2.3.0+rocm6.0", True),
    ("ERROR: No matching distribution found for torch==2.1.0", False),
    ("ERROR: Could not find a version that satisfies the requirement torch==1.4.0 (from versions: 2.0.0)", False),
])
def test_a_local_version_of_any_form_is_the_local_version_case(line, local):
    """A +cuNNN / +rocmX / +cudaNN.cudnnNN local version is never on PyPI: the framework's index or
    a build missing for this Python; a plain version is not read as that case, but as no wheel for
    this Python or platform, or a pip too old to know the wheels' tag."""
    found = _one(line)
    assert found.ambiguous and (found.id == "pip-gpu-wheel-not-found") is local
    if local:
        assert "pip-local-version-needs-index" in found.possible_ids
    else:
        assert found.id == "pip-no-wheel-for-python" and "pip-too-old-for-wheel-tag" in found.possible_ids
