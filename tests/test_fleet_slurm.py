"""`envcheck fleet … --engine slurm` against a real Slurm cluster on this machine
(tests/slurm_cluster.py): slurmctld and three slurmd, no hooks. Each node's srun task gets its
node's stand-in GPUs through the TaskProlog: n1 two healthy A100s, n2 one with uncorrected ECC
errors, n3 an envcheck installed as version 0.0.9 first on its tasks' PATH. The answer is the
fleet's own document and table, as on Ray (the aggregation is the same code; test_envelope.py
tests it over made-up answers). Every daemon is stopped by pid at the end.
"""
from __future__ import annotations

import json
import sys
import time

import pytest

from fake_nvml import A100
from ray_cluster import envcheck_of_version
from slurm_cluster import SlurmCluster, slurm_missing

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(600)]

OLD = "0.0.9"


@pytest.fixture(scope="module")
def cluster(fake_nvml, tmp_path_factory):
    missing = slurm_missing()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("fleet-slurm")
    old_bin = envcheck_of_version(root / "old-envcheck", root / "wheels", OLD)
    slurm = SlurmCluster(root / "cluster", hooks=())
    slurm.add_node("n1", [A100, A100])
    slurm.add_node("n2", [A100, A100 + ",ecc=2/2"])
    slurm.add_node("n3", [A100, A100])
    try:
        slurm.start(fake_nvml.lib_dir())
        slurm.set_node("n3", PATH=f"{old_bin}:{slurm.node_environ('n3')['PATH']}")
        yield slurm
    finally:
        left = slurm.stop()
        assert not left, f"Slurm processes left running: {left}"


def fleet(cluster: SlurmCluster, *args: str, inside: int | None = None, timeout: float = 120):
    argv = [sys.executable, "-m", "envcheck", "fleet", *args]
    if inside is not None:  # in an allocation of that many nodes, as a user's salloc
        argv = ["salloc", f"--nodes={inside}", "--quiet", *argv]
    return cluster.run(*argv, timeout=timeout)


def nodes_of(document: dict) -> dict[str, dict]:
    assert document["schema"] == "envcheck.fleet/1" and document["engine"] == "slurm"
    return {n["node_id"]: n for n in document["nodes"]}


def test_every_node_answers_in_the_fleets_own_document_and_table(cluster):
    done = fleet(cluster, "gpu", "--engine", "slurm", "--partition", "test", "--level", "1", "--json")
    assert done.returncode == 1, done.stderr  # n2's GPU 1 is not ready
    doc = json.loads(done.stdout)
    nodes = nodes_of(doc)
    assert [nodes[n]["verdict"] for n in ("n1", "n2", "n3")] == ["ready", "not-ready", "ready"]
    assert (nodes["n1"]["gpus"], nodes["n1"]["accelerator_type"], nodes["n1"]["ray_gpus"]) == (2, "a100", None)
    assert nodes["n2"]["problem"].startswith("GPU 1: 2 uncorrected ECC errors")
    assert [(d["node_id"], d["gpu"], d["finding"]) for d in doc["summary"]["drain"]] == [
        ("n2", 1, "ecc-uncorrected-volatile")]
    assert nodes["n3"]["envcheck_version"] == OLD and nodes["n1"]["envcheck_version"] == doc["envcheck_version"]
    assert doc["summary"]["other_versions"] == [{"node_id": "n3", "version": OLD}]
    assert doc["address"] == "slurm partition test" and doc["left_out"] == []
    table = fleet(cluster, "gpu", "--engine", "slurm", "--nodelist", "n[1-3]", "--level", "1")
    assert "SLURM GPUS" in table.stdout and "envcheck versions differ: n3 runs 0.0.9" in table.stdout
    assert "fleet: NOT READY: 2 of 3 node(s) ready, 3 needed" in table.stdout


def test_inside_an_allocation_its_nodes_answer_in_a_step_of_it(cluster):
    done = fleet(cluster, "gpu", "--engine", "slurm", "--json", inside=3)
    assert done.returncode == 0, done.stderr  # without --level 1, gpu asks only for usable GPUs
    doc = json.loads(done.stdout)
    assert doc["address"].startswith("slurm job ") and sorted(nodes_of(doc)) == ["n1", "n2", "n3"]
    one = fleet(cluster, "doctor", "--engine", "slurm", "--nodelist", "n1", "--json", inside=3)
    assert sorted(nodes_of(json.loads(one.stdout))) == ["n1"], one.stderr
    assert nodes_of(json.loads(one.stdout))["n1"]["report"]["schema"] == "envcheck.doctor/1"
    away = fleet(cluster, "gpu", "--engine", "slurm", "--nodelist", "n9", inside=1)
    assert away.returncode == 2 and "n9 not in allocation" in away.stderr


def test_drained_and_down_nodes_are_left_out_with_their_reasons(cluster):
    cluster.run("scontrol", "update", "NodeName=n2", "State=DRAIN", "Reason=admin: new fan")
    cluster.run("scontrol", "update", "NodeName=n3", "State=DOWN", "Reason=admin: psu swap")
    try:
        done = fleet(cluster, "gpu", "--engine", "slurm", "--partition", "test", "--json")
        doc = json.loads(done.stdout)
        assert done.returncode == 0, done.stderr
        assert sorted(nodes_of(doc)) == ["n1"]
        assert {n["node_id"]: n["why"] for n in doc["left_out"]} == {
            "n2": "drained in Slurm: admin: new fan (srun runs nothing there)",
            "n3": "down in Slurm: admin: psu swap (srun runs nothing there)"}
    finally:
        for node in ("n2", "n3"):
            cluster.run("scontrol", "update", f"NodeName={node}", "State=RESUME")
    cluster.wait_for(lambda: set(cluster.states().values()) == {"idle"}, 30, "every node idle again")


def test_a_node_without_envcheck_and_a_node_that_hangs_are_told_apart(cluster):
    path = cluster.node_environ("n3")["PATH"]
    cluster.set_node("n3", PATH="/usr/bin:/bin")
    cluster.set_node("n2", FAKE_NVML_HANG_nvmlDeviceGetHandleByIndex_v2="600")
    started_at = time.monotonic()
    try:
        done = fleet(cluster, "gpu", "--engine", "slurm", "--partition", "test", "--timeout", "8", "--json")
    finally:
        cluster.set_node("n3", PATH=path)
        cluster.set_node("n2", FAKE_NVML_HANG_nvmlDeviceGetHandleByIndex_v2="")
    assert time.monotonic() - started_at < 40
    nodes = nodes_of(json.loads(done.stdout))
    assert (nodes["n1"]["verdict"], nodes["n2"]["verdict"], nodes["n3"]["verdict"]) == ("ready", "lost", "no-envcheck")
    assert nodes["n2"]["problem"] == "its envcheck started, then gave no answer within --timeout 8 s"
    assert "no `envcheck` on the PATH srun gives its tasks (/usr/bin:/bin)" in nodes["n3"]["problem"]
    assert nodes["n3"]["fix"].startswith("install envcheck on that node")
    cluster.wait_for(lambda: not cluster.run("squeue", "--noheader").stdout.strip(), 30, "the step ended")


def test_a_node_whose_slurmd_is_gone_is_unreachable_with_srun_words(cluster):
    assert not cluster.stop_node("n3")
    try:
        done = fleet(cluster, "gpu", "--engine", "slurm", "--nodelist", "n1,n3", "--timeout", "60", "--json")
        nodes = nodes_of(json.loads(done.stdout))
        assert nodes["n1"]["verdict"] == "ready" and nodes["n3"]["verdict"] == "unreachable", done.stderr
        assert nodes["n3"]["problem"] and "scontrol show node n3" in nodes["n3"]["fix"]
    finally:
        cluster.start_node("n3")
        cluster.run("scontrol", "update", "NodeName=n3", "State=RESUME")
    cluster.wait_for(lambda: cluster.states().get("n3") == "idle", 60, "n3 back")


@pytest.mark.parametrize("args, said", [
    (("gpu", "--engine", "slurm"), "not inside a Slurm allocation"),
    (("gpu", "--engine", "slurm", "--nodelist", "n9"), "Slurm knows no node n9"),
    (("gpu", "--engine", "slurm", "--partition", "nosuch"), "--partition nosuch: Slurm lists no node in it"),
    (("gpu", "--engine", "slurm", "--partition", "test", "--address", "10.0.0.1:6379"), "--address is for --engine ray"),
    (("gpu", "--partition", "test"), "--partition is for --engine slurm"),
    (("gpu", "--engine", "mesos"), "unknown engine 'mesos'"),
])
def test_bad_input_is_exit_2_before_anything_runs(cluster, args, said):
    done = fleet(cluster, *args)
    assert done.returncode == 2 and said in done.stderr and done.stdout == "", done.stderr
