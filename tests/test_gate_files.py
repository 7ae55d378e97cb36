"""The gate against changes behind its back (the env's files), its stored-pass answer's cost,
and its answers where the host or the interpreter can't train (issue 18, points 3, 5 and 6)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

from conftest import clean_env
from test_gate import fresh_gated, gate  # noqa: F401  (the fixture: these tests change the env's files)
from test_select import envcheck, make_env


def standin_package(home):
    """The folder the tensorflow-cpu stand-in installs, as a framework's package folder."""
    (site,) = (home / "envs" / "tf" / "lib").glob("python*/site-packages")
    return site / "tensorflow_cpu_standin"


def test_moving_the_framework_package_away_misses_the_stored_pass(fresh_gated, home, tmp_path):
    assert gate(fresh_gated)["cached"]
    shutil.move(str(standin_package(home)), str(tmp_path / "moved"))
    assert not gate(fresh_gated)["cached"]
    smoke = envcheck(fresh_gated, "check", "--env", "tf", "--json", "--smoke")
    assert smoke.code == 1 and not smoke.json()["ready"] and not smoke.json()["cached"]


def test_an_edited_package_init_misses_the_stored_pass_and_is_drift(fresh_gated, home):
    """An edit behind envcheck's back: the env is no longer the one validated (issue 21.4)."""
    assert gate(fresh_gated)["cached"]
    with open(standin_package(home) / "__init__.py", "a") as fh:
        fh.write("raise ImportError('edited behind envcheck')\n")
    data = gate(fresh_gated)
    assert not data["cached"] and not data["ready"]
    assert data["reason"].startswith("drifted since validation: 1 file(s) changed")
    assert "envcheck env verify tf" in data["fix"]
    again = gate(fresh_gated)  # still drifted: no validation turns it back into the env that was validated
    assert not again["ready"] and again["reason"] == data["reason"]
    verified = envcheck(fresh_gated, "env", "verify", "tf", "--json")
    assert verified.code == 1 and verified.json()["files"]["changed"] == [
        "lib/python3.11/site-packages/tensorflow_cpu_standin/__init__.py"]


def test_bytecode_the_env_writes_keeps_the_stored_pass(fresh_gated, home):
    """Importing writes __pycache__ folders into site-packages and its packages: no change."""
    assert gate(fresh_gated)["cached"]
    python = home / "envs" / "tf" / "bin" / "python"
    subprocess.run([str(python), "-c", "import tensorflow_cpu_standin"], capture_output=True, timeout=60)
    assert (standin_package(home) / "__pycache__").is_dir()
    assert gate(fresh_gated)["cached"]


def imported_modules(importtime_stderr):
    return {line.split("|")[-1].strip() for line in importtime_stderr.splitlines() if "|" in line}


def test_the_stored_pass_answer_imports_almost_nothing(home, wheelhouse, tmp_path):
    """No click, session, store, probe or report types: dataclasses, typing and pathlib stay out."""
    make_env(home, wheelhouse, "tf", "tensorflow-cpu==2.21.0")
    env = clean_env(ENVCHECK_HOME=str(home), LD_LIBRARY_PATH=str(tmp_path))  # no NVML here
    assert envcheck(env, "validate", "tf", "--no-smoke").code == 0
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "envcheck", "check", "--env", "tf", "--json"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and json.loads(proc.stdout)["cached"], proc.stderr[-2000:]
    # What the interpreter imports before any code runs (site, .pth hooks such as an editable
    # install's finder) is the floor every command pays; the fast path is judged on what it adds.
    floor = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"],
                           capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    imported = imported_modules(proc.stderr) - imported_modules(floor.stderr)
    assert "envcheck" in imported
    assert not imported & {"click", "dataclasses", "typing", "pathlib", "pynvml", "envcheck.envs.store",
                           "envcheck.usecases.session", "envcheck.validation.reports", "envcheck.host.probe"}


def test_the_fast_path_declares_what_click_does():
    from envcheck.cli import fast
    from envcheck.cli.options import CHECK
    from envcheck.data import gate_client
    from envcheck.envs import gate_link
    from envcheck.validation import reports

    assert {**fast.VALUED, **fast.SWITCHES} == {o.flag: o.dest for o in CHECK}
    assert set(fast.SWITCHES) == {o.flag for o in CHECK if o.is_flag}
    assert fast.REPORT_SCHEMA == reports.SCHEMA
    assert gate_link.PYTHON_FILE == gate_client.PYTHON_FILE


def test_require_gpu_on_a_host_without_nvml_names_the_driver_fix(home, wheelhouse, tmp_path):
    """As `select --require-gpu` says it: the driver (or the container's --gpus), not `validate`."""
    make_env(home, wheelhouse, "tf", "tensorflow-cpu==2.21.0")
    env = clean_env(ENVCHECK_HOME=str(home), LD_LIBRARY_PATH=str(tmp_path))
    assert envcheck(env, "validate", "tf", "--no-smoke").code == 0
    for args in (("--env", "tf"), ("--env=tf",)):  # the stored-pass path and click's
        r = envcheck(env, "check", *args, "--json", "--require-gpu")
        data = r.json()
        assert r.code == 1 and not data["ready"] and data["cached"]
        assert "libnvidia-ml.so.1" in data["reason"] and "not needed by this CPU env" not in data["reason"]
        assert "--gpus all" in data["fix"] and "validate" not in data["fix"]
    selected = envcheck(env, "select", "--require-gpu", "--json").json()
    assert data["fix"] in selected["warning"]


def test_ensure_ready_outside_envchecks_envs_says_what_to_do_from_there(tmp_path):
    """This interpreter is no env of envcheck's: no `envcheck env add venv`, but pip for it."""
    code = ("import json, envcheck\n"
            "try:\n    envcheck.ensure_ready()\n"
            "except envcheck.NotReady as exc:\n    print(json.dumps({'fix': exc.fix, 'reason': exc.reason}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env=clean_env(LD_LIBRARY_PATH=str(tmp_path), ENVCHECK_HOME=str(tmp_path / "h")), timeout=120)
    assert proc.returncode == 0, proc.stderr
    fix = json.loads(proc.stdout)["fix"]
    assert "envcheck env add" not in fix
    assert f"{sys.executable} -m pip install" in fix and "envcheck run --env" in fix
