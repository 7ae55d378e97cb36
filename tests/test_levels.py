"""Health levels (issue 20): `--level 1|2|3` on validate, check, doctor, provision and fleet;
level-1 findings in the verdict, the envelope, the JSON, the views and the fleet's summary.

Level 1 reads NVML, so those cases run the CLI in a subprocess against the fake NVML (its
device nodes and kernel log through the seams ENVCHECK_TEST_DEV_DIR and
ENVCHECK_TEST_KERNEL_LOG); the rest run in process, with a level-1 report built here.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_nvml import FakeNvml
from wheelhouse import offline

from envcheck.fleet.aggregate import FleetResult, node_report
from envcheck.fleet.cluster import Node
from envcheck.fleet.dispatch import Outcome
from envcheck.host.findings import Finding
from envcheck.host.level1 import GpuVerdict, HealthReport
from envcheck.host.probe import Gpu, HostState
from envcheck.usecases.gate import GateResult, with_health
from envcheck.usecases.validate_envs import ValidationRun
from envcheck.validation.health import health_check, section
from envcheck.validation.reports import Check, Report, verdict_of

pytestmark = pytest.mark.timeout(600)

A100 = "NVIDIA A100-SXM4-80GB,8.0,81920,retired=na"
DRIVER = {"FAKE_NVML_DRIVER": "570.124.06", "FAKE_NVML_CUDA": "12080"}
PRESET = """title = "torch stand-in, CUDA 12.8 wheels"
kind = "gpu"
framework = "torch"
packages = ["torch==2.10.0"]

[gpu]
cuda = "12.8"
cudnn = "9.10"
libraries = []
"""


@pytest.fixture
def gpu_env(home: Path, wheelhouse: Path, fake_nvml: FakeNvml):
    """Env `pt` (a torch 2.10 stand-in: a CUDA 12.8 build, not importable) in ``home``;
    ``run(gpus, *args, **env)`` runs envcheck against the fake NVML with these GPUs."""
    (home / "presets").mkdir()
    (home / "presets" / "pt.toml").write_text(PRESET)

    def run(gpus: list[str], *args: str, **extra: str):
        env = fake_nvml.env(gpus, ENVCHECK_HOME=str(home), **DRIVER, **extra)
        return fake_nvml.cli(env, *args)

    made = run([A100], "env", "create", "pt", "--preset", "pt", *offline(wheelhouse))
    assert made.code == 0, made.err
    return run


# -- level 1 through the CLI -------------------------------------------------------------------

def test_level1_on_a_faulty_gpu_is_not_ready_naming_the_finding(gpu_env, home):
    got = gpu_env([A100 + ",ecc=2/2", A100], "validate", "pt", "--level", "1", "--json")
    assert got.code == 1, got.err
    doc = got.json()
    [report] = doc["reports"]
    assert report["verdict"] == "not-ready" and report["level"] == 1 and doc["summary"]["level"] == 1
    assert [c["id"] for c in report["checks"]] == ["host", "health"]
    health = report["health"]
    assert (health["version"], health["level"], health["verdict"]) == (1, 1, "not-ready")
    assert health["used_gpus"] == [0, 1] and health["drain"][0]["gpu"] == 0
    assert [g["verdict"] for g in health["gpus"]] == ["not-ready", "ready"]
    assert health["gpus"][0]["version"] == 1 and health["gpus"][0]["uuid"]
    envelope = doc["envelope"]
    assert envelope["problem"].startswith("env pt: health: GPU 0: 2 uncorrected ECC errors")
    assert "nvidia-smi -r -i 0" in envelope["fix"]
    assert not (home / "envs" / "pt" / "envcheck-report.json").exists()  # level 1 is never stored
    text = gpu_env([A100 + ",ecc=2/2"], "validate", "pt", "--level", "1")
    assert text.code == 1 and "health (level 1" in text.out and "not-ready: 2 uncorrected ECC" in text.out


def test_level1_on_healthy_gpus_is_ready_and_imports_no_framework(gpu_env):
    got = gpu_env([A100, A100], "validate", "pt", "--level", "1", "--json", PYTHONPROFILEIMPORTTIME="1")
    assert got.code == 0, got.err
    [report] = got.json()["reports"]
    assert report["verdict"] == "ready" and report["gpus_usable"] == 2
    assert {c["id"]: c["status"] for c in report["checks"]} == {"host": "pass", "health": "pass"}
    imported = {line.split("|")[-1].strip() for line in got.err.splitlines() if "|" in line}
    assert not imported & {"torch", "tensorflow", "jax", "numpy"}
    assert "envcheck.validation.smoke" not in imported  # no framework started, no runner


def test_a_missing_uvm_node_makes_the_gpu_env_not_ready(gpu_env, tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidiactl"):
        (dev / name).touch()
    got = gpu_env([A100], "validate", "pt", "--level", "1", "--json", ENVCHECK_TEST_DEV_DIR=str(dev))
    assert got.code == 1
    assert "nvidia-modprobe -u -c=0" in got.json()["envelope"]["fix"]


def test_bad_level_is_one_line_exit_2(gpu_env):
    for args in (("validate", "pt", "--level", "4"), ("check", "--env", "pt", "--level", "0"),
                 ("doctor", "--level", "x"), ("provision", "--preset", "pt", "--level", "9")):
        got = gpu_env([A100], *args)
        assert got.code == 2, (args, got.err)
        lines = got.err.strip().splitlines()
        assert len(lines) == 1 and "--level" in lines[0] and "give 1" in lines[0], got.err


# -- NVML's Xid events and the replay counters are watched through the whole run --------------

def test_an_xid_event_or_replays_during_the_run_are_caught_and_classified(gpu_env, tmp_path):
    """The fake delivers the Xid only after the level-1 read's own wait (xidlate=1) and steps the
    replay counter only from its third read (the level-1 read reads it twice): what arrives
    while the env's framework runs. `gpu --level 1` (its read alone) sees neither."""
    for spec, finding, effect in ((A100 + ",xid=79,xidlate=1", "xid-79", "not-ready"),
                                  (A100 + ",replay=10+5@3", "pcie-replay-rising", "degraded"),
                                  (A100 + ",xid=43,xidlate=1", "xid-43", "info")):
        alone = gpu_env([spec], "gpu", "--level", "1", "--json")
        assert alone.code == 0 and alone.json()["gpus"][0]["findings"] == [], alone.out
        run = gpu_env([spec], "validate", "pt", "--json", "--no-smoke")  # the framework runs to list GPUs
        [report] = run.json()["reports"]
        [gpu] = report["health"]["gpus"]
        found = {f["id"]: f for f in gpu["findings"]}
        assert found[finding]["effect"] == effect, gpu["findings"]
        health = next(c for c in report["checks"] if c["id"] == "health")
        if effect == "not-ready":
            assert report["health"]["verdict"] == "not-ready" and health["status"] == "fail"
            assert "Xid 79 reported by NVML during the check" in health["summary"]
            assert "fallen off the bus" in found[finding]["cause"] and "reboot" in found[finding]["action"]
            assert report["health"]["drain"] == [{"gpu": 0, "uuid": gpu["uuid"], "finding": "xid-79"}]
            # the gate validating again (its stored report is no pass): level 1 read on its fast
            # path through nvml_direct, watched through the full path's run
            gate = gpu_env([spec], "check", "--env", "pt", "--require-gpu", "--json")
            assert gate.code == 1 and not gate.json()["cached"]
            assert "xid-79" in [f["id"] for g in gate.json()["health"]["gpus"] for f in g["findings"]]
        elif effect == "degraded":
            assert health["status"] == "warn" and "rose from 10 to 15" in health["summary"]
        else:  # an application's Xid: listed, the GPU stays ready
            assert gpu["verdict"] == "ready" and gpu["checks"]["xid-events"] == "info"


# -- the gate re-reads level 1 every time it needs a GPU ----------------------------------------

def stored_pass(home: Path) -> None:
    """Make env pt's stored report a pass on one GPU (its fingerprint kept: nothing changed)."""
    path = home / "envs" / "pt" / "envcheck-report.json"
    data = json.loads(path.read_text())
    for check in data["checks"]:
        check["status"], check["fix"] = "pass", None
    data.update(verdict="ready", gpus_usable=1)
    path.write_text(json.dumps(data))


def test_check_rereads_level1_no_cache(gpu_env, home, tmp_path):
    assert gpu_env([A100], "validate", "pt", "--no-smoke").code == 1  # the stand-in can't list GPUs
    stored_pass(home)
    trace = tmp_path / "trace"
    ok = gpu_env([A100], "check", "--env", "pt", "--require-gpu", "--json", FAKE_NVML_TRACE=str(trace))
    assert ok.code == 0, ok.err
    doc = ok.json()
    assert doc["cached"] and doc["ready"] and doc["health"]["verdict"] == "ready"
    assert trace.read_text().split().count("nvmlInitWithFlags") == 1
    # the GPU fails between two jobs: same UUID, so the stored report still answers; level 1 refuses
    for spelling in (("--env", "pt"), ("--env=pt",)):  # the stored-pass answer, and click's path
        bad = gpu_env([A100 + ",remap=0/1/1/0"], "check", *spelling, "--require-gpu", "--json")
        assert bad.code == 1, bad.err
        doc = bad.json()
        assert not doc["ready"] and doc["reason"].startswith("health: GPU 0: a row remapping is pending")
        assert "nvidia-smi -r -i 0" in doc["fix"] and doc["envelope"]["fix"] == doc["fix"]
        assert doc["health"]["drain"] == [{"gpu": 0, "uuid": doc["health"]["gpus"][0]["uuid"],
                                           "finding": "row-remap-pending"}]
    # the stored report used a GPU: the gate needs one without --require-gpu too
    assert gpu_env([A100 + ",cmode=2"], "check", "--env", "pt").code == 1
    slow = gpu_env([A100 + ",clocks=0x8"], "check", "--env", "pt", "--require-gpu", "--json")
    assert slow.code == 0 and slow.json()["envelope"]["verdict"] == "degraded"
    assert "hw-slowdown" in slow.json()["envelope"]["problem"]
    text = gpu_env([A100 + ",clocks=0x8"], "check", "--env", "pt", "--require-gpu")
    assert text.code == 0 and "warning: health: GPU 0: clock event reason active: hw-slowdown" in text.out


def stored_with_health(home: Path, status: str) -> None:
    """Env pt's stored report a pass but for its health check, which says ``status`` (what
    level 1 found when it was validated), with its verdict and health section to match."""
    stored_pass(home)
    path = home / "envs" / "pt" / "envcheck-report.json"
    data = json.loads(path.read_text())
    health = next(c for c in data["checks"] if c["id"] == "health")
    health.update(status=status, summary="GPU 0: a row remapping is pending (old)", fix="reset it (old)")
    data["verdict"] = {"fail": "not-ready", "warn": "degraded"}[status]
    data["health"].update(verdict=data["verdict"], host_verdict=data["verdict"])
    path.write_text(json.dumps(data))


def test_a_stored_reports_health_neither_fails_nor_passes_the_gate(gpu_env, home):
    """Level 1 is read now for the gate; the stored report's health section and check, from
    when it was validated, decide nothing: a GPU is reset, or fails, between two jobs."""
    assert gpu_env([A100], "validate", "pt", "--no-smoke").code == 1
    stored_with_health(home, "warn")  # degraded then, healthy now: ready, from the stored pass
    for spelling in (("--env", "pt"), ("--env=pt",)):  # the stored-pass answer, and click's path
        now = gpu_env([A100], "check", *spelling, "--require-gpu", "--json")
        assert now.code == 0, now.err
        doc = now.json()
        assert doc["cached"] and doc["health"]["verdict"] == "ready" and doc["envelope"]["verdict"] == "ready"
        assert doc["envelope"]["problem"] is None
    stored_with_health(home, "fail")  # not-ready then: that failure does not answer; validated again
    again = gpu_env([A100], "check", "--env", "pt", "--require-gpu", "--json")
    doc = again.json()
    assert not doc["cached"] and "old" not in (doc["reason"] + (doc["fix"] or ""))
    assert doc["health"]["verdict"] == "ready"
    stored_pass(home)  # and a stored pass, health pass, doesn't pass a GPU that is faulty now
    bad = gpu_env([A100 + ",cmode=2"], "check", "--env", "pt", "--require-gpu", "--json")
    assert bad.code == 1 and bad.json()["reason"].startswith("health: GPU 0: compute mode: prohibited")


def test_check_level1_alone(gpu_env):
    assert gpu_env([A100], "check", "--env", "pt", "--level", "1", "--require-gpu").code == 0
    bad = gpu_env([A100 + ",xid=79"], "check", "--env", "pt", "--level", "1", "--json")
    assert bad.code == 1 and "Xid 79" in bad.json()["reason"]


def test_doctor_markdown_shows_health(gpu_env):
    got = gpu_env([A100 + ",clocks=0x8", A100 + ",persist=0"], "doctor", "--markdown", "--no-smoke")
    assert got.code in (0, 1), got.err
    assert "#### Health (level 2, GPUs read at level 1)" in got.out
    assert "clock event reason active: hw-slowdown" in got.out and "persistence mode: off" in got.out
    assert "| GPU 0 (NVIDIA A100-SXM4-80GB GPU-" in got.out


# -- in process: verdicts, the gate's answer, the views, the fleet -------------------------------

HOST = HostState("ok", driver_version="570.124.06", cuda_driver_version="12.8",
                 gpus=[Gpu(0, name="NVIDIA A100-SXM4-80GB", uuid="GPU-a0"),
                       Gpu(1, name="NVIDIA A100-SXM4-80GB", uuid="GPU-a1")])
SLOW = Finding("clocks-hw-slowdown", "clocks", "degraded", 1, "clock event reason active: hw-slowdown",
               "hardware slowdown", "check cooling")
ECC = Finding("ecc-uncorrected-volatile", "ecc", "not-ready", 0, "2 uncorrected ECC errors",
              "uncorrectable errors", "drain the node and reset the GPU (`sudo nvidia-smi -r -i 0`)")
INFO = Finding("persistence-off", "persistence", "info", 0, "persistence mode: off", "slow first call")
NA = Finding("ecc-na", "ecc", "n/a", 1, "ECC: n/a (not supported on this GPU)", "not known")


def health(*gpu_findings: list[Finding]) -> HealthReport:
    gpus = [GpuVerdict(i, "NVIDIA A100-SXM4-80GB", f"GPU-a{i}", None, True,
                       next((e for e in ("not-ready", "degraded") if any(f.effect == e for f in found)), "ready"),
                       found, {}, {}) for i, found in enumerate(gpu_findings)]
    return HealthReport(HOST, gpus=gpus)


def report_with(found: HealthReport, used: list[int], *others: Check) -> Report:
    checks = [Check("host", "pass", "2 GPUs")]
    mine = health_check(found, used)
    checks += [mine] if mine else []
    checks += list(others)
    return Report("pt", verdict_of(checks), checks, [], None, None, {}, HOST.to_json(), {},
                  "2026-11-25T12:00:00+00:00", 0.5, False, gpus_usable=len(used),
                  health=section(found, used, 2), level=2)


def test_findings_on_used_gpus_decide_info_and_na_do_not():
    assert health_check(health([INFO], [NA]), [0, 1]).status == "pass"
    degraded = report_with(health([INFO], [SLOW]), [0, 1], Check("smoke", "pass", "fit"))
    assert degraded.verdict == "degraded"
    assert ValidationRun([degraded]).envelope()["problem"] == (
        "env pt: health: GPU 1: clock event reason active: hw-slowdown (hardware slowdown)")
    assert report_with(health([], [SLOW]), [0]).verdict == "ready"  # GPU 1 not used
    failing = report_with(health([ECC], [SLOW]), [0, 1])
    assert failing.verdict == "not-ready" and failing.checks[1].fix.startswith("drain the node")
    assert "GPU 1: clock event reason" in failing.checks[1].detail
    assert health_check(health([ECC]), []) is None  # a CPU env: no GPU, no verdict from them
    assert section(health([ECC]), [], 2)["verdict"] is None


def test_the_gate_refuses_on_a_fault_and_degrades_on_a_slowdown():
    stored = {"verdict": "ready", "gpus_usable": 2, "checks": [], "created": "2026-11-25T12:00:00+00:00"}

    def gate(found: HealthReport, needed: bool = True) -> GateResult:
        return with_health(GateResult("pt", True, True, "ready, 2 GPU(s) usable", None, 1.0, 2, stored),
                           found, needed)

    refused = gate(health([ECC], []))
    assert not refused.ready and refused.exit_code == 1 and "sudo nvidia-smi -r -i 0" in refused.fix
    assert refused.envelope()["problem"].startswith("health: GPU 0: 2 uncorrected ECC errors")
    assert refused.to_json()["health"]["drain"] == [{"gpu": 0, "uuid": "GPU-a0",
                                                     "finding": "ecc-uncorrected-volatile"}]
    slow = gate(health([], [SLOW]))
    assert slow.ready and slow.envelope()["verdict"] == "degraded"
    assert gate(health([ECC]), needed=False).ready  # no GPU needed: level 1 not consulted


def test_text_and_html_views_show_health(tmp_path):
    from envcheck.cli.views.report import _env_view
    from envcheck.cli.views.text import report_lines

    report = report_with(health([ECC, INFO], [NA]), [0, 1])
    text = "\n".join(report_lines(report))
    assert "health (level 2, GPUs read at level 1): not-ready; drain: GPU 0" in text
    assert "not-ready: 2 uncorrected ECC errors (uncorrectable errors); action: drain the node" in text
    assert "n/a: ECC: n/a (not supported on this GPU)" in text
    view = _env_view({"name": "pt", "report": report.to_json()})
    assert view["health"][0]["label"] == "GPU 0 (NVIDIA A100-SXM4-80GB GPU-a0)"
    assert [f["effect"] for f in view["health"][0]["findings"]] == ["not-ready", "info"]
    from envcheck.cli.views.report import html_page
    from envcheck.usecases.report import EnvEvidence, StoredReports

    page = html_page(StoredReports(HOST, [EnvEvidence("pt", "ready", report)], "2026-11-25T12:00:00+00:00"))
    assert "<h3>GPU health</h3>" in page and 'class="e-not-ready"' in page
    assert "2 uncorrected ECC errors" in page and "ECC: n/a (not supported on this GPU)" in page


def node(label: str) -> Node:
    return Node(f"{label:0<8}" + "f" * 48, f"10.0.0.{len(label)}", {"fleet-node": label}, 2, "A100")


def answered(document: dict, code: int) -> dict:
    return {"hostname": f"host-{code}", "python": "/usr/bin/python3", "envcheck": "envcheck",
            "installed": True, "version": "1.2.3", "exit_code": code, "timed_out": False,
            "document": json.loads(json.dumps(document)), "host": None, "error": None}


def test_the_fleet_counts_nodes_by_health_and_lists_the_gpus_to_drain():
    sick = ValidationRun([report_with(health([ECC], []), [0, 1])])
    slow = ValidationRun([report_with(health([], [SLOW]), [0, 1])])
    fine = ValidationRun([report_with(health([], []), [0, 1])])
    gate = with_health(GateResult("pt", True, True, "ready", None, 1.0, 2, {"verdict": "ready"}),
                       health([ECC], [ECC]), True)
    reports = [node_report("validate", Outcome(node(n), "answered", answer=answered(r.to_json(), r.exit_code),
                                               seconds=1.0))
               for n, r in (("sick", sick), ("slow", slow), ("fine", fine))]
    reports.append(node_report("check", Outcome(node("gate"), "answered",
                                                answer=answered(gate.to_json(), 1), seconds=1.0)))
    reports.append(node_report("validate", Outcome(node("gone"), "lost", cause="gone")))
    result = FleetResult("validate", [], "10.0.0.1:6379", "1.2.3", 60.0, reports)
    summary = result.summary()
    assert summary["health"] == {"ready": 1, "degraded": 1, "not_ready": 2, "no_gpu": 0, "unknown": 1}
    assert [(d["node_id"][:4], d["gpu"], d["uuid"]) for d in summary["drain"]] == [
        ("sick", 0, "GPU-a0"), ("gate", 0, "GPU-a0"), ("gate", 1, "GPU-a1")]
    assert result.to_json()["nodes"][0]["health"] == "not-ready"
    from envcheck.cli.views.fleet import fleet

    text = fleet(result)
    assert "GPU health (level 1) of the nodes: 1 ready, 1 degraded, 2 not-ready, 1 unknown" in text
    assert "drain: node sick0000 (host-1) GPU 0 GPU-a0: ecc-uncorrected-volatile" in text


def test_fleet_forwards_level(monkeypatch, home, capsys):
    from envcheck.cli import _dispatch
    from envcheck.fleet import cluster, survey

    asked = []

    def dispatch(ray, nodes, command, args, environment, **_):
        asked.append(args)
        return []

    class FakeRay:
        def shutdown(self) -> None:
            pass

    monkeypatch.setenv("ENVCHECK_HOME", str(home))
    monkeypatch.setattr(cluster, "import_ray", FakeRay)
    monkeypatch.setattr(cluster, "connect", lambda ray, given: "10.0.0.1:6379")
    monkeypatch.setattr(cluster, "alive_nodes", lambda ray: [node("a100")])
    monkeypatch.setattr(survey, "dispatch", dispatch)
    _dispatch(["fleet", "validate", "--level", "1", "--json"])
    _dispatch(["fleet", "check", "--env", "pt"])
    assert asked[0][-2:] == ["--level", "1"] and "--level" not in asked[1]
    _dispatch(["fleet", "gpu", "--level", "1"])  # `gpu` reads level 1 of the node
    assert asked[2][-2:] == ["--level", "1"]
    from envcheck.errors import UsageError

    with pytest.raises(UsageError, match="judges an env"):  # level 2 needs an env: exit 2 at the top
        _dispatch(["fleet", "gpu", "--level", "2"])
    capsys.readouterr()


def test_gpu_level_1_reads_the_nodes_health_in_its_one_nvml_session(fake_nvml, home, tmp_path):
    """`envcheck gpu --level 1`, as `dcgmi diag -r 1`: no env needed; the GPU table and each GPU's
    findings, exit 1 and the GPU to drain when one is not ready; NVML initialised once."""
    trace = tmp_path / "trace"
    env = fake_nvml.env([A100, A100 + ",ecc=2/2"], ENVCHECK_HOME=str(home), FAKE_NVML_TRACE=str(trace))
    got = fake_nvml.cli(env, "gpu", "--level", "1", "--json")
    assert got.code == 1, got.err
    data = got.json()
    assert data["schema"] == "envcheck.health/1" and data["verdict"] == "not-ready" and data["drain"] == [1]
    assert [g["index"] for g in data["host"]["gpus"]] == [0, 1]  # what `gpu --json` says, too
    assert "envelope" not in data["host"]  # the answer is the document's own envelope, once
    assert data["envelope"]["problem"].startswith("GPU 1: 2 uncorrected ECC errors")
    assert trace.read_text().split().count("nvmlInit_v2") + trace.read_text().split().count("nvmlInitWithFlags") == 1
    text = fake_nvml.cli(env, "gpu", "--level", "1")
    assert text.code == 1 and "drain: GPU 1" in text.out and "nvidia-smi -r -i 1" in text.out
    assert text.err.startswith("envcheck: not ready: GPU 1:")
    healthy = fake_nvml.cli(fake_nvml.env([A100, A100], ENVCHECK_HOME=str(home)), "gpu", "--level", "1", "--json")
    assert healthy.code == 0 and healthy.json()["verdict"] == "ready", healthy.err
    plain = fake_nvml.cli(env, "gpu", "--json")
    assert plain.code == 0 and "level" not in plain.json()  # without --level: as before, no health read
    bad = fake_nvml.cli(env, "gpu", "--level", "3")
    assert bad.code == 2 and bad.err.count("\n") == 1 and "validate ENV --level 3" in bad.err


def test_validate_level_1_on_a_node_without_an_env_answers_with_its_gpus(fake_nvml, home):
    """A fresh GPU node (no env yet), as `dcgmi diag -r 1` is run there: level 1 reads no
    framework, so `validate --level 1` needs no env and the node's GPUs answer; level 2 does."""
    env = fake_nvml.env([A100, A100 + ",ecc=2/2"], ENVCHECK_HOME=str(home))
    got = fake_nvml.cli(env, "validate", "--level", "1", "--json")
    assert got.code == 1, got.err
    doc = got.json()
    assert doc["schema"] == "envcheck.validation/1" and doc["reports"] == [] and doc["summary"]["level"] == 1
    health = doc["health"]
    assert health["schema"] == "envcheck.health/1" and health["drain"] == [1]
    assert "envelope" not in health and "envelope" not in health["host"]
    answer = doc["envelope"]
    assert answer["verdict"] == "not-ready" and answer["problem"].startswith("GPU 1: 2 uncorrected ECC errors")
    assert "nvidia-smi -r -i 1" in answer["fix"] and answer["ready_envs"] == []
    assert answer["node"]["health"]["drain"][0]["gpu"] == 1
    text = fake_nvml.cli(env, "validate", "--level", "1")
    assert text.code == 1 and "drain: GPU 1" in text.out and "envcheck: not ready: GPU 1:" in text.err
    healthy = fake_nvml.env([A100, A100], ENVCHECK_HOME=str(home))
    ready = fake_nvml.cli(healthy, "validate", "--level", "1", "--json")
    assert ready.code == 0 and ready.json()["envelope"]["verdict"] == "ready", ready.err
    level2 = fake_nvml.cli(healthy, "validate", "--json")
    assert level2.code == 1 and "no env to use" in level2.err and "envcheck env create" in level2.err


def test_level2_in_process_a_degraded_gpu_makes_the_env_degraded(gpu_env, home, monkeypatch):
    """validate (level 2) with a level-1 report given to the session: the health check comes
    right after the host's, and the framework's listing (stood in for here) still runs."""
    from envcheck.paths import Home
    from envcheck.usecases.session import Session
    from envcheck.usecases.validate_envs import validate_envs
    from envcheck.validation import smoke
    from envcheck.validation.smoke import SmokeResult

    host = HostState("ok", driver_version="570.124.06", cuda_driver_version="12.8",
                     gpus=[Gpu(i, name="NVIDIA A100-SXM4-80GB", uuid=f"GPU-a{i}", compute_capability="8.0",
                               cuda_index=i) for i in range(2)])
    found = HealthReport(host, gpus=health([INFO], [SLOW]).gpus)
    listed = SmokeResult(build={"framework": "torch"}, gpus_seen=2, devices=[], multi_replica=None,
                         error=None, stderr_tail="", wall_s=0.0)
    monkeypatch.setattr(smoke, "list_devices", lambda *a, **k: listed)
    run = validate_envs(Session(Home(home), health=found), ("pt",), smoke=False)
    [report] = run.reports
    assert [c.id for c in report.checks][:3] == ["host", "health", "compat"]
    assert report.verdict == "degraded" and run.exit_code == 0, [(c.id, c.status, c.summary) for c in report.checks]
    assert run.envelope()["problem"].startswith("env pt: health: GPU 1: clock event reason active")
    assert report.health["used_gpus"] == [0, 1] and report.health["verdict"] == "degraded"
    sick = validate_envs(Session(Home(home), health=HealthReport(host, gpus=health([ECC], []).gpus)), ("pt",),
                         smoke=False)
    assert sick.reports[0].verdict == "not-ready" and sick.exit_code == 1
    assert validate_envs(Session(Home(home), host=host), ("pt",), smoke=False).reports[0].health is None


def test_provision_and_doctor_at_level1(gpu_env):
    got = gpu_env([A100 + ",ecc=2/2"], "provision", "--preset", "pt", "--level", "1", "--json")
    assert got.code == 1, got.err
    doc = got.json()
    assert doc["envs"][0]["verdict"] == "not-ready" and doc["health"]["drain"][0]["gpu"] == 0
    assert "health: GPU 0: 2 uncorrected ECC errors" in doc["envelope"]["problem"]
    doctor = gpu_env([A100], "doctor", "--level", "1", "--json")
    assert doctor.code == 0, doctor.err
    assert doctor.json()["report"]["level"] == 1 and doctor.json()["report"]["health"]["verdict"] == "ready"


@pytest.mark.parametrize("level", [2, 3])
def test_level3_asks_the_runner_for_figures(monkeypatch, tmp_path, level):
    from envcheck.validation import smoke

    jobs = []

    class Stop(Exception):
        pass

    def run_once(python, job, *args, **kwargs):
        jobs.append(job)
        raise Stop

    monkeypatch.setattr(smoke, "_run_once", run_once)
    with pytest.raises(Stop):
        smoke.run_smoke(tmp_path / "python", ["cpu:0"], timeout=5, multi_replica=False, level=level)
    assert jobs[0].get("level") == (3 if level == 3 else None)  # level 2: the runner's default
