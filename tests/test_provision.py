"""`envcheck provision` for real: user presets pointing at stand-in wheels, offline installs,
the fake NVML for the host, two real processes racing for the same env.

Stand-ins carry the metadata of tensorflow / tensorflow-cpu but don't import, so every run
here validates with --no-smoke (compat, integrity and libraries still run for real).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env
from fake_nvml import A100, FakeNvml
from wheelhouse import offline

CPU = """title = "tensorflow-cpu stand-in"
kind = "cpu"
framework = "tensorflow"
packages = ["tensorflow-cpu==2.21.0"{extra}]
"""
GPU12 = """title = "tensorflow CUDA 12 stand-in"
kind = "gpu"
framework = "tensorflow"
requires-python = ">=3.8"
packages = ["tensorflow==2.21.0"]

[gpu]
cuda = "12.5"
cudnn = "9.3"
"""
MISSING_LIB = "libenvcheck-test-absent.so.11"
GPU11_LIBS = f"""title = "a CUDA 11.2 preset whose system libraries are partly missing"
kind = "gpu"
framework = "tensorflow"
requires-python = ">=3.8"
packages = ["tensorflow==2.21.0"]

[gpu]
cuda = "11.2"
cudnn = "8.1"
libraries = ["libc.so.6", "{MISSING_LIB}"]
"""
OLD_DRIVER = {"FAKE_NVML_DRIVER": "470.57.02", "FAKE_NVML_CUDA": "11040"}


def write_preset(home: Path, name: str, text: str) -> None:
    (home / "presets").mkdir(exist_ok=True)
    (home / "presets" / f"{name}.toml").write_text(text)


def manifest(home: Path, name: str) -> dict:
    return json.loads((home / "envs" / name / "envcheck.json").read_text())


def by_name(report: dict) -> dict[str, dict]:
    assert report["schema"] == "envcheck.provision/1"
    return {e["name"]: e for e in report["envs"]}


@pytest.fixture
def cpu_preset(home: Path) -> str:
    write_preset(home, "standin-cpu", CPU.format(extra=""))
    return "standin-cpu"


def test_provision_creates_validates_and_a_second_run_changes_nothing(cli, home, cpu_preset, wheelhouse):
    first = cli("provision", "--preset", cpu_preset, "--no-smoke", "--json", *offline(wheelhouse))
    assert first.code == 0, first.err
    (env,) = first.json()["envs"]
    assert (env["name"], env["preset"], env["action"], env["verdict"]) == (cpu_preset, cpu_preset, "created", "ready")
    assert first.json()["ok"] is True
    made = manifest(home, cpu_preset)
    assert made["state"] == "ready" and made["packages"]["tensorflow-cpu"] == "2.21.0"
    report = json.loads((home / "envs" / cpu_preset / "envcheck-report.json").read_text())
    assert report["verdict"] == "ready"  # stored for `envcheck check`

    again = cli("provision", "--preset", cpu_preset, "--no-smoke", "--json", *offline(wheelhouse))
    assert again.code == 0, again.err
    (env,) = again.json()["envs"]
    assert (env["action"], env["verdict"]) == ("unchanged", "ready")
    after = manifest(home, cpu_preset)
    assert (after["created"], after["updated"]) == (made["created"], made["updated"])  # not reinstalled


def test_text_output_names_each_env_and_the_outcome(cli, cpu_preset, wheelhouse):
    r = cli("provision", "--preset", cpu_preset, "--no-smoke", *offline(wheelhouse))
    assert r.code == 0, r.err
    assert "creating env standin-cpu" in r.err
    assert "standin-cpu" in r.out and "created" in r.out and "provision: ok" in r.out


def test_changed_preset_makes_the_env_stale_and_leaves_it_alone(cli, home, cpu_preset, wheelhouse):
    assert cli("provision", "--preset", cpu_preset, "--no-smoke", *offline(wheelhouse)).code == 0
    before = manifest(home, cpu_preset)
    write_preset(home, cpu_preset, CPU.format(extra=', "alpha==1.0"'))
    r = cli("provision", "--preset", cpu_preset, "--no-smoke", "--json", *offline(wheelhouse))
    assert r.code == 1
    (env,) = r.json()["envs"]
    assert env["action"] == "stale" and r.json()["ok"] is False
    assert "another version of preset standin-cpu" in env["reason"]
    assert env["fix"] == "envcheck env remove standin-cpu --yes && envcheck provision --preset standin-cpu"
    assert env["verdict"] == "ready"  # the old env still works, and the report says so
    assert manifest(home, cpu_preset) == before and "alpha" not in before["packages"]


def test_a_reworded_description_does_not_make_an_env_stale(cli, home, cpu_preset, wheelhouse):
    assert cli("provision", "--preset", cpu_preset, "--no-smoke", *offline(wheelhouse)).code == 0
    write_preset(home, cpu_preset, CPU.format(extra="") + 'description = "now with words"\n')
    r = cli("provision", "--preset", cpu_preset, "--no-smoke", "--json", *offline(wheelhouse))
    assert r.code == 0 and r.json()["envs"][0]["action"] == "unchanged"


def test_failed_install_is_reported_and_the_other_envs_still_made(cli, home, cpu_preset, wheelhouse):
    write_preset(home, "broken", CPU.format(extra=', "gamma==1.0"'))  # gamma needs alpha<1, unsatisfiable
    r = cli("provision", "--preset", "broken", "--preset", cpu_preset, "--no-smoke", "--json", *offline(wheelhouse))
    assert r.code == 1
    envs = by_name(r.json())
    assert envs["broken"]["action"] == "failed" and envs["broken"]["verdict"] is None
    assert envs["broken"]["log"] and Path(envs["broken"]["log"]).is_file()
    assert envs[cpu_preset]["action"] == "created" and envs[cpu_preset]["verdict"] == "ready"
    assert not (home / "envs" / "broken").exists()


def test_unknown_preset_exits_2_and_creates_nothing(cli, home, cpu_preset, wheelhouse):
    r = cli("provision", "--preset", cpu_preset, "--preset", "no-such-preset", "--no-smoke", *offline(wheelhouse))
    assert r.code == 2 and "unknown preset 'no-such-preset'" in r.err
    assert not (home / "envs").exists() or not any((home / "envs").iterdir())


def test_nothing_asked_exits_2(cli):
    r = cli("provision", "--no-smoke")
    assert r.code == 2 and "--auto" in r.err


def test_two_concurrent_provisions_both_end_ready_with_one_env(home, cpu_preset, slow_links):
    url, requested, gate = slow_links
    args = [sys.executable, "-m", "envcheck", "provision", "--preset", cpu_preset, "--no-smoke",
            "--no-index", "--find-links", url, "--wait", "60"]
    env = clean_env(ENVCHECK_HOME=str(home))
    first = subprocess.Popen([*args, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert requested.wait(60), "the first provision never reached the index"
    second = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # the second finds the env locked mid-install and says it waits, before the first can finish
    assert "being changed by another envcheck process; waiting" in second.stderr.readline()
    gate.set()
    out1, err1 = first.communicate(timeout=120)
    out2, err2 = second.communicate(timeout=120)
    assert (first.returncode, second.returncode) == (0, 0), err1 + err2
    assert json.loads(out1)["envs"][0]["action"] == "created"
    assert "unchanged" in out2 and "provision: ok" in out2
    assert [p.name for p in (home / "envs").iterdir()] == [cpu_preset]
    assert manifest(home, cpu_preset)["state"] == "ready"


@pytest.fixture
def auto_home(home: Path) -> Path:
    """User presets that override the built-in CPU and CUDA 12 presets with stand-ins."""
    write_preset(home, "tensorflow-cpu", CPU.format(extra=""))
    write_preset(home, "tensorflow-gpu-cuda12", GPU12)
    return home


def auto(fake_nvml: FakeNvml, home: Path, wheelhouse: Path, gpus=(A100,), **extra: str):
    """--auto for TensorFlow (the PyTorch presets' --auto is in test_torch_envs.py)."""
    env = fake_nvml.env(gpus=gpus, ENVCHECK_HOME=str(home), **extra)
    return fake_nvml.cli(env, "provision", "--auto", "--framework", "tensorflow", "--no-smoke", "--json",
                         *offline(wheelhouse))


def only_these_pythons(tmp_path: Path) -> dict[str, str]:
    """Interpreter discovery sees only the running Python (no PATH, pyenv or uv Pythons)."""
    for folder in ("bin", "pyenv", "uv-pythons"):
        (tmp_path / folder).mkdir()
    return {"PATH": str(tmp_path / "bin"), "PYENV_ROOT": str(tmp_path / "pyenv"),
            "UV_PYTHON_INSTALL_DIR": str(tmp_path / "uv-pythons")}


def test_auto_with_an_old_driver_makes_the_cpu_env_and_skips_the_gpu_presets(fake_nvml, auto_home, wheelhouse,
                                                                           tmp_path):
    r = auto(fake_nvml, auto_home, wheelhouse, **OLD_DRIVER, **only_these_pythons(tmp_path))
    assert r.code == 0, r.err
    envs = by_name(r.json())
    # made, and degraded: a CPU build beside a usable GPU ignores it (issue 28)
    assert envs["tensorflow-cpu"]["action"] == "created" and envs["tensorflow-cpu"]["verdict"] == "degraded"
    cuda12 = envs["tensorflow-gpu-cuda12"]
    assert cuda12["action"] == "skipped"
    assert "driver 470.57.02" in cuda12["reason"] and "tensorflow 2.21.0" in cuda12["reason"]
    assert cuda12["fix"]
    # the built-in CUDA 11.2 preset needs a Python <= 3.10, and discovery found none
    cuda11 = envs["tensorflow-gpu-cuda11.2"]
    assert cuda11["action"] == "skipped"
    if sys.version_info >= (3, 11):
        assert "no Python satisfies requires-python >=3.7,<3.11" in cuda11["reason"]
    assert sorted(p.name for p in (auto_home / "envs").iterdir()) == ["tensorflow-cpu"]


def test_auto_on_a_good_gpu_host_makes_one_gpu_env_per_framework(fake_nvml, auto_home, wheelhouse):
    r = auto(fake_nvml, auto_home, wheelhouse, FAKE_NVML_DRIVER="550.54.15", FAKE_NVML_CUDA="12040")
    envs = by_name(r.json())
    assert set(envs) == {"tensorflow-cpu", "tensorflow-gpu-cuda12", "tensorflow-gpu-cuda11-wheels",
                         "tensorflow-gpu-cuda11.2"}  # --framework tensorflow: no PyTorch preset
    assert envs["tensorflow-gpu-cuda12"]["action"] == "created"
    assert manifest(auto_home, "tensorflow-gpu-cuda12")["preset"]["kind"] == "gpu"
    # the first GPU preset that fits covers TensorFlow; the others are not made, and say why
    for name in ("tensorflow-gpu-cuda11-wheels", "tensorflow-gpu-cuda11.2"):
        assert envs[name]["action"] == "skipped"
        assert envs[name]["reason"].startswith("tensorflow-gpu-cuda12 already gives tensorflow this host's GPUs")
        assert envs[name]["fix"] == f"provision it by name if you want it too: envcheck provision --preset {name}"
    # Even without the fit, GPU readiness needs the framework to have seen the GPUs: the
    # stand-in can't be imported, so it is not ready, and select keeps it off the GPU tier.
    assert r.code == 1
    gpu_env = envs["tensorflow-gpu-cuda12"]
    assert gpu_env["verdict"] == "not-ready" and "framework-gpus" in gpu_env["reason"], gpu_env
    env = fake_nvml.env(gpus=(A100,), ENVCHECK_HOME=str(auto_home))
    ranked = {x["name"]: x["tier"] for x in fake_nvml.cli(env, "select", "--json").json()["ranking"]}
    assert ranked["tensorflow-gpu-cuda12"] == "cpu"


def test_auto_names_the_system_libraries_a_gpu_preset_misses(fake_nvml, auto_home, wheelhouse, tmp_path):
    """The CUDA 12 preset can't be made (no Python fits it), the wheels one neither (it needs a
    Python <= 3.10), so the system-CUDA one is judged: its missing library is named."""
    write_preset(auto_home, "tensorflow-gpu-cuda12", GPU12.replace('">=3.8"', '"<3.0"'))
    write_preset(auto_home, "tensorflow-gpu-cuda11.2", GPU11_LIBS)
    r = auto(fake_nvml, auto_home, wheelhouse, FAKE_NVML_DRIVER="550.54.15", FAKE_NVML_CUDA="12040",
             **only_these_pythons(tmp_path))
    envs = by_name(r.json())
    assert "no Python satisfies" in envs["tensorflow-gpu-cuda12"]["reason"]
    assert "no Python satisfies" in envs["tensorflow-gpu-cuda11-wheels"]["reason"]
    cuda11 = envs["tensorflow-gpu-cuda11.2"]
    assert cuda11["action"] == "skipped"
    assert MISSING_LIB in cuda11["reason"] and "libc.so.6" not in cuda11["reason"]
    assert "tensorflow-gpu-cuda11-wheels preset, whose CUDA comes from pip" in cuda11["fix"]


def test_auto_without_a_usable_gpu_skips_gpu_presets_with_the_reason(fake_nvml, auto_home, wheelhouse):
    r = auto(fake_nvml, auto_home, wheelhouse, FAKE_NVML_INIT_ERROR="9")
    assert r.code == 0, r.err
    envs = by_name(r.json())
    assert envs["tensorflow-cpu"]["action"] == "created"
    for name in ("tensorflow-gpu-cuda12", "tensorflow-gpu-cuda11.2"):
        assert envs[name]["action"] == "skipped" and envs[name]["reason"].startswith("no usable GPU: ")


def test_a_gpu_preset_asked_by_name_is_refused_as_env_create_refuses_it(fake_nvml, auto_home, wheelhouse):
    """The same rule as `env create`: a GPU preset this host can't train with is bad input,
    before anything is downloaded; --for-another-host makes it anyway, and its validation
    says why it can't use the GPU."""
    env = fake_nvml.env(ENVCHECK_HOME=str(auto_home), **OLD_DRIVER)
    created = fake_nvml.cli(env, "env", "create", "x", "--preset", "tensorflow-gpu-cuda12", *offline(wheelhouse))
    r = fake_nvml.cli(env, "provision", "--preset", "tensorflow-gpu-cuda12", "--no-smoke", "--json",
                      *offline(wheelhouse))
    assert created.code == r.code == 2 and "Traceback" not in r.err
    assert created.err.split("this host can't train")[1] == r.err.split("this host can't train")[1]
    assert not (auto_home / "envs" / "tensorflow-gpu-cuda12").exists()
    r = fake_nvml.cli(env, "provision", "--preset", "tensorflow-gpu-cuda12", "--no-smoke", "--json",
                      "--for-another-host", *offline(wheelhouse))
    assert r.code == 1
    (made,) = r.json()["envs"]
    assert made["action"] == "created" and made["verdict"] == "not-ready"
    assert "validation failed: compat" in made["reason"]


