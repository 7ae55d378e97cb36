"""Level-1 health (envcheck.host.level1) against the real pynvml loading the fake NVML.

Each injected fault sits on its own GPU of one fake host, so one subprocess judges the whole
table; faults of the node (device nodes, the kernel log, NVML itself) get a process each.
Device nodes and the kernel log come through the two test seams, ENVCHECK_TEST_DEV_DIR and
ENVCHECK_TEST_KERNEL_LOG.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.host.xid import CRITICAL, classify, parse, pci_key
from fake_nvml import FakeNvml

pytestmark = pytest.mark.timeout(300)

A100 = "NVIDIA A100-SXM4-80GB,8.0,81920,retired=na"
H100 = "NVIDIA H100 80GB HBM3,9.0,81559,retired=na,pcie=5/5/16/16"
T4 = "NVIDIA T4,7.5,15360,mig=na,remap=na,pcie=3/3/16/16"
RTX4090 = "NVIDIA GeForce RTX 4090,8.9,24564,mig=na,ecc=na,remap=na,retired=na"
SCRIPT = """
import json
from envcheck.host.level1 import level1
print(json.dumps(level1().to_json()))
"""


def xid_line(gpu: int, code: int) -> str:
    """The kernel's own line for an Xid on GPU ``gpu`` of the fake (PCI bus 0x10 + index)."""
    return (f"[ 8123.{gpu:06d}] NVRM: Xid (PCI:0000:{0x10 + gpu:02x}:00): {code}, pid=4242, "
            "name=python3, Ch 00000008")


# (case, GPU spec, Xids in the kernel log for it, verdict it must get, finding it must show)
HEALTHY = [
    ("A100", A100, [], "ready", None),
    ("H100", H100, [], "ready", None),
    ("T4", T4, [], "ready", None),
    ("RTX 4090 (no ECC, no row remapping)", RTX4090, [], "ready", None),
    ("A100 idle at PCIe Gen1", A100 + ",pcie=1/4/16/16", [], "ready", None),
    ("H100 at its software power cap", H100 + ",clocks=0x4,util=100/80", [], "ready", None),
    ("A100 with old PCIe replays, not rising", A100 + ",replay=7", [], "ready", None),
    ("A100 with rows remapped, none pending", A100 + ",remap=3/1/0/0", [], "ready", None),
    ("A100 persistence off", A100 + ",persist=0", [], "ready", "persistence-off"),
    ("A100 in MIG mode", A100 + ",mig=1", [], "ready", "mig-enabled"),
    ("T4 exclusive-process", T4 + ",cmode=3", [], "ready", "compute-mode-exclusive-process"),
    ("A100 app Xids 13/31/43", A100, [13, 31, 43], "ready", "xid-31"),
    ("A100 app Xid event 43", A100 + ",xid=43", [], "ready", "xid-43"),
    ("H100 without NVML events", H100 + ",events=na", [], "ready", "xid-events-na"),
    ("H100 SXM with 18 NVLink 4.0 links", H100 + ",nvlink=18/6", [], "ready", None),
]
FAULTS = [
    ("volatile uncorrected ECC", A100 + ",ecc=2/2", [], "not-ready", "ecc-uncorrected-volatile"),
    ("lifetime uncorrected ECC", A100 + ",ecc=0/3", [], "degraded", "ecc-uncorrected-aggregate"),
    ("row remap pending", A100 + ",remap=0/1/1/0", [], "not-ready", "row-remap-pending"),
    ("row remap failure", H100 + ",remap=0/9/0/1", [], "not-ready", "row-remap-failure"),
    ("retired pages pending (T4)", T4 + ",retired=1", [], "not-ready", "retired-pages-pending"),
    ("PCIe x4 of x16", A100 + ",pcie=4/4/4/16", [], "degraded", "pcie-width-below-max"),
    ("PCIe Gen3 of Gen4 under load", A100 + ",pcie=3/4/16/16,util=95/60", [], "degraded",
     "pcie-gen-below-max"),
    ("PCIe replays rising", A100 + ",replay=10+5", [], "degraded", "pcie-replay-rising"),
    ("HW slowdown", H100 + ",clocks=0x8", [], "degraded", "clocks-hw-slowdown"),
    ("HW thermal slowdown", H100 + ",clocks=0x40", [], "degraded", "clocks-hw-thermal"),
    ("power brake", A100 + ",clocks=0x80", [], "degraded", "clocks-hw-power-brake"),
    ("SW thermal slowdown", T4 + ",clocks=0x24", [], "degraded", "clocks-sw-thermal"),
    ("at the slowdown temperature", A100 + ",temp=88", [], "degraded", "temperature-at-slowdown"),
    ("at the shutdown temperature", RTX4090 + ",temp=93,tlimit=90/92", [], "not-ready",
     "temperature-at-shutdown"),
    ("compute mode prohibited", A100 + ",cmode=2", [], "not-ready", "compute-mode-prohibited"),
    ("a process on the GPU", A100 + ",procs=4242:2048:python3", [], "degraded", "gpu-in-use"),
    ("memory held, no process listed", A100 + ",free=60000", [], "degraded", "memory-held"),
    ("no /dev/nvidia<minor>", A100 + ",minor=63", [], "not-ready", "device-node-missing"),
    ("MIG on, no instance", A100 + ",mig=1", [], "not-ready", "mig-no-instances"),
    ("Xid 79 event during the run", H100 + ",xid=79", [], "not-ready", "xid-79"),
    ("Xid 95 event during the run", A100 + ",xid=13+95", [], "not-ready", "xid-95"),
    *[(f"Xid {code} since boot", A100, [code], "not-ready", f"xid-{code}")
      for code in (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)],
]


@pytest.fixture(scope="module")
def table_report(fake_nvml: FakeNvml, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One fake host carrying every case of HEALTHY and FAULTS, one GPU each, judged once."""
    root = tmp_path_factory.mktemp("health")
    cases = HEALTHY + FAULTS
    specs = [spec for _, spec, _, _, _ in cases]
    # "MIG on, no instance": the fake gives every MIG GPU one instance; hide it with a failure
    no_instance = next(i for i, c in enumerate(cases) if c[0] == "MIG on, no instance")
    log = [xid_line(i, code) for i, case in enumerate(cases) for code in case[2]]
    no_mig = {"FAKE_NVML_ERROR_nvmlDeviceGetMigDeviceHandleByIndex": f"6:{no_instance}"}
    env = fake_nvml.env(specs, **no_mig, **seams(root, range(len(cases)), log))
    return run_level1(env)


def seams(root: Path, minors, log_lines: list[str] | None, *, control: bool = True,
          uvm: bool = True) -> dict[str, str]:
    """A /dev stand-in with these nodes and a kernel log with these lines (None: no file)."""
    dev = root / "dev"
    dev.mkdir(exist_ok=True)
    for name in [f"nvidia{m}" for m in minors] + ["nvidiactl"] * control + ["nvidia-uvm"] * uvm:
        (dev / name).touch()
    log = root / "kern.log"
    if log_lines is not None:
        log.write_text("".join(line + "\n" for line in
                               ["[    0.000000] Linux version 6.8.0", *log_lines]))
    return {"ENVCHECK_TEST_DEV_DIR": str(dev), "ENVCHECK_TEST_KERNEL_LOG": str(log)}


def run_level1(env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("position, case", list(enumerate(HEALTHY + FAULTS)),
                         ids=[c[0] for c in HEALTHY + FAULTS])
def test_each_case_gets_its_verdict(table_report: dict, position: int, case: tuple) -> None:
    name, _, _, expected, finding = case
    gpu = table_report["gpus"][position]
    ids = [f["id"] for f in gpu["findings"]]
    assert gpu["verdict"] == expected, (name, gpu["findings"])
    if finding:
        assert finding in ids, (name, ids)
    if expected == "ready":  # nothing on it but info and n/a
        assert {f["effect"] for f in gpu["findings"]} <= {"info", "n/a"}, (name, ids)


def test_table_size_and_no_fault_is_ready(table_report: dict) -> None:
    assert len(FAULTS) >= 16
    assert table_report["node"]["findings"] == []
    faulty = table_report["gpus"][len(HEALTHY):]
    assert all(g["verdict"] != "ready" for g in faulty)
    assert table_report["verdict"] == "not-ready"
    assert table_report["drain"] == [g["gpu"] for g in faulty if g["verdict"] == "not-ready"]


def test_healthy_models_have_no_finding_but_unsupported_reads(table_report: dict) -> None:
    a100, h100, t4, rtx = table_report["gpus"][:4]
    for gpu in (a100, h100, t4):
        assert gpu["findings"] == [] and set(gpu["checks"].values()) == {"pass"}, gpu["findings"]
    na = {f["check"]: f for f in rtx["findings"]}
    assert set(na) == {"ecc", "memory-repair"} and {f["effect"] for f in na.values()} == {"n/a"}
    assert "not supported on this GPU" in na["ecc"]["measured"]
    assert rtx["checks"]["ecc"] == "n/a" and rtx["checks"]["memory-repair"] == "n/a"


def test_every_finding_has_what_cause_and_action(table_report: dict) -> None:
    for gpu in table_report["gpus"]:
        for f in gpu["findings"]:
            assert f["gpu"] == gpu["gpu"] and f["measured"] and f["cause"]
            assert f["effect"] in ("not-ready", "degraded", "info", "n/a")
            if f["effect"] in ("not-ready", "degraded"):
                assert f["action"], f


def by_case(report: dict, name: str) -> dict:
    position = [c[0] for c in HEALTHY + FAULTS].index(name)
    return {f["id"]: f for f in report["gpus"][position]["findings"]}


def test_actions_name_the_gpu_and_the_process(table_report: dict) -> None:
    position = [c[0] for c in HEALTHY + FAULTS].index("row remap pending")
    assert f"nvidia-smi -r -i {position}" in by_case(table_report, "row remap pending")[
        "row-remap-pending"]["action"]
    busy = by_case(table_report, "a process on the GPU")["gpu-in-use"]
    assert "pid 4242 (python3, 2048 MiB)" in busy["measured"] and "kill 4242" in busy["action"]
    xid = by_case(table_report, "Xid 79 since boot")["xid-79"]
    assert "drain" in xid["action"] and "NVRM: Xid (PCI:" in xid["measured"]
    assert "reseat" in by_case(table_report, "PCIe x4 of x16")["pcie-width-below-max"]["action"]
    assert "-c DEFAULT" in by_case(table_report, "compute mode prohibited")[
        "compute-mode-prohibited"]["action"]


def test_gpu_sections_are_versioned(table_report: dict) -> None:
    gpu = table_report["gpus"][0]
    assert table_report["schema"] == "envcheck.health/1" and table_report["level"] == 1
    assert (gpu["version"], gpu["level"], gpu["gpu"]) == (1, 1, 0)
    assert gpu["readings"]["pcie_max_width"] == 16 and gpu["readings"]["xid_events"] == []
    assert gpu["readings"]["compute_mode"] == "default"
    cap = table_report["gpus"][[c[0] for c in HEALTHY].index("H100 at its software power cap")]
    assert cap["readings"]["clock_event_reasons"] == ["sw-power-cap"]
    assert table_report["envelope"]["verdict"] == "not-ready"


@pytest.mark.parametrize("control, uvm, finding, fix", [
    (True, False, "nvidia-uvm-missing", "nvidia-modprobe -u -c=0"),
    (False, True, "nvidiactl-missing", "nvidia-modprobe -c=0"),
])
def test_missing_control_nodes_make_every_gpu_not_ready(fake_nvml: FakeNvml, tmp_path: Path,
                                                        control: bool, uvm: bool, finding: str,
                                                        fix: str) -> None:
    env = fake_nvml.env([A100, T4], **seams(tmp_path, [0, 1], [], control=control, uvm=uvm))
    report = run_level1(env)
    [node] = report["node"]["findings"]
    assert (node["id"], node["effect"], node["gpu"]) == (finding, "not-ready", None)
    assert fix in node["action"]
    assert [g["verdict"] for g in report["gpus"]] == ["not-ready", "not-ready"]
    assert report["envelope"]["verdict"] == "not-ready" and fix in report["envelope"]["fix"]


def test_unopenable_uvm_is_not_ready(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    env = fake_nvml.env([A100], **seams(tmp_path, [0], [], uvm=False))
    (Path(env["ENVCHECK_TEST_DEV_DIR"]) / "nvidia-uvm").mkdir()  # exists, can't be opened
    [node] = run_level1(env)["node"]["findings"]
    assert node["id"] == "nvidia-uvm-no-access" and "cannot be opened" in node["measured"]


def test_unreadable_kernel_log_is_na_never_a_pass(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    report = run_level1(fake_nvml.env([A100], **seams(tmp_path, [0], None)))
    assert report["node"]["checks"]["kernel-log"] == "n/a"
    assert "does not exist" in report["node"]["kernel_log"]
    [gpu] = report["gpus"]
    assert gpu["checks"]["xid-kernel-log"] == "n/a" and gpu["verdict"] == "ready"
    assert gpu["readings"]["kernel_xids"] is None


def test_xid_of_a_gpu_nvml_no_longer_lists(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    line = ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1101, name=nvc:[driver], GPU has fallen off "
            "the bus.")
    report = run_level1(fake_nvml.env([A100], **seams(tmp_path, [0], [line])))
    [node] = report["node"]["findings"]
    assert (node["id"], node["effect"], node["gpu"]) == ("xid-79", "not-ready", None)
    assert "0000:3b:00" in node["measured"]
    assert report["gpus"][0]["verdict"] == "not-ready" and report["verdict"] == "not-ready"


def test_nvml_failure_is_a_node_finding(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    report = run_level1(fake_nvml.env([A100], FAKE_NVML_INIT_ERROR=9, **seams(tmp_path, [0], [])))
    [node] = report["node"]["findings"]
    assert node["id"] == "nvml-driver-not-loaded" and "modprobe nvidia" in node["action"]
    assert report["gpus"] == [] and report["verdict"] == "not-ready"
    # its device nodes are there and the driver is not loaded: a broken node, the same word everywhere
    assert report["node"]["verdict"] == "not-ready"
    assert report["envelope"]["node"]["health"] == {"verdict": "not-ready", "drain": []}


@pytest.mark.parametrize("code", [None, 9])  # no NVML library at all; the library without its driver
def test_a_host_without_driver_or_device_nodes_is_no_gpu_said_once(fake_nvml: FakeNvml, tmp_path: Path,
                                                                   code) -> None:
    env = {**fake_nvml.env([A100], **({"FAKE_NVML_INIT_ERROR": code} if code else {})),
           **seams(tmp_path, [], [], control=False, uvm=False)}
    if code is None:
        env["LD_LIBRARY_PATH"] = str(tmp_path / "dev")  # no libnvidia-ml.so.1 there
    report = run_level1(env)
    [node] = report["node"]["findings"]  # one statement, not NVML + nvidiactl + nvidia-uvm failures
    assert (node["id"], node["effect"]) == ("no-gpu", "info")
    assert node["action"].startswith("if this host should have an NVIDIA GPU: ")
    assert report["verdict"] == report["node"]["verdict"] == "no-gpu"
    assert report["envelope"]["node"]["health"] == {"verdict": "no-gpu", "drain": []}
    assert report["envelope"]["verdict"] == "not-ready"  # `gpu` is ready with a usable GPU
    text = subprocess.run([sys.executable, "-m", "envcheck", "gpu", "--level", "1"], capture_output=True,
                          text=True, env={**env, "ENVCHECK_HOME": str(tmp_path / "home")}, timeout=60)
    assert text.returncode == 1 and "not-ready" not in text.stdout
    assert "health (level 1, GPUs read at level 1): no-gpu" in text.stdout
    assert text.stdout.count("no NVIDIA GPU here") == 1


@pytest.mark.parametrize("code, finding, fix", [
    (15, "gpu-lost", "nvidia-smi -r"),                 # NVML_ERROR_GPU_IS_LOST at nvmlInit
    (4, "gpu-no-permission", "/dev/nvidia*"),          # NVML_ERROR_NO_PERMISSION
    (18, "gpu-error", "reboot"),                       # driver/library mismatch: no CUDA runs either
])
def test_nvml_failing_while_gpu_device_nodes_exist_drains_each_gpu(fake_nvml: FakeNvml, tmp_path: Path,
                                                                   code: int, finding: str, fix: str) -> None:
    """NVML can't list the GPUs but the driver made their nodes: each /dev/nvidia<minor> is a GPU
    to drain, not a node without GPUs."""
    report = run_level1(fake_nvml.env([A100, A100], FAKE_NVML_INIT_ERROR=code,
                                      **seams(tmp_path, [0, 1], [xid_line(0, 79)])))
    assert [(g["gpu"], g["verdict"], g["findings"][0]["id"]) for g in report["gpus"]] == [
        (0, "not-ready", finding), (1, "not-ready", finding)]
    first = report["gpus"][0]["findings"][0]
    assert "/dev/nvidia0 exists" in first["measured"] and fix in first["action"]
    assert report["gpus"][0]["checks"]["xid-kernel-log"] == "n/a"  # its PCI address is not known
    assert "xid-79" in [f["id"] for f in report["node"]["findings"]]  # so the Xid is the node's
    assert report["drain"] == [0, 1] and report["verdict"] == "not-ready"
    assert report["envelope"]["node"]["health"] == {
        "verdict": "not-ready", "drain": [{"gpu": 0, "uuid": None, "finding": finding},
                                          {"gpu": 1, "uuid": None, "finding": finding}]}


def test_nvml_failing_without_gpu_device_nodes_is_a_failing_node(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    """No GPU node to drain, but the driver's control node is there and NVML says a GPU is lost:
    a failing node (the same word in every view), not a host without GPUs."""
    report = run_level1(fake_nvml.env([A100], FAKE_NVML_INIT_ERROR=15, **seams(tmp_path, [], [])))
    assert report["gpus"] == [] and report["node"]["findings"][0]["id"] == "nvml-gpu-lost"
    assert report["verdict"] == report["node"]["verdict"] == "not-ready"
    assert report["envelope"]["node"]["health"] == {"verdict": "not-ready", "drain": []}


@pytest.mark.parametrize("code", [15, 4])
def test_a_gpu_nvml_cannot_reach_is_faulty_in_gpu_labels_and_metrics(fake_nvml: FakeNvml, tmp_path: Path,
                                                                     code: int) -> None:
    env = fake_nvml.env([A100], FAKE_NVML_INIT_ERROR=code, ENVCHECK_HOME=str(tmp_path / "home"),
                        **seams(tmp_path, [0], []))
    gpu = fake_nvml.cli(env, "gpu", "--level", "1", "--json")
    assert gpu.code == 1 and gpu.json()["envelope"]["node"]["health"]["verdict"] == "not-ready"
    assert gpu.json()["drain"] == [0]
    labels = fake_nvml.cli(env, "labels", "--format", "json")
    assert labels.json()["labels"]["envcheck.io/gpu-health"] == "faulty"
    metrics = fake_nvml.cli(env, "metrics")
    assert metrics.code == 0 and 'envcheck_gpu_health{check="nvml",gpu="0",uuid=""} 0.0\n' in metrics.out


def test_lost_gpus_before_and_during_level1(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    env = fake_nvml.env([A100, A100, A100], FAKE_NVML_ERROR_nvmlDeviceGetMemoryInfo="15:0",
                        FAKE_NVML_ERROR_nvmlDeviceGetRemappedRows="15:1",
                        **seams(tmp_path, [0, 1, 2], []))
    lost0, lost1, ok = run_level1(env)["gpus"]
    assert lost0["findings"][0]["id"] == "gpu-lost" and lost0["verdict"] == "not-ready"
    assert lost0["checks"]["nvml"] == "not-ready" and lost0["checks"]["ecc"] == "n/a"
    assert all(v != "pass" for c, v in lost1["checks"].items() if c != "xid-kernel-log")
    assert lost1["findings"][0]["id"] == "gpu-lost" and "nvidia-smi -r -i 1" in lost1[
        "findings"][0]["action"]
    assert ok["verdict"] == "ready" and ok["findings"] == []


def test_older_driver_falls_back_and_says_na(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    omit = ["nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetRemappedRows",
            "nvmlEventSetCreate"]
    env = fake_nvml.env([A100 + ",clocks=0x40", A100 + ",retired=1"], omit=omit,
                        **seams(tmp_path, [0, 1], []))
    hot, pending = run_level1(env)["gpus"]
    assert "clocks-hw-thermal" in [f["id"] for f in hot["findings"]]  # ...ThrottleReasons
    assert hot["checks"]["memory-repair"] == "n/a" and hot["checks"]["xid-events"] == "n/a"
    assert "lacks the function" in hot["readings"]["unavailable"]["xid_events"]
    assert pending["verdict"] == "not-ready"
    assert "retired-pages-pending" in [f["id"] for f in pending["findings"]]


def test_a_driver_before_510_lists_processes_through_v2(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    """No ..._v3 (drivers before 510): the processes come from ..._v2, the same struct, not n/a."""
    env = fake_nvml.env([A100 + ",procs=4242:2048:python3", A100], omit=["nvmlDeviceGetComputeRunningProcesses_v3"],
                        **seams(tmp_path, [0, 1], []))
    busy, free = run_level1(env)["gpus"]
    assert "gpu-in-use" in [f["id"] for f in busy["findings"]] and busy["checks"]["processes"] == "degraded"
    assert free["checks"]["processes"] == "pass"


def test_level1_opens_no_cuda_and_shuts_nvml_down(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    env = fake_nvml.env([A100, T4], FAKE_NVML_TRACE=trace, **seams(tmp_path, [0, 1], []))
    env["PYTHONPROFILEIMPORTTIME"] = "1"
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=60)
    imported = {line.split("|")[-1].strip().split(".")[0]
                for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert not imported & {"tensorflow", "torch", "jax", "numpy", "ctypes.cuda", "cuda"}
    calls = trace.read_text().split()
    assert calls.count("nvmlInitWithFlags") == 1 and calls[-1] == "nvmlShutdown"
    assert "nvmlEventSetFree" in calls and calls.count("nvmlDeviceGetPcieReplayCounter") == 4


def test_kernel_line_parsing() -> None:
    lines = ["4,1234,5678,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
             "[  269.5] NVRM: Xid (0000:01:00): 3, C 00000005",
             "Oct 01 13:00:00 host kernel: NVRM: Xid (PCI:0000:C6:00.0): 119, pid=7, GSP",
             "NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014",
             "Xid 79 mentioned in prose"]
    found = parse(lines)
    assert [(x.pci, x.code) for x in found] == [("0000:3b:00", 79), ("0000:01:00", 3),
                                                ("0000:c6:00", 119)]
    assert found[0].line.startswith("NVRM: Xid (PCI:0000:3b:00): 79")
    assert pci_key("00000000:3B:00.0") == "0000:3b:00" == pci_key("0000:3b:00")
    assert pci_key(None) is None


def test_xid_classes() -> None:
    assert CRITICAL == {48, 63, 64, 74, 79, 92, 94, 95, 119, 120}
    for code in (13, 31, 43):
        assert classify(code, 0)[0] == "info"
    effect, cause, action = classify(79, 3)
    assert effect == "not-ready" and "fallen off the bus" in cause and "drain" in action
    assert "nvidia-smi -r -i 5" in classify(48, 5)[2]
    effect, cause, action = classify(45, 0)
    assert effect == "info" and "xid-errors" in action


def test_real_kernel_log_read_or_explained() -> None:
    from envcheck.host.xid import kernel_xids

    xids, why = kernel_xids({})
    assert (xids is None) != (why is None)


def test_hidden_gpus_are_judged_but_not_counted(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    env = fake_nvml.env([A100 + ",cmode=2", A100], CUDA_VISIBLE_DEVICES="1",
                        **seams(tmp_path, [0, 1], []))
    report = run_level1(env)
    hidden, used = report["gpus"]
    assert (hidden["visible"], hidden["verdict"]) == (False, "not-ready")
    assert (used["visible"], used["verdict"]) == (True, "ready")
    assert report["verdict"] == "ready" and report["drain"] == [0]


def test_a_refused_read_is_na_with_its_reason(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    env = fake_nvml.env([A100], FAKE_NVML_ERROR_nvmlDeviceGetComputeMode=4,
                        FAKE_NVML_ERROR_nvmlDeviceGetPcieReplayCounter=3,
                        **seams(tmp_path, [0], []))
    [gpu] = run_level1(env)["gpus"]
    found = {f["id"]: f for f in gpu["findings"]}
    assert set(found) == {"compute-mode-na", "pcie-replay-na"} and gpu["verdict"] == "ready"
    assert "no permission" in found["compute-mode-na"]["measured"]
    assert "not supported" in found["pcie-replay-na"]["measured"]
