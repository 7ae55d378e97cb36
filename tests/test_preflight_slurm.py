"""`envcheck fleet preflight --engine slurm` on the real Slurm test cluster (tests/slurm_cluster.py):
slurmctld and three slurmd, n1..n3, no GPUs, each node's tasks with their own env home holding a
real CPU PyTorch env (tests/torch_homes.py). Every round is one srun step; each node's rank of a
collective reaches its task as its own variables; outside an allocation the preflight takes
one of its own (whole nodes) and cancels it at the end. A node slowed by a CPU quota on its slurmd
(what slurmd starts, the steps' tasks, starts in its cgroup) is named a straggler, and ``--exclude
slurm`` gives its name; a node whose slurmd and tasks are stopped (SIGSTOP) mid-collective is
named by the halving. Every daemon is stopped by pid at the end.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cpu_quota import CpuQuota, quota_missing, stopped_mid_collective
from ray_cluster import cmdline, descendants
from slurm_cluster import SlurmCluster, slurm_missing

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.timeout(1200)]

NODES = ("n1", "n2", "n3")


@pytest.fixture(scope="module")
def cluster(torch_homes, tmp_path_factory):
    missing = slurm_missing()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("preflight-slurm")
    (root / "no-nvml").mkdir()
    slurm = SlurmCluster(root / "cluster", hooks=())
    for name in NODES:
        slurm.add_node(name, [])
    try:
        slurm.start(root / "no-nvml")
        for name, home in zip(NODES, torch_homes):
            slurm.set_node(name, ENVCHECK_HOME=str(home))
        yield slurm
    finally:
        left = slurm.stop()
        assert not left, f"Slurm processes left running: {left}"


def slurmd_tree(cluster: SlurmCluster, name: str) -> set[int]:
    return descendants(cluster.nodes[name].child.pid)


def preflight(cluster: SlurmCluster, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "envcheck", "fleet", "preflight", "--env", "torch", "--engine",
                             "slurm", "--partition", "test", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=cluster.environ(), cwd=str(cluster.root))


def test_a_slurm_node_under_a_cpu_quota_is_named_and_its_name_is_the_exclude_list(cluster):
    missing = quota_missing()
    if missing:
        pytest.skip(missing)
    with CpuQuota(0.5, "n2") as quota:
        quota.add(slurmd_tree(cluster, "n2"))
        out, err = preflight(cluster, "--json").communicate(timeout=300)
        exclude = preflight(cluster, "--exclude", "slurm")
        listed, _ = exclude.communicate(timeout=300)
        assert quota.throttled() > 0
    doc = json.loads(out)
    nodes = {n["node_id"]: n for n in doc["nodes"]}
    assert doc["engine"] == "slurm" and doc["address"] == "slurm partition test", err[-2000:]
    assert nodes["n2"]["verdict"] == "straggler" and min(nodes["n2"]["ratios"].values()) < 0.75, err[-2000:]
    assert doc["summary"]["named"] == ["n2"] and doc["collective"]["ok"]
    assert sorted(n["turn"] for n in nodes.values()) == [0, 1, 2]  # one machine: in turn
    assert (exclude.returncode, listed) == (1, "n2\n")  # srun --exclude=n2
    assert nodes["n2"]["recorded"] is True
    labels = subprocess.run([sys.executable, "-m", "envcheck", "labels"], capture_output=True, text=True,
                            env=cluster.environ(ENVCHECK_HOME=cluster.node_environ("n2")["ENVCHECK_HOME"]),
                            timeout=120).stdout
    assert "envcheck.io/preflight=straggler" in labels.splitlines()


def test_a_slurm_node_stopped_mid_collective_is_named_by_the_halving_within_the_budget(cluster):
    started = preflight(cluster, "--json")
    out, err, stopped = stopped_mid_collective(started, lambda: slurmd_tree(cluster, "n3"), cmdline)
    doc = json.loads(out)
    nodes = {n["node_id"]: n for n in doc["nodes"]}
    assert stopped and started.returncode == 1, err[-2000:]
    assert nodes["n3"]["verdict"] in ("lost", "bad-link") and "named by the halving" in nodes["n3"]["cause"], nodes
    assert [n["nodes"] for n in doc["halving"]["named"]] == [["n3"]]
    assert len(doc["halving"]["rounds"]) <= doc["halving"]["max_rounds"] == 3  # ceil(log2 3) + 1
    assert doc["seconds"] <= doc["budget"]
    assert doc["address"] == "slurm partition test"  # in an allocation of its own, cancelled at the end
    cluster.wait_for(lambda: not cluster.run("squeue", "--noheader").stdout.strip(), 60, "the steps ended")
