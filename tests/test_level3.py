"""Level 3: figures measured per device in the env's framework (``data/smoke_figures.py``,
asked for with the job key "level": 3) and their judgement against the expectations table
(``validation/figures.py``, ``data/gpu_expectations.json``).

Real frameworks on CPU devices (slow: a real PyTorch and a real JAX env, installed as
test_smoke_torch.py and test_smoke.py install theirs, and the session's TensorFlow env): copy and matmul figures are measured
and shown, a CPU has no expectation, the all-reduce bus bandwidth is measured over two CPU
devices. The judgement in process with synthetic figures; the runner's timing and allocation
loop with stand-in operations; and, with ``-m gpu`` on a machine with an NVIDIA GPU, level 3
for real on it.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import uv

from conftest import clean_env
from envcheck.validation.figures import (NO_CPU_EXPECTATION, Figure, GpuFacts, figure_checks,
                                         gpu_facts, judge, model_of, table)
from envcheck.validation.smoke import RUNNER

TORCH = ["torch==2.13.0+cpu", "numpy"]
JAX = ["jax==0.10.2", "jaxlib==0.10.2"]
LOCAL_INDEX = Path("/opt/pypi/simple")
FIGURES_PY = RUNNER.parent / "smoke_figures.py"
A100 = GpuFacts("NVIDIA A100-SXM4-80GB", pcie_max_gen=4, pcie_max_width=16,
                memory_free_bytes=80 << 30)


def run_runner(python: Path, job: dict, timeout: float = 300) -> tuple[int, dict, str]:
    proc = subprocess.run([str(python), str(RUNNER), json.dumps(job)], capture_output=True,
                          text=True, timeout=timeout, env=clean_env())
    return proc.returncode, json.loads(proc.stdout), proc.stderr


@pytest.fixture(scope="module")
def torch_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real CPU PyTorch env, installed by pip from its configured indexes and find-links."""
    env = tmp_path_factory.mktemp("torch-cpu") / "env"
    subprocess.run(["python3.11", "-m", "venv", str(env)], check=True, env=clean_env())
    proc = subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "--quiet",
                           *TORCH], capture_output=True, text=True, env=clean_env(), timeout=900)
    assert proc.returncode == 0, proc.stderr
    return env / "bin" / "python"


@pytest.fixture(scope="module")
def jax_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real CPU JAX env (jax and jaxlib only), installed by uv."""
    env = tmp_path_factory.mktemp("jax") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True,
                   env=clean_env())
    index = ["--extra-index-url", LOCAL_INDEX.as_uri()] if LOCAL_INDEX.is_dir() else []
    subprocess.run([uv.find_uv_bin(), "pip", "install", "--quiet", "--python",
                    str(env / "bin" / "python"), *index, *JAX], check=True, env=clean_env())
    return env / "bin" / "python"


def assert_cpu_figures(doc: dict, devices: list[str]) -> None:
    """Copy and matmul measured and shown on each CPU device, memory skipped with its reason,
    the all-reduce over all of them; judged: no expectation, n/a, never a pass."""
    assert [d["device"] for d in doc["devices"]] == devices
    for device in doc["devices"]:
        figures = device["figures"]
        for name in ("copy_h2d", "copy_d2h"):
            assert figures[name]["value"] > 0 and figures[name]["unit"] == "GB/s", figures[name]
            assert figures[name]["bytes"] > 0 and figures[name]["host_memory"]
        fp32 = figures["matmul_fp32"]
        assert fp32["value"] > 0 and fp32["unit"] == "TFLOPS" and fp32["n"] > 0, fp32
        assert figures["matmul_bf16"]["value"] is None and figures["matmul_bf16"]["skipped"]
        assert figures["memory"]["value"] is None
        assert "CPU" in figures["memory"]["skipped"]
    reduce = doc["multi_replica"]["figures"]["allreduce"]
    assert reduce["value"] > 0 and reduce["unit"] == "GB/s" and reduce["devices"] == 2, reduce
    assert reduce["value"] == pytest.approx(reduce["algbw"], rel=0.01)  # 2(n-1)/n = 1 for n = 2
    assert reduce["algbw"] == pytest.approx(reduce["bytes"] / reduce["seconds"] / 1e9, rel=0.01)

    judged = judge({d["device"]: d["figures"] for d in doc["devices"]},
                   multi=doc["multi_replica"]["figures"])
    assert judged and all(f.verdict == "n/a" and f.expectation is None for f in judged)
    measured = [f for f in judged if f.value is not None]
    assert {f.name for f in measured} == {"copy_h2d", "copy_d2h", "matmul_fp32", "allreduce"}
    assert all(f.why == NO_CPU_EXPECTATION for f in measured)
    checks = {c.id: c for c in figure_checks(judged)}
    assert {c.status for c in checks.values()} == {"skip"}
    assert "GB/s" in checks["figure-copy"].detail and "TFLOPS" in checks["figure-matmul"].detail


@pytest.mark.slow
def test_torch_measures_copy_matmul_and_allreduce_on_cpu_devices(torch_python: Path):
    code, doc, err = run_runner(torch_python, {"backend": "torch", "devices": ["cpu:0", "cpu:1"],
                                               "multi_replica": True, "level": 3})

    assert code == 0, (doc, err[-3000:])
    assert_cpu_figures(doc, ["cpu:0", "cpu:1"])
    copy = doc["devices"][0]["figures"]["copy_h2d"]
    assert copy["host_memory"].startswith("host memory to host memory")  # no pinning on a CPU
    assert "all_reduce over gloo, 2 processes" in doc["multi_replica"]["figures"]["allreduce"]["how"]
    assert "envcheck-smoke: figures {" in err  # streamed once measured


@pytest.mark.slow
def test_jax_measures_copy_matmul_and_psum_on_two_logical_cpus(jax_python: Path):
    code, doc, err = run_runner(jax_python, {"devices": ["cpu:0", "cpu:1"], "logical_cpus": 2,
                                             "multi_replica": True, "level": 3})

    assert code == 0, (doc, err[-3000:])
    assert doc["build"]["framework"] == "jax"
    assert_cpu_figures(doc, ["cpu:0", "cpu:1"])
    assert "psum" in doc["multi_replica"]["figures"]["allreduce"]["how"]


@pytest.mark.slow
def test_tensorflow_measures_copy_matmul_and_mirrored_allreduce_on_two_logical_cpus(
        tf_python: Path):
    code, doc, err = run_runner(tf_python, {"backend": "tensorflow", "devices": ["cpu:0", "cpu:1"],
                                            "logical_cpus": 2, "multi_replica": True, "level": 3})

    assert code == 0, (doc, err[-3000:])
    assert_cpu_figures(doc, ["cpu:0", "cpu:1"])
    assert "MirroredStrategy all_reduce" in doc["multi_replica"]["figures"]["allreduce"]["how"]


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_level_2_output_is_unchanged(framework: str, torch_python: Path, jax_python: Path):
    python = torch_python if framework == "torch" else jax_python
    code, doc, err = run_runner(python, {"backend": framework, "devices": ["cpu:0", "cpu:1"],
                                         "logical_cpus": 2, "multi_replica": True})

    assert code == 0, (doc, err[-3000:])
    assert all("figures" not in d for d in doc["devices"])
    assert "figures" not in doc["multi_replica"]
    assert "envcheck-smoke: figures" not in err


def test_a_level_other_than_2_or_3_is_a_bad_job():
    # judged before any framework is imported: any interpreter will do
    code, doc, _ = run_runner(Path(sys.executable), {"devices": ["cpu:0"], "level": 4})

    assert (code, doc) == (2, {"error": "bad job: level must be 2 or 3"})


# --- the runner's framework-neutral part, with stand-in operations -----------------------

def figures_module():
    spec = importlib.util.spec_from_file_location("level3_smoke_figures", FIGURES_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeGpu:
    """A GPU's operations as a backend gives them, with memory that runs out early."""
    host_memory = "pinned (stand-in)"

    def __init__(self, free: int, fails_after: int | None = None, largest: int | None = None):
        self.free, self.fails_after, self.held, self.released = free, fails_after, 0, False
        self.largest = largest  # the largest piece its allocator can give (its free memory in pieces)

    def memory(self):
        return {"free_bytes": self.free, "total_bytes": 2 * self.free, "limit_bytes": None,
                "source": "stand-in"}

    def allocate(self, nbytes):
        if self.fails_after is not None and self.held + nbytes > self.fails_after:
            raise MemoryError("CUDA out of memory. Tried to allocate 64.00 MiB")
        if self.largest is not None and nbytes > self.largest:
            raise MemoryError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate")
        self.held += nbytes
        return bytearray(0)

    def release(self):
        self.released = True


def test_memory_figure_allocates_ninety_percent_of_free_in_chunks():
    kit = figures_module()
    ops = FakeGpu(free=10 << 30)

    figure = kit.memory_figure(ops)

    assert figure["asked_bytes"] == int(0.9 * (10 << 30)) == figure["allocated_bytes"]
    assert figure["chunk_bytes"] == figure["asked_bytes"] // 16 and figure["error"] is None
    assert figure["value"] == pytest.approx(0.9 * (10 << 30) / 1e9, abs=1e-3) and ops.released
    assert figure["free_bytes"] == 10 << 30 and figure["source"] == "stand-in"


def test_memory_that_runs_out_early_is_reported_with_what_was_had():
    kit = figures_module()

    figure = kit.memory_figure(FakeGpu(free=10 << 30, fails_after=4 << 30))

    assert (4 << 30) - (10 << 30) // 1024 < figure["allocated_bytes"] <= 4 << 30 < figure["asked_bytes"]
    assert figure["error"].startswith("MemoryError: CUDA out of memory") and figure["refused"] > 1
    judged = judge({"gpu:0": {"memory": figure}}, {"gpu:0": A100})[0]
    assert judged.verdict == "degraded" and "gave only" in judged.cause
    assert "nvidia-smi --query-compute-apps" in judged.action


def test_free_memory_in_pieces_smaller_than_a_chunk_is_had_and_passes():
    """An allocator whose free memory lies in pieces (XLA's on a healthy H200 refused a 5.9 GiB
    chunk with 17 GB free) gives it in halves: all of it is had, a pass, not a sick GPU."""
    kit = figures_module()

    figure = kit.memory_figure(FakeGpu(free=10 << 30, largest=200 << 20))

    assert figure["allocated_bytes"] == figure["asked_bytes"] == int(0.9 * (10 << 30))
    assert figure["error"] is None and figure["refused"] == 2
    assert figure["chunk_bytes"] == figure["asked_bytes"] // 16 > figure["smallest_chunk_bytes"]
    facts = GpuFacts(A100.name, pcie_max_gen=4, pcie_max_width=16, memory_free_bytes=10 << 30)
    judged = judge({"gpu:0": {"memory": figure}}, {"gpu:0": facts})[0]
    assert judged.verdict == "pass", judged


def test_timing_keeps_the_fastest_batch_and_busbw_follows_nccl_tests():
    kit = figures_module()
    calls = []

    seconds, reps = kit.timed(lambda reps: calls.append(reps), budget=0.01, max_reps=5)

    assert calls[:2] == [1, 1] and len(calls) == 2 + kit.BATCHES and 1 <= reps <= 5
    figure = kit.busbw_figure(8 << 20, 0.001, 4, 10, "stand-in")
    algbw = (8 << 20) / 0.001 / 1e9
    assert figure["algbw"] == pytest.approx(algbw, abs=1e-3)
    assert figure["value"] == pytest.approx(algbw * 2 * 3 / 4, abs=1e-3)  # busbw, n = 4
    ranks = [{"bytes": 8 << 20, "seconds": 0.002, "reps": 10},
             {"bytes": 8 << 20, "seconds": 0.004, "reps": 10}]
    slowest = kit.allreduce_figure(ranks, "stand-in")
    assert slowest["seconds"] == 0.004 and slowest["devices"] == 2  # the collective's last rank
    assert kit.allreduce_figure([ranks[0], None], "x")["skipped"]


# --- the judgement, in process ----------------------------------------------------------

def matmul(value: float | None, **facts) -> dict:
    return {"value": value, "unit": "TFLOPS", "error": None, "skipped": None, **facts}


def one(figures: dict, gpu: GpuFacts | None = A100, device: str = "gpu:0") -> Figure:
    return judge({device: figures}, {device: gpu} if gpu else {})[0]


def test_an_a100_at_half_its_fp16_expectation_is_degraded_and_at_it_passes():
    expected = 312.0 * table()["matmul"]["healthy_fraction"]["fp16"]

    slow = one({"matmul_fp16": matmul(expected * 0.5)})
    healthy = one({"matmul_fp16": matmul(expected)})

    assert slow.expectation == pytest.approx(expected) == healthy.expectation
    assert (slow.verdict, healthy.verdict) == ("degraded", "pass")
    assert "fp16 matmul on gpu:0 (NVIDIA A100-SXM4-80GB) is slow" in slow.cause
    assert "nvidia-smi -q -d PERFORMANCE,CLOCK" in slow.action and healthy.cause is None
    assert "312 TFLOPS fp16 dense peak" in healthy.why
    checks = figure_checks([slow, healthy])
    assert [(c.id, c.status) for c in checks] == [("figure-matmul", "warn")]
    assert checks[0].fix == slow.action


def test_an_unknown_model_and_a_cpu_have_no_expectation():
    unknown = one({"matmul_fp16": matmul(50.0)}, GpuFacts("NVIDIA Imaginary X9"))
    cpu = one({"matmul_fp32": matmul(0.1)}, None, device="cpu:0")
    no_bf16 = one({"matmul_bf16": matmul(10.0)}, GpuFacts("Tesla V100-SXM2-32GB"))

    assert (unknown.verdict, unknown.expectation) == ("n/a", None)
    assert unknown.why == "model not in the table (NVIDIA Imaginary X9)"
    assert (cpu.verdict, cpu.expectation, cpu.why) == ("n/a", None, NO_CPU_EXPECTATION)
    assert cpu.value == 0.1  # shown all the same
    assert no_bf16.verdict == "n/a" and "no bf16" in no_bf16.why
    assert [c.status for c in figure_checks([unknown, cpu])] == ["skip"]


def test_copy_bandwidth_is_judged_against_the_links_maximum():
    pinned = {"unit": "GB/s", "host_memory": "pinned (Tensor.pin_memory())"}

    good = one({"copy_h2d": dict(pinned, value=24.0)})
    slow = one({"copy_h2d": dict(pinned, value=6.0)})  # what an x4 link gives
    pageable = one({"copy_h2d": dict(pinned, value=6.0, host_memory="pageable (numpy)")})
    unread = one({"copy_h2d": dict(pinned, value=24.0)}, GpuFacts("NVIDIA A100-SXM4-80GB"))

    assert good.expectation == pytest.approx(1.969 * 16 * 0.8, abs=1e-3)  # gen4 x16: ~25 GB/s
    assert (good.verdict, slow.verdict) == ("pass", "degraded")
    assert "PCIe gen4 x16: 31.5 GB/s theoretical" in good.why
    assert "slow for its link" in slow.cause and "nvidia-smi -q -d PCIE" in slow.action
    assert pageable.verdict == "n/a" and "pinned" in pageable.why
    assert unread.verdict == "n/a" and "not read" in unread.why


def test_memory_nvml_calls_free_must_be_had():
    fine = {"value": 72.0, "unit": "GB", "allocated_bytes": 72 << 30, "asked_bytes": 72 << 30,
            "free_bytes": 80 << 30, "limit_bytes": None, "fraction": 0.9, "source": "x",
            "error": None, "skipped": None}
    hidden = dict(fine, free_bytes=40 << 30, asked_bytes=36 << 30, allocated_bytes=36 << 30)
    capped = dict(hidden, limit_bytes=60 << 30)  # the framework's own cap (XLA's 75%)

    assert one({"memory": fine}).verdict == "pass"
    found = one({"memory": hidden})
    assert found.verdict == "degraded" and "NVML" in found.cause
    assert one({"memory": capped}).verdict == "pass"
    on_cpu = one({"memory": {"value": None, "unit": "GB", "skipped": "a CPU device has no "
                             "memory of its own to fill"}}, None, device="cpu:0")
    assert on_cpu.verdict == "n/a" and "CPU" in on_cpu.why


def test_unmeasured_and_failed_figures_are_never_a_pass():
    judged = judge({"gpu:0": None, "gpu:1": {"matmul_fp32": matmul(None, error="RuntimeError: "
                                                                   "CUBLAS_STATUS_EXECUTION_FAILED")}},
                   {"gpu:1": A100}, multi={"allreduce": {"value": 80.0, "unit": "GB/s"}})

    verdicts = {(f.device, f.name): f.verdict for f in judged}
    assert verdicts == {("gpu:0", "figures"): "n/a", ("gpu:1", "matmul_fp32"): "degraded",
                        ("gpu:0,gpu:1", "allreduce"): "n/a"}
    assert "interconnect" in judged[-1].why
    assert all(f.verdict != "pass" for f in judged)
    assert json.dumps([f.to_json() for f in judged])  # the report's JSON


def allreduce(value: float, gpus: dict, devices=("gpu:0", "gpu:1")) -> Figure:
    figure = {"value": value, "unit": "GB/s", "how": "stand-in", "error": None, "skipped": None}
    return judge({d: {} for d in devices}, gpus, multi={"allreduce": figure})[-1]


def test_allreduce_busbw_is_judged_against_nvlink_or_the_pcie_links():
    h100 = GpuFacts("NVIDIA H100 80GB HBM3", 5, 16, 80 << 30, nvlink_links=18, nvlink_version=6)
    rule = table()["allreduce"]
    nvlink = 18 * 25.0 * rule["nvlink"]["healthy_fraction"]  # 450 GB/s a direction: 360 expected
    pcie = 1.969 * 16 * table()["pcie"]["healthy_fraction"] * rule["pcie_efficiency"]  # gen4 x16: ~19 GB/s
    sxm = {"gpu:0": h100, "gpu:1": h100}
    no_nvlink = GpuFacts("NVIDIA A100 80GB PCIe", 4, 16, nvlink_links=0)

    healthy = allreduce(300.0, sxm)
    link_down = allreduce(40.0, sxm)  # what the ring gets once NVLink falls back to PCIe
    on_pcie = allreduce(18.0, {"gpu:0": no_nvlink, "gpu:1": no_nvlink})
    slow_pcie = allreduce(6.0, {"gpu:0": no_nvlink, "gpu:1": no_nvlink})
    mixed = allreduce(18.0, {"gpu:0": h100, "gpu:1": no_nvlink})  # one GPU without NVLink: PCIe

    assert (healthy.verdict, healthy.expectation) == ("pass", pytest.approx(nvlink))
    assert "NVLink: 18 links per GPU, 450 GB/s per direction" in healthy.why
    assert link_down.verdict == "degraded" and link_down.floor == pytest.approx(nvlink * rule["degraded_below"])
    assert "all-reduce over gpu:0,gpu:1 is slow for its interconnect" in link_down.cause
    assert "nvidia-smi nvlink -s" in link_down.action and "NCCL_P2P_DISABLE" in link_down.action
    assert (on_pcie.verdict, on_pcie.expectation) == ("pass", pytest.approx(pcie, abs=1e-3))
    assert "PCIe (no NVLink on every GPU)" in on_pcie.why
    assert slow_pcie.verdict == "degraded"
    assert mixed.expectation == pytest.approx(on_pcie.expectation, abs=1e-3)
    checks = figure_checks([healthy, link_down])
    assert [(c.id, c.status) for c in checks] == [("figure-allreduce", "warn")]


def test_four_bridged_pcie_cards_get_no_nvlink_expectation_an_sxm_board_does():
    """Four A100 PCIe cards, NVLink bridges joining them in pairs: every GPU has links, but the
    ring crosses PCIe; without the topology read, no expectation (n/a), never a false degraded.
    Four SXM GPUs on an NVSwitch board keep theirs."""
    bridged = GpuFacts("NVIDIA A100 80GB PCIe", 4, 16, nvlink_links=12, nvlink_version=4)
    sxm = GpuFacts("NVIDIA A100-SXM4-80GB", 4, 16, nvlink_links=12, nvlink_version=4)
    four = ("gpu:0", "gpu:1", "gpu:2", "gpu:3")
    pairs = allreduce(40.0, {d: bridged for d in four}, devices=four)
    board = allreduce(40.0, {d: sxm for d in four}, devices=four)
    assert pairs.verdict == "n/a" and "not on a known NVSwitch board" in pairs.why
    assert board.verdict == "degraded" and board.expectation == pytest.approx(12 * 25.0 * 0.8)
    assert allreduce(150.0, {"gpu:0": bridged, "gpu:1": bridged}).verdict == "pass"  # two: one bridge


def test_allreduce_without_its_interconnect_read_or_on_cpus_has_no_expectation():
    unread = allreduce(100.0, {"gpu:0": A100, "gpu:1": A100})  # NVLink not read (an older NVML)
    unknown = allreduce(100.0, {d: GpuFacts("X", 4, 16, nvlink_links=4, nvlink_version=99)
                                for d in ("gpu:0", "gpu:1")})
    cpus = allreduce(3.0, {}, devices=("cpu:0", "cpu:1"))

    assert (unread.verdict, unread.expectation) == ("n/a", None) and "not read" in unread.why
    assert unknown.verdict == "n/a" and "NVLink version [99] is not in the table" in unknown.why
    assert (cpus.verdict, cpus.expectation, cpus.why) == ("n/a", None, NO_CPU_EXPECTATION)
    assert cpus.value == 3.0  # shown all the same, never a pass
    assert [c.status for c in figure_checks([unread, cpus])] == ["skip"]


def test_every_nvlink_version_nvml_names_up_to_5_has_its_link_figure():
    per_link = table()["allreduce"]["nvlink"]["per_link_gb_s"]
    assert set(per_link) == {str(v) for v in range(1, 8)} and per_link["6"] * 18 == 450.0


@pytest.mark.parametrize("name, model", [
    ("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA A100 80GB PCIe", "A100"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM5"), ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"), ("NVIDIA H200", "H200 SXM"), ("Tesla T4", "T4"),
    ("NVIDIA T4", "T4"), ("Tesla V100-SXM2-32GB", "V100 SXM2"), ("Tesla V100-PCIE-16GB", "V100 PCIe"),
    ("NVIDIA L4", "L4"), ("NVIDIA A10G", "A10G"), ("NVIDIA A10", "A10"),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"), ("NVIDIA GeForce RTX 3090", "GeForce RTX 3090"),
    ("NVIDIA L40S", None), ("NVIDIA GeForce RTX 3090 Ti", None)])
def test_nvml_model_names_find_their_row(name: str, model: str | None):
    found = model_of(name)
    assert (found["model"].split(" (")[0] if found else None) == model


def test_every_row_has_a_source_and_dense_peaks():
    for row in table()["models"]:
        assert row["source"].startswith("https://"), row
        assert row["fp32"] > 0 and row["fp16"] >= row["fp32"], row
        assert row["bf16"] is None or row["bf16"] == row["fp16"], row
    assert table()["pcie"]["per_lane_gb_s"]["4"] * 16 == pytest.approx(31.5, abs=0.05)


# --- a real GPU (pytest -m gpu) -----------------------------------------------------------

def real_gpu_count() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    proc = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    return proc.stdout.count("GPU ") if proc.returncode == 0 else 0


@pytest.fixture(scope="module")
def gpu_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ENVCHECK_TEST_GPU_PYTHON (an interpreter with a CUDA framework), else a jax[cuda12] env."""
    given = os.environ.get("ENVCHECK_TEST_GPU_PYTHON")
    if given:
        return Path(given)
    env = tmp_path_factory.mktemp("jax-cuda") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    index = ["--extra-index-url", LOCAL_INDEX.as_uri()] if LOCAL_INDEX.is_dir() else []
    proc = subprocess.run([uv.find_uv_bin(), "pip", "install", "--quiet", "--python",
                           str(env / "bin" / "python"), *index, "jax[cuda12]==0.10.2"],
                          capture_output=True, text=True, env=clean_env())
    if proc.returncode:
        pytest.skip("no CUDA framework to install: " + proc.stderr[-300:])
    return env / "bin" / "python"


@pytest.mark.gpu
@pytest.mark.timeout(900)
@pytest.mark.skipif(real_gpu_count() == 0, reason="no real NVIDIA GPU (nvidia-smi lists none)")
def test_level_3_on_a_real_gpu(gpu_python: Path):
    """The figures on a real, idle GPU, judged as `validate --level 3` judges them: against the
    model's row and the PCIe link level 1 reads. A healthy GPU gives the memory it calls free
    (XLA's allocator on an H200 once refused a 16th chunk with 17 GB free: judged degraded)."""
    from envcheck.host.level1 import level1
    from envcheck.validation.devices import Device

    code, doc, err = run_runner(gpu_python, {"devices": ["gpu:0"], "level": 3}, timeout=600)

    assert code == 0, (doc, err[-3000:])
    figures = doc["devices"][0]["figures"]
    assert figures["copy_h2d"]["value"] > 1 and figures["copy_d2h"]["value"] > 1, figures
    assert figures["matmul_fp32"]["value"] > 0.5, figures["matmul_fp32"]
    assert figures["matmul_fp16"]["value"] or figures["matmul_fp16"]["skipped"]
    memory = figures["memory"]
    assert memory["allocated_bytes"] > 0 and memory["asked_bytes"] > 0, memory
    health = level1()
    facts = gpu_facts([Device("gpu", 0, 0)], health.host, health)
    judged = {f.name: f for f in judge({"gpu:0": figures}, facts)}
    print(json.dumps([f.to_json() for f in judged.values()], indent=1))
    assert {f.verdict for f in judged.values()} <= {"pass", "degraded", "n/a"}
    assert judged["memory"].verdict == "pass", judged["memory"]
    if facts["gpu:0"].pcie_max_gen:  # the link read: the copies have an expectation
        assert judged["copy_h2d"].expectation and judged["copy_d2h"].expectation, judged["copy_h2d"]


def test_gpu_facts_come_from_the_probe_and_the_level_1_readings():
    from types import SimpleNamespace as NS

    from envcheck.validation.devices import Device

    host = NS(gpus=[NS(index=0, name="NVIDIA L4", memory_free_mib=22000),
                    NS(index=3, name="Tesla T4", memory_free_mib=None)])
    health = NS(gpus=[NS(index=3, readings={"pcie_max_gen": 3, "pcie_max_width": 16, "nvlink_links": 0,
                                            "nvlink_version": None})])
    devices = [Device("cpu", 0, 0), Device("gpu", 0, 1), Device("gpu", 3, 0)]

    facts = gpu_facts(devices, host, health)

    assert facts == {"gpu:1": GpuFacts("NVIDIA L4", None, None, 22000 << 20),
                     "gpu:0": GpuFacts("Tesla T4", 3, 16, None, nvlink_links=0)}


def test_level1_reads_the_nvlink_links_the_all_reduce_is_judged_by(fake_nvml):
    """The fake's H100 with 18 NVLink 4.0 links, a PCIe card answering NOT_SUPPORTED (no NVLink)
    and a driver without the function (n/a, with why), through the real pynvml."""
    code = ("import json; from envcheck.host.level1 import level1; "
            "print(json.dumps([g.readings for g in level1().gpus]))")
    for omit, expected in (((), [(18, 6), (0, None)]), (("nvmlDeviceGetNvLinkState",), [(None, None)] * 2)):
        env = fake_nvml.env(["NVIDIA H100 80GB HBM3,9.0,81559,nvlink=18/6", "NVIDIA L4,8.9,23034"], omit=omit)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        readings = json.loads(proc.stdout)
        assert [(r["nvlink_links"], r["nvlink_version"]) for r in readings] == expected, proc.stderr
        if omit:
            assert "lacks the function" in readings[0]["unavailable"]["nvlink_links"]
