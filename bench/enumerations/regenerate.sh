#!/usr/bin/env bash
# Regenerate envcheck/data/enumerations/*.json from inputs fetched by hand (README.md in that
# folder says what each input is and where it came from). Nothing here downloads anything.
#
#   IN=/path/to/inputs bash bench/enumerations/regenerate.sh
#
# Expected layout under $IN (what the commit that added these files used):
#   cuda13/          the CUDA 13.0 toolkit from PyPI wheels (nvidia-cuda-runtime 13.0.96 ...):
#                    include/driver_types.h, include/cuda.h, lib/libcudart.so.13
#   wheels/          unzipped wheels: nvidia/cu13/{include,lib} (nvidia-cublas 13.10.0.20,
#                    nvidia-cufft 12.4.0.43, nvidia-cusolver 12.4.1.2, nvidia-cusparse 12.9.4.2,
#                    nvidia-curand 10.4.4.72, nvidia-nvml-dev 13.4.92), nvidia/cudnn (nvidia-cudnn-cu13
#                    9.27.0.42), nvidia/nccl (nvidia-nccl-cu13 2.32.3)
#   wheels8/         unzipped nvidia-cudnn-cu12 8.9.7.29: nvidia/cudnn/{include,lib}
#   wheels12/        unzipped nvidia-cufft-cu12 11.4.1.4 and nvidia-cusolver-cu12 11.7.5.82
#   debs/            dpkg-deb -x of Debian libcuda1, libnvidia-ml1, nvidia-smi, nvidia-kernel-dkms 555.58.02-4
#   src/             cudaError-10.0.java, cudaError-10.1.java (jcuda/jcuda), hip_runtime_api.h (ROCm/HIP),
#                    hip_error.cpp (ROCm/clr), nverror.h (NVIDIA/open-gpu-kernel-modules),
#                    xid-catalog.md (NVIDIA's Xid Catalog page as text)
#   nccl-src/        a checkout of NVIDIA/nccl;  kmod-src/  kmod-project/kmod (tools/);
#   ogkm-src/        NVIDIA/open-gpu-kernel-modules (kernel-open/nvidia/nv.c, nv-pci.c, os-interface.c,
#                    src/nvidia/arch/nvalloc/unix/src/osapi.c, osinit.c)
#   rocr-src/        a git clone of ROCm/ROCR-Runtime (read at commit c7785a6d... with git show)
#   miopen-src/      a git clone of ROCm/MIOpen (read at commit 2d1fd997... with git show)
set -euo pipefail
: "${IN:?set IN to the inputs folder}"
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$HERE/../../envcheck/data/enumerations}
PY=${PYTHON:-python3}
W=$IN/wheels/nvidia
DRV=$IN/debs/usr/lib/x86_64-linux-gnu/nvidia/current
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$W/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

$PY "$HERE/extract_cuda_runtime.py" --header "$IN/cuda13/include/driver_types.h" \
    --lib "$IN/cuda13/lib/libcudart.so.13" --package "PyPI nvidia-cuda-runtime 13.0.96" \
    --url https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html \
    --old-java "$IN/src/cudaError-10.0.java" --old-java-new "$IN/src/cudaError-10.1.java" > "$OUT/cudaError_t.json"
$PY "$HERE/extract_cuda_driver.py" --header "$IN/cuda13/include/cuda.h" --lib "$DRV/libcuda.so.1" \
    --driver 555.58.02 --lib-source "Debian experimental non-free libcuda1 555.58.02-4" > "$OUT/CUresult.json"
$PY "$HERE/extract_nvml.py" --header "$W/cu13/include/nvml.h" --lib "$DRV/libnvidia-ml.so.1" \
    --pynvml "$($PY -c 'import pynvml; print(pynvml.__file__)')" \
    --smi "$IN/debs/usr/lib/nvidia/current/nvidia-smi" --driver 555.58.02 > "$OUT/nvmlReturn_t.json"
$PY "$HERE/extract_cudnn.py" --header9 "$W/cudnn/include/cudnn_graph.h" --lib9 "$W/cudnn/lib/libcudnn_graph.so.9" \
    --header8 "$IN/wheels8/nvidia/cudnn/include/cudnn_ops_infer.h" \
    --lib8 "$IN/wheels8/nvidia/cudnn/lib/libcudnn_ops_infer.so.8" > "$OUT/cudnnStatus_t.json"
$PY "$HERE/extract_mathlibs.py" --which cublas --header "$W/cu13/include/cublas_api.h" \
    --lib "$W/cu13/lib/libcublas.so.13" --version "cuBLAS 13.10.0 (PyPI nvidia-cublas 13.10.0.20)" > "$OUT/cublasStatus_t.json"
$PY "$HERE/extract_mathlibs.py" --which cusparse --header "$W/cu13/include/cusparse.h" \
    --lib "$W/cu13/lib/libcusparse.so.12" --version "cuSPARSE 12.9.4 (PyPI nvidia-cusparse 12.9.4.2)" > "$OUT/cusparseStatus_t.json"
$PY "$HERE/extract_mathlibs.py" --which cufft --header "$W/cu13/include/cufft.h" \
    --version "cuFFT 12.4.0 (PyPI nvidia-cufft 12.4.0.43)" \
    --prev-header "$IN/wheels12/nvidia/cufft/include/cufft.h" \
    --prev-version "cuFFT 11.4.1 (PyPI nvidia-cufft-cu12 11.4.1.4)" > "$OUT/cufftResult.json"
$PY "$HERE/extract_mathlibs.py" --which cusolver --header "$W/cu13/include/cusolver_common.h" \
    --version "cuSOLVER 12.4.1 (PyPI nvidia-cusolver 12.4.1.2)" \
    --prev-header "$IN/wheels12/nvidia/cusolver/include/cusolver_common.h" \
    --prev-version "cuSOLVER 11.7.5 (PyPI nvidia-cusolver-cu12 11.7.5.82)" > "$OUT/cusolverStatus_t.json"
$PY "$HERE/extract_mathlibs.py" --which curand --header "$W/cu13/include/curand.h" \
    --version "cuRAND 10.4.4 (PyPI nvidia-curand 10.4.4.72)" > "$OUT/curandStatus_t.json"
$PY "$HERE/extract_nccl.py" --repo "$IN/nccl-src" --commit 5067397c2676d5aed50042fc39e5c8ee96eb0027 \
    --header "$W/nccl/include/nccl.h" --lib "$W/nccl/lib/libnccl.so.2" --out-dir "$OUT" \
    --older-tags v2.26.2-1,v2.21.5-1,v2.18.6-1,v2.14.3-1
$PY "$HERE/extract_xid.py" --page "$IN/src/xid-catalog.md" --nverror "$IN/src/nverror.h" \
    --nverror-commit df1c9a3de2be4b130f4fc7680f7198193d8ac6ad --nverror-version 595.45.04 > "$OUT/xid.json"
$PY "$HERE/extract_hip.py" --header "$IN/src/hip_runtime_api.h" --error-cpp "$IN/src/hip_error.cpp" \
    --hip-commit c5e11fcac8249ce4f7e70157588ff9661a870b59 \
    --clr-commit f9f995c6d0aecec28debd3db0f41df0c15ec003d > "$OUT/hipError_t.json"
$PY "$HERE/extract_hsa.py" --repo "$IN/rocr-src" --commit c7785a6da1c10c25bc8d527c00b1fe79bfbd84c9 > "$OUT/hsa_status_t.json"
$PY "$HERE/extract_miopen.py" --repo "$IN/miopen-src" --commit 2d1fd997a6fcf801ac4ca7a63e0656ef1cb9f488 > "$OUT/miopenStatus_t.json"
$PY "$HERE/extract_host_messages.py" --ld-so /lib64/ld-linux-x86-64.so.2 \
    --libc-version "Debian libc6 $(dpkg-query -W -f='${Version}' libc6 2>/dev/null || echo unknown)" \
    --kmod-repo "$IN/kmod-src" --kmod-commit 84fa569b2eb3230284168d59863330bafb07bc52 \
    --nvidia-open-repo "$IN/ogkm-src" --nvidia-open-commit df1c9a3de2be4b130f4fc7680f7198193d8ac6ad \
    --nv-kernel-blob "$IN/debs/usr/src/nvidia-current-555.58.02/nvidia/nv-kernel.o_binary" \
    --nv-kernel-package "Debian experimental non-free nvidia-kernel-dkms 555.58.02-4" > "$OUT/host_messages.json"
$PY "$HERE/validate.py" "$OUT"
