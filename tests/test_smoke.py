"""The smoke runner, run for real: a real TensorFlow CPU env, and stand-in frameworks that
fail the ways real ones do (an import that cannot load CUDA, a hang, an abort)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import uv

from envcheck.envs.metadata import site_packages
from envcheck.envs.pythons import list_pythons
from envcheck.validation.smoke import run_smoke

def wrap_on_import(module: str) -> str:
    """Source of a meta-path hook that calls ``wrap(module)`` (defined by the code around it)
    on the real ``module`` as it is imported: a fault put into a real framework."""
    return f'''class Hook(importlib.abc.MetaPathFinder):
    searching = False

    def find_spec(self, name, path=None, target=None):
        if name != {module!r} or self.searching:
            return None
        self.searching = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.searching = False
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            wrap(module)

        spec.loader.exec_module = exec_module
        return spec
'''


# A hook that lets a stand-in env run the real TensorFlow, except that asking for one
# device (ENVCHECK_TEST_FAULT="abort:cpu:1" or "hang:cpu:1") aborts or hangs the process.
FAULT_HOOK = '''
import importlib.abc, importlib.util, os, sys, time

ACTION, _, DEVICE = os.environ.get("ENVCHECK_TEST_FAULT", "").partition(":")


def wrap(tf):
    real_device = tf.device

    def device(name):
        if name.strip("/").lower() == DEVICE:
            if ACTION == "abort":
                os.abort()
            time.sleep(10 ** 6)
        return real_device(name)

    tf.device = device


''' + wrap_on_import("tensorflow") + '''

if ACTION:
    sys.meta_path.insert(0, Hook())
'''

# Writes the runner's pid and a helper child's pid to PID_FILE, so a test can check the
# whole process group is gone; the child sleeps like a data-loader worker would.
SPAWN_CHILD = '''
import os, subprocess, sys
_child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(10 ** 6)"])
with open(os.environ["PID_FILE"], "w") as fh:
    fh.write("%d %d" % (os.getpid(), _child.pid))
'''


def make_env(root: Path, files: dict[str, str], python: str = sys.executable) -> Path:
    """A bare virtualenv (no pip: milliseconds) with ``files`` in its site-packages."""
    subprocess.run([uv.find_uv_bin(), "venv", "--no-seed", "--quiet", "--python", python,
                    str(root)], check=True)
    sp = site_packages(root)[0]
    for name, text in files.items():
        path = sp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root / "bin" / "python"


def running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan may wait a while for init to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def assert_group_gone(pid_file: Path) -> None:
    pids = [int(p) for p in pid_file.read_text().split()]
    deadline = time.monotonic() + 5
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(p) for p in pids), f"left running: {pids}"


# --- the real TensorFlow --------------------------------------------------------------

@pytest.mark.slow
def test_cpu_smoke_on_real_tensorflow(tf_python: Path):
    result = run_smoke(tf_python, ["cpu:0"], timeout=120, multi_replica=False)

    assert result.ok, result
    assert result.build["framework"] == "tensorflow"
    assert result.build["version"] == "2.21.0"
    assert result.build["is_cuda_build"] is False
    assert result.build["keras_backend"] == "tensorflow"
    assert result.gpus_seen == 0
    [cpu] = result.devices
    assert cpu.status == "pass" and cpu.error is None
    assert cpu.ms_per_step > 0
    assert cpu.loss_last < cpu.loss_first
    assert cpu.placed_on == "cpu:0"
    assert result.multi_replica is None
    assert result.runs == ["all devices: finished"]


@pytest.mark.slow
def test_two_logical_cpus_train_as_two_replicas(tf_python: Path):
    result = run_smoke(tf_python, ["cpu:0", "cpu:1", "cpu:2"], backend="tensorflow",
                       timeout=120, logical_cpus=3, multi_replica=True,
                       replica_devices=["cpu:1", "cpu:2"], batch=16)

    assert result.ok, result
    assert [d.placed_on for d in result.devices] == ["cpu:0", "cpu:1", "cpu:2"]
    multi = result.multi_replica
    assert multi.status == "pass", multi.detail
    assert multi.replicas == 2
    assert multi.per_replica_batch == 16
    assert multi.global_batch == 2 * multi.per_replica_batch
    assert multi.scaling_efficiency > 0
    assert "[16, 16]" in multi.detail  # what each replica really received


@pytest.mark.slow
def test_a_device_the_framework_does_not_see_fails_and_the_others_pass(tf_python: Path):
    result = run_smoke(tf_python, ["cpu:0", "gpu:0"], timeout=120, multi_replica=False)

    cpu, gpu = result.devices
    assert cpu.status == "pass"
    assert gpu.status == "fail"
    assert "gpu:0 is not visible to tensorflow (it sees 0 GPU device(s))" in gpu.error
    assert not result.ok


@pytest.mark.slow
@pytest.mark.parametrize("fault, cause", [("abort", "crashed with SIGABRT"),
                                          ("hang", "no result within 10 s (hang)")])
def test_one_bad_device_is_isolated_and_the_other_still_checked(
        tmp_path: Path, tf_python: Path, fault: str, cause: str):
    real_site = site_packages(tf_python.parent.parent)[0]
    python = make_env(tmp_path / "env", {
        "real_tf.pth": f"import site; site.addsitedir({str(real_site)!r})\n",
        "fault_hook.py": FAULT_HOOK,
        "fault_hook.pth": "import fault_hook\n",
    })

    result = run_smoke(python, ["cpu:0", "cpu:1"], timeout=10, import_timeout=60,
                       multi_replica=True, env={"ENVCHECK_TEST_FAULT": f"{fault}:cpu:1"})

    cpu0, cpu1 = result.devices
    assert cpu0.status == "pass", cpu0.error
    assert cpu0.loss_last < cpu0.loss_first
    assert cpu1.status == "fail"
    assert cpu1.error == cause
    assert result.build["version"] == "2.21.0"  # facts from before the crash are kept
    assert result.multi_replica.status == "skip"
    assert "cpu:1 failed on its own" in result.multi_replica.detail
    assert result.runs == [f"all devices: {cause}", f"cpu:1 alone: {cause}"]


# --- JAX, jitted (what the GPU machine runs, here on CPU) -------------------------------

JAX = ["jax==0.10.2", "jaxlib==0.10.2"]
LOCAL_INDEX = Path("/opt/pypi/simple")


@pytest.fixture(scope="module")
def jax_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = tmp_path_factory.mktemp("jax") / "env"
    python = make_env(env, {})
    index = ["--extra-index-url", LOCAL_INDEX.as_uri()] if LOCAL_INDEX.is_dir() else []
    subprocess.run([uv.find_uv_bin(), "pip", "install", "--quiet", "--python", str(python),
                    *index, *JAX], check=True)
    return python


@pytest.mark.slow
def test_jax_trains_per_device_and_as_two_replicas(jax_python: Path):
    result = run_smoke(jax_python, ["cpu:0", "cpu:1"], timeout=120, logical_cpus=2,
                       multi_replica=True)

    assert result.ok, result
    assert result.build["framework"] == "jax"  # "auto" without TensorFlow
    assert "keras_version" not in result.build  # pure JAX, no Keras in between
    assert result.gpus_seen == 0
    for device in result.devices:
        assert device.placed_on == device.device
        assert device.loss_last < device.loss_first
    multi = result.multi_replica
    assert (multi.status, multi.replicas, multi.global_batch) == ("pass", 2, 64), multi.detail
    assert "[32, 32]" in multi.detail


# --- stand-in frameworks that break on import -------------------------------------------

def test_framework_that_cannot_load_cuda_reports_the_import_error(tmp_path: Path):
    python = make_env(tmp_path / "env", {"tensorflow/__init__.py": '''
        raise ImportError("libcudart.so.11.0: cannot open shared object file: "
                          "No such file or directory")
        '''})

    result = run_smoke(python, ["cpu:0", "gpu:0"], timeout=5, multi_replica=True)

    assert not result.ok
    assert result.error.startswith("ImportError: libcudart.so.11.0: cannot open shared object")
    assert 'tensorflow/__init__.py", line 2' in result.error  # the traceback's last lines
    assert "libcudart.so.11.0: cannot open" in result.stderr_tail  # for the diagnosis step
    assert result.devices == [] and result.multi_replica is None  # nothing ran
    assert result.wall_s < 5


def test_runner_runs_on_the_oldest_python_it_supports(tmp_path: Path):
    oldest = [p for p in list_pythons() if p.version.release[:2] == (3, 7)]
    if not oldest:
        pytest.skip("no Python 3.7 on this machine")
    python = make_env(tmp_path / "env", {
        "tensorflow/__init__.py": "raise ImportError('DLL load failed')\n"},
        python=str(oldest[0].path))

    result = run_smoke(python, ["cpu:0"], timeout=5, multi_replica=False)

    assert result.error.startswith("ImportError: DLL load failed"), result.stderr_tail


def test_framework_import_that_hangs_is_killed_with_its_process_group(tmp_path: Path):
    python = make_env(tmp_path / "env", {
        "tensorflow/__init__.py": SPAWN_CHILD + "import time\ntime.sleep(10 ** 6)\n"})
    pid_file = tmp_path / "pids"

    result = run_smoke(python, ["cpu:0", "cpu:1"], timeout=2, import_timeout=2,
                       multi_replica=False, env={"PID_FILE": str(pid_file)})

    assert result.error == "no result within 2 s (hang) before the framework finished importing"
    assert result.devices == []
    assert result.wall_s < 4
    assert result.runs == ["all devices: no result within 2 s (hang)"]  # no futile reruns
    assert_group_gone(pid_file)


def test_a_runner_reporting_progress_forever_is_stopped_at_the_whole_runs_bound(tmp_path: Path):
    """Progress extends a phase, never the process: 0.5 + 0.5 × (1 device + 2) = 2 s at most."""
    python = make_env(tmp_path / "env", {"tensorflow/__init__.py": SPAWN_CHILD + (
        "import sys, time\n"
        "while True:\n"
        "    sys.stderr.write('envcheck-smoke: start cpu:0\\n')\n"
        "    sys.stderr.flush()\n"
        "    time.sleep(0.1)\n")})
    pid_file = tmp_path / "pids"

    result = run_smoke(python, ["cpu:0"], timeout=0.5, import_timeout=0.5, multi_replica=False,
                       env={"PID_FILE": str(pid_file)})

    assert result.error == ("no result within 2 s, the whole run's bound (it kept reporting "
                            "progress) before the framework finished importing")
    assert result.wall_s < 20
    assert_group_gone(pid_file)


@pytest.mark.parametrize("crash, cause", [
    ("os.abort()", "crashed with SIGABRT"),
    ("ctypes.string_at(0)", "crashed with SIGSEGV"),
    ("os.kill(os.getpid(), signal.SIGKILL)",
     "out of memory (killed by SIGKILL, as the kernel's out-of-memory killer does)"),
])
def test_framework_that_crashes_is_reported_with_its_cause(tmp_path: Path, crash: str,
                                                           cause: str):
    python = make_env(tmp_path / "env", {
        "tensorflow/__init__.py": SPAWN_CHILD + "print('fatal: bad driver', flush=True)\n"
                                  f"import ctypes, os, signal\n{crash}\n"})
    pid_file = tmp_path / "pids"

    result = run_smoke(python, ["cpu:0"], timeout=5, multi_replica=False,
                       env={"PID_FILE": str(pid_file)})

    assert result.error == f"{cause} before the framework finished importing"
    assert result.devices == []
    assert "fatal: bad driver" in result.stderr_tail  # stdout noise lands in stderr
    assert result.wall_s < 5
    assert_group_gone(pid_file)


def test_runner_environment_is_known(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """PYTHONPATH and friends from the caller never reach the env under test."""
    python = make_env(tmp_path / "env", {"tensorflow/__init__.py": '''
        import json, os, sys
        keys = ("PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "TF_CPP_MIN_LOG_LEVEL",
                "VIRTUAL_ENV", "EXTRA")
        raise ImportError(json.dumps({k: os.environ.get(k) for k in keys}))
        '''})
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "elsewhere"))

    result = run_smoke(python, ["cpu:0"], timeout=5, multi_replica=False,
                       env={"EXTRA": "1", "PYTHONHOME": "/nowhere"})

    seen = result.error.splitlines()[0].partition(": ")[2]
    assert seen == ('{"PYTHONPATH": null, "PYTHONHOME": null, "PYTHONNOUSERSITE": "1", '
                    '"TF_CPP_MIN_LOG_LEVEL": "2", "VIRTUAL_ENV": "%s", "EXTRA": "1"}'
                    % (tmp_path / "env"))
    assert os.environ["PYTHONPATH"]  # the caller's own environment is untouched
