"""The preflight's probes on a real NVIDIA GPU (``pytest -m gpu``; skipped without one): the node's
probes in an interpreter with a CUDA PyTorch (ENVCHECK_TEST_GPU_PYTHON, else this one), one rank
per GPU over nccl, and one node's rank of a collective over nccl (a world of one: this node)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.validation import probes
from envcheck.validation.figures import GpuFacts
from test_gpu_real import _real_gpu_count

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600),
              pytest.mark.skipif(_real_gpu_count() == 0, reason="no real NVIDIA GPU (libnvidia-ml.so.1 not "
                                                                "loadable or no device)")]


def _python() -> Path:
    given = os.environ.get("ENVCHECK_TEST_GPU_PYTHON")
    if given:
        return Path(given)
    if importlib.util.find_spec("torch") is None:
        pytest.skip("no interpreter with torch (set ENVCHECK_TEST_GPU_PYTHON)")
    return Path(sys.executable)


def _gpu_names() -> list[str]:
    out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True, timeout=60).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def test_the_probes_measure_every_gpu_and_are_judged_against_the_table_beside():
    count = _real_gpu_count()
    devices = [f"gpu:{i}" for i in range(count)]
    measured = probes.probe(_python(), "torch", devices, 300, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert measured.ok, (measured.error, measured.stderr_tail[-3000:])
    doc = measured.document
    assert doc["build"]["cuda_version"] and doc["build"]["nccl_version"], doc["build"]
    for device in devices:
        figures = doc["devices"][device]
        for name in ("matmul_fp32", "matmul_fp16", "copy_h2d", "copy_d2h"):
            figure = figures[name]
            assert figure["value"] > 0 and len(figure["samples"]) == probes.SAMPLES, (name, figure)
            assert figure["reps"] * min(figure["samples"]) >= 0.15  # each sample about 0.2 s of work, or more
    reduce = doc["allreduce"]
    if count > 1:
        assert reduce["value"] > 0 and reduce["devices"] == count and "nccl" in reduce["how"]
    names = _gpu_names()
    judged = probes.absolute(doc, {f"gpu:{i}": GpuFacts(name=names[i]) for i in range(count)})
    matmul = [j for j in judged if j["name"] == "matmul_fp16"]
    assert matmul and all(j["verdict"] in ("pass", "degraded", "n/a") for j in matmul)
    if "H200" in names[0] or "H100" in names[0]:  # in level 3's table: an expectation beside
        assert matmul[0]["expectation"] and matmul[0]["verdict"] in ("pass", "degraded")


def test_a_nodes_rank_of_the_collective_runs_over_nccl_on_its_first_gpu():
    env = {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
           "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    measured = probes.collective(_python(), "torch", "gpu:0", 120, env)
    assert measured.ok, (measured.error, measured.stderr_tail[-3000:])
    figure = measured.document["allreduce"]
    assert figure["devices"] == 1 and "nccl, 1 nodes" in figure["how"] and figure["algbw"] > 0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
