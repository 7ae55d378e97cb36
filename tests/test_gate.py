"""The pre-training gate: cached answers, and misses when what the validation depended on changes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env
from envcheck.paths import Home
from fake_nvml import A100
from test_select import envcheck, make_env


def make_gated(home: Path, wheelhouse: Path, fake_nvml) -> dict:
    """Env tf in ``home``, validated on the fake A100 host; that host's environment."""
    make_env(home, wheelhouse, "tf", "tensorflow-cpu==2.21.0")
    env = fake_nvml.env([A100], FAKE_NVML_DRIVER="550.54.15", FAKE_NVML_CUDA="12040", ENVCHECK_HOME=str(home))
    assert envcheck(env, "validate", "tf", "--no-smoke").code == 0
    return env


@pytest.fixture(scope="module")
def validated(tmp_path_factory, wheelhouse, fake_nvml) -> dict:
    return make_gated(tmp_path_factory.mktemp("gate-home"), wheelhouse, fake_nvml)


@pytest.fixture
def gated(validated):
    """The validated env, made once per module: a check that misses stores a fresh report,
    so each test starts from the report the validation stored and gets it back after. Tests
    that change the env itself take ``fresh_gated``."""
    report = Home(validated["ENVCHECK_HOME"]).report("tf")
    stored = report.read_bytes()
    yield validated
    report.write_bytes(stored)


@pytest.fixture
def fresh_gated(home, wheelhouse, fake_nvml):
    return make_gated(home, wheelhouse, fake_nvml)


def gate(env: dict, *args: str) -> dict:
    r = envcheck(env, "check", "--env", "tf", "--json", *args)
    data = r.json()
    assert data["schema"] == "envcheck.gate/1"
    assert (r.code == 0) == data["ready"]
    return data


def test_cache_hit(gated):
    data = gate(gated)
    assert data["ready"] and data["cached"] and data["age_s"] >= 0


def test_driver_change_misses(gated):
    assert not gate({**gated, "FAKE_NVML_DRIVER": "555.42.02"})["cached"]


def test_visible_devices_change_misses(gated):
    assert not gate({**gated, "CUDA_VISIBLE_DEVICES": ""})["cached"]


def test_package_change_misses(fresh_gated, wheelhouse):
    assert envcheck(fresh_gated, "env", "add", "tf", "alpha", "--no-index", "--find-links", str(wheelhouse)).code == 0
    first = gate(fresh_gated)
    assert not first["cached"] and first["ready"]
    assert gate(fresh_gated)["cached"]  # the fresh result was stored


def test_max_age(gated):
    assert not gate(gated, "--max-age", "0s")["cached"]
    bad = envcheck(gated, "check", "--env", "tf", "--max-age", "soon")
    assert bad.code == 2 and "soon" in bad.err


def test_require_gpu_on_a_cpu_build_is_not_ready(gated):
    data = gate(gated, "--require-gpu")
    assert not data["ready"] and "GPU" in data["reason"] and data["fix"]
    # the real fix, as `select --require-gpu` gives it: the GPU env of its framework to create
    assert data["fix"].startswith("env tf is a CPU build") and "envcheck env create tensorflow" in data["fix"]


def test_auto_picks_the_selected_env(gated):
    r = envcheck(gated, "check", "--json")
    assert r.code == 0 and r.json()["env"] == "tf"


def test_ensure_ready_raises_not_ready_without_importing_frameworks(tmp_path):
    code = ("import json, sys, envcheck\n"
            "try:\n    envcheck.ensure_ready(require_gpu=True)\n"
            "except envcheck.NotReady as exc:\n"
            "    print(json.dumps({'fix': exc.fix, 'verdict': exc.report['verdict'],\n"
            "        'frameworks': [m for m in ('tensorflow', 'torch', 'jax') if m in sys.modules]}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=clean_env(LD_LIBRARY_PATH=str(tmp_path)), timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["frameworks"] == [] and out["fix"]


@pytest.mark.slow
def test_ensure_ready_in_a_validated_env_answers_from_its_report(tf_home, tf_python):
    """Inside an envcheck env (the real TensorFlow one): ready, from the stored report, no TF import."""
    assert envcheck(clean_env(ENVCHECK_HOME=str(tf_home)), "validate", "tf", "--no-smoke").code == 0
    deps = Path(subprocess.check_output([sys.executable, "-c", "import click, os; print(os.path.dirname(os.path.dirname(click.__file__)))"], text=True).strip())
    code = ("import json, sys, envcheck\nr = envcheck.ensure_ready()\n"
            "print(json.dumps({'verdict': r['verdict'], 'tf': 'tensorflow' in sys.modules}))\n")
    proc = subprocess.run([str(tf_python), "-c", code], capture_output=True, text=True, timeout=120,
                          env=clean_env(PYTHONPATH=f"{ROOT}{os.pathsep}{deps}"))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {"verdict": out["verdict"], "tf": False} and out["verdict"] in ("ready", "degraded")


def test_fast_path_agrees_with_click_and_skips_it(gated):
    fast = envcheck(gated, "check", "--env", "tf", "--json")
    slow = envcheck(gated, "check", "--env=tf", "--json")  # a spelling only click parses
    keys = ("env", "ready", "cached", "reason", "fix", "gpus_usable", "verdict")
    assert fast.code == slow.code == 0
    assert {k: fast.json()[k] for k in keys} == {k: slow.json()[k] for k in keys}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "envcheck", "check", "--env", "tf"],
                          capture_output=True, text=True, env=gated, timeout=120)
    assert proc.returncode == 0
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "click" not in imported and not imported & {"tensorflow", "torch", "jax"}


def test_a_stored_failure_stands_against_a_quicker_check(home, tmp_path):
    """validate's smoke fit failed: a quick `check` neither says ready nor overwrites it."""
    from test_validate import standin_env

    standin_env(home, tmp_path, "bad", "importerror")
    env = clean_env(ENVCHECK_HOME=str(home), LD_LIBRARY_PATH=str(tmp_path))  # no NVML: a CPU host
    assert envcheck(env, "validate", "bad", "--devices", "cpu", "--timeout", "20").code == 1
    stored = (home / "envs" / "bad" / "envcheck-report.json").read_text()
    r = envcheck(env, "check", "--env", "bad", "--json")
    assert r.code == 1 and not r.json()["ready"] and r.json()["cached"]
    assert "smoke" in r.json()["reason"]
    assert (home / "envs" / "bad" / "envcheck-report.json").read_text() == stored


def test_a_deleted_interpreter_misses_the_stored_pass(fresh_gated, home):
    assert gate(fresh_gated)["cached"]
    (home / "envs" / "tf" / "bin" / "python").unlink()
    data = gate(fresh_gated)
    assert not data["ready"] and not data["cached"] and "interpreter" in data["reason"]


GATE_IN_ENV = """
import json, sys
import envcheck
out = {"foreign": sorted(m for m in ("click", "packaging", "pynvml", "filelock", "platformdirs",
                                      "tensorflow", "torch", "jax") if m in sys.modules)}
out["verdict"] = envcheck.ensure_ready()["verdict"]
try:
    envcheck.ensure_ready(require_gpu=True)
except envcheck.NotReady as exc:
    out["not_ready_fix"] = exc.fix
out["foreign"] += sorted(m for m in ("click", "packaging", "pynvml", "filelock", "tensorflow")
                         if m in sys.modules)
print(json.dumps(out))
"""


def test_ensure_ready_works_inside_every_env_envcheck_creates(gated, tmp_path):
    """The env's own python imports envcheck through the env's gate link, answers from the
    stored report, and imports nothing but the standard library and envcheck."""
    python = Path(gated["ENVCHECK_HOME"]) / "envs" / "tf" / "bin" / "python"
    assert subprocess.run([str(python), "-c", "import click"], capture_output=True).returncode != 0
    env = {k: v for k, v in gated.items() if k not in ("ENVCHECK_HOME",)}
    proc = subprocess.run([str(python), "-c", GATE_IN_ENV], capture_output=True, text=True,
                          env=env, timeout=120, cwd=tmp_path)  # not the repo: its envcheck/ would be on sys.path
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["verdict"] in ("ready", "degraded") and out["foreign"] == []  # degraded: a CPU build beside a GPU
    assert out["not_ready_fix"]
