"""The node's readiness as Prometheus metrics and node labels, in process (``usecases.readiness``,
``usecases.node_labels``, ``usecases.revalidation``, ``cli/views/metrics``).

Real envs (made once from the suite's wheelhouse) with reports written here, judged on a
Session given its level-1 health (no NVML read). The exposition is held byte-identical to
``prometheus_client.generate_latest`` for the same families, and checked by ``promtool check
metrics`` where Debian's prometheus package is installed. What needs processes (the exporter,
a real Prometheus, concurrent textfile writers, signals) is in test_serve.py.
"""
from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import clean_env
from envcheck.host.health import GpuHealth, GpuProcess
from envcheck.host.level1 import GpuVerdict, HealthReport
from envcheck.host.probe import Gpu, HostState
from envcheck.paths import Home
from envcheck.usecases.node_labels import env_key, node_labels, valid_key
from envcheck.usecases.readiness import label_value, readiness
from envcheck.usecases.revalidation import Revalidation, free_devices
from envcheck.usecases.session import Session
from envcheck.validation.reports import Check, Report, fingerprint, store_report
from envcheck.cli.views.metrics import exposition, families
from test_select import make_env

pytestmark = pytest.mark.timeout(300)
NAMES = ("fast", "slow", "fresh", "old")


def a100s(driver: str = "550.54.15", busy: tuple[int, ...] = ()) -> HostState:
    gpus = [Gpu(i, name="NVIDIA A100-SXM4-80GB", uuid=f"GPU-a{i}", compute_capability="8.0", visible=True,
                cuda_index=i, health=GpuHealth(processes=[GpuProcess(99, 100)] if i in busy else []))
            for i in range(2)]
    return HostState("ok", driver_version=driver, cuda_driver_version="12.4", gpus=gpus)


def level1(host: HostState, checks: dict | None = None) -> HealthReport:
    states = checks or {"ecc": "pass", "clocks": "degraded", "mig": "n/a"}
    verdict = next((v for v in ("not-ready", "degraded") if v in states.values()), "ready")
    return HealthReport(host, gpus=[GpuVerdict(g.index, g.name, g.uuid, None, True, verdict, [], dict(states), {})
                                    for g in host.gpus])


@pytest.fixture(scope="module")
def envs_home(tmp_path_factory, wheelhouse) -> Path:
    home = tmp_path_factory.mktemp("metrics-home")
    for name in NAMES:
        make_env(home, wheelhouse, name, "tensorflow==2.21.0")
    return home


@pytest.fixture
def session_on(envs_home):
    yield lambda host=None, **kw: Session(Home(envs_home), health=level1(host or a100s(), **kw))
    for name in NAMES:
        Home(envs_home).report(name).unlink(missing_ok=True)


def write(session: Session, name: str, verdict: str = "ready", host: HostState | None = None,
          devices: list | None = None, multi: dict | None = None, age_s: float = 60.0,
          gpus_usable: int = 2) -> Report:
    info = session.store.get(name)
    host = host or session.host
    status = {"ready": "pass", "degraded": "warn", "not-ready": "fail"}[verdict]
    created = (datetime.now(timezone.utc) - timedelta(seconds=age_s)).isoformat()
    report = Report(name, verdict, [Check("smoke", status, "fit")], devices or [], multi, None, {}, host.to_json(),
                    fingerprint(info, host), created, 1.0, True, gpus_usable=gpus_usable, depth="smoke")
    store_report(session.home, report)
    return report


def samples(text: str, name: str) -> dict[tuple, float]:
    """{((label, value), ...): value} of metric ``name`` in an exposition."""
    found = {}
    for line in text.splitlines():
        m = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if m:
            labels = tuple(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m[1]))
            found[labels] = float(m[2])
    return found


def populated(session_on) -> tuple[Session, str]:
    session = session_on()
    write(session, "fast", devices=[{"device": "gpu:0", "status": "pass", "ms_per_step": 12.5},
                                    {"device": "cpu:0", "status": "pass", "ms_per_step": 250.0},
                                    {"device": "gpu:1", "status": "fail", "ms_per_step": None}],
          multi={"status": "pass", "scaling_efficiency": 0.93})
    write(session, "slow", verdict="degraded")
    write(session, "old", host=a100s(driver="535.104.05"))  # made on another driver: stale
    return session, exposition(families(readiness(session)))


def test_each_env_says_its_verdict_and_an_env_never_validated_or_stale_is_not_ready(session_on):
    _, text = populated(session_on)
    ready = samples(text, "envcheck_env_ready")
    assert ready == {
        (("env", "fast"), ("framework", "tensorflow"), ("variant", ""), ("verdict", "ready")): 1.0,
        (("env", "fresh"), ("framework", "tensorflow"), ("variant", ""), ("verdict", "never-validated")): 0.0,
        (("env", "old"), ("framework", "tensorflow"), ("variant", ""), ("verdict", "stale")): 0.0,
        (("env", "slow"), ("framework", "tensorflow"), ("variant", ""), ("verdict", "degraded")): 1.0}
    assert samples(text, "envcheck_env_report_stale") == {(("env", "fast"),): 0.0, (("env", "old"),): 1.0,
                                                         (("env", "slow"),): 0.0}
    stamps = samples(text, "envcheck_env_validated_timestamp_seconds")
    assert set(stamps) == {(("env", n),) for n in ("fast", "old", "slow")}  # never validated: no time
    assert all(abs(v - (datetime.now(timezone.utc).timestamp() - 60)) < 30 for v in stamps.values())
    assert samples(text, "envcheck_smoke_seconds_per_step") == {
        (("device", "cpu:0"), ("env", "fast")): 0.25, (("device", "gpu:0"), ("env", "fast")): 0.0125}
    assert samples(text, "envcheck_multi_device_efficiency") == {(("env", "fast"),): 0.93}


def test_gpu_health_driver_and_build_info(session_on):
    _, text = populated(session_on)
    health = samples(text, "envcheck_gpu_health")
    assert health[(("check", "ecc"), ("gpu", "0"), ("uuid", "GPU-a0"))] == 1.0
    assert health[(("check", "clocks"), ("gpu", "1"), ("uuid", "GPU-a1"))] == 0.5
    assert math.isnan(health[(("check", "mig"), ("gpu", "0"), ("uuid", "GPU-a0"))])
    assert samples(text, "envcheck_driver_info") == {(("cuda", "12.4"), ("driver", "550.54.15")): 1.0}
    assert list(samples(text, "envcheck_build_info")) == [(("version", "0.1.0"),)]
    for name in ("envcheck_env_ready", "envcheck_gpu_health", "envcheck_build_info"):
        assert f"# HELP {name} " in text and f"# TYPE {name} gauge\n" in text


def test_the_exposition_is_what_prometheus_client_writes(session_on):
    client = pytest.importorskip("prometheus_client")
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.registry import CollectorRegistry

    session, _ = populated(session_on)
    found = families(readiness(session))
    found[0].samples.append(({"env": 'a"b\\c\nd', "framework": "ü", "variant": "", "verdict": "x"}, 1e12))

    class Collector:
        def collect(self):
            for family in found:
                gauge = GaugeMetricFamily(family.name, family.help, labels=sorted({k for s in family.samples for k in s[0]}))
                for labels, value in family.samples:
                    gauge.add_metric([labels[k] for k in gauge._labelnames], value)
                yield gauge

    registry = CollectorRegistry()
    registry.register(Collector())
    ours, theirs = exposition(found).encode(), client.generate_latest(registry)
    assert ours.splitlines() == theirs.splitlines()
    assert ours == theirs


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool not installed (Debian: apt-get install prometheus; .ci/run does)")
def test_promtool_finds_nothing_to_say(session_on):
    _, text = populated(session_on)
    done = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), done.stdout + done.stderr


def test_label_values_carry_no_secret_nor_control_character():
    assert label_value("https://user:s3cret@example.com/simple") == "https://***@example.com/simple"
    assert label_value("a\x1b[31mb\udcff\n") == "a?[31mb??"
    assert len(label_value("x" * 1000)) == 128


def test_a_device_label_from_a_report_is_sanitized(session_on):
    session = session_on()
    write(session, "fast", devices=[{"device": "https://u:t0ken@h/x\n", "status": "pass", "ms_per_step": 1.0}])
    text = exposition(families(readiness(session)))
    assert "t0ken" not in text
    assert samples(text, "envcheck_smoke_seconds_per_step") == {(("device", "https://***@h/x?"), ("env", "fast")): 0.001}


# -- labels ------------------------------------------------------------------------------------

ODD_NAMES = ["a", "A-b.c_d", "x" * 59, "x" * 60, "y" * 64, "z" * 63 + "-", "trailing.", "trailing_", "trailing-",
             "name-0123abcd", "name-0123ABCD", "v" * 50 + "-" + "w" * 13, "v" * 50 + "." + "w" * 13, "0"]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_every_env_name_maps_to_a_valid_label_key(name):
    from envcheck.envs.env_info import check_name

    check_name(name)  # one envcheck allows
    assert valid_key(env_key(name)), env_key(name)


def test_keys_are_distinct_and_kept_as_is_where_valid():
    keys = [env_key(n) for n in ODD_NAMES]
    assert len(set(keys)) == len(keys)
    assert env_key("A-b.c_d") == "envcheck.io/env.A-b.c_d"
    assert env_key("trailing") == "envcheck.io/env.trailing"
    assert env_key("trailing-") == "envcheck.io/env.trailing-b520d72a"  # docs/prometheus.md's example
    hashed = env_key("name-0123abcd")  # the form of a changed name: changed too, so no kept name can match it
    assert hashed.startswith("envcheck.io/env.name-0123abcd-") and len(hashed) - len("envcheck.io/") <= 63


def test_labels_say_each_env_the_count_and_the_gpus(session_on):
    session, _ = populated(session_on)
    found = node_labels(readiness(session))
    assert found.labels == {"envcheck.io/env.fast": "ready", "envcheck.io/env.fresh": "not-ready",
                            "envcheck.io/env.old": "not-ready", "envcheck.io/env.slow": "degraded",
                            "envcheck.io/ready-envs": "2", "envcheck.io/gpu-health": "degraded"}
    assert found.to_json()["envelope"]["verdict"] == "degraded"
    faulty = node_labels(readiness(session_on(checks={"ecc": "not-ready"})))
    assert faulty.labels["envcheck.io/gpu-health"] == "faulty"
    no_gpu = Session(session.home, health=HealthReport(HostState("no-library")))
    assert "envcheck.io/gpu-health" not in node_labels(readiness(no_gpu)).labels


# -- revalidation policy -----------------------------------------------------------------------

def test_the_exporters_own_cuda_variables_make_no_report_stale(session_on):
    """A job validated with CUDA_VISIBLE_DEVICES=0 and PCI_BUS_ID order; the exporter runs
    without them: the node did not change, the report is current (and nothing to revalidate)."""
    session = session_on()
    job = a100s()
    job.cuda_visible_devices, job.cuda_device_order = "0", "PCI_BUS_ID"
    write(session, "fast", host=job)
    (fast,) = [e for e in readiness(session).envs if e.name == "fast"]
    assert (fast.verdict, fast.stale, fast.changed) == ("ready", False, [])
    assert Revalidation().next(readiness(session), session.health) is None


def test_a_stored_health_failure_counts_for_nothing_the_health_read_now_does(session_on):
    """As in the gate: a report whose level-1 health check failed (a GPU since reset) is judged
    by its other checks and the health read now; a not-ready finding now makes the env not ready."""
    from envcheck.host.findings import Finding

    session = session_on()
    write(session, "fast")
    info = session.store.get("fast")
    report = Report("fast", "not-ready", [Check("smoke", "pass", "fit"), Check("health", "fail", "GPU 0: Xid 79")],
                    [], None, None, {}, session.host.to_json(), fingerprint(info, session.host),
                    datetime.now(timezone.utc).isoformat(), 1.0, True, gpus_usable=2, depth="smoke")
    store_report(session.home, report)
    (fast,) = [e for e in readiness(session).envs if e.name == "fast"]
    assert fast.verdict == "ready" and fast.ready

    lost = Finding("xid-79", "xid", "not-ready", 1, "Xid 79", "the GPU fell off the bus", "drain the node")
    sick = session_on()
    sick.health.gpus[1].findings.append(lost)
    (fast,) = [e for e in readiness(sick).envs if e.name == "fast"]
    assert fast.verdict == "not-ready" and not fast.ready


def test_a_host_change_revalidates_each_env_once_on_free_gpus(session_on):
    session = session_on(host=a100s(busy=(0,)))
    write(session, "fast", host=a100s(driver="535.104.05"))
    write(session, "slow")
    policy = Revalidation()
    due = policy.next(readiness(session), session.health)
    assert (due.env, due.devices) == ("fast", "cpu:0,gpu:1") and "driver_version" in due.why
    assert policy.next(readiness(session), session.health) is None  # tried on this host: not again


def test_every_gpu_busy_means_no_validation_now_but_of_an_env_that_trains_on_none(session_on):
    session = session_on(host=a100s(busy=(0, 1)))
    write(session, "fast", host=a100s(driver="535.104.05"))
    assert free_devices(session.health) is None
    assert Revalidation().next(readiness(session), session.health) is None
    write(session, "slow", host=a100s(driver="535.104.05"), gpus_usable=0)
    due = Revalidation().next(readiness(session), session.health)
    assert (due.env, due.devices) == ("slow", "cpu")


def test_periodic_revalidation_takes_old_reports_only(session_on):
    session = session_on()
    write(session, "fast", age_s=7 * 3600)
    write(session, "slow", age_s=60)
    policy = Revalidation(every=6 * 3600)
    due = policy.next(readiness(session), session.health)
    assert (due.env, due.devices) == ("fast", "all")  # no GPU busy: as a validation by hand
    assert policy.next(readiness(session), session.health) is None  # tried: not before 6h
    assert Revalidation(on_change=False).next(readiness(session), session.health) is None


@pytest.mark.slow
def test_a_real_validations_smoke_figures_are_exported(tf_home):
    """The ms/step a real smoke fit measured per device, as `validate` stored it, read back from
    `envcheck metrics` as envcheck_smoke_seconds_per_step."""
    env = clean_env(ENVCHECK_HOME=str(tf_home))
    validated = subprocess.run([sys.executable, "-m", "envcheck", "validate", "tf", "--devices", "cpu", "--json"],
                               capture_output=True, text=True, env=env, timeout=900)
    assert validated.returncode == 0, validated.stderr
    (measured,) = json.loads(validated.stdout)["reports"][0]["devices"]
    assert measured["status"] == "pass" and measured["ms_per_step"] > 0
    metrics = subprocess.run([sys.executable, "-m", "envcheck", "metrics"], capture_output=True, text=True,
                             env=env, timeout=120)
    assert metrics.returncode == 0, metrics.stderr
    assert samples(metrics.stdout, "envcheck_smoke_seconds_per_step") == {
        (("device", "cpu:0"), ("env", "tf")): measured["ms_per_step"] / 1000}
