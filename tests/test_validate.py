"""envcheck validate: real TensorFlow on CPU, broken stand-in frameworks, compat before smoke."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Result, clean_env
from envcheck.validation.smoke import RUNNER
from wheelhouse import build_wheel

STANDINS = {
    "importerror": "raise ImportError('libcudart.so.11.0: cannot open shared object file: No such file or directory')\n",
    "hang": "import time\ntime.sleep(10 ** 6)\n",
    "abort": "import os\nos.abort()\n",
    "odd": "import sys\nsys.stderr.write('odd-stand-in: something odd happened\\n')\nraise RuntimeError('odd')\n",
}


def envcheck(home: Path, *args: str, env: dict | None = None, timeout: float = 900) -> Result:
    proc = subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True,
                          env=env or clean_env(ENVCHECK_HOME=str(home)), timeout=timeout)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def standin_env(home: Path, tmp_path: Path, name: str, behaviour: str, dist: str = "tensorflow-cpu") -> None:
    """An env whose `tensorflow` module is a stand-in that misbehaves on import."""
    wheels = tmp_path / f"wheels-{name}"
    build_wheel(wheels, dist, "2.21.0", files={"tensorflow/__init__.py": STANDINS[behaviour]})
    preset = tmp_path / f"{name}.toml"
    preset.write_text(f'title = "{behaviour}"\ndescription = ""\nkind = "cpu"\nframework = "tensorflow"\n'
                      f'requires-python = ">=3.8"\npackages = ["{dist}==2.21.0"]\n')
    r = envcheck(home, "env", "create", name, "--preset-file", str(preset), "--no-index", "--find-links", str(wheels))
    assert r.code == 0, r.err


def check(report: dict, check_id: str) -> dict:
    return next(c for c in report["checks"] if c["id"] == check_id)


@pytest.mark.slow
def test_cpu_smoke_on_real_tensorflow(tf_home):
    r = envcheck(tf_home, "validate", "tf", "--devices", "cpu", "--json")
    assert r.code == 0, r.err
    (report,) = r.json()["reports"]
    assert r.json()["schema"] == "envcheck.validation/1" and report["schema"] == "envcheck.report/1" and report["verdict"] in ("ready", "degraded")
    (cpu,) = report["devices"]
    assert cpu["device"] == "cpu:0" and cpu["status"] == "pass"
    assert cpu["ms_per_step"] > 0 and cpu["loss_last"] < cpu["loss_first"]
    assert "CPU" in cpu["placed_on"].upper()
    assert check(report, "smoke")["status"] == "pass"
    assert check(report, "integrity")["status"] == "pass"
    assert check(report, "compat")["status"] == "pass"
    stored = json.loads((tf_home / "envs" / "tf" / "envcheck-report.json").read_text())
    assert stored["verdict"] == report["verdict"] and stored["fingerprint"]["packages"]


@pytest.mark.slow
def test_two_logical_cpu_replicas(tf_home):
    r = envcheck(tf_home, "validate", "tf", "--devices", "cpu:0,cpu:1", "--json")
    assert r.code == 0, r.err
    (report,) = r.json()["reports"]
    multi = report["multi_replica"]
    assert multi["status"] == "pass" and multi["replicas"] == 2
    assert multi["global_batch"] == 2 * multi["per_replica_batch"]
    assert multi["scaling_efficiency"] > 0
    assert [d["device"] for d in report["devices"]] == ["cpu:0", "cpu:1"]
    assert all(d["status"] == "pass" for d in report["devices"])
    assert check(report, "multi-replica")["status"] == "pass"
    # what the efficiency measures, and why logical CPUs can't scale, is said with it
    assert "1.00 = each replica as fast as one device alone" in check(report, "multi-replica")["summary"]
    assert "logical CPU devices share this host's" in check(report, "multi-replica")["detail"]


@pytest.mark.slow
def test_human_report_shows_devices_and_verdict(tf_home):
    r = envcheck(tf_home, "validate", "tf", "--devices", "cpu")
    assert r.code == 0, r.err
    assert "DEVICE" in r.out and "cpu:0" in r.out and "MS/STEP" in r.out
    assert r.out.strip().splitlines()[-1].startswith("verdict: ")


@pytest.mark.parametrize("behaviour, cause", [
    ("importerror", "libcudart.so.11.0"),
    ("hang", "hang"),
    ("abort", "SIGABRT"),
])
def test_broken_framework_is_not_ready(home, tmp_path, behaviour, cause):
    standin_env(home, tmp_path, "bad", behaviour)
    timeout = "2" if behaviour == "hang" else "5"  # a hang is waited out: the smallest bound that shows it
    started = time.monotonic()
    r = envcheck(home, "validate", "bad", "--devices", "cpu", "--timeout", timeout, "--json")
    elapsed = time.monotonic() - started
    assert r.code == 1, r.err
    assert "Traceback" not in r.err
    (report,) = r.json()["reports"]
    assert report["verdict"] == "not-ready"
    smoke = check(report, "smoke")
    assert smoke["status"] == "fail" and cause in smoke["summary"] + smoke["detail"], smoke
    assert elapsed < 60
    if behaviour == "importerror":  # the catalogue's cause and fix become the check's
        assert "LD_LIBRARY_PATH" in smoke["fix"] and "loader path" in smoke["detail"]


def test_gpu_env_on_old_driver_fails_compat_without_gpu_smoke(home, tmp_path, fake_nvml):
    standin_env(home, tmp_path, "gpu", "importerror", dist="tensorflow")
    env = fake_nvml.env(FAKE_NVML_DRIVER="470.82.01", FAKE_NVML_CUDA="11040", ENVCHECK_HOME=str(home))
    r = envcheck(home, "validate", "gpu", "--json", "--timeout", "10", env=env)
    assert r.code == 1, r.err
    (report,) = r.json()["reports"]
    compat = check(report, "compat")
    assert compat["status"] == "fail" and "525.60.13" in compat["summary"] + compat["detail"] + (compat["fix"] or "")
    gpu = next(d for d in report["devices"] if d["device"].startswith("gpu:"))
    assert gpu["status"] == "skip" and "compat" in gpu["error"]


def test_bad_device_list_is_usage_error(home, tmp_path):
    standin_env(home, tmp_path, "x", "importerror")
    for spec in ("tpu:0", "cpu0", ""):
        r = envcheck(home, "validate", "x", "--devices", spec)
        assert r.code == 2 and "device" in r.err and "Traceback" not in r.err
    r = envcheck(home, "validate", "x", "--devices", "gpu:3")
    assert r.code == 2 and "gpu:3" in r.err


def test_a_gpu_by_uuid_is_the_gpu_of_that_nvml_index(home, tmp_path, fake_nvml):
    """`--devices` takes a GPU's UUID as `run --gpus` does; reports name it by NVML index."""
    from fake_nvml import A100

    standin_env(home, tmp_path, "x", "importerror")
    env = fake_nvml.env([A100, A100], ENVCHECK_HOME=str(home))
    r = envcheck(home, "validate", "x", "--devices", "cpu:0,GPU-fa4e0000-0000-0000-0000-000000000001",
                 "--json", env=env)
    (report,) = r.json()["reports"]
    gpu = next(d for d in report["devices"] if d["device"] == "gpu:1")
    assert gpu["status"] == "skip" and "CPU-only build" in gpu["error"]
    unknown = envcheck(home, "validate", "x", "--devices", "GPU-fa4e0000-0000-0000-0000-000000000009", env=env)
    assert unknown.code == 2 and "unknown GPU GPU-fa4e0000-0000-0000-0000-000000000009" in unknown.err
    assert "gpu:0, gpu:1" in unknown.err and unknown.err.count("\n") == 1


def test_no_smoke_is_quick_checks_only(home, tmp_path):
    standin_env(home, tmp_path, "x", "importerror")
    r = envcheck(home, "validate", "x", "--no-smoke", "--json")
    (report,) = r.json()["reports"]
    assert check(report, "smoke")["status"] == "skip" and report["devices"] == []
    assert check(report, "integrity")["status"] == "pass"
    assert r.code == 0 and report["verdict"] in ("ready", "degraded")


def test_integrity_names_a_dependency_removed_behind_the_envs_back(home, wheelhouse):
    presets = home / "presets"
    presets.mkdir()
    (presets / "dep.toml").write_text('title = "dep"\ndescription = ""\nkind = "cpu"\nframework = "tensorflow"\n'
                                      'requires-python = ">=3.8"\npackages = ["tensorflow-cpu==2.21.0", "beta"]\n')
    r = envcheck(home, "env", "create", "dep", "--preset", "dep", "--no-index", "--find-links", str(wheelhouse))
    assert r.code == 0, r.err
    site = next((home / "envs" / "dep" / "lib").glob("python3*/site-packages"))
    for path in [*site.glob("alpha-*.dist-info"), site / "alpha"]:
        shutil.rmtree(path)
    r = envcheck(home, "validate", "dep", "--no-smoke", "--json")
    assert r.code == 1
    integrity = check(r.json()["reports"][0], "integrity")
    assert integrity["status"] == "fail" and "beta 1.0 requires alpha>=1.0, has not installed" in integrity["detail"]


def smoke_runners(argv: list[str]) -> list[int]:
    """Live processes whose command line starts with ``argv``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().split(b"\0")[:2] == [a.encode() for a in argv]:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_removing_the_env_during_validate_reports_it_gone(home, tmp_path):
    standin_env(home, tmp_path, "doomed", "hang")
    proc = subprocess.Popen([sys.executable, "-m", "envcheck", "validate", "doomed", "--devices", "cpu",
                             "--timeout", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env(ENVCHECK_HOME=str(home)))
    runner = [str(home / "envs" / "doomed" / "bin" / "python"), str(RUNNER)]
    deadline = time.monotonic() + 60
    while not smoke_runners(runner) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert smoke_runners(runner), "the smoke runner never started"  # it is importing the hanging stand-in
    assert envcheck(home, "env", "remove", "doomed", "--yes").code == 0
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "Traceback" not in err and "internal error" not in err
    assert "env doomed was removed while it was being validated" in err


@pytest.mark.slow
def test_the_smoke_fit_leaves_the_users_home_untouched(tf_home, tmp_path):
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    env = clean_env(ENVCHECK_HOME=str(tf_home), HOME=str(user_home))
    r = envcheck(tf_home, "validate", "tf", "--devices", "cpu", env=env)
    assert r.code == 0, r.err
    assert list(user_home.iterdir()) == []


def test_a_failing_smoke_keeps_the_runners_output_in_a_log_named_by_the_fix(home, tmp_path):
    standin_env(home, tmp_path, "crash", "odd")
    r = envcheck(home, "validate", "crash", "--devices", "cpu", "--timeout", "10")
    assert r.code == 1 and "Traceback" not in r.out + r.err
    fixes = [line for line in r.out.splitlines() if line.strip().startswith("fix (")]
    assert fixes and all("see the detail" not in f for f in fixes)
    logs = list((home / "logs").glob("crash-smoke-*.log"))
    assert len(logs) == 1 and str(logs[0]) in r.out
    assert (logs[0].stat().st_mode & 0o777) == 0o600
    assert "odd-stand-in" in logs[0].read_text()
    assert envcheck(home, "diagnose", str(logs[0])).code in (0, 1)


@pytest.mark.parametrize("command", [["validate"], ["doctor"], ["provision", "--preset", "tensorflow-cpu"]])
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_timeouts_are_finite_and_positive(home, command, value):
    r = envcheck(home, *command, "--timeout", value)
    assert r.code == 2 and f"--timeout {value}" in r.err and "Traceback" not in r.err
    assert list(home.iterdir()) == []


def test_a_timeout_past_the_maximum_is_exit_2_naming_it_and_nothing_changes(home, tmp_path):
    """--timeout 1e10 overflowed the smoke run's timer (time_t) once the fit started: an internal
    error. Past one day it is bad input, before anything is read or written."""
    standin_env(home, tmp_path, "pt", "importerror")
    before = {p: p.stat().st_mtime_ns for p in home.rglob("*")}
    for value in ("1e10", "86401", "inf"):
        r = envcheck(home, "validate", "pt", "--timeout", value)
        assert r.code == 2 and f"--timeout {value}: '{value}' is past the maximum, 86400 seconds (1 day)" in r.err, r.err
        assert r.err.count("\n") == 1 and "Traceback" not in r.err
    assert {p: p.stat().st_mtime_ns for p in home.rglob("*")} == before


@pytest.mark.slow
def test_a_shallower_validation_keeps_the_deeper_evidence(tf_home):
    """The smoke fit's ms/step, then `validate --no-smoke` of the same env on the same host:
    `report` still shows the ms/step, and `check --smoke` still answers from them."""
    deep = envcheck(tf_home, "validate", "tf", "--devices", "cpu", "--json")
    assert deep.code == 0, deep.err
    (measured,) = deep.json()["reports"][0]["devices"]
    quick = envcheck(tf_home, "validate", "tf", "--no-smoke", "--json")
    assert quick.code == 0 and quick.json()["reports"][0]["devices"] == [], quick.err
    (shown,) = envcheck(tf_home, "report", "tf", "--json").json()["envs"]
    assert shown["current"] and shown["report"]["depth"] == "smoke"
    assert shown["report"]["devices"][0]["ms_per_step"] == measured["ms_per_step"] > 0
    assert "MS/STEP" in envcheck(tf_home, "report", "tf").out
    gate = envcheck(tf_home, "check", "--env", "tf", "--smoke", "--json")
    assert gate.code == 0 and gate.json()["cached"], gate.err


@pytest.mark.slow
def test_a_newer_shallow_failure_is_the_answer_and_keeps_the_deeper_measurements(tf_home, tmp_path):
    """A dependency's metadata starts asking for a package that isn't there (its RECORD and
    every name unchanged: the same fingerprint) after a passing smoke fit: the quick failure
    is what `check` answers, and `report` shows it with the earlier ms/step, said to be so,
    also after `check` has validated again."""
    home = tmp_path / "home"
    (home / "envs").mkdir(parents=True)
    subprocess.run(["cp", "-al", str(tf_home / "envs" / "tf"), str(home / "envs")], check=True)  # links: cheap
    (home / "envs" / "tf" / "envcheck-report.json").unlink(missing_ok=True)
    deep = envcheck(home, "validate", "tf", "--devices", "cpu", "--json")
    assert deep.code == 0, deep.err
    (measured,) = deep.json()["reports"][0]["devices"]
    meta = next((home / "envs" / "tf" / "lib").glob("python3*/site-packages/absl_py-*.dist-info")) / "METADATA"
    head, rest = meta.read_text().split("\n", 1)
    fresh = meta.with_name("METADATA.new")
    fresh.write_text(f"{head}\nRequires-Dist: not-installed-anywhere>=1\n{rest}")
    os.replace(fresh, meta)  # a new file: tf_home's, linked, is left as it was

    quick = envcheck(home, "validate", "tf", "--no-smoke", "--json")
    assert quick.code == 1 and quick.json()["reports"][0]["devices"] == []
    gate = envcheck(home, "check", "--env", "tf", "--json")
    assert gate.code == 1 and "integrity" in gate.json()["reason"], gate.out
    (shown,) = envcheck(home, "report", "tf", "--json").json()["envs"]
    report = shown["report"]
    assert shown["current"] and report["verdict"] == "not-ready" and report["depth"] == "quick"
    assert report["devices"][0]["ms_per_step"] == measured["ms_per_step"]
    smoke = check(report, "smoke")
    source = f"measured by the smoke validation of {deep.json()['reports'][0]['created']}"
    assert smoke["status"] == "pass" and smoke["summary"].count(source) == 1  # carried on by check's rerun too


def test_a_quick_validation_after_a_touch_keeps_the_deeper_ones_figures(home, tmp_path):
    """A stored smoke report (ms/step per device), then a `touch` of a top-level
    site-packages file (the fingerprint moves) and `validate --no-smoke`: the quick report is
    the answer now, and `report` still shows the figures, said to be the earlier fit's."""
    standin_env(home, tmp_path, "x", "importerror")
    assert envcheck(home, "validate", "x", "--no-smoke").code == 0
    path = home / "envs" / "x" / "envcheck-report.json"
    stored = json.loads(path.read_text())
    rows = [{"device": "cpu:0", "status": "pass", "ms_per_step": 4.2, "loss_first": 2.3, "loss_last": 0.4},
            {"device": "cpu:1", "status": "pass", "ms_per_step": 4.6, "loss_first": 2.3, "loss_last": 0.5}]
    checks = [c if c["id"] != "smoke" else {**c, "status": "pass", "summary": "2 device(s): 4.2-4.6 ms/step"}
              for c in stored["checks"]]
    path.write_text(json.dumps({**stored, "depth": "smoke", "smoke": True, "devices": rows, "checks": checks}))
    (shown,) = envcheck(home, "report", "x", "--json").json()["envs"]
    assert shown["current"] and shown["report"]["depth"] == "smoke"

    module = next((home / "envs" / "x" / "lib").glob("python3*/site-packages/tensorflow/__init__.py"))
    subprocess.run(["touch", str(module)], check=True)
    quick = envcheck(home, "validate", "x", "--no-smoke", "--json")
    assert quick.code == 0 and quick.json()["reports"][0]["devices"] == [], quick.err
    (shown,) = envcheck(home, "report", "x", "--json").json()["envs"]
    report = shown["report"]
    assert shown["current"] and report["depth"] == "quick" and report["verdict"] == "ready"
    assert [(d["device"], d["ms_per_step"]) for d in report["devices"]] == [("cpu:0", 4.2), ("cpu:1", 4.6)]
    smoke = check(report, "smoke")
    assert smoke["status"] == "skip" and "it was pass: 2 device(s): 4.2-4.6 ms/step" in smoke["summary"]
    assert f"measured by the smoke validation of {stored['created']}" in smoke["summary"]
    assert "MS/STEP" in envcheck(home, "report", "x").out
    assert envcheck(home, "check", "--env", "x", "--json").json()["cached"]  # the quick answer stands
    assert not envcheck(home, "check", "--env", "x", "--smoke", "--json").json()["cached"]  # the fit is no answer


@pytest.mark.slow
def test_a_real_fit_survives_a_touch_and_a_quick_validation(tf_home, tmp_path):
    """The issue's case on real TensorFlow: the smoke fit's ms/step, a `touch` of a
    top-level site-packages file, `validate --no-smoke`: `report` still shows the ms/step."""
    home = tmp_path / "home"
    (home / "envs").mkdir(parents=True)
    subprocess.run(["cp", "-al", str(tf_home / "envs" / "tf"), str(home / "envs")], check=True)  # links: cheap
    (home / "envs" / "tf" / "envcheck-report.json").unlink(missing_ok=True)
    deep = envcheck(home, "validate", "tf", "--devices", "cpu", "--json")
    assert deep.code == 0, deep.err
    (measured,) = deep.json()["reports"][0]["devices"]
    module = next((home / "envs" / "tf" / "lib").glob("python3*/site-packages/six.py"))
    shutil.copy2(module, module.with_suffix(".new"))
    os.replace(module.with_suffix(".new"), module)  # its own inode: tf_home's file is left as it was
    subprocess.run(["touch", str(module)], check=True)
    quick = envcheck(home, "validate", "tf", "--no-smoke", "--json")
    assert quick.code == 0, quick.err
    (shown,) = envcheck(home, "report", "tf", "--json").json()["envs"]
    assert shown["current"] and shown["report"]["depth"] == "quick"
    assert shown["report"]["devices"][0]["ms_per_step"] == measured["ms_per_step"] > 0


def test_the_gate_in_a_job_envcheck_runs_keeps_the_stored_deep_validation(home, tmp_path, fake_nvml):
    """The README's pattern, `envcheck run --env E -- python train.py` whose script calls
    `envcheck.ensure_ready()`: `run` sets CUDA_DEVICE_ORDER (as a kernel does), which is not a
    change: the gate answers from the stored deep validation, which stays as it was; `report`
    from a plain shell says it is current, and `metrics` keeps its seconds per step."""
    standin_env(home, tmp_path, "x", "importerror")
    env = fake_nvml.env(ENVCHECK_HOME=str(home))
    assert envcheck(home, "validate", "x", "--no-smoke", env=env).code == 0
    path = home / "envs" / "x" / "envcheck-report.json"
    stored = json.loads(path.read_text())
    rows = [{"device": "cpu:0", "status": "pass", "ms_per_step": 4.2, "loss_first": 2.3, "loss_last": 0.4}]
    checks = [c if c["id"] != "smoke" else {**c, "status": "pass", "summary": "1 device(s): 4.2 ms/step"}
              for c in stored["checks"]]
    path.write_text(json.dumps({**stored, "depth": "smoke", "smoke": True, "devices": rows, "checks": checks}))
    before = path.read_bytes()
    job = "import envcheck, json; r = envcheck.ensure_ready(); print(json.dumps([r['created'], r['depth']]))"
    ran = envcheck(home, "run", "--env", "x", "--", "python", "-c", job, env=env)
    assert ran.code == 0, ran.err
    assert json.loads(ran.out.strip().splitlines()[-1]) == [stored["created"], "smoke"]  # answered from it
    assert path.read_bytes() == before  # the deep validation is not replaced
    (shown,) = envcheck(home, "report", "x", "--json", env=env).json()["envs"]
    assert shown["current"] and shown["validation"] == shown["report"]["verdict"] and shown["report"]["depth"] == "smoke"
    metrics = envcheck(home, "metrics", env=env).out
    assert 'envcheck_smoke_seconds_per_step{device="cpu:0",env="x"' in metrics
