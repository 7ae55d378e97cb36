"""`envcheck.ensure_ready` inside an env survives every reinstall of envcheck (issue 18, point 1):
the env imports a copy of the gate client that asks envcheck's interpreter, and every envcheck
command repairs what an older envcheck (a link into its own installation) left."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env
from ray_cluster import envcheck_of_version
from test_gate import GATE_IN_ENV, gated, validated  # noqa: F401  (the fixtures)
from test_select import envcheck

PRESET = ('title = "e"\ndescription = ""\nkind = "cpu"\nframework = "tensorflow"\n'
          'requires-python = ">=3.8"\npackages = ["tensorflow-cpu==2.21.0"]\n')


def gate_in_env(python, env: dict, cwd) -> dict:
    """GATE_IN_ENV run by the env's interpreter: its verdict, foreign modules and fix."""
    proc = subprocess.run([str(python), "-c", GATE_IN_ENV], capture_output=True, text=True, env=env,
                          timeout=300, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_ensure_ready_survives_reinstalling_envcheck_regular_then_editable(home, wheelhouse, tmp_path):
    """The Quickstart's sequence: envcheck from a wheel makes an env, then envcheck is
    installed again (a regular reinstall, then editable from this checkout) into the same
    interpreter, and the env's gate answers each time without any envcheck command between."""
    bin_dir = envcheck_of_version(tmp_path / "scratch", tmp_path / "wheels", "0.1.0")
    python = bin_dir / "python"
    env = clean_env(ENVCHECK_HOME=str(home))
    (tmp_path / "e.toml").write_text(PRESET)
    made = subprocess.run([str(bin_dir / "envcheck"), "env", "create", "e", "--preset-file", str(tmp_path / "e.toml"),
                           "--no-index", "--find-links", str(wheelhouse)], capture_output=True, text=True,
                          env=env, timeout=300, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    env_python = home / "envs" / "e" / "bin" / "python"
    no_home = {k: v for k, v in env.items() if k != "ENVCHECK_HOME"}

    def answers() -> None:
        out = gate_in_env(env_python, no_home, tmp_path)
        assert out["verdict"] in ("ready", "degraded") and out["foreign"] == [] and out["not_ready_fix"]

    answers()
    wheel = next((tmp_path / "wheels").glob("envcheck-*.whl"))
    subprocess.run([sys.executable, "-m", "uv", "pip", "install", "--python", str(python), "--reinstall",
                    "--no-deps", "--offline", "--quiet", str(wheel)], check=True, capture_output=True)
    answers()
    # pip as configured (the local mirrors give the build its hatchling and editables)
    editable = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--quiet", "-e", str(ROOT)],
                              capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert editable.returncode == 0, editable.stderr
    site = next((tmp_path / "scratch" / "lib").glob("python*/site-packages"))
    assert not (site / "envcheck" / "__init__.py").exists()  # the wheel's copy is gone: editable now
    answers()


@pytest.fixture
def gated_home(gated, tmp_path_factory) -> Path:
    """The home of test_gate's validated env tf (made once per module); its lib/ (the gate
    client and envcheck's interpreter, which these tests break) put back after each test."""
    home = Path(gated["ENVCHECK_HOME"])
    lib = home / "lib"
    kept = tmp_path_factory.mktemp("lib-kept") / "lib"
    shutil.copytree(lib, kept, symlinks=True)
    yield home
    shutil.rmtree(lib)
    shutil.copytree(kept, lib, symlinks=True)


def test_an_older_envchecks_link_is_repaired_by_the_next_command(gated, gated_home, tmp_path):
    """What the issue met: lib/envcheck a link to a reinstalled envcheck's folder, now holding
    only data/presets. `check` (its stored-pass answer) puts the gate client back."""
    home = gated_home
    lib = home / "lib"
    shutil.rmtree(lib / "envcheck")
    stale = tmp_path / "old-site-packages" / "envcheck"
    (stale / "data" / "presets").mkdir(parents=True)
    (lib / "envcheck").symlink_to(stale, target_is_directory=True)
    python = home / "envs" / "tf" / "bin" / "python"
    env = {k: v for k, v in gated.items() if k != "ENVCHECK_HOME"}
    broken = subprocess.run([str(python), "-c", "import envcheck; envcheck.ensure_ready"], capture_output=True,
                            text=True, env=env, cwd=tmp_path, timeout=60)
    assert "has no attribute 'ensure_ready'" in broken.stderr  # the issue, reproduced
    assert envcheck(gated, "check", "--env", "tf", "--json").json()["cached"]
    assert not (lib / "envcheck").is_symlink()
    out = gate_in_env(python, env, tmp_path)
    assert out["verdict"] in ("ready", "degraded") and out["foreign"] == []


def test_a_gone_interpreter_is_said_with_its_fix(gated, gated_home, tmp_path):
    """envcheck's venv moved or deleted: the env's gate says so and how to point it anew."""
    home = gated_home
    (home / "lib" / "envcheck-python").write_text(str(tmp_path / "gone" / "python"))
    python = home / "envs" / "tf" / "bin" / "python"
    env = {k: v for k, v in gated.items() if k != "ENVCHECK_HOME"}
    code = ("import json, envcheck\ntry:\n    envcheck.ensure_ready()\n"
            "except envcheck.NotReady as exc:\n    print(json.dumps([exc.reason, exc.fix]))\n")
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=60)
    reason, fix = json.loads(proc.stdout)
    assert "is gone" in reason and "envcheck env list" in fix
    assert envcheck(gated, "env", "list").code == 0  # any command points the env at this envcheck
    assert (home / "lib" / "envcheck-python").read_text() == sys.executable
    assert gate_in_env(python, env, tmp_path)["verdict"] in ("ready", "degraded")
    assert os.path.isfile(home / "lib" / "envcheck" / "__init__.py")
