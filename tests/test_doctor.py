"""envcheck doctor: the main job at a glance."""
from __future__ import annotations

import pytest

from fake_nvml import A100
from test_select import envcheck, make_env

from conftest import clean_env
from envcheck.paths import Home


def test_empty_home_says_what_to_create(home):
    r = envcheck(clean_env(ENVCHECK_HOME=str(home)), "doctor", "--json")
    assert r.code == 1
    data = r.json()
    assert data["schema"] == "envcheck.doctor/1" and data["ok"] is False and data["report"] is None
    assert any("envcheck env create tensorflow-cpu --preset tensorflow-cpu" in step for step in data["next_steps"])


def test_selected_env_is_validated_with_next_steps(home, wheelhouse, tmp_path):
    make_env(home, wheelhouse, "tf", "tensorflow-cpu==2.21.0")
    env = clean_env(ENVCHECK_HOME=str(home), LD_LIBRARY_PATH=str(tmp_path))  # no NVML here
    r = envcheck(env, "doctor", "--no-smoke", "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert data["selection"]["selected"] == "tf" and data["report"]["env"] == "tf"
    assert data["host"]["nvml"]["status"] == "no-library"
    assert any(step.startswith("train: envcheck run --env tf") for step in data["next_steps"])
    assert (home / "envs" / "tf" / "envcheck-report.json").exists()
    human = envcheck(env, "doctor", "--no-smoke")
    assert "host: no-gpu" in human.out and "verdict: ready" in human.out and "next steps:" in human.out
    # a host without NVIDIA is a state, said once with what to do if a GPU was expected: no red block
    assert "not-ready" not in human.out and human.out.count("if this host should have an NVIDIA GPU") == 1


def test_bad_timeout_is_usage_error(home):
    r = envcheck(clean_env(ENVCHECK_HOME=str(home)), "doctor", "--timeout", "0")
    assert r.code == 2 and "--timeout" in r.err and "Traceback" not in r.err


@pytest.fixture(scope="module")
def made_tfgpu(tmp_path_factory, wheelhouse):
    home = tmp_path_factory.mktemp("doctor-home")
    make_env(home, wheelhouse, "tfgpu", "tensorflow==2.21.0")
    return home


@pytest.fixture
def tfgpu_home(made_tfgpu):
    """Env tfgpu, made once per module; each test starts as it was made, with no stored report
    (doctor validates and stores one: it is removed after the test)."""
    report = Home(made_tfgpu).report("tfgpu")
    assert not report.exists()
    yield made_tfgpu
    report.unlink(missing_ok=True)


@pytest.mark.parametrize("driver", ["abc", ""])
def test_a_driver_version_nvml_reports_unreadably_is_unknown_not_bad_input(tfgpu_home, fake_nvml, driver):
    """A driver string that doesn't parse is a fact about the host: doctor goes on, says why
    the driver is unknown, prints its JSON and exits by its verdict."""
    home = tfgpu_home
    env = fake_nvml.env([A100], FAKE_NVML_DRIVER=driver, ENVCHECK_HOME=str(home))
    r = fake_nvml.cli(env, "doctor", "--no-smoke", "--json")
    data = r.json()  # printed whatever the verdict
    checks = {c["id"]: c for c in data["report"]["checks"]}
    # the stand-in can't import: not ready for that, and only that
    assert [c for c in checks if checks[c]["status"] == "fail"] == ["framework-gpus"]
    assert r.code == 1 and data["ok"] is False and "error" not in r.err
    assert checks["compat"]["status"] == "warn"
    assert f"the NVIDIA driver's version is unknown (NVML reported {driver!r}" in checks["compat"]["summary"]
    human = fake_nvml.cli(env, "doctor", "--no-smoke")
    assert human.code == 1 and "error" not in human.err
    assert f"host: driver unknown (NVML reported {driver!r}, which is not a version)" in human.out


def test_the_gpu_env_suggested_is_of_the_framework_the_user_has(home, local_wheels, fake_nvml):
    (home / "presets").mkdir(exist_ok=True)
    (home / "presets" / "pt.toml").write_text('title = "pt"\nkind = "cpu"\nframework = "torch"\n'
                                              'packages = ["torch==2.13.0+cpu"]\n')
    made = envcheck(clean_env(ENVCHECK_HOME=str(home)), "env", "create", "pt", "--preset", "pt", "--no-index",
                    "--find-links", str(local_wheels))
    assert made.code == 0, made.err
    env = fake_nvml.env(ENVCHECK_HOME=str(home), FAKE_NVML_DRIVER="550.54.15", FAKE_NVML_CUDA="12040")
    steps = envcheck(env, "doctor", "--no-smoke", "--json").json()["next_steps"]
    gpu = [s for s in steps if "no env can use them" in s]
    assert gpu and "--preset pytorch-" in gpu[0] and "tensorflow" not in gpu[0], steps
