"""The result envelope (issue 19, point 6): every readiness answer (`gpu`, `doctor`, `validate`,
`check`, `provision`, `fleet`) says its verdict, first problem and fix, and the envs ready, in
one nested object, computed by the result from its own data; and `envcheck fleet` reads that
alone, whatever the command. All in process (results built directly, or by a use case given
its host), but for the gate's two paths, click's and the stored-pass answer, compared as the
CLI prints them.

The fleet's aggregation (``fleet.aggregate``: ``node_report``, ``FleetResult``) is tested here
over synthetic ``Outcome`` answers, each carrying a document a real result printed; what needs
a real Ray cluster stays in test_fleet.py.
"""
from __future__ import annotations

import json

import pytest
from fake_nvml import A100 as FAKE_A100
from wheelhouse import offline

from envcheck.cli.views.fleet import fleet as fleet_view
from envcheck.fleet.aggregate import FleetResult, NodeReport, node_report
from envcheck.fleet.cluster import Node
from envcheck.fleet.dispatch import Outcome
from envcheck.fleet.tasks import host_of
from envcheck.host.findings import Finding
from envcheck.host.level1 import GpuVerdict, HealthReport
from envcheck.host.probe import Gpu, HostState
from envcheck.results import ENVELOPE_KEY, Result
from envcheck.usecases.cache import CacheInfo
from envcheck.usecases.doctor import Diagnosis
from envcheck.usecases.gate import GateResult, judge, with_health
from envcheck.usecases.provision import Outcome as Provisioned
from envcheck.usecases.provision import ProvisionResult
from envcheck.usecases.selection import Ranked, Selection
from envcheck.usecases.validate_envs import ValidationRun
from envcheck.validation.health import section
from envcheck.validation.reports import Check, Report, verdict_of

NO_LIBRARY = HostState("no-library", "libnvidia-ml.so.1 was not found", "install the NVIDIA driver")
A100 = HostState("ok", driver_version="550.54.15", cuda_driver_version="12.4",
                 gpus=[Gpu(0, name="NVIDIA A100-SXM4-80GB", uuid="GPU-a0"),
                       Gpu(1, name="NVIDIA A100-SXM4-80GB", uuid="GPU-a1")])
PYTHON = "/opt/ray/bin/python"


def report(env: str, *checks: tuple) -> Report:
    """A validation report of env ``env`` with these (id, status, summary, fix) checks."""
    made = [Check(id_, status, summary, fix=fix) for id_, status, summary, fix in checks]
    return Report(env, verdict_of(made), made, [], None, None, {}, A100.to_json(), {},
                  "2026-11-25T12:00:00+00:00", 0.5, False, gpus_usable=2)


PASSED = ("integrity", "pass", "all packages present", None)
FAILED = ("libraries", "fail", "libcudnn.so.8 missing", "envcheck env add tf nvidia-cudnn-cu11")
WARNED = ("speedup", "warn", "the GPU is slower than the CPU", "check the GPU's clocks")


def document_envelope(result: Result) -> dict:
    """The envelope as the document carries it, checked to be the result's own, and last."""
    document = json.loads(json.dumps(result.to_json()))
    assert list(document)[0] == "schema" and list(document)[-1] == ENVELOPE_KEY
    assert document[ENVELOPE_KEY] == result.envelope()
    assert set(document[ENVELOPE_KEY]["node"]) == {"host", "health", "envs"}
    return document[ENVELOPE_KEY]


def envelope_of(result: Result) -> dict:
    """The answer of the envelope: all but its ``node`` (``node_of``)."""
    return {k: v for k, v in document_envelope(result).items() if k != "node"}


def node_of(result: Result) -> dict:
    """The envelope's ``node``: the host facts the command read, the node's level-1 health
    (the envs it looked at aside: ``envs_of``)."""
    return {k: v for k, v in document_envelope(result)["node"].items() if k != "envs"}


def envs_of(result: Result) -> list | None:
    return document_envelope(result)["node"]["envs"]


def expect(verdict, problem=None, fix=None, ready_envs=None) -> dict:
    return {"verdict": verdict, "problem": problem, "fix": fix, "ready_envs": ready_envs}


# -- each result's envelope --------------------------------------------------------------------

def test_gpu_is_ready_with_a_usable_gpu_and_says_why_not_without():
    assert envelope_of(A100) == expect("ready")
    assert envelope_of(NO_LIBRARY) == expect("not-ready", "libnvidia-ml.so.1 was not found",
                                             "install the NVIDIA driver")
    hidden = HostState("ok", gpus=[Gpu(0, visible=False)], cuda_visible_devices="")
    assert envelope_of(hidden) == expect("not-ready", "CUDA_VISIBLE_DEVICES='' hides every GPU",
                                         "unset CUDA_VISIBLE_DEVICES or list GPUs shown by `envcheck gpu`")
    lost = HostState("ok", gpus=[Gpu(0, status="lost", problem="it fell off the bus", fix="reset it")])
    assert envelope_of(lost) == expect("not-ready", "no visible GPU answers: GPU 0: it fell off the bus", "reset it")


def test_the_envelope_leaves_every_field_as_it_was():
    """Installers and scripts read today's fields: the envelope only adds its own key."""
    document = A100.to_json()
    assert {k: v for k, v in document.items() if k != ENVELOPE_KEY} == {"schema": A100.schema, **A100.body()}
    assert set(document) - set(A100.body()) == {"schema", ENVELOPE_KEY}


def test_a_result_that_answers_no_readiness_question_has_no_envelope():
    listing = CacheInfo([])
    assert listing.envelope() is None and ENVELOPE_KEY not in listing.to_json()


def test_select_is_ready_with_its_env_and_splits_its_warning_into_problem_and_fix():
    assert envelope_of(Selection([Ranked("tf", "gpu", "GPU build")])) == expect("ready", ready_envs=["tf"])
    none = Selection([], warning="no env has torch; create one: envcheck env create torch --preset pytorch-cpu")
    assert envelope_of(none) == expect("not-ready", "no env has torch",
                                       "create one: envcheck env create torch --preset pytorch-cpu", [])
    required = Selection([Ranked("tf", "cpu", "a CPU build")], require_gpu=True,
                         warning="a GPU env is required but this host has no usable GPU: "
                                 "no driver; fix: install the NVIDIA driver")
    assert required.selected is None
    assert envelope_of(required) == expect("not-ready", "a GPU env is required but this host has no "
                                           "usable GPU: no driver", "install the NVIDIA driver", [])


@pytest.mark.parametrize("driver, verdict", [("550.54.15", "ready"), ("520.61.05", "not-ready")])
def test_compat_maps_its_verdict_with_the_worst_reason_and_first_fix(home, driver, verdict):
    from envcheck.paths import Home
    from envcheck.usecases.compat import judge_compat
    from envcheck.usecases.session import Session

    result = judge_compat(Session(Home(home), host=A100), framework="jax==0.10.2", driver=driver,
                          gpu_ccs=("8.0",), os_name="linux")
    answer = envelope_of(result)
    assert answer["verdict"] == verdict and answer["ready_envs"] is None
    if verdict == "ready":
        assert answer == expect("ready")
    else:
        assert answer["problem"] == result.verdict.reasons[0] and "525.60.13" in answer["problem"]
        assert answer["fix"] == result.verdict.fixes[0]


def test_validate_gives_the_worst_verdict_its_first_problem_and_the_envs_that_passed():
    run = ValidationRun([report("ok", PASSED), report("slow", PASSED, WARNED), report("broken", WARNED, FAILED)])
    assert envelope_of(run) == expect("not-ready", "env broken: libraries: libcudnn.so.8 missing",
                                      "envcheck env add tf nvidia-cudnn-cu11", ["ok", "slow"])
    degraded = ValidationRun([report("ok", PASSED), report("slow", PASSED, WARNED)], strict=True)
    assert degraded.exit_code == 1  # --strict fails it; its verdict stays what it is
    assert envelope_of(degraded) == expect("degraded", "env slow: speedup: the GPU is slower than the CPU",
                                           "check the GPU's clocks", ["ok", "slow"])
    assert envelope_of(ValidationRun([report("ok", PASSED)])) == expect("ready", ready_envs=["ok"])
    assert envelope_of(ValidationRun()) == expect("not-ready", "no env was validated", "envcheck validate NAME", [])


def diagnosis(rep: Report | None, steps: list[str]) -> Diagnosis:
    return Diagnosis(A100, Selection([Ranked(rep.env, "gpu", "GPU build")] if rep else []), rep, steps)


def test_doctor_gives_the_chosen_envs_verdict_and_its_first_problem():
    steps = ["libraries: envcheck env add tf nvidia-cudnn-cu11", "train: envcheck run --env tf"]
    assert envelope_of(diagnosis(report("tf", PASSED, FAILED), steps)) == expect(
        "not-ready", "env tf: libraries: libcudnn.so.8 missing", "envcheck env add tf nvidia-cudnn-cu11", [])
    assert envelope_of(diagnosis(report("tf", WARNED), steps)) == expect(
        "degraded", "env tf: speedup: the GPU is slower than the CPU", "check the GPU's clocks", ["tf"])
    assert envelope_of(diagnosis(report("tf", PASSED), steps)) == expect("ready", ready_envs=["tf"])
    # a failing check without a fix of its own: the first next step is the fix
    no_fix = report("tf", ("smoke", "fail", "the fit crashed", None))
    assert envelope_of(diagnosis(no_fix, steps)) == expect("not-ready", "env tf: smoke: the fit crashed", steps[0], [])


def test_doctor_with_no_env_says_so_and_what_to_create(home):
    """Through the use case, on a host given to the session: an empty home."""
    from envcheck.paths import Home
    from envcheck.usecases.doctor import doctor
    from envcheck.usecases.session import Session

    result = doctor(Session(Home(home), host=NO_LIBRARY), smoke=False)
    answer = envelope_of(result)
    assert result.report is None and result.exit_code == 1
    assert answer == expect("not-ready", "no env to validate", result.next_steps[0], [])
    assert "envcheck env create" in answer["fix"]


def test_check_ready_carries_the_stored_verdict_and_the_env_not_ready_the_gates_reason():
    assert envelope_of(judge("tf", report("tf", PASSED).to_json(), True, False, 0)) == expect(
        "ready", ready_envs=["tf"])
    assert envelope_of(judge("tf", report("tf", WARNED).to_json(), True, True, 1)) == expect(  # its warning, never null
        "degraded", "env tf: speedup: the GPU is slower than the CPU", "check the GPU's clocks", ["tf"])
    failed = judge("tf", report("tf", FAILED).to_json(), False, False, 0)
    assert envelope_of(failed) == expect("not-ready", "libraries: libcudnn.so.8 missing",
                                         "envcheck env add tf nvidia-cudnn-cu11", [])
    too_few = judge("tf", report("tf", PASSED).to_json(), True, False, 4, host=A100)  # 2 usable, 4 asked
    assert not too_few.ready and envelope_of(too_few) == expect("not-ready", too_few.reason, too_few.fix, [])
    assert "needs 4 GPU(s)" in too_few.reason
    # the client's answer when envcheck could not give one: no report, still an envelope
    gone = GateResult("tf", False, False, "envcheck is gone", "reinstall it", None, 0)
    assert envelope_of(gone) == expect("not-ready", "envcheck is gone", "reinstall it", [])


def test_provision_is_ready_only_when_every_requested_env_is():
    created = Provisioned("tf", "tf", "created", "created from preset tf", "ready")
    slow = Provisioned("pt", "pt", "unchanged", "already made", "degraded", fix="check the GPU's clocks",
                       problem="env pt: speedup: the GPU is slower than the CPU")
    skipped = Provisioned("tf-gpu", "tf-gpu", "skipped", "no usable GPU", fix="install the driver")
    stale = Provisioned("old", "old", "stale", "made from another version", fix="envcheck env remove old --yes")
    assert envelope_of(ProvisionResult([created, skipped])) == expect("ready", ready_envs=["tf"])
    assert envelope_of(ProvisionResult([created, slow, skipped])) == expect(  # the warning, never null
        "degraded", "env pt: speedup: the GPU is slower than the CPU", "check the GPU's clocks", ["tf", "pt"])
    result = ProvisionResult([created, stale, slow])
    assert result.exit_code == 1 and envelope_of(result) == expect(
        "not-ready", "env old: stale: made from another version", "envcheck env remove old --yes", ["tf", "pt"])
    failed_fit = Provisioned("tf", "tf", "created", "created; validation failed: smoke: crashed", "not-ready",
                             fix="envcheck validate tf")
    assert envelope_of(ProvisionResult([failed_fit])) == expect(
        "not-ready", "env tf: created: created; validation failed: smoke: crashed", "envcheck validate tf", [])


# -- the node: what the fleet needs, in the envelope ---------------------------------------------

NVML_DOWN = Finding("nvml-driver-not-loaded", "nvml", "not-ready", None, "NVML: driver not loaded",
                    "the NVIDIA kernel module is not loaded", "load the driver")
ECC = Finding("ecc-uncorrected-volatile", "ecc", "not-ready", 0, "2 uncorrected ECC errors",
              "uncorrectable errors", "drain the node")


def level1(*gpu_findings: list, host: HostState = A100, node_findings: tuple = ()) -> HealthReport:
    """A level-1 report of ``host``'s GPUs, each with its findings."""
    gpus = [GpuVerdict(i, "NVIDIA A100-SXM4-80GB", f"GPU-a{i}", None, True,
                       "not-ready" if found else "ready", list(found), {}, {})
            for i, found in enumerate(gpu_findings)]
    return HealthReport(host, gpus=gpus, node=list(node_findings))


def with_section(rep: Report, found: HealthReport) -> Report:
    rep.health = section(found, [g.index for g in found.gpus], 2)
    return rep


def test_each_result_says_the_host_it_read_and_the_nodes_health_in_its_envelope():
    facts = {k: v for k, v in A100.to_json().items() if k != ENVELOPE_KEY}
    assert node_of(A100) == {"host": facts, "health": None}  # `gpu`: no health read
    sick = level1([ECC], [])
    drain = [{"gpu": 0, "uuid": "GPU-a0", "finding": "ecc-uncorrected-volatile"}]
    assert node_of(sick) == {"host": facts, "health": {"verdict": "not-ready", "drain": drain}}
    run = ValidationRun([with_section(report("ok", PASSED), level1([], [])),
                         with_section(report("tf", PASSED), sick)])
    assert node_of(run) == {"host": facts, "health": {"verdict": "not-ready", "drain": drain}}
    assert node_of(ValidationRun([report("ok", PASSED)])) == {"host": facts, "health": None}
    assert node_of(diagnosis(with_section(report("tf", PASSED), sick), [])) == node_of(run)
    assert node_of(diagnosis(None, ["create one"])) == {"host": facts, "health": None}
    stored = with_section(report("tf", PASSED), level1([], [])).to_json()
    cached = judge("tf", stored, True, False, 0)
    assert node_of(cached) == {"host": facts, "health": {"verdict": "ready", "drain": []}}
    now = with_health(judge("tf", stored, True, True, 0), sick, True)  # read now: it decides
    assert node_of(now)["health"] == {"verdict": "not-ready", "drain": drain}
    made = ProvisionResult([Provisioned("tf", "tf", "created", "made", "ready")], health=stored["health"])
    assert node_of(made) == {"host": None, "health": {"verdict": "ready", "drain": []}}
    gone = GateResult("tf", False, False, "gone", None, None, 0)
    for silent in (Selection([Ranked("tf", "gpu", "GPU build")]), gone):
        assert node_of(silent) == {"host": None, "health": None}


def test_a_node_without_gpus_is_no_gpu_and_a_broken_driver_is_not_ready_in_every_word():
    """`gpu --level 1` where NVML lists no GPU: with no driver and no device node (the one
    no-gpu finding) the node's health is no-gpu, in the report, its envelope and the fleet; a
    driver that fails (NVML a not-ready finding) is not-ready in all of them alike."""
    from envcheck.host.level1 import _no_gpu

    none = level1(host=NO_LIBRARY, node_findings=(_no_gpu(NO_LIBRARY),))
    assert none.verdict == "no-gpu" and envelope_of(none)["verdict"] == "not-ready"
    assert node_of(none)["health"] == {"verdict": "no-gpu", "drain": []}
    got = read("gpu", answered(none))
    assert (got.verdict, got.health, got.drain) == ("not-ready", "no-gpu", [])
    assert fleet_of("gpu", [got]).summary()["health"]["no_gpu"] == 1
    down = level1(host=NO_LIBRARY, node_findings=(NVML_DOWN,))
    assert down.verdict == "not-ready" and node_of(down)["health"] == {"verdict": "not-ready", "drain": []}
    assert read("gpu", answered(down)).health == "not-ready"


def test_the_fleet_reads_host_and_health_from_the_envelope_alone():
    """What the document's other fields say is not read: only the envelope's node."""
    sick = ValidationRun([with_section(report("tf", PASSED), level1([ECC], []))])
    document = sick.to_json()
    assert document["reports"][0]["health"]["host_verdict"] == "not-ready"
    document[ENVELOPE_KEY]["node"] = {"host": None, "health": None}
    got = read("validate", answered(document=document, code=0))
    assert (got.health, got.drain) == ("unknown", []) and host_of(document) is None
    document[ENVELOPE_KEY]["node"] = {"host": NO_LIBRARY.facts(), "health": {"verdict": "degraded", "drain": []}}
    got = read("validate", answered(document=document, code=0))
    assert got.health == "degraded" and host_of(document) == NO_LIBRARY.facts()
    for odd in ("ready", {"health": {"verdict": "splendid"}}, {"host": {"schema": "other/1"}}):
        document[ENVELOPE_KEY]["node"] = odd
        assert read("validate", answered(document=document, code=0)).health == "unknown"
        assert host_of(document) is None


# -- the gate's two paths give one document ----------------------------------------------------

PRESET = """title = "tf"
kind = "cpu"
framework = "tensorflow"
requires-python = ">=3.8"
packages = ["tensorflow-cpu==2.21.0"]
"""


def test_the_stored_pass_answer_prints_clicks_document_envelope_included(cli, home, wheelhouse, fake_nvml):
    env = fake_nvml.env([FAKE_A100], FAKE_NVML_DRIVER="550.54.15", FAKE_NVML_CUDA="12040")
    (home / "presets").mkdir()
    (home / "presets" / "tf.toml").write_text(PRESET)
    made = cli("env", "create", "tf", "--preset", "tf", *offline(wheelhouse), env=env)
    assert made.code == 0, made.err
    assert cli("validate", "tf", "--no-smoke", env=env).code == 0
    timed = {**env, "PYTHONPROFILEIMPORTTIME": "1"}
    fast = cli("check", "--env", "tf", "--json", env=timed)
    slow = cli("check", "--env=tf", "--json", env=timed)  # a spelling only click parses
    assert fast.code == slow.code == 0, fast.err[-2000:] + slow.err[-2000:]
    assert "click" not in imported(fast.err) and "click" in imported(slow.err)  # each took its own path
    documents = [fast.json(), slow.json()]
    assert documents[0]["cached"] and documents[0]["age_s"] is not None
    for doc in documents:
        doc.pop("age_s")  # seconds since the validation: later for the second call
    assert documents[0] == documents[1]
    answer = dict(documents[0][ENVELOPE_KEY])
    place = answer.pop("node")
    assert answer["verdict"] == "degraded" and answer["ready_envs"] == ["tf"]  # a CPU build beside the A100
    assert "will ignore this host's 1 GPU(s)" in answer["problem"]
    (identity,) = place["envs"]  # the env as the fleet compares it, the same on either path
    assert (identity["name"], identity["lock"], identity["packages"]) == ("tf", None, {"tensorflow-cpu": "2.21.0"})
    assert identity["digest"].startswith("sha256:")
    assert place["host"]["driver_version"] == "550.54.15" and ENVELOPE_KEY not in place["host"]
    assert place["health"] == {"verdict": "ready", "drain": []}


def imported(importtime_stderr: str) -> set[str]:
    return {line.split("|")[-1].strip() for line in importtime_stderr.splitlines() if "|" in line}


# -- the fleet reads the envelope alone --------------------------------------------------------

def node(label: str, gpus: int = 0) -> Node:
    return Node(f"{label:0<8}" + "f" * 48, f"10.0.0.{len(label)}", {"fleet-node": label}, gpus,
                "A100" if gpus else None)


def answered(result: Result | None = None, *, code: int | None = None, document: dict | None = None,
             version: str = "1.2.3", error: str | None = None) -> dict:
    """A node's answer (``tasks.answer``'s shape) carrying ``result``'s document as printed."""
    if result is not None:
        document = json.loads(json.dumps(result.to_json()))
        code = result.exit_code if code is None else code
    return {"hostname": "node", "python": PYTHON, "envcheck": "/usr/local/bin/envcheck", "installed": True,
            "version": version, "exit_code": code, "timed_out": False, "document": document,
            "host": host_of(document), "error": error}


def read(command: str, answer: dict, label: str = "n1"):
    return node_report(command, Outcome(node(label, 2), "answered", answer=answer, seconds=1.5))


def test_a_ready_node_reads_ready_with_its_facts():
    got = read("gpu", answered(A100))
    assert (got.verdict, got.ready, got.exit_code, got.problem, got.fix) == ("ready", True, 0, None, None)
    assert got.ready_envs is None  # gpu doesn't speak of envs
    assert (got.envcheck_version, got.driver_version, got.gpu_models) == ("1.2.3", "550.54.15", ["NVIDIA A100-SXM4-80GB"])
    assert got.report == A100.to_json() and got.seconds == 1.5


def test_a_not_ready_node_reads_its_documents_problem_and_fix():
    got = read("gpu", answered(NO_LIBRARY))
    assert (got.verdict, got.ready, got.exit_code) == ("not-ready", False, 1)
    assert (got.problem, got.fix) == ("libnvidia-ml.so.1 was not found", "install the NVIDIA driver")
    doctor = read("doctor", answered(diagnosis(report("tf", FAILED), ["libraries: add it"])))
    assert (doctor.verdict, doctor.problem, doctor.fix, doctor.ready_envs) == (
        "not-ready", "env tf: libraries: libcudnn.so.8 missing", "envcheck env add tf nvidia-cudnn-cu11", [])
    gate = read("check", answered(judge("tf", report("tf", FAILED).to_json(), True, False, 0)))
    assert (gate.verdict, gate.problem, gate.ready_envs) == ("not-ready", "libraries: libcudnn.so.8 missing", [])
    made = read("provision", answered(ProvisionResult([Provisioned("x", "x", "failed", "uv failed", fix="retry")])))
    assert (made.verdict, made.problem, made.fix) == ("not-ready", "env x: failed: uv failed", "retry")


def test_a_degraded_node_is_ready_unless_its_exit_code_says_otherwise():
    run = ValidationRun([report("tf", PASSED), report("pt", WARNED)])
    got = read("validate", answered(run))
    assert (got.verdict, got.ready, got.ready_envs) == ("degraded", True, ["tf", "pt"])
    assert got.problem == "env pt: speedup: the GPU is slower than the CPU" and got.fix == "check the GPU's clocks"
    strict = read("validate", answered(ValidationRun(run.reports, strict=True)))
    assert (strict.verdict, strict.exit_code, strict.ready) == ("degraded", 1, False)  # --strict on the node
    gate = read("check", answered(judge("tf", report("tf", WARNED).to_json(), True, False, 0)))
    assert (gate.verdict, gate.ready, gate.ready_envs) == ("degraded", True, ["tf"])


@pytest.mark.parametrize("command", ["gpu", "doctor", "validate", "check", "provision"])
def test_a_document_without_the_envelope_is_an_error_naming_the_old_envcheck(command):
    results = {"gpu": A100, "doctor": diagnosis(report("tf", PASSED), []),
               "validate": ValidationRun([report("tf", PASSED)]),
               "check": judge("tf", report("tf", PASSED).to_json(), True, False, 0),
               "provision": ProvisionResult([Provisioned("tf", "tf", "created", "made", "ready")])}
    older = results[command].to_json()
    assert older.pop(ENVELOPE_KEY)["verdict"] == "ready"  # the same answer with an envelope reads ready
    for code in (0, 1):
        got = read(command, answered(document=older, code=code, version="0.0.9"))
        assert (got.verdict, got.ready, got.exit_code) == ("error", False, code)
        assert "0.0.9" in got.problem and "without the result envelope" in got.problem
        assert older["schema"] in got.problem
        assert got.fix.startswith("upgrade envcheck on that node") and PYTHON in got.fix
    assert read(command, answered(results[command])).verdict == "ready"


def test_an_envelope_of_another_shape_is_an_error_too():
    document = {**A100.to_json(), ENVELOPE_KEY: {"verdict": "splendid"}}
    assert read("gpu", answered(document=document, code=0)).verdict == "error"
    document[ENVELOPE_KEY] = "ready"
    assert read("gpu", answered(document=document, code=0)).verdict == "error"


def test_an_error_line_is_not_ready_an_unknown_exit_code_or_no_document_an_error():
    line = "envcheck: error: no env to validate; fix: envcheck env create tf --preset tensorflow-cpu"
    got = read("validate", answered(code=1, error=line))
    assert (got.verdict, got.problem, got.fix, got.ready_envs) == (
        "not-ready", "no env to validate", "envcheck env create tf --preset tensorflow-cpu", [])
    assert read("gpu", answered(code=1, error=line)).ready_envs is None
    bad = read("validate", answered(code=2, error="envcheck: error: no GPU gpu:1 here; fix: see --devices"))
    assert (bad.verdict, bad.exit_code, bad.problem, bad.fix) == ("error", 2, "no GPU gpu:1 here", "see --devices")
    # a document printed, but exit 2: still not an answer to the question
    assert read("gpu", answered(A100, code=2)).verdict == "error"
    silent = read("gpu", answered(code=0))
    assert (silent.verdict, silent.problem) == ("error", "its envcheck exited 0")
    crashed = read("gpu", answered(code=None))
    assert (crashed.verdict, crashed.problem) == ("error", "its envcheck did not run")


def test_a_node_without_envcheck_or_whose_envcheck_hung():
    missing = {**answered(code=None), "installed": False, "version": None,
               "error": "envcheck is not installed on this node: no `envcheck` on its PATH"}
    got = read("gpu", missing)
    assert (got.verdict, got.envcheck_version) == ("no-envcheck", None)
    assert got.problem == missing["error"] and "pip install 'envcheck[fleet]'" in got.fix and PYTHON in got.fix
    hung = {**answered(code=-9), "timed_out": True}
    assert (read("gpu", hung).verdict, read("gpu", hung).problem) == (
        "lost", "the node's envcheck gave no answer within --timeout")


@pytest.mark.parametrize(("state", "fix"), [("busy", "allow more --busy-after"), ("unreachable", "ray status"),
                                            ("lost", "raylet log")])
def test_a_node_with_no_answer_reads_as_its_outcome(state, fix):
    cause = f"the task {state}"
    for command, envs in (("gpu", None), ("validate", [])):
        got = node_report(command, Outcome(node("x", 2), state, cause=cause, seconds=3.0))
        assert (got.verdict, got.problem, got.exit_code, got.ready, got.ready_envs) == (state, cause, None, False, envs)
        assert fix in got.fix and got.report is None


def fleet_of(command: str, reports: list, min_ready: int | None = None) -> FleetResult:
    return FleetResult(command, ["--json"], "10.0.0.1:6379", "1.2.3", 60.0, reports, [node("head")], min_ready)


def test_the_fleet_counts_verdicts_and_min_ready_decides_the_exit_code():
    nodes = [read("gpu", answered(A100), "a100"), read("gpu", answered(A100, version="0.0.9"), "t4"),
             read("gpu", answered(NO_LIBRARY), "cpu"),
             node_report("gpu", Outcome(node("held", 2), "busy", cause="held by other Ray work"))]
    every = fleet_of("gpu", nodes)
    summary = every.summary()
    assert (summary["nodes"], summary["ready"], summary["not_ready"], summary["busy"], summary["ready_nodes"]) == (
        4, 2, 1, 1, 2)
    assert summary["error"] == summary["lost"] == summary["unreachable"] == summary["no_envcheck"] == 0
    assert (summary["needed"], summary["ok"], every.exit_code) == (4, False, 1)
    assert summary["driver_versions"] == ["550.54.15"] and summary["gpu_models"] == ["NVIDIA A100-SXM4-80GB"]
    assert summary["envcheck_versions"] == ["0.0.9", "1.2.3"]
    assert summary["other_versions"] == [{"node_id": nodes[1].node.id, "version": "0.0.9"}]
    assert summary["envs_ready_everywhere"] is None
    assert [fleet_of("gpu", nodes, n).exit_code for n in (0, 1, 2, 3, 4)] == [0, 0, 0, 1, 1]
    assert fleet_of("gpu", []).exit_code == 1 and fleet_of("gpu", [], 0).exit_code == 1  # no node asked
    document = every.to_json()
    assert [n["verdict"] for n in document["nodes"]] == ["ready", "ready", "not-ready", "busy"]
    assert [n["ready"] for n in document["nodes"]] == [True, True, False, False]
    assert document["left_out"][0]["why"].startswith("the head node has no GPUs")


def test_the_fleets_own_envelope_names_the_first_node_that_is_not_ready():
    good, bad = read("gpu", answered(A100), "a100"), read("gpu", answered(NO_LIBRARY), "cpu")
    assert envelope_of(fleet_of("gpu", [good])) == expect("ready")
    answer = envelope_of(fleet_of("gpu", [good, bad]))
    assert answer == expect("not-ready", f"1 of 2 node(s) ready, 2 needed; node {bad.node.describe()}: not-ready: "
                                         "libnvidia-ml.so.1 was not found", "install the NVIDIA driver")
    assert envelope_of(fleet_of("gpu", [good, bad], 1))["verdict"] == "degraded"  # enough, not all
    assert envelope_of(fleet_of("gpu", [])) == expect("not-ready", "0 of 0 node(s) ready, 0 needed: no node was asked")


def test_the_envs_ready_everywhere_are_those_every_node_has_ready():
    both = ProvisionResult([Provisioned("tf", "tf", "created", "made", "ready"),
                            Provisioned("pt", "pt", "created", "made", "degraded")])
    one = ProvisionResult([Provisioned("tf", "tf", "unchanged", "kept", "ready"),
                           Provisioned("pt", "pt", "failed", "uv failed", fix="retry")])
    nodes = [read("provision", answered(both), "a"), read("provision", answered(one), "b")]
    assert [n.ready_envs for n in nodes] == [["tf", "pt"], ["tf"]]
    result = fleet_of("provision", nodes, min_ready=1)
    assert result.envs_ready_everywhere() == ["tf"] and result.summary()["envs_ready_everywhere"] == ["tf"]
    assert envelope_of(result)["ready_envs"] == ["tf"]
    lost = node_report("provision", Outcome(node("c"), "lost", cause="NodeDiedError: gone"))
    assert fleet_of("provision", [*nodes, lost], 1).envs_ready_everywhere() == []


# -- the CLI's fleet, with Ray's parts replaced ------------------------------------------------

NODES = {"a100": (A100, 2), "t4": (A100, 1), "cpu": (NO_LIBRARY, 0)}


class FakeRay:
    def shutdown(self) -> None:
        pass


@pytest.fixture
def fake_cluster(monkeypatch, home):
    """`envcheck fleet` in this process: the cluster's nodes and their answers made up, the
    node selection (``cluster.select``), reading, aggregation and rendering the real ones."""
    from envcheck.fleet import cluster, survey

    asked: list[list[str]] = []

    def dispatch(ray, nodes, command, args, environment, **_):
        asked.append([n.labels["fleet-node"] for n in nodes])
        return [Outcome(n, "answered", answer=answered(NODES[n.labels["fleet-node"]][0]), seconds=0.1)
                for n in nodes]

    monkeypatch.setenv("ENVCHECK_HOME", str(home))
    monkeypatch.setattr(cluster, "import_ray", FakeRay)
    monkeypatch.setattr(cluster, "connect", lambda ray, given: "10.0.0.1:6379")
    monkeypatch.setattr(cluster, "alive_nodes", lambda ray: [node(label, gpus) for label, (_, gpus) in NODES.items()])
    monkeypatch.setattr(survey, "dispatch", dispatch)
    return asked


def fleet_cli(capsys, *args: str) -> tuple[int, str]:
    from envcheck.cli import _dispatch

    code = _dispatch(["fleet", *args])
    return code or 0, capsys.readouterr().out


def test_min_ready_decides_the_exit_code(fake_cluster, capsys):
    """Moved from test_fleet.py: the aggregation, through the CLI's options."""
    assert fleet_cli(capsys, "gpu", "--min-ready", "2")[0] == 0
    code, out = fleet_cli(capsys, "gpu", "--min-ready", "3")
    assert code == 1 and "fleet: NOT READY: 2 of 3 node(s) ready, 3 needed" in out
    assert fleet_cli(capsys, "gpu", "--nodes", "fleet-node=a100,fleet-node=t4")[0] == 0
    assert fake_cluster == [["a100", "t4", "cpu"]] * 2 + [["a100", "t4"]]
    code, out = fleet_cli(capsys, "gpu", "--json")
    document = json.loads(out)
    assert code == 1 and document[ENVELOPE_KEY]["verdict"] == "not-ready"
    assert [n["verdict"] for n in document["nodes"]] == ["ready", "ready", "not-ready"]


# -- the same env on every node? (issue 21: digests grouped, differing packages named) ----------

def identities(*envs: tuple) -> list[dict]:
    return [{"name": n, "lock": lock, "digest": digest, "packages": packages} for n, lock, digest, packages in envs]


def with_envs(label: str, envs: list[dict] | None, command: str = "check") -> NodeReport:
    gate = judge("tf", report("tf", PASSED).to_json(), True, False, 0)
    document = json.loads(json.dumps(gate.to_json()))
    document[ENVELOPE_KEY]["node"]["envs"] = envs
    return read(command, answered(document=document, code=0), label)


def test_the_fleet_groups_each_env_by_digest_and_names_the_nodes_and_packages_that_differ():
    same = {"tensorflow-cpu": "2.21.0", "alpha": "2.0"}
    nodes = [with_envs("a100", identities(("tf", "sha256:lock", "sha256:one", same))),
             with_envs("t4", identities(("tf", "sha256:lock", "sha256:one", same))),
             with_envs("cpu", identities(("tf", "sha256:lock", "sha256:one", {**same, "alpha": "1.0"}))),
             with_envs("old", None)]  # an envcheck that says nothing of its envs: in no list
    compared = fleet_of("check", nodes).summary()["envs"]["tf"]
    ids = [n.node.id for n in nodes]
    assert compared["digests"] == {"sha256:one": ids[:3]} and compared["locks"] == {"sha256:lock": ids[:3]}
    assert compared["differ"] == [{"node_id": ids[2], "hostname": "node",
                                   "packages": {"alpha": {"node": "1.0", "others": "2.0"}}}]
    assert not compared["same"] and compared["missing"] == []
    text = fleet_view(fleet_of("check", nodes))
    assert f"node {ids[2][:8]} (node) differs: alpha 1.0 (others 2.0)" in text

    alike = fleet_of("check", nodes[:2]).summary()["envs"]["tf"]
    assert alike["same"] and alike["digests"] == {"sha256:one": ids[:2]}
    assert "env tf: the same on every node (sha256:one)" in fleet_view(fleet_of("check", nodes[:2]))

    two = [with_envs("a", identities(("tf", None, "sha256:one", same), ("pt", None, None, {"torch": "2.10.0"})), "doctor"),
           with_envs("b", identities(("tf", None, "sha256:two", same)), "doctor")]
    summary = fleet_of("doctor", two).summary()["envs"]
    assert summary["tf"]["digests"] == {"sha256:one": [two[0].node.id], "sha256:two": [two[1].node.id]}
    assert not summary["tf"]["same"] and summary["tf"]["differ"] == []  # same packages, other files
    assert summary["pt"]["missing"] == [two[1].node.id] and summary["pt"]["digests"] == {"none": [two[0].node.id]}


def test_doctor_and_check_say_which_envs_they_looked_at():
    gate = judge("tf", report("tf", PASSED).to_json(), True, False, 0)
    assert envs_of(gate) is None  # judged alone: no env facts
    gate.identity = {"name": "tf", "lock": None, "digest": "sha256:x", "packages": {"a": "1"}}
    assert envs_of(gate) == [gate.identity]
    told = diagnosis(report("tf", PASSED), [])
    told.envs = identities(("tf", None, "sha256:x", {}), ("pt", "sha256:l", "sha256:y", {}))
    assert [e["name"] for e in envs_of(told)] == ["tf", "pt"]
