"""The probe against a real NVIDIA driver (``pytest -m gpu``); skipped on machines without one."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from envcheck.host.probe import probe

COUNT_SCRIPT = """
import pynvml
try:
    pynvml.nvmlInit()
    print(pynvml.nvmlDeviceGetCount())
    pynvml.nvmlShutdown()
except pynvml.NVMLError:
    print(0)
"""


def _real_gpu_count() -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NVML_")}
    proc = subprocess.run([sys.executable, "-c", COUNT_SCRIPT], capture_output=True,
                          text=True, env=env, timeout=60)
    return int(proc.stdout.strip() or 0) if proc.returncode == 0 else 0


pytestmark = [pytest.mark.gpu, pytest.mark.timeout(300),
              pytest.mark.skipif(_real_gpu_count() == 0,
                                 reason="no real NVIDIA GPU (libnvidia-ml.so.1 not loadable "
                                        "or no device)")]


def _smi(*fields: str) -> list[list[str]]:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi is not installed")
    out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}",
                          "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return [[cell.strip() for cell in line.split(",")] for line in out.strip().splitlines()]


def _env_without_cuda_vars(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PYTHONPATH")}
    env.update(extra)
    return env


def test_real_host_reads_sane_values() -> None:
    state = probe({})
    assert state.nvml_status == "ok", (state.message, state.fix)
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", state.driver_version or "")
    assert re.fullmatch(r"\d+\.\d", state.cuda_driver_version or "")
    assert state.nvml_version
    assert state.usable_gpus == state.gpus
    for gpu in state.gpus:
        assert gpu.status == "ok" and gpu.name and (gpu.uuid or "").startswith(("GPU-", "MIG-"))
        assert gpu.memory_total_mib and 0 <= gpu.memory_free_mib <= gpu.memory_total_mib
        assert re.fullmatch(r"\d+\.\d+", gpu.compute_capability or "")
        assert re.fullmatch(r"[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d",
                            gpu.pci_bus_id or "")


def test_matches_nvidia_smi() -> None:
    state = probe({})
    rows = _smi("driver_version", "index", "uuid", "name", "memory.total", "pci.bus_id")
    assert [r[0] for r in rows] == [state.driver_version] * len(state.gpus)
    assert [(int(r[1]), r[2], r[3]) for r in rows] == [(g.index, g.uuid, g.name)
                                                       for g in state.gpus]
    assert [int(r[4]) for r in rows] == [g.memory_total_mib for g in state.gpus]
    assert [r[5].upper() for r in rows] == [(g.pci_bus_id or "").upper() for g in state.gpus]


def test_cli_reports_ready() -> None:
    proc = subprocess.run([sys.executable, "-m", "envcheck", "gpu", "--json"],
                          capture_output=True, text=True, env=_env_without_cuda_vars(),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["nvml"]["status"] == "ok" and doc["gpus"]


TORCH_SCRIPT = """
import json, torch
n = torch.cuda.device_count()
print(json.dumps([torch.cuda.get_device_properties(i).name for i in range(n)]))
"""


def test_visibility_agrees_with_a_cuda_process() -> None:
    """With CUDA_VISIBLE_DEVICES set to a GPU's UUID, CUDA (via torch) sees exactly the GPU
    the probe marks visible."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    last = probe({}).gpus[-1]
    env = _env_without_cuda_vars(CUDA_VISIBLE_DEVICES=last.uuid or "",
                                 CUDA_DEVICE_ORDER="PCI_BUS_ID")
    marked = probe(env)
    assert [g.index for g in marked.usable_gpus] == [last.index]
    assert marked.usable_gpus[0].cuda_index == 0
    proc = subprocess.run([sys.executable, "-c", TORCH_SCRIPT], capture_output=True, text=True,
                          env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [last.name]


def test_jax_smoke_trains_on_the_gpu():
    """The smoke runner on a real GPU, with JAX's jitted fit (what a GPU machine has)."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is needed in this interpreter")
    from pathlib import Path

    from envcheck.validation.smoke import run_smoke

    result = run_smoke(Path(sys.executable), ["cpu:0", "gpu:0"], backend="jax", timeout=300,
                       multi_replica=False)
    assert result.error is None, result.stderr_tail
    devices = {d.device: d for d in result.devices}
    gpu = devices["gpu:0"]
    assert gpu.status == "pass", gpu.error
    assert gpu.ms_per_step > 0 and gpu.loss_last < gpu.loss_first
    assert re.search(r"cuda|gpu", gpu.placed_on or "", re.IGNORECASE), gpu.placed_on
    assert result.gpus_seen and result.gpus_seen >= 1


def _needs_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")


def test_native_torch_smoke_trains_on_the_gpu_and_gives_its_memory_back():
    """Native PyTorch on gpu:0: placed there, loss falling, cuDNN used by a convolution, and
    the caching allocator back to where it was once the fit is over."""
    _needs_torch()
    from pathlib import Path

    from envcheck.validation.smoke import run_smoke

    result = run_smoke(Path(sys.executable), ["cpu:0", "gpu:0"], backend="torch", timeout=300,
                       multi_replica=False)

    assert result.error is None, result.stderr_tail
    build = result.build
    assert build["framework"] == "torch" and build["cuda_version"] and build["cuda_available"]
    assert build["cudnn_version"] and build["arch_list"]
    assert result.gpus_seen >= 1
    cpu, gpu = result.devices
    assert cpu.status == "pass" and cpu.cudnn is None, cpu.error
    assert gpu.status == "pass", gpu.error
    assert gpu.placed_on == "gpu:0"
    assert gpu.ms_per_step > 0 and gpu.loss_last < gpu.loss_first
    assert gpu.cudnn["enabled"] and gpu.cudnn["is_acceptable"], gpu.cudnn
    assert gpu.cudnn["version"] == build["cudnn_version"]
    memory = gpu.memory
    assert memory["weights_freed"] and memory["returned"], memory
    assert memory["after_bytes"] <= memory["baseline_bytes"] < memory["peak_bytes"]


def _runner():
    """The smoke runner as a module (its DDP parts, for a one-GPU machine)."""
    import importlib.util as util

    from envcheck.validation.smoke import RUNNER

    spec = util.spec_from_file_location("envcheck_smoke_runner", RUNNER)
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_native_torch_ddp_over_nccl_on_every_gpu():
    """DistributedDataParallel over nccl, one process per GPU (two GPUs or more)."""
    _needs_torch()
    count = _real_gpu_count()
    if count < 2:
        pytest.skip(f"DDP over several GPUs needs 2 or more; this machine has {count}")
    from pathlib import Path

    from envcheck.validation.smoke import run_smoke

    devices = [f"gpu:{i}" for i in range(count)]
    result = run_smoke(Path(sys.executable), devices, backend="torch", timeout=300,
                       multi_replica=True, env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})

    assert result.ok, (result.multi_replica, result.stderr_tail[-3000:])
    multi = result.multi_replica
    assert (multi.replicas, multi.global_batch) == (count, 32 * count)
    assert multi.detail.startswith(f"DistributedDataParallel over nccl, {count} processes;")
    assert multi.scaling_efficiency > 0 and multi.samples_per_s > 0


def test_native_torch_ddp_one_rank_over_nccl_on_gpu0():
    """On any GPU machine, one GPU included: the runner's DDP process over nccl on gpu:0
    joins its process group, trains, and answers."""
    _needs_torch()
    runner = _runner()
    job = {"steps": 12, "batch": 32, "seed": 0, "multi_timeout": 240.0}

    ranks, waited = runner.run_ranks(["gpu:0"], "nccl", job, 0)

    [rank] = ranks
    assert rank.answered, (rank.code, rank.phase, rank.result)
    verdict = runner.ddp_verdict(["gpu:0"], ranks, waited, None, job, "one rank")
    assert verdict["status"] == "pass", verdict["detail"]
    assert rank.result["placed_on"] == "gpu:0" and rank.result["sizes"] == [32] * 12
    assert rank.result["loss_last"] < rank.result["loss_first"]


def test_metrics_name_every_real_gpu_by_uuid_and_the_driver(tmp_path):
    """`envcheck metrics` on the real driver: the driver's info gauge and each GPU's level-1
    checks under its NVML index and UUID, as nvidia-smi lists them (an empty home: no env)."""
    env = _env_without_cuda_vars(ENVCHECK_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "envcheck", "metrics"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = _smi("index", "uuid", "driver_version")
    assert 'envcheck_driver_info{cuda="' in done.stdout and f'driver="{rows[0][2]}"}} 1.0' in done.stdout
    found = set(re.findall(r'envcheck_gpu_health\{check="ecc",gpu="(\d+)",uuid="([^"]+)"\}', done.stdout))
    assert found == {(index, uuid) for index, uuid, _ in rows}
    if shutil.which("promtool"):
        checked = subprocess.run(["promtool", "check", "metrics"], input=done.stdout, capture_output=True,
                                 text=True, timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr
