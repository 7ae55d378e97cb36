"""`envcheck run` for real: an env built from local wheels, GPUs from the fake NVML, and the
command exec'd by envcheck reporting what it really got."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Result, clean_env
from fake_nvml import A100, T4, FakeNvml
from wheelhouse import offline

CPU_STANDIN = """title = "tensorflow-cpu stand-in"
kind = "cpu"
framework = "tensorflow"
packages = ["tensorflow-cpu==2.21.0"]
"""
GPU_STANDIN = """title = "tensorflow (CUDA 12) stand-in"
kind = "gpu"
framework = "tensorflow"
packages = ["tensorflow==2.21.0"]

[gpu]
cuda = "12.5"
"""
REPORT = ("import json, os, sys; print(json.dumps({'prefix': sys.prefix, 'executable': sys.executable, "
          "'env': {k: v for k, v in os.environ.items()}}))")


@pytest.fixture(scope="module")
def home(tmp_path_factory, wheelhouse) -> Path:
    """One env home with env `dl` (a GPU tensorflow stand-in) and env `cpu` (tensorflow-cpu),
    shared by this module's tests."""
    root = tmp_path_factory.mktemp("run-home")
    (root / "presets").mkdir()
    for name, preset in (("dl", GPU_STANDIN), ("cpu", CPU_STANDIN)):
        (root / "presets" / f"standin-{name}.toml").write_text(preset)
        proc = subprocess.run([sys.executable, "-m", "envcheck", "env", "create", name, "--preset",
                               f"standin-{name}", "--for-another-host", *offline(wheelhouse)],
                              capture_output=True, text=True,
                              env=clean_env(ENVCHECK_HOME=str(root)), timeout=300)
        assert proc.returncode == 0, proc.stderr
    return root


@pytest.fixture
def run(fake_nvml: FakeNvml, home: Path):
    """``run(*args, gpus=(A100, A100), **env)``: envcheck ARGS on a host with these GPUs."""

    def call(*args: str, gpus=(A100, A100), **extra: str) -> Result:
        return fake_nvml.cli(fake_nvml.env(gpus=gpus, ENVCHECK_HOME=str(home), **extra), *args)

    return call


def seen(result: Result) -> dict:
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_command_runs_in_the_env_on_all_gpus_with_growth_and_pci_order(run, home, tmp_path):
    # envcheck itself runs fine with these; left in place, they would pull the command's
    # python out of the env (PYTHONHOME) or shadow its packages (PYTHONPATH)
    got = seen(run("run", "--env", "dl", "--", "python", "-c", REPORT, PYTHONPATH=str(tmp_path),
                   PYTHONHOME=sys.base_prefix, CUDA_DEVICE_ORDER="FASTEST_FIRST"))
    env_dir = home / "envs" / "dl"
    assert Path(got["prefix"]) == env_dir  # `python` on PATH was the env's interpreter
    environ = got["env"]
    assert environ["PATH"].split(":")[0] == str(env_dir / "bin")
    assert environ["VIRTUAL_ENV"] == str(env_dir)
    assert "PYTHONPATH" not in environ and "PYTHONHOME" not in environ
    assert environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert environ["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert "ENVCHECK_GLOBAL_BATCH" not in environ


@pytest.mark.parametrize(("gpus", "visible"), [("1", "1"), ("1,0", "1,0"), ("none", ""), ("all", "0,1"),
                                              ("gpu:1", "1"), ("GPU-fa4e0000-0000-0000-0000-000000000001,0", "1,0")])
def test_gpu_selection_sets_cuda_visible_devices(run, gpus, visible):
    environ = seen(run("run", "--env", "dl", "--gpus", gpus, "--", "python", "-c", REPORT))["env"]
    assert environ["CUDA_VISIBLE_DEVICES"] == visible


def test_all_means_the_gpus_the_callers_allocation_shows(run):
    """A scheduler that gave this job GPU 2 of 4 (CUDA_VISIBLE_DEVICES=2) keeps it to GPU 2."""
    r = run("run", "--env", "dl", "--", "python", "-c", REPORT, gpus=(A100,) * 4, CUDA_VISIBLE_DEVICES="2")
    assert seen(r)["env"]["CUDA_VISIBLE_DEVICES"] == "2"
    hidden = run("run", "--env", "dl", "--gpus", "0", "--", "true", gpus=(A100,) * 4, CUDA_VISIBLE_DEVICES="2")
    assert hidden.code == 2 and "GPU 0 is hidden by CUDA_VISIBLE_DEVICES='2'" in hidden.err


def test_unknown_gpu_index_exits_2_naming_it_and_what_exists(run):
    r = run("run", "--env", "dl", "--gpus", "0,5", "--", "python", "-c", "print('ran')")
    assert r.code == 2 and "ran" not in r.out
    assert "unknown GPU 5" in r.err and "0, 1" in r.err


@pytest.mark.parametrize("gpus", ["\u00b2", "\uff11", "0,\u0661", "1" * 5000])
def test_gpu_indexes_are_ascii_digits_only(run, gpus):
    """'²' and the full-width '１' pass str.isdigit(), and '１' even int(); neither is GPU 1."""
    r = run("run", "--env", "dl", "--gpus", gpus, "--", "python", "-c", "print('ran')")
    assert r.code == 2 and "ran" not in r.out
    assert r.err.startswith("envcheck: error: bad GPU list") and r.err.count("\n") == 1


@pytest.mark.parametrize(("gpus", "why"), [("cpu:0", "cpu:0 is not allowed in a GPU list"),
                                          ("cpu", "cpu is not allowed in a GPU list"), ("GPU-1", "")])
def test_gpus_takes_the_device_grammar_s_gpus_only(run, gpus, why):
    r = run("run", "--env", "dl", "--gpus", gpus, "--", "python", "-c", "print('ran')")
    assert r.code == 2 and "ran" not in r.out
    assert r.err.startswith(f"envcheck: error: bad GPU list {gpus!r}") and why in r.err and r.err.count("\n") == 1


def test_unknown_gpu_uuid_exits_2_naming_it(run):
    r = run("run", "--env", "dl", "--gpus", "GPU-fa4e0000-0000-0000-0000-000000000007", "--", "true")
    assert r.code == 2 and "unknown GPU GPU-fa4e0000-0000-0000-0000-000000000007" in r.err and "0, 1" in r.err


def test_gpu_index_on_a_host_without_nvml_exits_2(run):
    r = run("run", "--env", "dl", "--gpus", "0", "--", "true", FAKE_NVML_INIT_ERROR="9")
    assert r.code == 2 and "unknown GPU 0" in r.err


def test_batch_that_does_not_split_over_the_gpus_exits_2_with_the_nearest_sizes(run):
    r = run("run", "--env", "dl", "--batch-size", "30", "--", "python", "-c", "print('ran')", gpus=(A100,) * 4)
    assert r.code == 2 and "ran" not in r.out
    assert "global batch 30 is not a multiple of 4 GPUs (7.5 per GPU)" in r.err
    assert "28 (7 per GPU)" in r.err and "32 (8 per GPU)" in r.err
    assert "same per-GPU batch" in r.err


def test_batch_that_splits_is_exported(run):
    environ = seen(run("run", "--env", "dl", "--batch-size", "32", "--", "python", "-c", REPORT,
                       gpus=(A100,) * 4))["env"]
    assert environ["ENVCHECK_GLOBAL_BATCH"] == "32" and environ["ENVCHECK_PER_GPU_BATCH"] == "8"
    assert environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"


def test_batch_rule_counts_only_the_chosen_gpus(run):
    two = run("run", "--env", "dl", "--gpus", "0,1", "--batch-size", "30", "--", "true", gpus=(A100,) * 4)
    assert two.code == 0, two.err
    cpu = seen(run("run", "--env", "dl", "--gpus", "none", "--batch-size", "31", "--", "python", "-c", REPORT))
    assert cpu["env"]["ENVCHECK_PER_GPU_BATCH"] == "31"  # no GPU: the CPU is the one replica


def test_no_gpu_host_runs_on_the_cpu_and_says_so(run):
    r = run("run", "--env", "dl", "--batch-size", "30", "--", "python", "-c", REPORT, FAKE_NVML_INIT_ERROR="9")
    assert "CUDA_VISIBLE_DEVICES" not in seen(r)["env"]
    assert "no usable GPU" in r.err and "runs on the CPU" in r.err


@pytest.mark.parametrize("code", [0, 7, 255])
def test_exit_status_is_the_commands(run, code):
    r = run("run", "--env", "dl", "--", "python", "-c", f"raise SystemExit({code})")
    assert r.code == code


def test_a_command_killed_by_a_signal_is_killed_as_envcheck_run(fake_nvml, home):
    """envcheck becomes the command, so a shell sees 128+signal, as for the bare command."""
    env = fake_nvml.env(gpus=(A100,), ENVCHECK_HOME=str(home))
    script = f"{sys.executable} -m envcheck run --env dl -- python -c 'import os; os.kill(os.getpid(), 15)'; echo $?"
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert proc.stdout.strip() == "143", proc.stderr


def test_command_not_found_exits_127_with_one_line(run):
    r = run("run", "--env", "dl", "--", "no-such-command-xyz", "--flag")
    assert r.code == 127
    assert r.err.strip().count("\n") == 0 and "no-such-command-xyz: command not found" in r.err
    assert "envcheck env add dl PACKAGE" in r.err  # the env's name filled in


def test_missing_command_exits_2(run):
    assert run("run", "--env", "dl").code == 2
    assert run("run", "--env", "dl", "--").code == 2


def test_options_after_the_command_belong_to_the_command(run):
    """`envcheck run python -c ...` without `--` passes -c to python, not to envcheck."""
    got = seen(run("run", "--env", "dl", "python", "-c", REPORT))
    assert got["env"]["VIRTUAL_ENV"].endswith("dl")


def test_auto_picks_the_selected_env_and_unknown_env_exits_2(run, home):
    r = run("run", "--", "python", "-c", REPORT)
    assert Path(seen(r)["prefix"]) == home / "envs" / "dl"
    assert "env dl selected" in r.err
    unknown = run("run", "--env", "nope", "--", "true")
    assert unknown.code == 2 and "no env named 'nope'" in unknown.err


def test_auto_with_no_env_exits_1_with_the_selection_warning(fake_nvml, tmp_path):
    empty = tmp_path / "empty-home"
    empty.mkdir()
    r = fake_nvml.cli(fake_nvml.env(gpus=(T4,), ENVCHECK_HOME=str(empty)), "run", "--", "true")
    assert r.code == 1 and "envcheck env create tensorflow-cpu --preset tensorflow-cpu" in r.err


def test_gpus_asked_for_with_a_cpu_env_is_exit_2(run):
    r = run("run", "--env", "cpu", "--gpus", "1", "--", "python", "-c", "print('ran')")
    assert r.code == 2 and "ran" not in r.out
    assert "env cpu can't use GPUs: its framework is a CPU-only build" in r.err and "--gpus none" in r.err
    assert run("run", "--env", "cpu", "--gpus", "none", "--", "true").code == 0


def test_gpus_with_auto_selects_a_gpu_env(run, home):
    got = seen(run("run", "--gpus", "1", "--", "python", "-c", REPORT))
    assert Path(got["prefix"]) == home / "envs" / "dl" and got["env"]["CUDA_VISIBLE_DEVICES"] == "1"
    old = run("run", "--gpus", "1", "--", "true", FAKE_NVML_DRIVER="470.57.02", FAKE_NVML_CUDA="11040")
    assert old.code == 2 and "can't use GPUs" in old.err


def test_batch_rule_comes_from_the_framework(fake_nvml, tmp_path, wheelhouse):
    """PyTorch's data-parallel processes, one per GPU unless --nproc says otherwise, each take
    the whole batch: global = batch x processes."""
    root = tmp_path / "home"
    (root / "presets").mkdir(parents=True)
    (root / "presets" / "pt.toml").write_text('title = "torch stand-in"\nkind = "cpu"\n'
                                               'framework = "torch"\npackages = ["torch==2.13.0"]\n')
    env = fake_nvml.env(gpus=(A100, A100), ENVCHECK_HOME=str(root), FAKE_NVML_DRIVER="580.65.06",
                        FAKE_NVML_CUDA="13000")
    assert fake_nvml.cli(env, "env", "create", "pt", "--preset", "pt", *offline(wheelhouse)).code == 0
    r = fake_nvml.cli(env, "run", "--env", "pt", "--gpus", "0,1", "--batch-size", "30", "--",
                      "python", "-c", REPORT)
    assert r.code == 0, r.err
    ranks = sorted((json.loads(line)["env"] for line in r.out.splitlines()), key=lambda e: e["RANK"])
    assert [(e["RANK"], e["LOCAL_RANK"], e["WORLD_SIZE"]) for e in ranks] == [("0", "0", "2"), ("1", "1", "2")]
    for environ in ranks:
        assert environ["ENVCHECK_GLOBAL_BATCH"] == "60" and environ["ENVCHECK_PER_GPU_BATCH"] == "30"
        assert environ["CUDA_VISIBLE_DEVICES"] == "0,1" and "TF_FORCE_GPU_ALLOW_GROWTH" not in environ
    assert "2 processes, one per GPU" in r.err and "each process's batch" in r.err
    one = fake_nvml.cli(env, "run", "--env", "pt", "--gpus", "0,1", "--nproc", "1", "--batch-size", "30",
                        "--", "python", "-c", REPORT)
    environ = seen(one)["env"]
    assert (environ["RANK"], environ["WORLD_SIZE"], environ["ENVCHECK_GLOBAL_BATCH"]) == ("0", "1", "30")


def test_nproc_is_bounded_by_a_limit_the_error_names_and_the_limit_runs(fake_nvml, home, tmp_path):
    """A typo like 100000 would start processes until the machine gives out: refused before
    any rank starts, with the limit named (4 per usable CPU core or chosen GPU, whichever gives
    more); as many as the limit all start. envcheck runs on one core here."""
    core = min(os.sched_getaffinity(0))
    log = tmp_path / "ranks"

    def ranks(nproc: str, gpus: str = "none") -> Result:
        proc = subprocess.run([sys.executable, "-m", "envcheck", "run", "--env", "dl", "--gpus", gpus,
                               "--nproc", nproc, "--", "sh", "-c", f'echo "$RANK" >> {log}'],
                              capture_output=True, text=True, timeout=60,
                              env=fake_nvml.env(gpus=(A100, A100), ENVCHECK_HOME=str(home)),
                              preexec_fn=lambda: os.sched_setaffinity(0, {core}))
        return Result(proc.returncode, proc.stdout, proc.stderr)

    for nproc in ("100000", "99999999999999999999", "5"):
        r = ranks(nproc)
        assert (r.code, r.err) == (2, f"envcheck: error: --nproc {nproc} is more than the 4 processes a "
                                      "job may start here (4 per CPU core, 1 usable); fix: give at most 4\n")
    two_gpus = ranks("9", gpus="0,1")
    assert two_gpus.code == 2
    assert "more than the 8 processes a job may start here (4 per GPU, 2 chosen)" in two_gpus.err
    assert not log.exists()
    full = ranks("4")
    assert full.code == 0, full.err
    assert sorted(map(int, log.read_text().split())) == [0, 1, 2, 3]
