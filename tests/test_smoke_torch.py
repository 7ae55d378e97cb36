"""The native PyTorch smoke, run for real in a CPU torch env: one device, DistributedDataParallel
over two gloo processes, and ranks that crash, hang or stop synchronising.

The torch env is a venv with ``torch==2.13.0+cpu`` and numpy installed by pip from its
configured indexes and find-links (here the CPU wheel lies in a find-links folder). The
faulty torch is that real torch seen through a hook (an env whose ``.pth`` files add the real
env's site-packages and wrap ``torch`` as it is imported), so one rank really dies or
hangs in the middle of a real DDP run while the others wait on it in gloo.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import clean_env
from envcheck.envs.metadata import site_packages
from envcheck.validation.smoke import RUNNER, run_smoke
from test_smoke import make_env, running, wrap_on_import

TORCH = ["torch==2.13.0+cpu", "numpy"]

# Wraps the real torch as it is imported, in the processes ENVCHECK_TEST_FAULT_RANK names
# ("1", or "all"), by the ranks' RANK variable (the runner's own process has none):
#   abort / hang: the rank's 2nd optimizer step aborts / never returns, mid-training;
#   desync: DistributedDataParallel is replaced by the bare module, so gradients are no
#   longer averaged across ranks (the ranks' weights then drift apart).
FAULT_HOOK = '''
import importlib.abc, importlib.util, os, sys, time

FAULT = os.environ.get("ENVCHECK_TEST_FAULT", "")
WHERE = os.environ.get("ENVCHECK_TEST_FAULT_RANK", "1")
RANK = os.environ.get("RANK")


def wrap(torch):
    if FAULT == "desync":
        torch.nn.parallel.DistributedDataParallel = lambda module, **options: module
        return
    real_step = torch.optim.Adam.step
    calls = []

    def step(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            if FAULT == "abort":
                os.abort()
            time.sleep(10 ** 6)
        return real_step(self, *args, **kwargs)

    torch.optim.Adam.step = step


''' + wrap_on_import("torch") + '''

if FAULT and RANK is not None and WHERE in (RANK, "all"):
    sys.meta_path.insert(0, Hook())
'''


@pytest.fixture(scope="module")
def torch_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real CPU PyTorch env, installed by pip as a user would."""
    env = tmp_path_factory.mktemp("torch-cpu") / "env"
    subprocess.run(["python3.11", "-m", "venv", str(env)], check=True, env=clean_env())
    proc = subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "--quiet",
                           *TORCH], capture_output=True, text=True, env=clean_env(),
                          timeout=900)
    assert proc.returncode == 0, proc.stderr
    return env / "bin" / "python"


def faulty(root: Path, torch_python: Path) -> Path:
    """An env that sees ``torch_python``'s real torch through FAULT_HOOK."""
    real_site = site_packages(torch_python.parent.parent)[0]
    return make_env(root, {"real_torch.pth": f"import site; site.addsitedir({str(real_site)!r})\n",
                           "fault_hook.py": FAULT_HOOK, "fault_hook.pth": "import fault_hook\n"})


def run_runner(python: Path, job: dict, **env: str) -> tuple[int, dict, str]:
    """The runner run directly, as envcheck runs it: its exit code, document and stderr."""
    proc = subprocess.run([str(python), str(RUNNER), json.dumps(job)], capture_output=True,
                          text=True, timeout=300, env=clean_env(**env))
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def ranks_of(python: Path) -> list[int]:
    """Live rank processes started by ``python``'s runner (by their command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:1] == [str(python).encode()] and b"--rank" in argv and running(int(entry.name)):
            found.append(int(entry.name))
    return found


# --- the real torch -------------------------------------------------------------------

@pytest.mark.slow
def test_one_cpu_device_trains_with_native_torch(torch_python: Path):
    code, doc, _ = run_runner(torch_python, {"devices": ["cpu:0"]})  # backend "auto"

    assert code == 0, doc
    build = doc["build"]
    assert build["framework"] == "torch" and build["version"] == "2.13.0+cpu"
    assert build["cuda_version"] is None and build["cuda_available"] is False
    assert build["cudnn_version"] is None and build["arch_list"] == []
    assert build["gloo_available"] is True and build["nccl_available"] is False
    assert "keras_backend" not in build  # native torch.nn, no Keras
    assert doc["gpus_seen"] == 0
    [cpu] = doc["devices"]
    assert cpu["status"] == "pass" and cpu["error"] is None
    assert cpu["placed_on"] == "cpu:0"
    assert cpu["ms_per_step"] > 0
    assert cpu["loss_last"] < cpu["loss_first"]
    assert cpu["memory"] == {"weights_freed": True}
    assert cpu["cudnn"] is None  # exercised on GPUs only
    assert doc["multi_replica"] is None


@pytest.mark.slow
def test_a_gpu_the_cpu_build_cannot_see_fails_and_the_cpu_still_passes(torch_python: Path):
    code, doc, _ = run_runner(torch_python, {"backend": "torch", "devices": ["cpu:0", "gpu:0"]})

    assert code == 1
    cpu, gpu = doc["devices"]
    assert cpu["status"] == "pass"
    assert gpu["status"] == "fail"
    assert gpu["error"].startswith("RuntimeError: gpu:0 is not visible to torch "
                                   "(it sees 0 CUDA device(s))")


@pytest.mark.slow
def test_two_cpu_processes_train_with_ddp_over_gloo(torch_python: Path):
    result = run_smoke(torch_python, ["cpu:0", "cpu:1"], backend="torch", timeout=120,
                       multi_replica=True, batch=16)

    assert result.ok, result
    assert [d.placed_on for d in result.devices] == ["cpu:0", "cpu:1"]
    multi = result.multi_replica
    assert multi.status == "pass", multi.detail
    assert (multi.replicas, multi.per_replica_batch, multi.global_batch) == (2, 16, 32)
    assert multi.scaling_efficiency > 0 and multi.ms_per_step > 0
    assert multi.samples_per_s == pytest.approx(32 * 1000 / multi.ms_per_step, rel=0.01)
    assert multi.detail.startswith("DistributedDataParallel over gloo, 2 processes, ")
    assert "replica batches [16, 16]" in multi.detail  # what each rank really trained on
    assert result.runs == ["all devices: finished"]


@pytest.mark.slow
def test_ranks_whose_gradients_are_not_averaged_fail_on_their_weights(tmp_path, torch_python):
    python = faulty(tmp_path / "env", torch_python)

    code, doc, _ = run_runner(python, {"backend": "torch", "devices": ["cpu:0", "cpu:1"],
                                       "multi_replica": True},
                              ENVCHECK_TEST_FAULT="desync", ENVCHECK_TEST_FAULT_RANK="all")

    assert code == 1
    assert [d["status"] for d in doc["devices"]] == ["pass", "pass"]
    multi = doc["multi_replica"]
    assert multi["status"] == "fail"
    assert multi["detail"].startswith("replicas disagree on weights 0.weight, 0.bias, 2.weight, "
                                      "2.bias; DistributedDataParallel over gloo"), multi["detail"]


@pytest.mark.slow
@pytest.mark.parametrize("fault, cause", [
    ("abort", "rank 1 (cpu:1) crashed with SIGABRT (last: step 1)"),
    ("hang", "rank 1 (cpu:1): no answer within "),
])
def test_a_rank_that_dies_or_hangs_fails_the_check_with_its_cause(
        tmp_path: Path, torch_python: Path, fault: str, cause: str):
    python = faulty(tmp_path / "env", torch_python)
    timeout = 20  # the runner's ranks get 1.5 x 20 = 30 s, their process group 3/4 of that

    started = time.monotonic()
    result = run_smoke(python, ["cpu:0", "cpu:1"], backend="torch", timeout=timeout,
                       import_timeout=60, multi_replica=True,
                       env={"ENVCHECK_TEST_FAULT": fault})
    took = time.monotonic() - started

    assert [d.status for d in result.devices] == ["pass", "pass"]  # one process each: fine
    multi = result.multi_replica
    assert multi.status == "fail"
    assert multi.detail.startswith(cause), multi.detail
    assert "(last: step 1)" in multi.detail.split(";")[0]  # how far the rank got
    assert re.search(r"; DistributedDataParallel over gloo, 2 processes, \d+ thread\(s\) each$",
                     multi.detail), multi.detail
    assert result.runs == ["all devices: finished"]  # the runner itself answered in time
    assert took < 60 + 2 * timeout
    assert ranks_of(python) == []
    if fault == "hang":  # rank 0, waiting on rank 1 in gloo, timed out after it, not before
        assert "rank 0 (cpu:0)" in multi.detail.split(";")[1]


@pytest.mark.slow
def test_ranks_die_with_a_runner_killed_alone(tmp_path: Path, torch_python: Path):
    python = faulty(tmp_path / "env", torch_python)
    job = {"backend": "torch", "devices": ["cpu:0", "cpu:1"], "multi_replica": True,
           "per_device": False, "multi_timeout": 300}
    runner = subprocess.Popen([str(python), str(RUNNER), json.dumps(job)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=clean_env(ENVCHECK_TEST_FAULT="hang"))
    try:
        deadline = time.monotonic() + 120
        while len(ranks_of(python)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        ranks = ranks_of(python)
        assert len(ranks) == 2
    finally:
        runner.kill()  # the runner alone, not its process group
        runner.wait()
        runner.stderr.close()
    deadline = time.monotonic() + 10
    while any(running(pid) for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(pid) for pid in ranks)


def test_a_multi_timeout_that_is_not_a_positive_number_is_a_bad_job():
    # the job is judged before any framework is imported: any interpreter will do
    code, doc, _ = run_runner(Path(sys.executable), {"devices": ["cpu:0"], "multi_timeout": 0})

    assert code == 2
    assert doc == {"error": "bad job: multi_timeout must be a number of seconds > 0"}


# --- through envcheck ----------------------------------------------------------------

ALL_REDUCE = """
import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")  # env:// - RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
rank, world = dist.get_rank(), dist.get_world_size()
assert (rank, world) == (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])) == (int(os.environ["LOCAL_RANK"]), 2)
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)  # 1 + 2
line = f"rank {rank}/{world} sum {t.item():g} port {os.environ['MASTER_PORT']} cuda {torch.version.cuda}\\n"
os.write(1, line.encode())  # one write: the ranks share the pipe
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_envcheck_makes_validates_and_runs_a_pytorch_cpu_env(tmp_path: Path, cli, home):
    """`envcheck env create` from the pytorch-cpu preset (offline: PyTorch's CPU index can't be
    reached here, the +cpu wheel is in the configured find-links), `validate` with --devices
    cpu and cpu:0,cpu:1 (DDP over gloo), and `run --nproc 2` all-reducing a tensor."""
    made = cli("env", "create", "t", "--preset", "pytorch-cpu")
    assert made.code == 0, made.err
    unreachable = cli("env", "show", "t", "--json").json()["env"]["index"].get("unreachable", [])
    for url in unreachable:  # left out, and said so: the configured indexes served the wheel
        assert f"warning: the preset's index {url} could not be reached" in made.err

    one = cli("validate", "t", "--devices", "cpu", "--json")
    two = cli("validate", "t", "--devices", "cpu:0,cpu:1", "--json")

    assert one.code == 0, one.out + one.err
    report = one.json()["reports"][0]
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["smoke"]["status"] == "pass", checks["smoke"]
    assert checks["multi-replica"]["status"] == "skip"
    assert report["build"]["framework"] == "torch" and report["build"]["cuda_version"] is None
    [cpu] = report["devices"]
    assert cpu["placed_on"] == "cpu:0" and cpu["memory"] == {"weights_freed": True}
    assert two.code == 0, two.out + two.err
    report = two.json()["reports"][0]
    multi = report["multi_replica"]
    assert multi["status"] == "pass", multi["detail"]
    assert (multi["replicas"], multi["global_batch"]) == (2, 2 * multi["per_replica_batch"])
    assert multi["samples_per_s"] > 0
    assert "gloo" in multi["detail"]
    detail = next(c for c in report["checks"] if c["id"] == "multi-replica")["detail"]
    assert detail.startswith("the CPU processes share this host's") and "gradients are averaged" in detail

    script = tmp_path / "all_reduce.py"
    script.write_text(ALL_REDUCE)
    ran = cli("run", "--env", "t", "--gpus", "none", "--nproc", "2", "--", "python", str(script), timeout=300)
    assert ran.code == 0, ran.out + ran.err
    lines = sorted(ran.out.splitlines())
    assert [line.split()[:4] for line in lines] == [["rank", "0/2", "sum", "3"], ["rank", "1/2", "sum", "3"]]
    assert len({line.split()[5] for line in lines}) == 1 and lines[0].endswith("cuda None")
