"""A real jax-cpu env, end to end: provisioned from its preset (jax + jaxlib from the configured
package index, no Keras, no CUDA plugin), validated with the pure-JAX jitted fit on one and on
two host devices (XLA_FLAGS splits the CPU) with the data-parallel check over both, then
selected, gated, provisioned and diagnosed (`doctor`, its HTML page) by --framework jax, run
with JAX's memory variable, and started as a Jupyter kernel that imports jax.

Then the same real jax seen through a hook (an env whose ``.pth`` files add the real env's
site-packages and wrap ``jax`` as it is imported), so each check of the backend is shown to
fail when what it checks goes wrong: arrays left off the device asked for, a fit that does
not learn, replicas whose weights differ."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env
from envcheck.envs.metadata import site_packages
from envcheck.validation.smoke import RUNNER
from test_kernel import run_in_kernel
from test_smoke import make_env, wrap_on_import

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# ENVCHECK_TEST_FAULT: misplace: jax.device_put ignores the device or sharding asked for;
# frozen: every gradient is zero (the fit cannot learn); desync: a replicated array gets a
# different copy on each device (the replicas start, and stay, apart).
FAULT_HOOK = '''
import importlib.abc, importlib.util, os, sys

FAULT = os.environ.get("ENVCHECK_TEST_FAULT", "")


def wrap(jax):
    real_put, real_grad = jax.device_put, jax.value_and_grad
    if FAULT == "misplace":
        jax.device_put = lambda x, device=None, *args, **kwargs: real_put(x)
    elif FAULT == "frozen":
        def value_and_grad(f, *args, **kwargs):
            inner = real_grad(f, *args, **kwargs)

            def zeroed(*a, **k):
                loss, grads = inner(*a, **k)
                return loss, jax.tree_util.tree_map(lambda g: g * 0.0, grads)
            return zeroed
        jax.value_and_grad = value_and_grad
    elif FAULT == "desync":
        import numpy as np

        def device_put(x, device=None, *args, **kwargs):
            spec = getattr(device, "spec", None)
            if spec is None or tuple(spec) or len(device.device_set) < 2:
                return real_put(x, device, *args, **kwargs)
            devices = sorted(device.device_set, key=lambda d: d.id)
            copies = [real_put(np.asarray(x) + 0.5 * i, d) for i, d in enumerate(devices)]
            return jax.make_array_from_single_device_arrays(np.shape(x), device, copies)
        jax.device_put = device_put


''' + wrap_on_import("jax") + '''

if FAULT:
    sys.meta_path.insert(0, Hook())
'''
TWO_CPUS = {"backend": "jax", "devices": ["cpu:0", "cpu:1"], "logical_cpus": 2,
            "multi_replica": True}
ENV = "jax-cpu"  # provision names an env after its preset


@pytest.fixture(scope="module")
def jax_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An env home with env jax-cpu, made by `envcheck provision --preset jax-cpu` as an
    installer hook makes it (its quick checks run, the fit left to the tests)."""
    home = tmp_path_factory.mktemp("jax-home")
    proc = envcheck(home, "provision", "--preset", "jax-cpu", "--no-smoke", "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr
    made = json.loads(proc.stdout)
    assert [(e["name"], e["action"], e["verdict"]) for e in made["envs"]] == [(ENV, "created", "ready")]
    return home


def envcheck(home: Path, *args: str, timeout: float = 600, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True,
                          text=True, timeout=timeout, env=clean_env(ENVCHECK_HOME=str(home), **extra))


def test_a_real_jax_cpu_env_trains_on_two_host_devices_and_is_selected(jax_home: Path):
    shown = envcheck(jax_home, "env", "show", ENV, "--json")
    packages = json.loads(shown.stdout)["env"]["packages"]
    assert packages["jax"].startswith("0.10.") and packages["jaxlib"] == packages["jax"]
    assert "keras" not in packages and "jax-cuda12-plugin" not in packages  # a pure-JAX fit

    r = envcheck(jax_home, "validate", ENV, "--devices", "cpu:0,cpu:1", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)["reports"][0]
    assert report["verdict"] == "ready", report["checks"]
    assert report["build"]["framework"] == "jax" and report["build"]["cuda_plugin"] is None
    assert report["build"]["devices"] == ["cpu:0", "cpu:1"]  # XLA_FLAGS made two host devices
    assert [d["device"] for d in report["devices"]] == ["cpu:0", "cpu:1"]
    for device in report["devices"]:
        assert device["status"] == "pass", device["error"]
        assert device["placed_on"] == device["device"]  # the arrays really were on that device
        assert device["loss_last"] < device["loss_first"] and device["ms_per_step"] > 0
    multi = report["multi_replica"]
    assert (multi["status"], multi["replicas"], multi["global_batch"]) == ("pass", 2, 64), multi
    assert "Mesh of 2 devices" in multi["detail"] and "replica batches [32, 32]" in multi["detail"]
    assert 0 < multi["scaling_efficiency"] and multi["samples_per_s"] > 0

    chosen = envcheck(jax_home, "select", "--framework", "jax", "--json")
    assert chosen.returncode == 0, chosen.stderr
    assert json.loads(chosen.stdout)["selected"] == ENV
    assert json.loads(chosen.stdout)["ranking"][0]["framework"] == "jax"
    gate = envcheck(jax_home, "check", "--framework", "jax", "--json")
    assert gate.returncode == 0, gate.stderr
    answer = json.loads(gate.stdout)
    assert (answer["env"], answer["ready"], answer["cached"]) == (ENV, True, True)
    other = envcheck(jax_home, "check", "--framework", "torch", "--json")
    assert other.returncode == 1 and "no env has torch" in other.stderr  # the filter is real

    ran = envcheck(jax_home, "run", "--env", ENV, "--", "python", "-c",
                   "import os, jax; print(os.environ['XLA_PYTHON_CLIENT_PREALLOCATE'], "
                   "jax.devices()[0].platform)")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["false", "cpu"]


def test_level_3_measures_copy_matmul_and_all_reduce_on_cpu_devices_with_no_expectation(jax_home: Path):
    """Issue 20: level 3 runs for real on CPU devices; the figures are measured and shown, judged
    n/a (a CPU has no expectation), never a pass, and leave the verdict alone."""
    r = envcheck(jax_home, "validate", ENV, "--devices", "cpu:0,cpu:1", "--level", "3", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)["reports"][0]
    assert report["level"] == 3 and report["verdict"] == "ready", report["checks"]
    figures = {(f["device"], f["name"]): f for f in report["figures"]}
    for device in ("cpu:0", "cpu:1"):
        for name in ("copy_h2d", "copy_d2h", "matmul_fp32"):
            figure = figures[(device, name)]
            assert figure["value"] > 0 and figure["verdict"] == "n/a", figure
    allreduce = figures[("cpu:0,cpu:1", "allreduce")]
    assert allreduce["value"] > 0 and allreduce["verdict"] == "n/a", allreduce
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["figure-matmul"]["status"] == "skip" and "TFLOPS" in checks["figure-matmul"]["summary"]
    assert checks["figure-memory"]["status"] == "skip"  # a CPU has no memory of its own to fill
    text = envcheck(jax_home, "validate", ENV, "--devices", "cpu:0", "--level", "3")
    assert text.returncode == 0 and "GB/s" in text.stdout and "TFLOPS" in text.stdout, text.stdout


# --- each check fails when what it checks goes wrong --------------------------------------

@pytest.fixture(scope="module")
def faulty_python(jax_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An env that sees jax-cpu's real jax through FAULT_HOOK."""
    real_site = site_packages(jax_home / "envs" / ENV)[0]
    return make_env(tmp_path_factory.mktemp("faulty-jax") / "env",
                    {"real_jax.pth": f"import site; site.addsitedir({str(real_site)!r})\n",
                     "fault_hook.py": FAULT_HOOK, "fault_hook.pth": "import fault_hook\n"},
                    python=str(jax_home / "envs" / ENV / "bin" / "python"))


def run_runner(python: Path, fault: str) -> tuple[int, dict]:
    proc = subprocess.run([str(python), str(RUNNER), json.dumps(TWO_CPUS)], capture_output=True,
                          text=True, timeout=300, env=clean_env(ENVCHECK_TEST_FAULT=fault))
    return proc.returncode, json.loads(proc.stdout)


def test_the_hooked_env_passes_without_a_fault(faulty_python: Path):
    code, doc = run_runner(faulty_python, "")
    assert code == 0, doc
    assert [d["status"] for d in doc["devices"]] == ["pass", "pass"]


def test_arrays_left_off_the_device_fail_placement_and_the_split(faulty_python: Path):
    code, doc = run_runner(faulty_python, "misplace")
    assert code == 1
    cpu0, cpu1 = doc["devices"]
    assert cpu0["status"] == "pass"  # the default device is the one asked for
    assert cpu1["status"] == "fail" and cpu1["placed_on"] == "cpu:0"
    assert "ran on cpu:0 (weights on cpu:0), not on cpu:1" in cpu1["error"]
    multi = doc["multi_replica"]
    assert multi["status"] == "fail" and "replicas got batches of [64]" in multi["detail"]


def test_a_fit_that_does_not_learn_fails(faulty_python: Path):
    code, doc = run_runner(faulty_python, "frozen")
    assert code == 1
    for device in doc["devices"]:
        assert device["status"] == "fail" and "loss did not fall" in device["error"]
    assert doc["multi_replica"]["status"] == "fail"
    assert "loss did not fall" in doc["multi_replica"]["detail"]


def test_replicas_whose_weights_differ_fail(faulty_python: Path):
    code, doc = run_runner(faulty_python, "desync")
    assert code == 1
    assert [d["status"] for d in doc["devices"]] == ["pass", "pass"]  # one device: no replicas
    multi = doc["multi_replica"]
    assert multi["status"] == "fail"
    assert "replicas disagree on weights b1, b2, w1, w2" in multi["detail"]


# --- the commands by --framework jax, the HTML page, a Jupyter kernel ----------------------

def test_provision_and_doctor_by_framework_and_the_html_report(jax_home: Path, tmp_path: Path):
    """`provision --auto --framework jax` asks for JAX's presets only (no GPU here: jax-cuda12 is
    skipped, the env made is kept); `doctor --framework jax` chooses the JAX env, fits it, and
    writes the page `report` shows, with its device rows and build."""
    auto = envcheck(jax_home, "provision", "--auto", "--framework", "jax", "--no-smoke", "--json",
                    CUDA_VISIBLE_DEVICES="")
    assert auto.returncode == 0, auto.stderr
    actions = {e["name"]: e["action"] for e in json.loads(auto.stdout)["envs"]}
    assert actions == {ENV: "unchanged", "jax-cuda12": "skipped"}

    page = tmp_path / "doctor.html"
    doctor = envcheck(jax_home, "doctor", "--framework", "jax", "--json", "--html", str(page))
    assert doctor.returncode == 0, doctor.stderr
    diagnosis = json.loads(doctor.stdout)
    assert diagnosis["selection"]["selected"] == ENV and diagnosis["envelope"]["ready_envs"] == [ENV]
    report = diagnosis["report"]
    assert report["verdict"] == "ready" and report["build"]["framework"] == "jax", report["checks"]
    assert report["devices"][0]["device"] == "cpu:0" and report["devices"][0]["status"] == "pass"

    html = page.read_text()
    assert f'data-env="{ENV}"' in html and 'data-device="cpu:0"' in html
    assert f"jax {report['build']['version']}" in html  # the build line, as the backend reports it
    data = json.loads(html.split('id="envcheck-data">', 1)[1].split("</script>", 1)[0])
    (shown,) = [e for e in data["envs"] if e["name"] == ENV]
    assert shown["report"]["devices"][0]["ms_per_step"] == report["devices"][0]["ms_per_step"]


KERNEL_CODE = ("import json, os, sys, jax, jax.numpy as jnp; print(json.dumps({'prefix': sys.prefix, "
               "'preallocate': os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE'), "
               "'platform': jax.devices()[0].platform, 'total': float(jnp.arange(4.0).sum())}))")


def test_a_jupyter_kernel_of_the_jax_env_runs_jax_with_what_run_sets(jax_home: Path, tmp_path: Path):
    """Last in the module: installing the kernel adds ipykernel to the env."""
    root = tmp_path / "jupyter"
    jupyter = {"JUPYTER_DATA_DIR": str(root / "data"), "JUPYTER_CONFIG_DIR": str(root / "config"),
               "JUPYTER_RUNTIME_DIR": str(root / "runtime"), "JUPYTER_PATH": "", "IPYTHONDIR": str(root / "ipython")}
    installed = envcheck(jax_home, "kernel", "install", ENV, "--json", **jupyter)
    assert installed.returncode == 0, installed.stderr
    kernel = json.loads(installed.stdout)["kernel"]
    assert (kernel["name"], kernel["status"]) == (f"envcheck-{ENV}", "ok")
    seen, _ = run_in_kernel(jupyter, kernel["name"], KERNEL_CODE)
    assert Path(seen["prefix"]) == jax_home / "envs" / ENV
    assert (seen["preallocate"], seen["platform"], seen["total"]) == ("false", "cpu", 6.0)
