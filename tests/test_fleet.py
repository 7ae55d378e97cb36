"""`envcheck fleet` against a real Ray cluster on this machine (tests/ray_cluster.py).

The module's cluster: a head (no GPU) and three workers, each `ray start` with its own fake
NVML, env home and label: `a100` (two A100s, driver 550), `t4` (a T4 on driver 470, and on
its PATH an envcheck installed as version 0.0.9), `cpu` (no GPU). Ray reads the GPUs through
the same fake NVML. Tests that kill or add a node start one of their own. Every Ray process
is stopped by pid at the end, and the module fails if one is left. The tests before the
`provisioned` fixture's first use see the nodes without envs (pytest's file order).

How a node's answer is read and the answers aggregated (verdicts, `--min-ready`, the envs
ready everywhere, an envcheck too old to carry the result envelope) is tested in process, over
made-up answers, in test_envelope.py; here, what needs the real cluster.
"""
from __future__ import annotations

import hashlib
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import Result, clean_env
from fake_nvml import A100, T4
from loopback import holding_server
from ray_cluster import RayCluster, envcheck_of_version, free_port, python_without_envcheck
from wheelhouse import build_wheel, offline

pytestmark = pytest.mark.fleet

OLD_DRIVER = {"FAKE_NVML_DRIVER": "470.82.01", "FAKE_NVML_CUDA": "11040"}
OLD_VERSION = "0.0.9"
PRESET = """title = "tensorflow-cpu stand-in"
kind = "cpu"
framework = "tensorflow"
packages = ["tensorflow-cpu==2.21.0"]
"""
HANG = "import time\ntime.sleep(10 ** 6)\n"  # a framework whose import never ends: a smoke fit in progress


@pytest.fixture(scope="module")
def cluster(fake_nvml, tmp_path_factory):
    if not Path("/proc/self/stat").exists():
        pytest.skip("the cluster helper finds Ray's processes in /proc (Linux)")
    root = tmp_path_factory.mktemp("fleet")
    old_bin = envcheck_of_version(root / "old-envcheck", root / "wheels", OLD_VERSION)
    ray = RayCluster(root)
    try:
        ray.start_head(fake_nvml.env(gpus=()))
        no_devices = root / "dev-none"  # a CPU node: no GPU, no NVIDIA device node
        no_devices.mkdir()
        for name, gpus, extra in (("a100", (A100, A100), {}), ("t4", (T4,), OLD_DRIVER),
                                  ("cpu", (), {"ENVCHECK_TEST_DEV_DIR": str(no_devices)})):
            env = fake_nvml.env(gpus=gpus, ENVCHECK_HOME=str(root / f"home-{name}"), **extra)
            if name == "t4":
                env["PATH"] = f"{old_bin}:{env['PATH']}"
            ray.add_worker(name, env, {"fleet-node": name})
        yield ray
    finally:
        left = ray.stop()
    assert not left, f"Ray processes left running: {left}"


def fleet(cluster: RayCluster, *args: str, timeout: float = 300) -> Result:
    proc = subprocess.run([sys.executable, "-m", "envcheck", "fleet", *args, "--address", cluster.address],
                          capture_output=True, text=True, env=clean_env(), cwd=cluster.work, timeout=timeout)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def start_fleet(cluster: RayCluster, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "envcheck", "fleet", *args, "--address", cluster.address],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(),
                            cwd=cluster.work)


def by_label(document: dict) -> dict[str, dict]:
    assert document["schema"] == "envcheck.fleet/1"
    return {n["labels"].get("fleet-node", "head"): n for n in document["nodes"]}


def wait_for(what, timeout: float, step: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(step)
    return what()


@pytest.fixture(scope="module")
def provisioned(cluster, wheelhouse):
    """`fleet provision` of one CPU stand-in preset on every node, run twice."""
    preset = cluster.work / "standin-cpu.toml"
    preset.write_text(PRESET)
    args = ("provision", "--preset-file", str(preset), "--no-smoke", *offline(wheelhouse), "--json")
    return fleet(cluster, *args), fleet(cluster, *args)


@pytest.fixture
def extra_node(cluster, fake_nvml, tmp_path):
    """Start one more worker node (no GPU, its own home); stopped and checked gone after."""
    started = []

    def start(name: str, python: str = sys.executable, path: str | None = None, envs: dict | None = None):
        home = tmp_path / f"home-{name}"
        env = fake_nvml.env(gpus=(), ENVCHECK_HOME=str(home))
        env["PATH"] = path or env["PATH"]
        for env_name, module in (envs or {}).items():
            wheels = tmp_path / f"wheels-{env_name}"
            build_wheel(wheels, "tensorflow-cpu", "2.21.0", files={"tensorflow/__init__.py": module})
            preset = tmp_path / f"{env_name}.toml"
            preset.write_text(PRESET)
            made = subprocess.run([sys.executable, "-m", "envcheck", "env", "create", env_name, "--preset-file",
                                   str(preset), *offline(wheels)], capture_output=True, text=True,
                                  env=clean_env(ENVCHECK_HOME=str(home)), timeout=300)
            assert made.returncode == 0, made.stderr
        started.append(name)
        return cluster.add_worker(name, env, {"fleet-node": name}, python=python)

    yield start
    for name in started:
        if name in cluster.nodes:
            assert not cluster.remove(name), f"processes of node {name} left running"


# -- each node answers for itself --------------------------------------------------------------

def test_each_node_answers_with_its_own_gpus_and_driver(cluster):
    r = fleet(cluster, "gpu", "--json")
    assert r.code == 1, r.err  # the cpu node has no GPU
    doc = r.json()
    nodes = by_label(doc)
    assert set(nodes) == {"a100", "t4", "cpu"}  # the head has no GPU: left out, and said so
    assert [n["head"] for n in doc["left_out"]] == [True] and "--include-head" in doc["left_out"][0]["why"]
    a100, t4, cpu = nodes["a100"], nodes["t4"], nodes["cpu"]
    assert (a100["ray_gpus"], a100["accelerator_type"], t4["ray_gpus"], t4["accelerator_type"]) == (2, "A100", 1, "T4")
    assert (cpu["ray_gpus"], cpu["accelerator_type"]) == (0, None)
    assert [g["name"] for g in a100["report"]["gpus"]] == ["NVIDIA A100-SXM4-80GB"] * 2
    assert a100["report"]["driver_version"] == "550.54.15" and a100["gpu_models"] == ["NVIDIA A100-SXM4-80GB"]
    assert [g["name"] for g in t4["report"]["gpus"]] == ["NVIDIA T4"] and t4["driver_version"] == "470.82.01"
    assert cpu["report"]["gpus"] == []
    assert (a100["verdict"], a100["exit_code"], t4["verdict"], cpu["verdict"], cpu["exit_code"]) == (
        "ready", 0, "ready", "not-ready", 1)
    assert cpu["problem"] and cpu["fix"]  # why not, and what to do
    # read from each node's own result envelope, which the old envcheck on t4 carries too
    assert (cpu["problem"], cpu["fix"]) == (cpu["report"]["envelope"]["problem"], cpu["report"]["envelope"]["fix"])
    assert [n["report"]["envelope"]["verdict"] for n in (a100, t4)] == ["ready", "ready"]
    summary = doc["summary"]
    assert (summary["nodes"], summary["ready"], summary["not_ready"], summary["ready_nodes"]) == (3, 2, 1, 2)
    assert summary["lost"] == summary["unreachable"] == summary["busy"] == 0
    assert summary["driver_versions"] == ["470.82.01", "550.54.15"]
    assert summary["gpu_models"] == ["NVIDIA A100-SXM4-80GB", "NVIDIA T4"]
    assert summary["envs_ready_everywhere"] is None  # gpu doesn't speak of envs
    assert len({n["node_id"] for n in doc["nodes"]}) == 3


def test_nodes_filters_by_label_and_by_id(cluster):
    ids = {n["labels"]["fleet-node"]: n["node_id"] for n in fleet(cluster, "gpu", "--json").json()["nodes"]}
    r = fleet(cluster, "gpu", "--nodes", f"fleet-node=t4,{ids['a100'][:10]}", "--json")
    assert r.code == 0, r.err
    assert sorted(by_label(r.json())) == ["a100", "t4"] and r.json()["left_out"] == []
    everyone = fleet(cluster, "gpu", "--include-head", "--json").json()
    assert sorted(by_label(everyone)) == ["a100", "cpu", "head", "t4"]
    assert by_label(everyone)["head"]["head"] is True and by_label(everyone)["head"]["verdict"] == "not-ready"


def test_a_selector_matching_no_node_is_bad_usage(cluster):
    r = fleet(cluster, "gpu", "--nodes", "fleet-node=h100")
    assert r.code == 2 and r.out == ""
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert "--nodes fleet-node=h100: no alive node" in r.err and "fleet-node=a100" in r.err


def test_a_node_running_another_envcheck_version_says_so(cluster):
    r = fleet(cluster, "gpu", "--json")
    doc = r.json()
    t4 = by_label(doc)["t4"]
    assert t4["envcheck_version"] == OLD_VERSION and t4["envcheck"].startswith(str(cluster.work / "old-envcheck"))
    assert by_label(doc)["a100"]["envcheck_version"] == doc["envcheck_version"] != OLD_VERSION
    assert doc["summary"]["other_versions"] == [{"node_id": t4["node_id"], "version": OLD_VERSION}]
    text = fleet(cluster, "gpu").out
    assert f"envcheck versions differ: {t4['node_id'][:8]} runs {OLD_VERSION}" in text


def test_doctor_table_gives_each_not_ready_node_its_own_first_fix(cluster):
    r = fleet(cluster, "doctor", "--nodes", "fleet-node=a100,fleet-node=t4,fleet-node=cpu")
    assert r.code == 1, r.err
    lines = r.out.splitlines()
    assert lines[1].split()[:3] == ["NODE", "ADDRESS", "LABELS"]
    fixes = {label: next(line for line in lines if f"(fleet-node={label}):" in line) for label in ("a100", "t4", "cpu")}
    # each node's hint comes from its own GPUs and driver: CUDA 12 on driver 550, CUDA 11 from wheels on 470
    assert "tensorflow-gpu-cuda12" in fixes["a100"] and "cuda11" not in fixes["a100"]
    assert "tensorflow-gpu-cuda11-wheels" in fixes["t4"]
    assert "tensorflow-gpu" not in fixes["cpu"] and "fix: " in fixes["cpu"]
    assert "fleet: NOT READY: 0 of 3 node(s) ready, 3 needed" in r.out


# -- provision, check, validate ----------------------------------------------------------------

def test_provision_runs_the_installer_hook_on_every_node_idempotently(cluster, provisioned):
    first, second = provisioned
    assert first.code == 0, first.err + first.out
    for label, node in by_label(first.json()).items():
        (env,) = node["report"]["envs"]
        # a CPU build beside a node's usable GPU ignores it: degraded there (issue 28), ready on the CPU node
        expected = "ready" if label == "cpu" else "degraded"
        assert (env["name"], env["action"], env["verdict"]) == ("standin-cpu", "created", expected), label
        assert (cluster.work / f"home-{label}" / "envs" / "standin-cpu").is_dir()  # in the node's own home
    assert first.json()["summary"]["envs_ready_everywhere"] == ["standin-cpu"]
    assert first.json()["summary"]["driver_versions"] == ["470.82.01", "550.54.15"]  # measured besides
    assert second.code == 0, second.err
    assert {n["report"]["envs"][0]["action"] for n in second.json()["nodes"]} == {"unchanged"}


def test_an_index_url_with_credentials_stays_off_the_nodes_command_line_and_the_document(cluster, wheelhouse):
    preset = cluster.work / "private.toml"
    preset.write_text(PRESET)
    secret = "https://fleet:s3cret@127.0.0.1:9/simple"
    r = fleet(cluster, "provision", "--preset-file", str(preset), "--no-smoke", *offline(wheelhouse),
              "--index-url", secret, "--nodes", "fleet-node=cpu", "--json")
    assert r.code == 0, r.err
    assert "s3cret" not in r.out + r.err and "--index-url" not in r.json()["args"]
    manifest = json.loads((cluster.work / "home-cpu" / "envs" / "private" / "envcheck.json").read_text())
    assert manifest["index"]["index_url"] == "https://***@127.0.0.1:9/simple"  # it reached the node


def test_check_answers_from_each_nodes_stored_validation(cluster, provisioned):
    r = fleet(cluster, "check", "--env", "standin-cpu", "--json")
    assert r.code == 0, r.err
    for label, node in by_label(r.json()).items():
        assert node["report"]["schema"] == "envcheck.gate/1"
        expected = "ready" if label == "cpu" else "degraded"  # a CPU build beside a GPU ignores it
        assert (node["report"]["env"], node["report"]["cached"], node["verdict"]) == ("standin-cpu", True, expected)
    assert r.json()["summary"]["envs_ready_everywhere"] == ["standin-cpu"]
    gone = fleet(cluster, "check", "--env", "no-such-env", "--nodes", "fleet-node=cpu", "--json")
    node = by_label(gone.json())["cpu"]
    assert gone.code == 1 and (node["verdict"], node["exit_code"]) == ("error", 2)  # bad input there
    assert "no-such-env" in node["problem"]


def test_labels_gives_every_nodes_labels_from_its_stored_validations(cluster, provisioned):
    r = fleet(cluster, "labels", "--json")
    nodes = by_label(r.json())
    assert set(nodes) == {"a100", "t4", "cpu"}, r.err
    for name, node in nodes.items():
        labels = node["report"]["labels"]
        assert node["report"]["schema"] == "envcheck.labels/1"
        assert labels["envcheck.io/env.standin-cpu"] in ("ready", "degraded"), labels
        assert int(labels["envcheck.io/ready-envs"]) >= 1
        assert ("envcheck.io/gpu-health" in labels) == (name != "cpu")
    text = fleet(cluster, "labels")
    assert "labels:" in text.out and "envcheck.io/env.standin-cpu=" in text.out, text.err


def test_validate_stores_what_each_nodes_gate_answers_from(cluster, provisioned):
    r = fleet(cluster, "validate", "standin-cpu", "--no-smoke", "--json")
    assert r.code == 0, r.err
    nodes = by_label(r.json())
    # the task held the node's GPUs through Ray, yet envcheck saw the node as a shell there does
    assert nodes["a100"]["report"]["reports"][0]["host"]["cuda_visible_devices"] is None
    assert [g["name"] for g in nodes["a100"]["report"]["reports"][0]["host"]["gpus"]] == ["NVIDIA A100-SXM4-80GB"] * 2
    gate = fleet(cluster, "check", "--env", "standin-cpu", "--json")
    assert gate.code == 0, gate.err
    for label, node in by_label(gate.json()).items():
        assert (node["report"]["cached"], node["report"]["report"]["created"]) == (
            True, nodes[label]["report"]["reports"][0]["created"]), label


LOCKED = """title = "locked stand-in"
kind = "cpu"
framework = "tensorflow"
packages = ["tensorflow-cpu==2.21.0", "beta"]
"""


def test_one_lock_gives_every_node_the_same_digest_and_a_drifted_node_is_named(cluster, wheelhouse, provisioned,
                                                                              extra_node):
    """Issue 21: provisioned from one lock, every node's env has one digest; a real `pip install`
    on one node is named by the next `fleet check` and `fleet doctor`, node and package."""
    extra_node("spare")
    preset, lock = cluster.work / "locked.toml", cluster.work / "pylock.toml"
    preset.write_text(LOCKED)
    made = subprocess.run([sys.executable, "-m", "envcheck", "env", "lock", "--preset-file", str(preset), "-o",
                           str(lock), *offline(wheelhouse)], capture_output=True, text=True, timeout=300,
                          env=clean_env(ENVCHECK_HOME=str(cluster.work / "home-builder")))
    assert made.returncode == 0, made.stderr
    nodes = ("--nodes", "fleet-node=a100,fleet-node=cpu,fleet-node=spare")  # t4's envcheck 0.0.9 knows no locks
    r = fleet(cluster, "provision", *nodes, "--lock", str(lock), "--name", "locked", "--no-smoke",
              *offline(wheelhouse), "--json")
    assert r.code == 0, r.err + r.out
    compared = fleet(cluster, "check", *nodes, "--env", "locked", "--json").json()["summary"]["envs"]["locked"]
    assert compared["same"] and len(compared["digests"]) == 1 and len(next(iter(compared["digests"].values()))) == 3
    assert list(compared["locks"]) == [f"sha256:{hashlib.sha256(lock.read_bytes()).hexdigest()}"]

    env_python = cluster.work / "home-cpu" / "envs" / "locked" / "bin" / "python"
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(env_python), "install", "--no-index",
                          "--find-links", str(wheelhouse), "alpha==1.0"], capture_output=True, text=True,
                         env=clean_env(PIP_CONFIG_FILE=os.devnull), timeout=300)
    assert pip.returncode == 0, pip.stderr
    checked = fleet(cluster, "check", *nodes, "--env", "locked", "--json")
    document = checked.json()
    cpu = by_label(document)["cpu"]
    assert checked.code == 1 and cpu["verdict"] == "not-ready" and cpu["problem"].startswith("drifted since validation")
    (differs,) = document["summary"]["envs"]["locked"]["differ"]
    assert differs["node_id"] == cpu["node_id"] and differs["packages"] == {"alpha": {"node": "1.0", "others": "2.0"}}
    doctor = fleet(cluster, "doctor", *nodes, "--no-smoke")
    assert f"node {cpu['node_id'][:8]}" in doctor.out and "differs: alpha 1.0 (others 2.0)" in doctor.out


def test_a_node_whose_envcheck_refuses_the_options_is_an_error_with_its_own_message(cluster, provisioned):
    r = fleet(cluster, "validate", "standin-cpu", "--devices", "gpu:1", "--no-smoke", "--json")
    assert r.code == 1, r.err
    nodes = by_label(r.json())
    assert nodes["a100"]["exit_code"] in (0, 1) and nodes["a100"]["verdict"] != "error"  # it has a GPU 1
    for label in ("t4", "cpu"):  # they have no GPU 1: their envcheck said so, exit 2
        assert (nodes[label]["verdict"], nodes[label]["exit_code"]) == ("error", 2)
        assert "gpu:1" in nodes[label]["problem"], nodes[label]["problem"]
    assert r.json()["summary"]["error"] == 2


def test_validate_says_busy_when_other_ray_work_holds_the_gpus(cluster):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, cluster.address], stdout=subprocess.PIPE,
                              text=True, env=clean_env(), cwd=cluster.work)
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        r = fleet(cluster, "validate", "--busy-after", "3", "--nodes", "fleet-node=a100,fleet-node=cpu", "--json")
        assert time.monotonic() - started < 60
    finally:
        holder.kill()
        holder.wait()
    assert r.code == 1, r.err
    nodes = by_label(r.json())
    assert nodes["a100"]["verdict"] == "busy" and "held by other Ray work" in nodes["a100"]["problem"]
    assert nodes["cpu"]["exit_code"] == 1 and nodes["cpu"]["verdict"] == "not-ready"  # still answered
    assert r.json()["summary"]["busy"] == 1


HOLDER = """
import sys, time, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
node = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Labels"].get("fleet-node") == "a100")

@ray.remote(num_gpus=2, num_cpus=0)
class Holder:
    def ready(self):
        return True

holder = Holder.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
ray.get(holder.ready.remote())
print("held", flush=True)
time.sleep(600)
"""


# -- faults -------------------------------------------------------------------------------------

RAYLET_PORT = """import ray, sys
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
print(next(f"{n['NodeManagerAddress']}:{n['NodeManagerPort']}" for n in ray.nodes() if n["Alive"]))
"""


def test_a_ray_port_that_is_not_the_clusters_address_is_bad_usage_within_the_bound(cluster):
    """A raylet's port is a gRPC server, as the cluster's address (its GCS) is: Ray's connect,
    bounded, gives up on it."""
    found = subprocess.run([sys.executable, "-c", RAYLET_PORT, cluster.address], capture_output=True,
                           text=True, env=clean_env(), timeout=120)
    assert found.returncode == 0, found.stderr
    raylet = found.stdout.strip().splitlines()[-1]
    r = run_envcheck("fleet", "gpu", "--address", raylet, timeout=60)  # unbounded, Ray tries for minutes
    assert r.code == 2 and r.out == "" and len(r.err.strip().splitlines()) == 1, r.err
    assert f"no Ray cluster at {raylet}: a gRPC server answers there, but Ray could not connect" in r.err


def test_a_node_killed_during_validate_is_lost_and_the_others_reported(cluster, extra_node):
    doomed = extra_node("doomed", envs={"hang": HANG})
    run = start_fleet(cluster, "validate", "--all", "--device-timeout", "300", "--timeout", "120",
                      "--nodes", "fleet-node=doomed,fleet-node=cpu", "--json")
    try:
        assert wait_for(lambda: doomed.find("smoke_runner"), 60), "the smoke fit never started on the node"
        killed = time.monotonic()
        doomed.kill()
        out, err = run.communicate(timeout=120)
    finally:
        run.kill()
    assert time.monotonic() - killed < 60  # Ray noticed; nobody waited for --timeout
    assert run.returncode == 1, err
    nodes = by_label(json.loads(out))
    lost = nodes["doomed"]
    assert lost["verdict"] == "lost" and lost["exit_code"] is None and lost["report"] is None
    assert "Error" in lost["problem"], lost["problem"]  # Ray's cause, e.g. NodeDiedError
    assert nodes["cpu"]["exit_code"] in (0, 1) and nodes["cpu"]["verdict"] in ("ready", "not-ready")  # answered
    assert json.loads(out)["summary"]["lost"] == 1


def test_a_node_that_does_not_answer_is_unreachable_at_the_timeout_and_the_others_reported(cluster, extra_node):
    frozen = extra_node("frozen")
    (raylet,) = frozen.named("raylet")
    os.kill(raylet, signal.SIGSTOP)  # a hung node: alive to Ray for a while, answering nothing
    try:
        started = time.monotonic()
        r = fleet(cluster, "gpu", "--timeout", "8", "--nodes", "fleet-node=frozen,fleet-node=a100", "--json")
        took = time.monotonic() - started
    finally:
        os.kill(raylet, signal.SIGCONT)
    assert r.code == 1, r.err
    assert took < 8 + 20  # the deadline, plus connecting and disconnecting
    nodes = by_label(r.json())
    assert nodes["frozen"]["verdict"] == "unreachable" and "within --timeout 8 s" in nodes["frozen"]["problem"]
    assert (nodes["a100"]["verdict"], nodes["a100"]["exit_code"]) == ("ready", 0)


def test_ctrl_c_cancels_the_tasks_and_leaves_nothing_running_on_the_nodes(cluster, extra_node):
    slow = extra_node("slow", envs={"hang": HANG})
    run = start_fleet(cluster, "validate", "hang", "--device-timeout", "300", "--nodes", "fleet-node=slow")
    try:
        assert wait_for(lambda: slow.find("smoke_runner"), 60), "the smoke fit never started on the node"
        assert slow.find("validate hang") and slow.find("ray::envcheck fleet")  # envcheck, under Ray's worker
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 130 and "interrupted" in err
    assert wait_for(lambda: not (slow.find("smoke_runner") or slow.find("validate hang")
                                 or slow.find("ray::envcheck fleet")), 30), \
        "the task or envcheck still runs on the node after Ctrl-C"
    assert slow.named("raylet")  # the node itself lives on


def test_a_node_without_envcheck_says_so(cluster, extra_node, tmp_path):
    python = python_without_envcheck(tmp_path / "bare")
    extra_node("bare", python=str(python), path=f"{python.parent}:/usr/bin:/bin")
    r = fleet(cluster, "gpu", "--nodes", "fleet-node=bare", "--json")
    assert r.code == 1, r.err
    node = by_label(r.json())["bare"]
    assert node["verdict"] == "no-envcheck" and node["envcheck_version"] is None
    assert "envcheck is not installed on this node" in node["problem"] and str(python) in node["problem"]
    assert "pip install 'envcheck[fleet]'" in node["fix"]
    assert r.json()["summary"]["no_envcheck"] == 1


# -- the task, without Ray ---------------------------------------------------------------------

# Each call marks that it started, then waits (up to 10 s) for the other call's mark: both
# succeed only when `--version` and the command run at the same time.
NO_GPU_HOST = {"schema": "envcheck.host/1", "gpus": []}
SLOW_ENVCHECK = """#!/bin/sh
here=$(dirname "$0")
if [ "$1" = --version ]; then me=version; other=command; else me=command; other=version; fi
touch "$here/$me.started"
i=0
while [ ! -e "$here/$other.started" ]; do
  i=$((i + 1)); [ $i -gt 100 ] && exit 1
  sleep 0.1
done
if [ "$me" = version ]; then echo "envcheck, version 9.9.9"; else echo '%s'; fi
""" % json.dumps({**NO_GPU_HOST, "envelope": {"verdict": "not-ready", "problem": "no GPU", "fix": None,
                                               "ready_envs": None, "node": {"host": NO_GPU_HOST, "health": None}}})
BROKEN_ENVCHECK = """#!/bin/sh
echo "ModuleNotFoundError: No module named 'envcheck'" >&2
exit 1
"""


def node_answer(tmp_path, monkeypatch, script: str) -> tuple[dict, float]:
    """``tasks.answer`` for `gpu`, in this process, with ``script`` as the `envcheck` on PATH."""
    from envcheck.fleet import tasks

    (tmp_path / "envcheck").write_text(script)
    (tmp_path / "envcheck").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("RAY_RAYLET_PID", raising=False)
    started = time.monotonic()
    reply = tasks.answer("gpu", [], {}, 30.0, False)
    return reply, time.monotonic() - started


def test_the_nodes_version_is_read_beside_its_command(tmp_path, monkeypatch):
    reply, took = node_answer(tmp_path, monkeypatch, SLOW_ENVCHECK)
    assert (reply["installed"], reply["version"], reply["exit_code"], reply["error"]) == (True, "9.9.9", 0, None)
    # each call saw the other running: side by side, not one after the other
    assert reply["host"] == NO_GPU_HOST and reply["document"]["envelope"]["node"]["host"] == NO_GPU_HOST  # read there
    assert took < 10, took


def test_an_envcheck_on_path_that_cant_import_envcheck_is_not_installed(tmp_path, monkeypatch):
    reply, _ = node_answer(tmp_path, monkeypatch, BROKEN_ENVCHECK)
    assert (reply["installed"], reply["version"], reply["document"]) == (False, None, None)
    assert "can't import envcheck" in reply["error"] and str(tmp_path / "envcheck") in reply["error"]


# -- usage ------------------------------------------------------------------------------------

def run_envcheck(*args: str, code: str = "", timeout: float = 120) -> Result:
    proc = subprocess.run([sys.executable, "-c", code + "from envcheck.cli import run; run()", *args],
                          capture_output=True, text=True, env=clean_env(), timeout=timeout)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def test_no_cluster_to_connect_to_is_exit_2_saying_how_to_start_one():
    port = free_port()
    r = run_envcheck("fleet", "gpu", "--address", f"127.0.0.1:{port}")
    assert r.code == 2 and r.out == "" and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1
    # the address as given (Ray connects to a loopback one through this machine's own IP)
    assert f"no Ray cluster at 127.0.0.1:{port}" in r.err and "ray start --head" in r.err


# 127.0.0.2, not 127.0.0.1: Ray would rewrite that to this machine's IP, where these don't listen
@pytest.fixture
def web_server():
    """A plain HTTP server on a loopback port (as the dashboard's port is one)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.2", 0), http.server.BaseHTTPRequestHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.2:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def silent_socket():
    """A listening loopback socket that takes connections (its backlog) and never says a word."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.2", 0))
        sock.listen(8)
        yield f"127.0.0.2:{sock.getsockname()[1]}"


@pytest.fixture
def mute_grpc():
    """A loopback server that opens HTTP/2 as a gRPC server does (its SETTINGS frame), then
    never answers a call: what a gRPC server other than Ray's may look like to Ray."""
    with holding_server("127.0.0.2", lambda conn: conn.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")) as port:
        yield f"127.0.0.2:{port}"


@pytest.mark.parametrize(("server", "said"), [
    ("web_server", "a web server answered ('<!DOCTYPE HTML>'), not a Ray cluster"),
    ("silent_socket", "the port takes connections but answered nothing in 5 s"),
    ("mute_grpc", "a gRPC server answers there, but Ray could not connect to it as a cluster "
                  "(Ray tries for up to 10 s)"),
])
def test_a_port_that_answers_but_is_not_ray_is_named_within_seconds(request, server, said):
    """Without the checks and bounds, Ray's connect retries each of these for minutes."""
    address = request.getfixturevalue(server)
    r = run_envcheck("fleet", "doctor", "--address", address, timeout=60)
    assert r.code == 2 and r.out == "" and len(r.err.strip().splitlines()) == 1, r.err
    assert f"no Ray cluster at {address}: {said}" in r.err and "GCS port" in r.err


def test_the_node_commands_options_are_checked_before_connecting():
    r = run_envcheck("fleet", "validate", "--address", f"127.0.0.1:{free_port()}", "--no-such-option")
    assert r.code == 2 and "No such option '--no-such-option'" in r.err and "no Ray cluster" not in r.err
    r = run_envcheck("fleet", "doctor", "--address", "127.0.0.1:1", "--markdown")
    assert r.code == 2 and "--markdown" in r.err
    r = run_envcheck("fleet", "gpu", "--timeout", "0")
    assert r.code == 2 and "--timeout 0" in r.err


RAY_ABSENT = "import sys; sys.modules['ray'] = None; "  # `import ray` raises ImportError
NO_RAY_AFTER = "import atexit, sys; atexit.register(lambda: print('ray imported' if 'ray' in sys.modules else '', file=sys.stderr)); "


def test_without_ray_fleet_says_how_to_install_it_and_the_rest_works():
    r = run_envcheck("fleet", "gpu", code=RAY_ABSENT)
    assert r.code == 2 and "envcheck fleet needs Ray" in r.err and "pip install 'envcheck[fleet]'" in r.err
    assert "Traceback" not in r.err
    for args in (("gpu", "--json"), ("doctor", "--no-smoke"), ("fleet", "--help"), ("fleet", "doctor", "--help")):
        r = run_envcheck(*args, code=NO_RAY_AFTER)
        assert r.code in (0, 1) and "ray imported" not in r.err, (args, r.err)
