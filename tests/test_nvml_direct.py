"""host/nvml_direct.py (the gate's fast path reads level 1 through ctypes itself) against
pynvml: both bindings, loading the same fake NVML, give level 1 the same answers, on every
case of test_health's table, on an older driver and on NVML's errors; and the gate's
stored-pass answer with a GPU imports neither pynvml nor the modules the target rules out."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fake_nvml import FakeNvml
from test_health import A100, FAULTS, H100, HEALTHY, RTX4090, T4, seams, xid_line
from test_levels import gpu_env, stored_pass  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(300)

READ = """
import json, sys
from envcheck.host import nvml_direct
from envcheck.host.level1 import level1
print(json.dumps(level1(nvml=nvml_direct if sys.argv[1] == "direct" else None).to_json()))
"""


def level1_with(bindings: str, env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", READ, bindings], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def same_answers(env: dict[str, str]) -> dict:
    """Level 1 through pynvml and through nvml_direct, each in a fresh process (the fake's
    queued Xid events and rising replay counters start anew): the same document."""
    with_pynvml = level1_with("pynvml", env)
    assert level1_with("direct", env) == with_pynvml
    return with_pynvml


def test_both_bindings_agree_on_every_case_of_the_table(fake_nvml: FakeNvml, tmp_path: Path):
    cases = HEALTHY + FAULTS
    no_instance = next(i for i, c in enumerate(cases) if c[0] == "MIG on, no instance")
    log = [xid_line(i, code) for i, case in enumerate(cases) for code in case[2]]
    env = fake_nvml.env([spec for _, spec, _, _, _ in cases],
                        FAKE_NVML_ERROR_nvmlDeviceGetMigDeviceHandleByIndex=f"6:{no_instance}",
                        **seams(tmp_path, range(len(cases)), log))
    doc = same_answers(env)
    assert [g["verdict"] for g in doc["gpus"]] == [c[3] for c in cases]


@pytest.mark.parametrize("omit", [
    ("nvmlDeviceGetCurrentClocksEventReasons",),  # a driver before 535: the older name answers
    ("nvmlDeviceGetRemappedRows", "nvmlDeviceGetComputeRunningProcesses_v3",
     "nvmlSystemGetCudaDriverVersion_v2", "nvmlEventSetWait_v2", "nvmlDeviceGetPcieReplayCounter"),
    ("nvmlDeviceGetCount_v2",),
], ids=["older-clock-reasons", "older-driver", "no-count"])
def test_both_bindings_agree_where_the_driver_lacks_functions(fake_nvml: FakeNvml, omit):
    same_answers(fake_nvml.env([A100, RTX4090 + ",clocks=0x40", T4 + ",procs=7:100:x"], omit=omit))


@pytest.mark.parametrize("extra", [
    {"FAKE_NVML_ERROR_nvmlDeviceGetName": "15:1"},             # GPU 1 fell off the bus
    {"FAKE_NVML_ERROR_nvmlDeviceGetPciInfo_v3": "16"},         # every GPU needs a reset
    {"FAKE_NVML_ERROR_nvmlDeviceGetTotalEccErrors": "4:0"},    # no permission for one field
    {"FAKE_NVML_ERROR_nvmlEventSetCreate": "999"},
    {"FAKE_NVML_INIT_ERROR": "9"},                              # the driver is not loaded
    {"FAKE_NVML_INIT_ERROR": "18"},                             # driver/library mismatch
    {"FAKE_NVML_INIT_ERROR": "15"},                             # a GPU is lost: each device node drained
    {"FAKE_NVML_INIT_ERROR": "4"},                              # no permission, the same
    {"FAKE_NVML_GPUS": ""},                                     # no GPU
], ids=lambda e: "-".join(f"{k.rsplit('_', 1)[-1]}={v}" for k, v in e.items()))
def test_both_bindings_agree_on_nvml_errors(fake_nvml: FakeNvml, extra):
    env = fake_nvml.env([A100, H100 + ",xid=79,procs=1:2:a\udcffb".encode("utf-8", "surrogateescape")
                         .decode("utf-8", "replace")])
    env.update(extra)
    same_answers(env)


def imported(stderr: str) -> set[str]:
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if "|" in line}


def test_the_gates_stored_pass_with_a_gpu_imports_no_pynvml_dataclasses_typing_json_or_re(
        gpu_env, home: Path, fake_nvml: FakeNvml, tmp_path: Path):  # noqa: F811
    assert gpu_env([A100], "validate", "pt", "--no-smoke").code == 1  # the stand-in can't list GPUs
    stored_pass(home)
    env = fake_nvml.env([A100], ENVCHECK_HOME=str(home), FAKE_NVML_DRIVER="570.124.06", FAKE_NVML_CUDA="12080")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "envcheck", "check", "--env", "pt",
                           "--require-gpu", "--json"], capture_output=True, text=True, env=env, timeout=60,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["cached"] and doc["ready"] and doc["health"]["verdict"] == "ready"
    floor = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True,
                           text=True, env=env, timeout=60, cwd=tmp_path)
    added = imported(proc.stderr) - imported(floor.stderr)
    assert "envcheck.host.nvml_direct" in added and "envcheck.host.level1" in added
    assert not added & {"pynvml", "dataclasses", "typing", "json", "re", "enum", "inspect", "click",
                        "pathlib", "envcheck.usecases.session", "envcheck.validation.reports"}, added
