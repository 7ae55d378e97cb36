"""`envcheck fleet preflight` on a real Ray cluster on this machine (tests/ray_cluster.py): a head
and four workers w1..w4, each with its own env home holding a real CPU PyTorch env ``torch``
(tests/torch_homes.py), so every node runs the real probes (torch.mm, copies, gloo all-reduces)
and the real cross-node collective (torch.distributed over gloo).

Faults are real and never told to envcheck: a node slowed by a CPU quota on its processes (the
cgroup v1 ``cpu`` controller, tests/cpu_quota.py), a node stopped with SIGSTOP while its rank of
the collective runs. The nodes share one machine (one boot id), so they are probed in turn.
Extra nodes for bad input (no env, an env that differs, another CPU model) are started by the
test that needs them and stopped after. Every Ray process is stopped by pid at the end.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Result, clean_env
from cpu_quota import CpuQuota, quota_missing, stopped_mid_collective
from ray_cluster import RayCluster, cmdline
from wheelhouse import offline

pytestmark = [pytest.mark.slow, pytest.mark.fleet, pytest.mark.timeout(1200)]

WORKERS = ("w1", "w2", "w3", "w4")
STANDIN = """title = "torch stand-in"
kind = "cpu"
framework = "torch"
packages = ["torch==2.13.0"]
"""


@pytest.fixture(scope="module")
def cluster(torch_homes, tmp_path_factory):
    if not Path("/proc/self/stat").exists():
        pytest.skip("the cluster helper finds Ray's processes in /proc (Linux)")
    ray = RayCluster(tmp_path_factory.mktemp("preflight"))
    try:
        ray.start_head(clean_env())
        for name, home in zip(WORKERS, torch_homes):
            ray.add_worker(name, clean_env(ENVCHECK_HOME=str(home)), {"node": name})
        yield ray
    finally:
        left = ray.stop()
    assert not left, f"Ray processes left running: {left}"


def preflight(cluster: RayCluster, *args: str, timeout: float = 600) -> Result:
    done = subprocess.run([sys.executable, "-m", "envcheck", "fleet", "preflight", "--env", "torch",
                           "--address", cluster.address, *args], capture_output=True, text=True,
                          env=clean_env(), cwd=cluster.work, timeout=timeout)
    return Result(done.returncode, done.stdout, done.stderr)


def by_label(document: dict) -> dict[str, dict]:
    assert document["schema"] == "envcheck.preflight/1"
    return {n["labels"]["node"]: n for n in document["nodes"]}


def labels_of(home: Path) -> dict[str, str]:
    done = subprocess.run([sys.executable, "-m", "envcheck", "labels", "--json"], capture_output=True, text=True,
                          env=clean_env(ENVCHECK_HOME=str(home)), timeout=120)
    return json.loads(done.stdout)["labels"]


def test_every_node_is_probed_in_turn_and_judged_against_the_fleet(cluster, torch_homes):
    done = preflight(cluster, "--json")
    doc = json.loads(done.out)
    nodes = by_label(doc)
    assert sorted(nodes) == list(WORKERS) and doc["left_out"][0]["head"], done.err
    assert len({n["boot_id"] for n in nodes.values()}) == 1  # one machine: probed in turn
    assert sorted(n["turn"] for n in nodes.values()) == [0, 1, 2, 3]
    for node in nodes.values():
        figures = {f["figure"]: f for f in node["figures"]}
        assert set(figures) == {"matmul_fp32", "copy_h2d", "allreduce"}, node
        assert all(f["basis"] == "fleet" and f["nodes"] == 4 and f["median"] > 0 for f in figures.values())
        assert figures["matmul_fp32"]["unit"] == "TFLOPS" and figures["allreduce"]["device"] == "node"
        assert figures["copy_h2d"]["absolute"] == "n/a"  # level 3's table beside: a CPU has no expectation
        assert node["build"]["framework"] == "torch" and node["recorded"] is True
    collective = doc["collective"]
    assert collective["ok"] and len(collective["nodes"]) == 4 and collective["busbw"] > 0
    assert collective["algbw"] == pytest.approx(collective["busbw"] * 4 / 6, rel=0.01)  # busbw = algbw 2(n-1)/n
    assert doc["summary"]["within_budget"] and doc["budget"] == 60
    named = {label for label, n in nodes.items() if n["verdict"] != "healthy"}
    assert done.code == (1 if named else 0)  # the machine is shared: what noise names, it names for real
    for label, home in zip(WORKERS, torch_homes):
        assert labels_of(home)["envcheck.io/preflight"] == nodes[label]["verdict"]


def test_a_node_under_a_cpu_quota_is_named_a_straggler_and_kept_so(cluster, torch_homes):
    missing = quota_missing()
    if missing:
        pytest.skip(missing)
    with CpuQuota(0.5, "w3") as quota:
        quota.add(cluster.nodes["w3"].pids())
        hosts = preflight(cluster, "--exclude", "hostlist")
        selector = preflight(cluster, "--exclude", "ray")
        done = preflight(cluster, "--json")  # the last: each node keeps this one's verdict
        assert quota.throttled() > 0  # the kernel held its processes back
    doc = json.loads(done.out)
    nodes = by_label(doc)
    w3 = nodes["w3"]
    assert done.code == 1 and w3["verdict"] == "straggler", done.err
    assert min(w3["ratios"].values()) < 0.75 and "% of the median of 4 nodes'" in w3["cause"], w3
    # (which of its figures the quota shows most varies from run to run: the slowest is well below)
    assert w3["probes"] == 2  # probed a second time: a fault holds
    assert w3["causes"] and all("CPU quota" in said[0] for said in w3["causes"].values())
    assert doc["summary"]["named"] == [w3["node_id"]]
    assert labels_of(torch_homes[2])["envcheck.io/preflight"] == "straggler"
    metrics = subprocess.run([sys.executable, "-m", "envcheck", "metrics"], capture_output=True, text=True,
                             env=clean_env(ENVCHECK_HOME=str(torch_homes[2])), timeout=120).stdout
    assert 'envcheck_preflight_ok{verdict="straggler"} 0.0' in metrics
    assert hosts.code == 1 and hosts.out == f"{w3['hostname'].split('.')[0]}\n"  # one host, said once
    assert selector.code == 1 and json.loads(selector.out) == {"ray.io/node-id": f"!in({w3['node_id']})"}
    ran_on = subprocess.run([sys.executable, "-c", RUN_WITH_SELECTOR, cluster.address, selector.out],
                            capture_output=True, text=True, env=clean_env(), cwd=cluster.work, timeout=300)
    assert ran_on.returncode == 0, ran_on.stderr[-2000:]
    assert w3["node_id"] not in json.loads(ran_on.stdout.splitlines()[-1])  # Ray keeps the work off it


RUN_WITH_SELECTOR = """
import json, sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
where = ray.remote(num_cpus=0)(lambda: ray.get_runtime_context().get_node_id())
print(json.dumps(sorted(set(ray.get([where.options(label_selector=json.loads(sys.argv[2])).remote()
                                     for _ in range(12)])))))
"""


def test_a_node_stopped_mid_collective_is_named_lost_by_the_halving_within_the_budget(cluster, torch_homes):
    node = cluster.nodes["w2"]
    started = subprocess.Popen([sys.executable, "-m", "envcheck", "fleet", "preflight", "--env", "torch", "--json",
                                "--address", cluster.address], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=clean_env(), cwd=cluster.work)
    out, err, stopped = stopped_mid_collective(started, node.pids, cmdline)
    doc = json.loads(out)
    nodes = by_label(doc)
    assert stopped and started.returncode == 1, err[-2000:]
    assert nodes["w2"]["verdict"] == "lost" and "named by the halving" in nodes["w2"]["cause"]
    assert nodes["w2"]["recorded"] is None  # it can't record what it can't hear
    halving = doc["halving"]
    assert [n["nodes"] for n in halving["named"]] == [[nodes["w2"]["node_id"]]] and halving["named"][0]["silent"]
    assert len(halving["rounds"]) <= 3 == halving["max_rounds"]  # ceil(log2 4) + 1 collectives
    assert not doc["collective"]["ok"] and doc["seconds"] <= doc["budget"] == 60
    assert all(nodes[w]["verdict"] not in ("lost", "bad-link") for w in ("w1", "w3", "w4"))
    assert not cluster.remove("w2"), "processes of the stopped node left running"
    cluster.add_worker("w2", clean_env(ENVCHECK_HOME=str(torch_homes[1])), {"node": "w2"})


@pytest.fixture
def extra_node(cluster, tmp_path):
    started = []

    def start(name: str, home: Path, **env: str):
        started.append(name)
        return cluster.add_worker(name, clean_env(ENVCHECK_HOME=str(home), **env), {"node": name})

    yield start
    for name in started:
        assert not cluster.remove(name), f"processes of node {name} left running"


def test_an_env_missing_or_different_on_a_node_is_refused_naming_it_before_any_probe(
        cluster, torch_homes, extra_node, tmp_path, wheelhouse):
    empty, other = tmp_path / "empty", tmp_path / "other"
    preset = tmp_path / "standin.toml"
    preset.write_text(STANDIN)
    made = subprocess.run([sys.executable, "-m", "envcheck", "env", "create", "torch", "--preset-file", str(preset),
                           *offline(wheelhouse)], capture_output=True, text=True,
                          env=clean_env(ENVCHECK_HOME=str(other)), timeout=300)
    assert made.returncode == 0, made.stderr
    extra_node("bare", empty)
    extra_node("odd", other)
    before = (torch_homes[0] / "preflight.json").stat().st_mtime_ns
    missing = preflight(cluster, "--nodes", "node=w1,node=bare")
    differs = preflight(cluster, "--nodes", "node=w1,node=odd")
    assert missing.code == 2 and missing.out == "" and "the env can't be probed on node" in missing.err, missing.err
    assert "(node=bare): env torch: no env named 'torch'" in missing.err
    assert differs.code == 2 and "the env differs between nodes: sha256:" in differs.err, differs.err
    assert "(env torch)" in differs.err and len(differs.err.strip().splitlines()) == 1
    assert (torch_homes[0] / "preflight.json").stat().st_mtime_ns == before  # nothing probed, nothing recorded


def test_too_few_nodes_and_a_budget_too_small_for_the_turns_are_bad_input(cluster):
    one = preflight(cluster, "--nodes", "node=w1")
    assert one.code == 2 and "1 node(s) to ask: a preflight compares nodes with each other" in one.err
    small = preflight(cluster, "--budget", "40")  # enough for two machines, not four nodes on one
    assert small.code == 2 and "the most on one machine 4, probed in turn" in small.err, small.err
    assert "give --budget 51s or more" in small.err


def test_a_model_on_one_node_only_is_judged_against_the_table_alone(cluster, torch_homes, extra_node, tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Other CPU 9000\n")
    extra_node("other-cpu", torch_homes[6], ENVCHECK_TEST_CPUINFO=str(cpuinfo))
    done = preflight(cluster, "--nodes", "node=w1,node=w4,node=other-cpu", "--json")
    doc = json.loads(done.out)
    nodes = by_label(doc)
    alone = nodes["other-cpu"]
    assert alone["verdict"] == "unjudged" and "alone with its model" in alone["cause"], done.err
    assert {f["basis"] for f in alone["figures"]} == {"none"}
    assert {f["basis"] for f in nodes["w1"]["figures"]} == {"fleet"}  # the two others against each other
    assert doc["models"]["CPU Other CPU 9000"] == {"nodes": 1, "judged against": ["nothing"]}
    assert any("CPU Other CPU 9000: on one node only" in note for note in doc["notes"])
    if not {nodes["w1"]["verdict"], nodes["w4"]["verdict"]} - {"healthy"}:
        assert done.code == 0 and doc["envelope"]["verdict"] == "degraded"  # measured, one node unjudged
