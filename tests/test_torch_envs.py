"""PyTorch envs for real: stand-in torch wheels (metadata only, not importable) with the
nvidia-* CUDA runtime wheels PyPI's torch requires, installed offline; hosts from the fake
NVML; `compat --env`, `select`, `provision --auto --framework torch`, `run --nproc`, a
preset's `indexes`, and `check`/`doctor --framework`.

The stand-ins don't import, so every validation here runs with --no-smoke (or none at all).
`compat --env` and `select` are judged in process (their use cases on a Session with the
host the fake NVML gives injected); `select`'s text, provision, run and check run as commands.
"""
from __future__ import annotations

import http.server
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from conftest import Result, clean_env
from fake_nvml import A100, T4, FakeNvml
from loopback import holding_server
from envcheck.paths import Home
from envcheck.usecases.compat import judge_compat
from envcheck.usecases.session import Session
from test_select import envcheck, host_of, make_env, select
from wheelhouse import offline

pytestmark = pytest.mark.timeout(180)

OLD_DRIVER = {"FAKE_NVML_DRIVER": "470.57.02", "FAKE_NVML_CUDA": "11040"}  # CUDA 11.4
NEW_DRIVER = {"FAKE_NVML_DRIVER": "550.54.15", "FAKE_NVML_CUDA": "12040"}  # CUDA 12.4

CPU = """title = "torch CPU stand-in"
kind = "cpu"
framework = "torch"
packages = ["torch==2.13.0+cpu"]
"""
# As the built-in presets ask: a release line, not a pin (the installer picks 2.0.1 / 2.10.0).
CUDA11 = """title = "torch CUDA 11.7 stand-in"
kind = "gpu"
framework = "torch"
packages = ["torch>=2.0,<2.1"]

[gpu]
cuda = "11.7"
cudnn = "8.5"
"""
CUDA12 = """title = "torch CUDA 12.8 stand-in"
kind = "gpu"
framework = "torch"
packages = ["torch~=2.10.0"]

[gpu]
cuda = "12.8"
cudnn = "9.10"
"""
# torch 2.13's release default is CUDA 13.0 (driver >= 580); with the CUDA 12.8 runtime
# wheel beside it, what the env holds says CUDA 12.8.
TORCH13_CU12 = """title = "torch 2.13 with a CUDA 12.8 runtime wheel"
kind = "cpu"
framework = "torch"
packages = ["torch==2.13.0", "nvidia-cuda-runtime-cu12==12.8.90", "nvidia-cudnn-cu12==9.10.2.21"]
"""
TF_GPU = """title = "tensorflow stand-in"
kind = "cpu"
framework = "tensorflow"
packages = ["tensorflow==2.21.0"]
"""


def write_preset(home: Path, name: str, text: str) -> None:
    (home / "presets").mkdir(exist_ok=True)
    (home / "presets" / f"{name}.toml").write_text(text)


def manifest(home: Path, name: str) -> dict:
    return json.loads((home / "envs" / name / "envcheck.json").read_text())


def host(fake_nvml: FakeNvml, home: Path, gpus=(A100,), **extra: str) -> dict[str, str]:
    return fake_nvml.env(gpus=gpus, ENVCHECK_HOME=str(home), **extra)


def compat(fake_nvml: FakeNvml, env: dict[str, str], **options) -> Result:
    """`envcheck compat --json` in process: the use case on the home of ``env`` with its host
    (read from the fake NVML) injected; its exit code and JSON document."""
    session = Session(Home(Path(env["ENVCHECK_HOME"])), host=host_of(fake_nvml, env))
    result = judge_compat(session, **options)
    return Result(result.exit_code, json.dumps(result.to_json()), "")


def tiers(result: Result) -> dict[str, str]:
    assert result.code == 0, result.err
    return {r["name"]: r["tier"] for r in result.json()["ranking"]}


def alive(pid: int) -> bool:
    """Is ``pid`` a live process (not gone, not a zombie)?"""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def all_gone(pids, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def closed_port_url() -> str:
    """An index URL on a loopback port nothing listens on (the kernel's pick, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/simple"


@pytest.fixture(scope="module")
def torch_home(tmp_path_factory, wheelhouse: Path, local_wheels: Path) -> Path:
    """Envs cu11 (torch 2.0.1 + the cu11 runtime wheels), cu12 (torch 2.10.0 + cu12), cpu
    (torch 2.13.0+cpu), t13 (torch 2.13.0 + the CUDA 12.8 runtime wheel) and tf (a GPU
    tensorflow stand-in), shared by the tests that only read them."""
    root = tmp_path_factory.mktemp("torch-home")
    for name, text in (("cu11", CUDA11), ("cu12", CUDA12), ("cpu", CPU), ("t13", TORCH13_CU12), ("tf", TF_GPU)):
        write_preset(root, f"standin-{name}", text)
        # only the +cpu env sees local_wheels: torch==2.13.0 would take 2.13.0+cpu there
        r = envcheck(clean_env(ENVCHECK_HOME=str(root)), "env", "create", name, "--preset", f"standin-{name}",
                     "--for-another-host",  # made here, used on the fake GPU hosts below
                     *offline(local_wheels if name == "cpu" else wheelhouse))
        assert r.code == 0, r.err
    assert manifest(root, "t13")["packages"]["torch"] == "2.13.0"
    return root


# -- the stand-in wheels ----------------------------------------------------------------------

def test_stand_in_wheels_install_with_their_nvidia_runtime_and_a_local_version(torch_home, local_wheels, wheelhouse,
                                                                                home):
    packages = {name: manifest(torch_home, name)["packages"] for name in ("cu11", "cu12", "cpu")}
    assert packages["cu11"] == {"torch": "2.0.1", "nvidia-cuda-runtime-cu11": "11.7.99",
                                "nvidia-cudnn-cu11": "8.5.0.96"}
    assert packages["cu12"] == {"torch": "2.10.0", "nvidia-cuda-runtime-cu12": "12.8.90",
                                "nvidia-cudnn-cu12": "9.10.2.21"}
    # build_wheel names a local version's wheel as the spec says (the + kept), and uv took it
    (wheel,) = local_wheels.glob("torch-*.whl")
    assert wheel.name == "torch-2.13.0+cpu-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        assert "Version: 2.13.0+cpu\n" in zf.read("torch-2.13.0+cpu.dist-info/METADATA").decode()
    assert packages["cpu"] == {"torch": "2.13.0+cpu"} and manifest(torch_home, "cpu")["installer"] == "uv"
    # ... and so does pip
    write_preset(home, "cpu", CPU)
    r = envcheck(clean_env(ENVCHECK_HOME=str(home)), "env", "create", "cpu-pip", "--preset", "cpu",
                 "--installer", "pip", *offline(local_wheels))
    assert r.code == 0, r.err
    made = manifest(home, "cpu-pip")
    assert made["installer"] == "pip" and made["packages"]["torch"] == "2.13.0+cpu"


# -- compat --env: the CUDA an env's torch was built with, read from its runtime wheel --------

def test_compat_on_an_old_driver_t4(fake_nvml, torch_home):
    env = host(fake_nvml, torch_home, gpus=(T4,), **OLD_DRIVER)
    cu11 = compat(fake_nvml, env, env_name="cu11")
    assert cu11.code == 0, cu11.err
    doc = cu11.json()
    assert (doc["framework"], doc["version"], doc["verdict"], doc["uses_gpu"]) == ("torch", "2.0.1", "ok", True)
    assert doc["host"]["driver_version"] == "470.57.02" and doc["host"]["gpu_ccs"] == ["7.5"]
    assert doc["build"]["cuda"].startswith("11.7") and doc["build"]["cudnn"].startswith("8.5")
    assert "CUDA 11.7 from the installed nvidia-cuda-runtime-cu11 11.7.99" in doc["build"]["notes"][0]
    assert doc["build"]["driver"]["min_driver"] == "450.80.02"  # CUDA 11 minor-version compatibility
    assert any("470.57.02 >= 450.80.02" in r for r in doc["reasons"])
    assert any("7.5" in r and "native code" in r for r in doc["reasons"])  # sm_75 is compiled in

    cu12 = compat(fake_nvml, env, env_name="cu12")
    assert cu12.code == 1
    doc = cu12.json()
    assert (doc["version"], doc["verdict"], doc["uses_gpu"]) == ("2.10.0", "fail", False)
    assert "nvidia-cuda-runtime-cu12 12.8.90" in doc["build"]["notes"][0]
    assert "driver 470.57.02 is too old for torch 2.10.0 (CUDA 12.8): needs driver >= 525.60.13" in doc["reasons"][0]
    assert doc["fixes"][0] == "upgrade the NVIDIA driver to >= 525.60.13"
    assert any("torch==2.0.*" in fix for fix in doc["fixes"])  # the release that runs here

    cpu = compat(fake_nvml, env, env_name="cpu")
    assert cpu.code == 0
    doc = cpu.json()
    assert (doc["version"], doc["verdict"], doc["uses_gpu"]) == ("2.13.0+cpu", "ok", False)
    assert doc["build"]["cuda"] is None and doc["build"]["gpu_capable"] is False


def test_compat_on_a_new_driver_a100(fake_nvml, torch_home):
    env = host(fake_nvml, torch_home, gpus=(A100,), **NEW_DRIVER)
    for name, cuda, runtime, minimum in (("cu11", "11.7", "nvidia-cuda-runtime-cu11 11.7.99", "450.80.02"),
                                         ("cu12", "12.8", "nvidia-cuda-runtime-cu12 12.8.90", "525.60.13")):
        r = compat(fake_nvml, env, env_name=name)
        assert r.code == 0, (name, r.out, r.err)
        doc = r.json()
        assert (doc["verdict"], doc["uses_gpu"]) == ("ok", True), doc
        assert doc["build"]["cuda"].startswith(cuda) and runtime in doc["build"]["notes"][0]
        assert doc["build"]["driver"]["min_driver"] == minimum
        assert doc["host"]["driver_version"] == "550.54.15" and doc["host"]["gpu_ccs"] == ["8.0"]


def test_the_runtime_wheel_not_the_release_default_decides(fake_nvml, torch_home):
    """torch 2.13's release default, CUDA 13, needs driver 580; the env's CUDA 12.8 runtime
    wheel says CUDA 12.8, which driver 550 runs."""
    env = host(fake_nvml, torch_home, gpus=(A100,), **NEW_DRIVER)
    default = compat(fake_nvml, env, framework="torch==2.13.0")
    assert default.code == 1 and "needs driver >= 580" in default.json()["reasons"][0]
    r = compat(fake_nvml, env, env_name="t13")
    assert r.code == 0, (r.out, r.err)
    doc = r.json()
    assert doc["verdict"] != "fail" and doc["uses_gpu"] is True
    assert (doc["build"]["cuda"], doc["build"]["cudnn"]) == ("12.8", "9.10")
    assert doc["build"]["driver"]["min_driver"] == "525.60.13"
    assert "not the release's default 13.0" in doc["build"]["notes"][0]
    old = compat(fake_nvml, host(fake_nvml, torch_home, gpus=(T4,), **OLD_DRIVER), env_name="t13")
    assert old.code == 1 and "(CUDA 12.8): needs driver >= 525.60.13" in old.json()["reasons"][0]


# -- select -----------------------------------------------------------------------------------

def test_select_on_the_old_driver_puts_only_the_cuda11_env_on_the_gpu(fake_nvml, torch_home):
    env = host(fake_nvml, torch_home, gpus=(T4,), **OLD_DRIVER)
    r = select(fake_nvml, env)
    got = tiers(r)
    assert (got["cu11"], got["cu12"], got["cpu"]) == ("gpu", "cpu", "cpu")
    assert r.json()["selected"] == "cu11"
    rows = {x["name"]: x for x in r.json()["ranking"]}
    assert rows["cu12"]["why_cpu"] == "incompatible" and "525.60.13" in rows["cu12"]["reason"]
    assert rows["cpu"]["why_cpu"] is None and "CPU-only build" in rows["cpu"]["reason"]
    assert rows["cu11"]["framework"] == "torch" and rows["cu11"]["version"] == "2.0.1"

    only_torch = select(fake_nvml, env, framework="torch")
    got = tiers(only_torch)
    assert (got["cu11"], got["cu12"], got["cpu"]) == ("gpu", "cpu", "cpu") and "tf" not in got
    assert only_torch.json()["selected"] == "cu11"
    assert "tf" in [x["name"] for x in only_torch.json()["excluded"]]
    text = fake_nvml.cli(env, "select", "--framework", "torch")
    assert text.code == 0 and text.out.splitlines()[0].split()[:3] == ["*", "cu11", "gpu"]


def test_select_on_the_new_driver_puts_both_cuda_envs_on_the_gpu(fake_nvml, torch_home):
    env = host(fake_nvml, torch_home, gpus=(A100,), **NEW_DRIVER)
    got = tiers(select(fake_nvml, env))
    assert (got["cu11"], got["cu12"], got["t13"], got["cpu"]) == ("gpu", "gpu", "gpu", "cpu")
    got = tiers(select(fake_nvml, env, framework="torch"))
    assert (got["cu11"], got["cu12"], got["cpu"]) == ("gpu", "gpu", "cpu") and "tf" not in got


def test_select_with_a_framework_reads_the_runtime_wheel_too(fake_nvml, torch_home):
    env = host(fake_nvml, torch_home, gpus=(T4,), **OLD_DRIVER)
    def reasons(**options: str) -> dict[str, str]:
        return {x["name"]: x["reason"] for x in select(fake_nvml, env, **options).json()["ranking"]}

    plain, only = reasons(), reasons(framework="torch")
    assert "(CUDA 12.8): needs driver >= 525.60.13" in plain["t13"]
    assert only["t13"] == plain["t13"]


# -- provision --auto --framework torch -------------------------------------------------------

@pytest.fixture
def torch_presets(home: Path) -> Path:
    """User presets overriding the built-in torch presets with stand-ins."""
    write_preset(home, "pytorch-cpu", CPU)
    write_preset(home, "pytorch-cuda12", CUDA12)
    write_preset(home, "pytorch-cuda11", CUDA11)
    return home


def provision_auto(fake_nvml, home, wheelhouse, local_wheels, gpus, **driver) -> Result:
    return fake_nvml.cli(host(fake_nvml, home, gpus=gpus, **driver), "provision", "--auto", "--framework", "torch",
                         "--no-smoke", "--json", *offline(wheelhouse), "--find-links", str(local_wheels))


def by_name(result: Result) -> dict[str, dict]:
    data = result.json()
    assert data["schema"] == "envcheck.provision/1"
    return {e["name"]: e for e in data["envs"]}


def test_provision_torch_on_an_old_driver_makes_cpu_and_cuda11(fake_nvml, torch_presets, wheelhouse, local_wheels):
    r = provision_auto(fake_nvml, torch_presets, wheelhouse, local_wheels, (T4,), **OLD_DRIVER)
    envs = by_name(r)
    assert set(envs) == {"pytorch-cpu", "pytorch-cuda12", "pytorch-cuda11"}  # torch's presets only
    # a CPU build beside a usable GPU trains, ignoring it: degraded, saying so (issue 28)
    assert envs["pytorch-cpu"]["action"] == "created" and envs["pytorch-cpu"]["verdict"] == "degraded"
    assert "CPU-only" in envs["pytorch-cpu"]["problem"] and "will ignore this host's 1 GPU(s)" in envs["pytorch-cpu"]["problem"]
    cuda12 = envs["pytorch-cuda12"]
    assert cuda12["action"] == "skipped" and cuda12["verdict"] is None
    assert "driver 470.57.02 is too old for torch 2.10.0" in cuda12["reason"] and "525.60.13" in cuda12["reason"]
    assert cuda12["fix"] == "upgrade the NVIDIA driver to >= 525.60.13"
    assert envs["pytorch-cuda11"]["action"] == "created"
    # the stand-in can't show the GPU to a smoke run, so validation can't call it ready
    assert envs["pytorch-cuda11"]["verdict"] == "not-ready" and r.code == 1
    assert sorted(p.name for p in (torch_presets / "envs").iterdir()) == ["pytorch-cpu", "pytorch-cuda11"]
    made = manifest(torch_presets, "pytorch-cuda11")
    assert made["packages"]["torch"] == "2.0.1" and made["packages"]["nvidia-cuda-runtime-cu11"] == "11.7.99"


def test_provision_torch_on_a_new_driver_makes_cuda12_only(fake_nvml, torch_presets, wheelhouse, local_wheels):
    r = provision_auto(fake_nvml, torch_presets, wheelhouse, local_wheels, (A100,), **NEW_DRIVER)
    envs = by_name(r)
    assert envs["pytorch-cpu"]["action"] == "created"
    assert envs["pytorch-cuda12"]["action"] == "created"
    cuda11 = envs["pytorch-cuda11"]
    assert cuda11["action"] == "skipped"
    assert cuda11["reason"].startswith("pytorch-cuda12 already gives torch this host's GPUs")
    assert cuda11["fix"] == "provision it by name if you want it too: envcheck provision --preset pytorch-cuda11"
    assert sorted(p.name for p in (torch_presets / "envs").iterdir()) == ["pytorch-cpu", "pytorch-cuda12"]
    assert manifest(torch_presets, "pytorch-cuda12")["packages"]["nvidia-cuda-runtime-cu12"] == "12.8.90"
    bad = fake_nvml.cli(host(fake_nvml, torch_presets), "provision", "--auto", "--framework", "nope")
    assert bad.code == 2 and "'nope'" in bad.err and "torch" in bad.err


def test_provision_reads_a_preset_pinned_to_a_patch_release(fake_nvml, torch_presets, wheelhouse, local_wheels):
    write_preset(torch_presets, "pytorch-cuda11", CUDA11.replace('"torch>=2.0,<2.1"', '"torch==2.0.1"'))
    envs = by_name(provision_auto(fake_nvml, torch_presets, wheelhouse, local_wheels, (T4,), **OLD_DRIVER))
    assert envs["pytorch-cuda11"]["action"] == "created", envs["pytorch-cuda11"]


# -- run --nproc --------------------------------------------------------------------------------

RANK_REPORT = """
import json, os, sys
keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
        "ENVCHECK_GLOBAL_BATCH", "ENVCHECK_PER_GPU_BATCH")
seen = {k: os.environ.get(k) for k in keys}
seen.update(prefix=sys.prefix, pid=os.getpid(), visible=os.environ.get("CUDA_VISIBLE_DEVICES"))
with open(os.path.join(sys.argv[1], "rank-%s.json" % os.environ.get("RANK")), "w") as fh:
    json.dump(seen, fh)
"""
# Rank 0 starts a grandchild and sleeps; rank 1 waits for rank 0's pids, then exits 3 or
# kills itself (argv[2]); every pid is written to OUT/pid-<rank>[-child].
FAILING = """
import os, signal, subprocess, sys, time
out, how, rank = sys.argv[1], sys.argv[2], int(os.environ["RANK"])
def note(name, pid):
    with open(os.path.join(out, name + ".tmp"), "w") as fh:
        fh.write(str(pid))
    os.replace(os.path.join(out, name + ".tmp"), os.path.join(out, name))
if rank == 0:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    note("pid-0-child", child.pid)
note("pid-%d" % rank, os.getpid())
if rank == 1 and how != "sleep":
    while not os.path.exists(os.path.join(out, "pid-0")):
        time.sleep(0.01)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(3)
time.sleep(120)
"""


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    (tmp_path / "report.py").write_text(RANK_REPORT)
    (tmp_path / "failing.py").write_text(FAILING)
    (tmp_path / "out").mkdir()
    return tmp_path


def rank_reports(out: Path) -> dict[str, dict]:
    return {p.stem.split("-", 1)[1]: json.loads(p.read_text()) for p in out.glob("rank-*.json")}


def pid_file(out: Path, name: str, within: float = 30.0) -> int:
    deadline = time.monotonic() + within
    while not (out / name).exists():
        assert time.monotonic() < deadline, f"{name} never written"
        time.sleep(0.02)
    return int((out / name).read_text())


def test_nproc_2_starts_two_ranks_the_way_torchrun_does(fake_nvml, torch_home, scripts):
    env = host(fake_nvml, torch_home, gpus=(A100, A100), **NEW_DRIVER)
    r = fake_nvml.cli(env, "run", "--env", "cu12", "--nproc", "2", "--", "python",
                      str(scripts / "report.py"), str(scripts / "out"))
    assert r.code == 0, r.err
    assert "rank" not in r.err  # nothing failed, nothing to report
    ranks = rank_reports(scripts / "out")
    assert set(ranks) == {"0", "1"}
    for rank, seen in ranks.items():
        assert seen["RANK"] == seen["LOCAL_RANK"] == rank
        assert seen["WORLD_SIZE"] == seen["LOCAL_WORLD_SIZE"] == "2" and seen["GROUP_RANK"] == "0"
        assert seen["MASTER_ADDR"] == "127.0.0.1"
        assert Path(seen["prefix"]) == torch_home / "envs" / "cu12"  # the env's own python
        assert seen["visible"] == "0,1"  # every rank sees the GPUs; a script takes cuda:LOCAL_RANK
    ports = {seen["MASTER_PORT"] for seen in ranks.values()}
    assert len(ports) == 1 and 0 < int(ports.pop()) < 65536
    assert ranks["0"]["pid"] != ranks["1"]["pid"]


def test_nproc_1_execs_the_command_alone_with_rank_variables(fake_nvml, torch_home, scripts):
    env = host(fake_nvml, torch_home, gpus=(A100, A100), **NEW_DRIVER)
    proc = subprocess.Popen([sys.executable, "-m", "envcheck", "run", "--env", "cu12", "--nproc", "1", "--",
                             "python", str(scripts / "report.py"), str(scripts / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    (seen,) = rank_reports(scripts / "out").values()
    assert (seen["RANK"], seen["LOCAL_RANK"], seen["WORLD_SIZE"], seen["LOCAL_WORLD_SIZE"]) == ("0", "0", "1", "1")
    assert seen["MASTER_ADDR"] == "127.0.0.1" and int(seen["MASTER_PORT"]) > 0
    assert seen["pid"] == proc.pid  # envcheck became the command: no supervisor in between


def test_without_nproc_torch_takes_one_process_per_gpu_and_tensorflow_one(fake_nvml, torch_home, scripts):
    env = host(fake_nvml, torch_home, gpus=(A100, A100), **NEW_DRIVER)
    out = scripts / "out"
    report = ["python", str(scripts / "report.py"), str(out)]
    r = fake_nvml.cli(env, "run", "--env", "cu12", "--", *report)
    assert r.code == 0, r.err
    assert set(rank_reports(out)) == {"0", "1"} and "2 processes, one per GPU" in r.err
    for p in out.iterdir():
        p.unlink()
    one_gpu = fake_nvml.cli(env, "run", "--env", "cu12", "--gpus", "1", "--", *report)
    assert one_gpu.code == 0 and set(rank_reports(out)) == {"None"}  # one GPU: the command alone
    for p in out.iterdir():
        p.unlink()
    cpu_build = fake_nvml.cli(env, "run", "--env", "cpu", "--", *report)  # +cpu: no GPU to give a rank
    assert cpu_build.code == 0 and set(rank_reports(out)) == {"None"} and "one per GPU" not in cpu_build.err
    for p in out.iterdir():
        p.unlink()
    tf = fake_nvml.cli(env, "run", "--env", "tf", "--", *report)
    assert tf.code == 0, tf.err
    (seen,) = rank_reports(out).values()
    assert seen["RANK"] is None and seen["visible"] == "0,1"  # MirroredStrategy: one process, both GPUs
    bad = fake_nvml.cli(env, "run", "--env", "cu12", "--nproc", "0", "--", "true")
    assert bad.code == 2 and "--nproc 0" in bad.err


def test_a_cpu_build_on_a_gpu_host_is_one_process_with_the_batch_as_given(fake_nvml, torch_home, scripts):
    env = host(fake_nvml, torch_home, gpus=(A100, A100), **NEW_DRIVER)
    out = scripts / "out"
    r = fake_nvml.cli(env, "run", "--env", "cpu", "--batch-size", "32", "--", "python",
                      str(scripts / "report.py"), str(out))
    assert r.code == 0, r.err
    (seen,) = rank_reports(out).values()
    assert (seen["RANK"], seen["ENVCHECK_GLOBAL_BATCH"], seen["ENVCHECK_PER_GPU_BATCH"]) == (None, "32", "32")
    assert "global batch" not in r.err


STUBBORN = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only SIGKILL ends it
if os.environ["RANK"] == "3":
    time.sleep(1)
    sys.exit(5)
time.sleep(120)
"""


def test_ranks_are_stopped_together_not_one_grace_after_another(fake_nvml, torch_home, tmp_path):
    """Three ranks ignoring SIGTERM when the fourth fails: one grace period for all of them
    (about 2 s, plus the guard's slack), where one after another would take three."""
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN)
    env = host(fake_nvml, torch_home, **NEW_DRIVER)
    started = time.monotonic()
    r = fake_nvml.cli(env, "run", "--env", "cpu", "--nproc", "4", "--", "python", str(script))
    elapsed = time.monotonic() - started
    assert r.code == 5, r.err
    assert sum("(stopped: another rank failed)" in line for line in r.err.splitlines()) == 3
    assert elapsed < 6, elapsed  # ~3.4 s here: 1 s + one grace (2 s); one after another: ~7.5 s


def test_a_failing_rank_stops_the_others_and_its_status_is_envchecks(fake_nvml, torch_home, scripts):
    env = host(fake_nvml, torch_home, **NEW_DRIVER)
    out = scripts / "out"
    started = time.monotonic()
    r = fake_nvml.cli(env, "run", "--env", "cpu", "--nproc", "2", "--", "python",
                      str(scripts / "failing.py"), str(out), "exit")
    elapsed = time.monotonic() - started
    assert r.code == 3, r.err
    assert elapsed < 20, elapsed  # rank 0 would sleep 120 s
    lines = r.err.splitlines()
    assert any(line == "envcheck: rank 1 exited with 3" for line in lines), r.err
    assert any(line.startswith("envcheck: rank 0 ") and line.endswith("(stopped: another rank failed)")
               for line in lines), r.err
    assert "1 of 2 ranks failed" in r.err
    pids = [int((out / name).read_text()) for name in ("pid-0", "pid-0-child", "pid-1")]
    assert all_gone(pids), [p for p in pids if alive(p)]  # rank 0 and what it started too


def test_a_rank_killed_by_a_signal_is_exit_128_plus_the_signal(fake_nvml, torch_home, scripts):
    env = host(fake_nvml, torch_home, **NEW_DRIVER)
    out = scripts / "out"
    r = fake_nvml.cli(env, "run", "--env", "cpu", "--nproc", "2", "--", "python",
                      str(scripts / "failing.py"), str(out), "kill")
    assert r.code == 137, r.err
    assert any(line == "envcheck: rank 1 killed by signal 9"
               for line in r.err.splitlines()), r.err
    assert all_gone([int((out / name).read_text()) for name in ("pid-0", "pid-0-child", "pid-1")])


def test_sigterm_to_envcheck_stops_every_rank(fake_nvml, torch_home, scripts):
    env = host(fake_nvml, torch_home, **NEW_DRIVER)
    out = scripts / "out"
    proc = subprocess.Popen([sys.executable, "-m", "envcheck", "run", "--env", "cpu", "--nproc", "2", "--",
                             "python", str(scripts / "failing.py"), str(out), "sleep"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        pids = [pid_file(out, name) for name in ("pid-0", "pid-0-child", "pid-1")]
        assert all(alive(p) for p in pids)
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 143, err  # as the command alone, killed by SIGTERM, would end
    assert "envcheck: SIGTERM: stopped all 2 ranks" in err
    assert all_gone(pids), [p for p in pids if alive(p)]


# -- a preset's indexes -----------------------------------------------------------------------

def indexed_preset(*urls: str, packages: str = '"torch==2.13.0+cpu"') -> str:
    return CPU.replace('"torch==2.13.0+cpu"', packages) + f"indexes = {json.dumps(list(urls))}\n"


@pytest.fixture
def empty_index(tmp_path: Path) -> list[str]:
    """An --index-url with nothing in it, so no install reaches PyPI."""
    (tmp_path / "simple").mkdir()
    return ["--index-url", (tmp_path / "simple").as_uri()]


def test_an_unreachable_preset_index_is_left_out_with_a_warning(cli, home, local_wheels, empty_index):
    url = closed_port_url()
    write_preset(home, "pt", indexed_preset(url))
    r = cli("env", "create", "pt", "--preset", "pt", *empty_index, "--find-links", str(local_wheels))
    assert r.code == 0, r.err
    warning = f"warning: the preset's index {url} could not be reached"
    assert any(line.startswith(warning) for line in r.err.splitlines()), r.err
    made = manifest(home, "pt")
    assert made["packages"] == {"torch": "2.13.0+cpu"}  # from the find-links
    assert made["index"]["unreachable"] == [url] and url not in made["index"]["extra_index_urls"]
    assert made["preset"]["indexes"] == [url]

    as_json = cli("env", "create", "pt2", "--preset", "pt", *empty_index, "--find-links", str(local_wheels), "--json")
    assert as_json.code == 0, as_json.err
    doc = as_json.json()
    assert doc["schema"] == "envcheck.env/1" and doc["env"]["state"] == "ready"
    assert len(doc["warnings"]) == 1 and url in doc["warnings"][0]
    assert doc["env"]["index"]["unreachable"] == [url]

    for form in ((), ("--json",)):  # provision keeps the warning env create gives
        shutil.rmtree(home / "envs" / "pt")
        made = cli("provision", "--preset", "pt", "--no-smoke", *empty_index, "--find-links", str(local_wheels), *form)
        assert made.code == 0, made.err
        if form:
            assert url in made.json()["envs"][0]["warnings"][0]
        else:
            assert f"warning (pt): the preset's index {url} could not be reached" in made.out


def test_with_no_index_the_preset_index_is_not_used(cli, home, local_wheels):
    url = closed_port_url()
    write_preset(home, "pt", indexed_preset(url))
    r = cli("env", "create", "pt", "--preset", "pt", *offline(local_wheels), "--json")
    assert r.code == 0, r.err
    assert r.json().get("warnings", []) == [] and "warning" not in r.err
    index = manifest(home, "pt")["index"]
    assert "unreachable" not in index and url not in index["extra_index_urls"]


def test_an_index_that_never_answers_costs_seconds_not_minutes(cli, home, local_wheels, empty_index):
    with socket.socket() as silent:  # accepts connections (the backlog), never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/simple"
        write_preset(home, "pt", indexed_preset(url))
        started = time.monotonic()
        r = cli("env", "create", "pt", "--preset", "pt", *empty_index, "--find-links", str(local_wheels),
                timeout=60, env={"ENVCHECK_INDEX_TIMEOUT": "0.8"})
        elapsed = time.monotonic() - started
    assert r.code == 0, r.err
    assert 0.8 < elapsed < 20, elapsed  # the wait it was given (default 3 s), then the install
    assert manifest(home, "pt")["index"]["unreachable"] == [url] and url in r.err


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def torch_index(tmp_path: Path, local_wheels: Path):
    """A PEP 503 index on loopback serving torch 2.13.0+cpu (as PyTorch's CPU index does)."""
    import functools
    import shutil
    import urllib.parse

    root = tmp_path / "index"
    (root / "simple" / "torch").mkdir(parents=True)
    (wheel,) = local_wheels.glob("torch-*.whl")
    shutil.copy(wheel, root / wheel.name)
    (root / "simple" / "torch" / "index.html").write_text(
        f'<html><body><a href="/{urllib.parse.quote(wheel.name)}">{wheel.name}</a></body></html>\n')
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/simple"
    server.shutdown()


def test_a_reachable_preset_index_is_used(cli, home, wheelhouse, empty_index, torch_index):
    write_preset(home, "pt", indexed_preset(torch_index))
    # the find-links hold no torch 2.13.0+cpu: only the preset's index does
    r = cli("env", "create", "pt", "--preset", "pt", *empty_index, "--find-links", str(wheelhouse), "--json")
    assert r.code == 0, r.err
    assert r.json().get("warnings", []) == [] and "warning" not in r.err
    made = manifest(home, "pt")
    assert made["packages"] == {"torch": "2.13.0+cpu"}
    assert torch_index in made["index"]["extra_index_urls"] and "unreachable" not in made["index"]


def test_unsatisfiable_with_an_unreachable_index_names_it_in_the_fix(cli, home, wheelhouse, empty_index):
    url = closed_port_url()
    write_preset(home, "bad", indexed_preset(url, packages='"gamma==1.0"'))  # gamma needs alpha<1: none here
    r = cli("env", "create", "bad", "--preset", "bad", *empty_index, "--find-links", str(wheelhouse))
    assert r.code == 2, r.err
    assert "could not resolve gamma==1.0" in r.err
    assert f"the preset's index {url} was unreachable" in r.err.partition("fix:")[2]
    assert not (home / "envs" / "bad").exists()


@pytest.fixture
def hanging_index():
    """An index on loopback that takes each request and never answers it (a stuck mirror)."""
    with holding_server("127.0.0.1", lambda conn: conn.recv(65536)) as port:  # read, never answered
        yield f"http://127.0.0.1:{port}/simple"


@pytest.mark.parametrize("option", ["--index-url", "--extra-index-url"])
def test_a_given_index_that_hangs_is_named_and_fails_within_the_probe(cli, home, local_wheels, hanging_index, option):
    write_preset(home, "pt", CPU)
    with_password = hanging_index.replace("http://", "http://bob:s3cr3t@")
    # the installer alone would retry for over 2 minutes
    r = cli("env", "create", "pt", "--preset", "pt", option, with_password, "--find-links", str(local_wheels),
            timeout=60, env={"ENVCHECK_INDEX_TIMEOUT": "0.8"})
    assert r.code == 2, r.err
    shown = hanging_index.replace("http://", "http://***@")
    assert r.err.count("\n") == 1 and f"the index {shown} could not be reached: no answer within 0.8 s" in r.err
    assert "s3cr3t" not in r.out + r.err and "the default index" not in r.err
    assert not (home / "envs").exists() or not any((home / "envs").iterdir())


@pytest.mark.parametrize("value", ["soon", "0", "nan"])
def test_a_bad_index_timeout_is_exit_2_on_one_line_naming_it(cli, home, local_wheels, hanging_index, value):
    write_preset(home, "pt", CPU)
    r = cli("env", "create", "pt", "--preset", "pt", "--extra-index-url", hanging_index,
            "--find-links", str(local_wheels), env={"ENVCHECK_INDEX_TIMEOUT": value})
    assert r.code == 2, r.err
    assert r.err.count("\n") == 1 and f"ENVCHECK_INDEX_TIMEOUT='{value}' is not a number of seconds" in r.err
    assert "ENVCHECK_INDEX_TIMEOUT=10" in r.err
    assert not (home / "envs").exists() or not any((home / "envs").iterdir())


def test_an_index_timeout_past_the_maximum_is_exit_2_naming_it(cli, home, local_wheels, hanging_index):
    """1e10 s overflowed the socket's timeout (time_t) in the probe: an internal error."""
    write_preset(home, "pt", CPU)
    r = cli("env", "create", "pt", "--preset", "pt", "--extra-index-url", hanging_index,
            "--find-links", str(local_wheels), env={"ENVCHECK_INDEX_TIMEOUT": "1e10"})
    assert r.code == 2, r.err
    assert r.err.count("\n") == 1 and "ENVCHECK_INDEX_TIMEOUT='1e10' is past the maximum, 86400 seconds" in r.err
    assert not (home / "envs").exists() or not any((home / "envs").iterdir())


def test_a_resolution_failure_names_the_given_extra_index(cli, home, wheelhouse, empty_index, torch_index):
    write_preset(home, "bad", CPU.replace('"torch==2.13.0+cpu"', '"gamma==1.0"'))  # gamma needs alpha<1: none here
    r = cli("env", "create", "bad", "--preset", "bad", *empty_index, "--extra-index-url", torch_index,
            "--find-links", str(wheelhouse))
    assert r.code == 2, r.err
    assert f"could not resolve gamma==1.0 from {empty_index[1]} and " in r.err and torch_index in r.err
    assert "the default index" not in r.err


@pytest.mark.parametrize(("indexes", "key"), [
    (["ftp://example.com/simple"], "indexes[0]"),
    (["https://alice:s3cr3t@example.com/simple"], "indexes[0]"),
    (["download.pytorch.org/whl/cpu"], "indexes[0]"),
    (["http://127.0.0.1:9/simple", "https://example.com/a simple"], "indexes[1]"),
    (["https://example.com/simple?token=s3cr3t"], "indexes[0]"),  # a secret in a query: refused
])
def test_a_bad_preset_index_is_exit_2_on_one_line(cli, home, local_wheels, indexes, key):
    write_preset(home, "pt", indexed_preset(*indexes))
    r = cli("env", "create", "pt", "--preset", "pt", "--find-links", str(local_wheels), timeout=60)
    assert r.code == 2, r.err
    assert r.err.count("\n") == 1 and f"key '{key}'" in r.err and "http(s) URL" in r.err
    assert "s3cr3t" not in r.err
    assert not (home / "envs").exists() or not any((home / "envs").iterdir())


def test_a_preset_index_with_credentials_is_not_echoed(cli, home):
    write_preset(home, "pt", indexed_preset("https://alice:s3cr3t@example.com/simple"))
    r = cli("env", "create", "pt", "--preset", "pt", "--no-index", timeout=60)
    assert r.code == 2 and "s3cr3t" not in r.err


def test_the_runtime_wheel_of_torchs_own_cuda_major_wins_in_a_mixed_env():
    """TensorFlow's [and-cuda] may bring a CUDA 12 runtime next to torch 2.0's CUDA 11 one."""
    from envcheck import frameworks

    packages = {"torch": "2.0.1", "nvidia-cuda-runtime-cu11": "11.7.99", "nvidia-cudnn-cu11": "8.5.0.96",
                "tensorflow": "2.15.0", "nvidia-cuda-runtime-cu12": "12.2.140", "nvidia-cudnn-cu12": "8.9.4.25"}
    build = frameworks.build_from_packages(packages, "torch")
    assert (build.version, build.cuda.split(".")[:2], build.cudnn.split(".")[:2]) == ("2.0.1", ["11", "7"], ["8", "5"])


def test_framework_without_auto_is_bad_usage(cli, home):
    r = cli("provision", "--preset", "pytorch-cpu", "--framework", "torch")
    assert r.code == 2 and "--framework chooses among the presets of --auto" in r.err
    assert not (home / "envs").exists()


# -- check / doctor --framework -------------------------------------------------------------

def test_check_and_doctor_choose_among_the_frameworks_envs(fake_nvml, home, wheelhouse, local_wheels):
    make_env(home, wheelhouse, "tf", "tensorflow-cpu==2.21.0")
    write_preset(home, "pt", CPU)
    assert envcheck(clean_env(ENVCHECK_HOME=str(home)), "env", "create", "pt", "--preset", "pt",
                    *offline(local_wheels)).code == 0
    env = host(fake_nvml, home, **NEW_DRIVER)
    assert fake_nvml.cli(env, "check", "--json").json()["env"] == "tf"  # without --framework: tf

    first = fake_nvml.cli(env, "check", "--framework", "torch", "--json")
    assert first.code == 0, first.err
    data = first.json()
    assert data["schema"] == "envcheck.gate/1" and data["env"] == "pt" and data["ready"] and not data["cached"]
    compat = next(c for c in data["report"]["checks"] if c["id"] == "compat")
    assert "torch 2.13.0+cpu" in compat["summary"]
    again = fake_nvml.cli(env, "check", "--framework", "torch", "--json")  # the stored validation answers
    assert again.json()["env"] == "pt" and again.json()["cached"]
    assert fake_nvml.cli(env, "check", "--framework=torch", "--json").json()["env"] == "pt"  # click's path
    assert fake_nvml.cli(env, "check", "--framework", "tensorflow", "--json").json()["env"] == "tf"

    doctor = fake_nvml.cli(env, "doctor", "--framework", "torch", "--no-smoke", "--json")
    assert doctor.code == 0, doctor.err
    doc = doctor.json()
    assert doc["selection"]["selected"] == "pt" and doc["report"]["env"] == "pt"
    assert [x["name"] for x in doc["selection"]["ranking"]] == ["pt"]

    named = fake_nvml.cli(env, "check", "--env", "tf", "--framework", "torch")  # a named env of another framework
    assert named.code == 2 and "env tf has no PyTorch" in named.err

    for args in (["check", "--framework", "nope"], ["check", "--framework=nope"], ["doctor", "--framework", "nope"]):
        bad = fake_nvml.cli(env, *args)
        assert bad.code == 2, (args, bad.err)
        assert "unknown framework 'nope'" in bad.err and "tensorflow, torch, jax" in bad.err


@pytest.mark.parametrize(("version", "platform", "expected"), [
    ("2.4.0+cu118", "linux", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    ("2.2.0", "linux", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    ("2.1.2", "linux", {}),  # before expandable segments
    (None, "linux", {}),  # the installed release not known: nothing release-bound
    ("2.4.0", "win32", {}),  # not implemented there
])
def test_run_gives_torch_expandable_segments_where_its_release_and_platform_have_them(
        monkeypatch, version, platform, expected):
    from packaging.version import Version

    from envcheck import frameworks

    monkeypatch.setattr(sys, "platform", platform)
    torch = frameworks.get("torch")
    assert torch.run_environ(Version(version) if version else None) == expected
    assert {v.name for v in torch.run_variables} == {"PYTORCH_CUDA_ALLOC_CONF"}  # declared, whatever the release
