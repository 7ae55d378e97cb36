"""envcheck doctor: the main job at a glance."""
from __future__ import annotations

from test_select import envcheck, make_env

from conftest import clean_env


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
    assert "host: no usable NVIDIA GPU" in human.out and "verdict:" in human.out and "next steps:" in human.out


def test_bad_timeout_is_usage_error(home):
    r = envcheck(clean_env(ENVCHECK_HOME=str(home)), "doctor", "--timeout", "0")
    assert r.code == 2 and "--timeout" in r.err and "Traceback" not in r.err
