"""The stored-report rule, in process: when a stored validation still answers (``freshness``,
through its typed face ``validation.reports.StoredReport``), what a new validation stores in its
place, and the gate (``usecases.gate.check``) and selection answering from it on a Session
given its host (no NVML read).

The envs are real (made once per module from the suite's wheelhouse); their reports are
written into the home here, with the fingerprint of the env and host they describe, and
removed after each test. What needs the CLI (the fast path, signals, the env's own
``ensure_ready``) stays in test_gate.py.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from envcheck.host.probe import Gpu, HostState
from envcheck.paths import Home
from envcheck.usecases.gate import check
from envcheck.usecases.session import Session
from envcheck.validation import freshness
from envcheck.validation.reports import Check, Report, StoredReport, fingerprint, load_report, store_report, to_store
from test_select import make_env

pytestmark = pytest.mark.timeout(300)


def a100_host(driver: str = "550.54.15", cvd: str | None = None) -> HostState:
    """Two A100s on ``driver``; ``cvd``: CUDA_VISIBLE_DEVICES as the probe read it ("" hides both)."""
    hidden = cvd == ""
    gpus = [Gpu(i, name="NVIDIA A100-SXM4-80GB", uuid=f"GPU-a{i}", compute_capability="8.0",
                visible=not hidden, cuda_index=None if hidden else i) for i in range(2)]
    return HostState("ok", driver_version=driver, cuda_driver_version="12.4", gpus=gpus, cuda_visible_devices=cvd)


HOST = a100_host()


def now(offset_s: float = 0.0) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=offset_s)).isoformat()


PASSED = Check("integrity", "pass", "manifest sound")
SMOKE_FAILED = Check("smoke", "fail", "cpu:0: the fit crashed", fix="envcheck diagnose LOG")


def written(session: Session, name: str, *checks: Check, depth: str = "quick", host: HostState = HOST,
            created: str | None = None, devices: list | None = None) -> Report:
    """A report of env ``name`` validated on ``host`` (its fingerprint: the env now, that host),
    stored in the session's home."""
    info = session.store.get(name)
    made = list(checks) or [PASSED]
    verdict = "not-ready" if any(c.status == "fail" for c in made) else "ready"
    report = Report(name, verdict, made, devices or [], None, None, {}, host.to_json(), fingerprint(info, host),
                    created or now(), 0.1, depth == "smoke", depth=depth)
    store_report(session.home, report)
    return report


@pytest.fixture(scope="module")
def envs_home(tmp_path_factory, wheelhouse) -> Path:
    """Env ``tf`` (a CPU build) and ``tfgpu`` (a GPU build), stand-ins installed from wheels."""
    home = tmp_path_factory.mktemp("reports-home")
    make_env(home, wheelhouse, "tf", "tensorflow-cpu==2.21.0")
    make_env(home, wheelhouse, "tfgpu", "tensorflow==2.21.0")
    return home


@pytest.fixture
def home_of(envs_home):
    """``home_of(host)``: a Session of the envs' home on ``host``; each test leaves no report
    and no package of its own behind."""
    yield lambda host=HOST: Session(Home(envs_home), host=host)
    for name in ("tf", "tfgpu"):
        Home(envs_home).report(name).unlink(missing_ok=True)
    for extra in envs_home.glob("envs/*/lib/python*/site-packages/alpha-1.0.dist-info"):
        for file in extra.iterdir():
            file.unlink()
        extra.rmdir()


# -- the rule on report data -------------------------------------------------------------------

FINGERPRINT = {"packages": {"tensorflow-cpu": "2.21.0"}, "python": "3.11.7", "driver_version": "550.54.15"}


def stored(verdict: str = "ready", depth: str = "quick", created: str | None = None, **fingerprint) -> StoredReport:
    return StoredReport({"env": "tf", "verdict": verdict, "depth": depth, "smoke": depth == "smoke",
                         "created": created or now(), "fingerprint": {**FINGERPRINT, **fingerprint},
                         "checks": [], "gpus_usable": 0})


def test_current_and_changed_name_what_differs():
    report = stored()
    assert report.current(FINGERPRINT) and report.changed(FINGERPRINT) == []
    assert report.verdict_now(FINGERPRINT) == "ready"
    newer = {**FINGERPRINT, "driver_version": "560.35.03", "cuda_visible_devices": ""}
    assert not report.current(newer) and report.changed(newer) == ["driver_version", "cuda_visible_devices"]
    assert report.verdict_now(newer) is None  # out of date: it says nothing of now
    unreadable = StoredReport({**report.data, "fingerprint": "garbage"})
    assert unreadable.changed(FINGERPRINT) == list(FINGERPRINT) and unreadable.verdict_now(FINGERPRINT) is None


def test_a_pass_answers_as_deep_as_it_went_and_while_young_enough():
    assert stored().answers(FINGERPRINT, max_age=60)
    assert not stored().answers(FINGERPRINT, max_age=60, smoke=True)  # a smoke fit asked, none run
    assert stored(depth="smoke").answers(FINGERPRINT, max_age=60, smoke=True)
    assert not stored(created=now(-120)).answers(FINGERPRINT, max_age=60)  # too old
    assert not stored(created=now(+120)).answers(FINGERPRINT, max_age=600)  # from the future: no age
    assert not stored(created="yesterday").answers(FINGERPRINT, max_age=60)
    assert not stored(python="3.12.1").answers(FINGERPRINT, max_age=60)  # out of date


def test_a_failure_answers_only_when_a_rerun_would_go_less_deep():
    assert stored("not-ready", "smoke").answers(FINGERPRINT, max_age=60)  # a quick check: it stands
    assert not stored("not-ready", "smoke").answers(FINGERPRINT, max_age=60, smoke=True)  # as deep: rerun
    assert not stored("not-ready", "listing").answers(FINGERPRINT, max_age=60)
    assert not stored("not-ready", "quick").answers(FINGERPRINT, max_age=60)


def test_a_report_written_before_depths_reads_its_depth_from_its_smoke_flag():
    old = {k: v for k, v in stored().data.items() if k != "depth"}
    assert freshness.depth_of({**old, "smoke": True}) == "smoke" and StoredReport(old).depth == "quick"


def fresh(verdict: str, depth: str, *checks: Check, **fingerprint) -> Report:
    made = list(checks) or [PASSED]
    return Report("tf", verdict, made, [], None, None, {}, {}, {**FINGERPRINT, **fingerprint}, now(), 0.1,
                  depth == "smoke", depth=depth)


def test_what_a_new_validation_stores_in_place_of_the_old():
    deep_pass = StoredReport({**stored(depth="smoke").data, "devices": [{"device": "cpu:0", "ms_per_step": 4.2}],
                              "checks": [{"id": "smoke", "status": "pass", "summary": "cpu:0: 4.2 ms/step"}]})
    assert to_store(None, fresh("ready", "quick")) is not None  # nothing stored: it is
    assert deep_pass.to_store(fresh("ready", "quick")) is None  # a shallower pass never erases a fit
    deep_failure = stored("not-ready", "smoke")
    assert deep_failure.to_store(fresh("ready", "quick")) is None  # the failure stands
    failed = fresh("not-ready", "quick", Check("integrity", "fail", "alpha missing"),
                   Check("smoke", "skip", "skipped (--no-smoke)"))
    kept = deep_pass.to_store(failed)  # a shallower failure is the answer now, with the fit's rows
    assert kept.verdict == "not-ready" and kept.devices == [{"device": "cpu:0", "ms_per_step": 4.2}]
    carried = next(c for c in kept.checks if c.id == "smoke")
    assert carried.status == "pass" and carried.measured.startswith("measured by the smoke validation of")
    assert deep_failure.to_store(fresh("ready", "smoke")).verdict == "ready"  # as deep: says otherwise
    assert stored(driver_version="1").to_store(fresh("ready", "quick")).verdict == "ready"  # out of date


def test_a_validation_after_a_change_is_stored_with_the_deeper_ones_figures():
    """The env or host changed since a smoke fit: the quick validation is the answer now and
    is stored, with the fit's rows and figures; the checks it skipped say what the fit found
    then, as skipped (a verdict on the env as it was is none on the env now)."""
    rows = [{"device": "cpu:0", "status": "pass", "ms_per_step": 4.2}, {"device": "gpu:0", "status": "pass",
                                                                         "ms_per_step": 0.7}]
    figures = [{"device": "gpu:0", "name": "matmul_tflops", "value": 300.0}]
    deep = StoredReport({**stored(depth="smoke").data, "devices": rows, "figures": figures,
                         "speedup": {"cpu_ms_per_step": 4.2, "gpu_over_cpu": {"gpu:0": 6.0}},
                         "checks": [{"id": "smoke", "status": "pass", "summary": "2 device(s): 0.7-4.2 ms/step"}]})
    quick = fresh("ready", "quick", PASSED, Check("smoke", "skip", "skipped (--no-smoke)"), files="touched")
    kept = deep.to_store(quick)
    assert kept is not None and kept.depth == "quick" and kept.fingerprint["files"] == "touched"
    assert kept.devices == rows and kept.figures == figures and kept.speedup["gpu_over_cpu"] == {"gpu:0": 6.0}
    smoke = next(c for c in kept.checks if c.id == "smoke")
    assert smoke.status == "skip" and smoke.measured.startswith("measured by the smoke validation of")
    assert smoke.summary.startswith("not run since files changed; it was pass: 2 device(s): 0.7-4.2 ms/step")
    assert freshness.verdict_without_health(kept.to_json()) == "ready"
    again = StoredReport(kept.to_json()).to_store(fresh("ready", "quick", PASSED, Check("smoke", "skip", "skipped"),
                                                        files="touched twice"))
    assert again.devices == rows and next(c for c in again.checks if c.id == "smoke").summary == smoke.summary
    failed_fit = StoredReport({**stored("not-ready", "smoke").data, "devices": rows[:1],
                               "checks": [{"id": "smoke", "status": "fail", "summary": "cpu:0: crashed"}]})
    repaired = failed_fit.to_store(quick)  # a failure before the change stands for nothing now
    assert repaired.verdict == "ready" and freshness.verdict_without_health(repaired.to_json()) == "ready"
    assert repaired.devices == rows[:1]


def test_an_unreadable_or_misshapen_report_is_none(home_of):
    session = home_of()
    assert StoredReport.load(session.home, "tf") is None
    path = session.home.report("tf")
    for text in ("{not json", '{"schema": "envcheck.report/1", "env": "tf"}', '["a list"]'):
        path.write_text(text)
        assert load_report(session.home, "tf") is None and StoredReport.load(session.home, "tf") is None


# -- the gate on a session given its host ------------------------------------------------------

def test_a_current_pass_answers_the_gate(home_of):
    session = home_of()
    written(session, "tf")
    answer = check(session, "tf")
    assert answer.ready and answer.cached and answer.age_s >= 0
    assert answer.envelope()["node"]["host"]["driver_version"] == "550.54.15"


def _install_behind_envcheck(session: Session, name: str) -> None:
    """A package dropped into env ``name``'s site-packages as a plain ``pip install`` would."""
    site = next(session.store.get(name).path.glob("lib/python*/site-packages"))
    extra = site / "alpha-1.0.dist-info"
    extra.mkdir()
    (extra / "METADATA").write_text("Metadata-Version: 2.1\nName: alpha\nVersion: 1.0\n")
    (extra / "RECORD").write_text("")


def test_a_package_installed_behind_envcheck_is_drift_since_validation(home_of):
    """The env recorded what was installed (its baseline): a package added behind envcheck's
    back makes the validated env another env, so the gate says it drifted and names the
    package, whatever a new validation would say."""
    session = home_of()
    written(session, "tf")
    _install_behind_envcheck(session, "tf")
    answer = check(home_of(), "tf")  # the store reads the env again
    assert not answer.ready and not answer.cached
    assert answer.reason.startswith("drifted since validation") and "alpha" in answer.reason
    assert "envcheck env verify tf" in answer.fix


def test_without_a_baseline_a_package_installed_behind_envcheck_misses_then_the_new_answer_is_stored(home_of):
    """An env made before envcheck recorded baselines has nothing to drift from: the new
    package changes the fingerprint, the gate validates again and stores that answer."""
    session = home_of()
    written(session, "tf")
    baseline = session.home.env_dir("tf") / "envcheck-files.json"
    kept = baseline.read_bytes()
    baseline.unlink()
    try:
        _install_behind_envcheck(session, "tf")
        session = home_of()
        first = check(session, "tf")
        assert first.ready and not first.cached
        assert "alpha" in StoredReport.load(session.home, "tf").fingerprint["packages"]
        assert check(home_of(), "tf").cached
    finally:
        baseline.write_bytes(kept)


@pytest.mark.parametrize("host", [a100_host(driver="560.35.03"), a100_host(cvd="")],
                         ids=["driver", "CUDA_VISIBLE_DEVICES"])
def test_another_driver_or_visible_gpus_misses(home_of, host):
    written(home_of(), "tf")
    assert check(home_of(host), "tf").cached is False
    assert check(home_of(host), "tf").cached  # the new host's answer was stored


def test_max_age_misses_an_older_pass(home_of):
    session = home_of()
    written(session, "tf", created=now(-7200))
    assert check(session, "tf", max_age=86400).cached
    assert not check(home_of(), "tf", max_age=3600).cached


def test_a_stored_failure_stands_until_a_validation_as_deep_says_otherwise(home_of, monkeypatch):
    session = home_of()
    written(session, "tf", PASSED, SMOKE_FAILED, depth="smoke")
    before = session.home.report("tf").read_bytes()
    quick = check(session, "tf")
    assert not quick.ready and quick.cached and quick.reason == "smoke: cpu:0: the fit crashed"
    assert quick.fix == "envcheck diagnose LOG" and session.home.report("tf").read_bytes() == before
    from envcheck.validation import smoke

    def passing_fit(python, devices, **_):  # the fit now passes (the env was repaired, say)
        results = [smoke.DeviceResult(d, "pass", 4.2, 0.9, 0.1, placed_on=d.upper()) for d in devices]
        return smoke.SmokeResult({"framework": "tensorflow", "version": "2.21.0"}, 0, results, None, None, "", 1.0)

    monkeypatch.setattr(smoke, "run_smoke", passing_fit)
    deep = check(home_of(), "tf", smoke=True)
    assert deep.ready and not deep.cached, deep.reason
    now_stored = StoredReport.load(session.home, "tf")
    assert (now_stored.verdict, now_stored.depth) == ("degraded", "smoke")  # a CPU build beside a GPU: ignores it
    assert check(home_of(), "tf").cached and check(home_of(), "tf").ready


def test_selection_counts_a_failure_only_while_it_is_current(home_of):
    """A GPU build whose stored validation failed goes to the CPU tier on the host it failed
    on; on another driver that failure is out of date and counts for nothing."""
    session = home_of()
    written(session, "tfgpu", PASSED, SMOKE_FAILED, depth="smoke")
    ranked = {r.name: r for r in session.select(framework="tensorflow").ranking}
    assert (ranked["tfgpu"].tier, ranked["tfgpu"].why_cpu, ranked["tfgpu"].validated) == ("cpu", "failed", "not-ready")
    moved = home_of(a100_host(driver="560.35.03")).select(framework="tensorflow")
    assert [r.name for r in moved.ranking][0] == "tfgpu"
    ranked = {r.name: r for r in moved.ranking}
    assert (ranked["tfgpu"].tier, ranked["tfgpu"].why_cpu, ranked["tfgpu"].validated) == ("gpu", None, None)
