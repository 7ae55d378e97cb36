"""`envcheck fleet preflight` without a cluster: how figures are judged against the fleet itself
(median and MAD per model, the table for a model alone), how the halving names the node or pair
at fault within ceil(log2 N) + 1 collectives, the exclude lists (the Ray one checked by Ray's own
label-selector parser), each node's kept verdict in its real `envcheck labels` and `metrics`, the
node commands' facts (GPU clocks read through the fake NVML), and bad input refused with exit 2
before any cluster is asked. The real fleets (Ray, Slurm) are in test_preflight.py and
test_preflight_slurm.py.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env
from envcheck.fleet.cluster import Node
from envcheck.fleet.srun import NODE_VARS, PER_NODE, node_vars
from envcheck.preflight import budget
from envcheck.preflight.halving import Halving, Trial
from envcheck.preflight.result import NodeVerdict, PreflightResult
from envcheck.preflight.scoring import Sample, differences, node_verdict, score
from fake_nvml import A100, T4

CPU = "CPU Xeon"


def samples(values: dict[str, float], figure: str = "matmul_fp32", model: str = CPU) -> list[Sample]:
    return [Sample(node, "cpu:0", figure, model, value, "TFLOPS") for node, value in values.items()]


# -- judged against the fleet ------------------------------------------------------------------

def test_a_node_slower_than_its_models_median_beyond_tolerance_and_noise_is_a_straggler():
    scores = score(samples({"a": 1.0, "b": 0.98, "c": 1.02, "d": 0.74}), 0.15)
    by_node = {s.sample.node: s for s in scores}
    assert [by_node[n].verdict for n in "abcd"] == ["ok", "ok", "ok", "slow"]
    d = by_node["d"]
    assert (d.basis, d.nodes, round(d.ratio, 3), round(d.median, 3)) == ("fleet", 4, 0.747, 0.99)
    assert d.z > 3.5 and node_verdict([d]) == "straggler"


def test_within_the_tolerance_or_within_the_spread_is_not_a_straggler():
    close = {s.sample.node: s.verdict for s in score(samples({"a": 1.0, "b": 1.0, "c": 1.0, "d": 0.9}), 0.15)}
    assert close["d"] == "ok"  # 10% below: within the tolerance
    noisy = {s.sample.node: s for s in score(samples({"a": 1.0, "b": 0.7, "c": 1.3, "d": 0.8, "e": 1.1}), 0.15)}
    assert noisy["b"].ratio < 0.85 and noisy["b"].verdict == "ok"  # the fleet's own spread is that wide


def test_each_model_is_judged_against_its_own_median():
    fleet = samples({"a": 100.0, "b": 98.0, "c": 101.0}, model="NVIDIA H100") + \
        samples({"d": 50.0, "e": 49.0, "f": 35.0}, model="NVIDIA A100")
    verdicts = {s.sample.node: s.verdict for s in score(fleet, 0.15)}
    assert verdicts == {"a": "ok", "b": "ok", "c": "ok", "d": "ok", "e": "ok", "f": "slow"}


def test_a_model_on_one_node_only_is_judged_against_the_table_alone():
    alone = [Sample("a", "gpu:0", "matmul_fp16", "NVIDIA T4", 20.0, "TFLOPS", "pass", 39.0),
             Sample("a", "gpu:1", "matmul_fp16", "NVIDIA T4", 9.0, "TFLOPS", "degraded", 39.0),
             Sample("b", "cpu:0", "matmul_fp32", "CPU other", 0.1, "TFLOPS", "n/a", None)]
    found = {(s.sample.node, s.sample.device): s for s in score(alone, 0.15)}
    assert [(s.verdict, s.basis, s.median) for s in found.values()] == [
        ("ok", "table", None), ("slow", "table", None), ("unjudged", "none", None)]
    assert node_verdict([found[("b", "cpu:0")]]) == "unjudged"


def test_configuration_that_differs_is_listed_with_its_nodes():
    found = differences({"a": {"driver_version": "550.54.15", "nccl_version": "2.21.5", "env_digest": "sha256:1"},
                         "b": {"driver_version": "535.104.05", "nccl_version": "2.21.5", "env_digest": "sha256:1"},
                         "c": {"driver_version": "550.54.15", "nccl_version": None, "env_digest": "sha256:1"}})
    assert found == {"driver_version": {"550.54.15": ["a", "c"], "535.104.05": ["b"]}}


def test_a_slow_figure_brings_its_likely_causes_a_gpus_findings_a_cpus_and_a_nodes_all_reduce():
    from envcheck.preflight.reading import causes

    gpu_node = {"devices": {"gpu:0": {"kind": "gpu", "findings": [{"measured": "PCIe gen3 x8 of gen4 x16",
                                                                   "cause": "the link trained below its maximum"}]},
                            "gpu:1": {"kind": "gpu", "findings": []}}}
    found = causes(gpu_node, {"gpu:0", "node"})
    assert found["gpu:0"] == ["PCIe gen3 x8 of gen4 x16: the link trained below its maximum"]
    assert "gpu:1" not in found and "nvidia-smi topo -m" in found["node"][0]
    cpu_node = {"devices": {"cpu:0": {"kind": "cpu", "findings": []}}}
    assert "CPU quota" in causes(cpu_node, {"node"})["node"][0]  # only its all-reduce was slow
    assert "CPU quota" in causes(cpu_node, {"cpu:0"})["cpu:0"][0]
    assert causes(cpu_node, set()) == {}


# -- the probes' timing ------------------------------------------------------------------------

def test_each_probe_is_the_median_of_samples_of_at_least_0_2_s_not_the_best(monkeypatch):
    """The preflight's clock (``smoke_figures.sampled``) over a stand-in operation whose calls
    take 10 ms, then 1 ms, then 4 ms a call from one sample to the next (a device that throttles
    and recovers), on a clock that counts only the work done."""
    from test_level3 import figures_module

    kit = figures_module()
    now = [0.0]
    per_call = iter([0.01, 0.01] + [0.01, 0.001, 0.004, 0.004, 0.004])
    seen = []

    def op(reps):
        step = next(per_call)
        seen.append((reps, step))
        now[0] += reps * step

    monkeypatch.setattr(kit.time, "perf_counter", lambda: now[0])
    median, reps, times = kit.sampled(op, 0.2, 5)
    assert seen[:2] == [(1, 0.01), (1, 0.01)] and reps == 20  # a warm-up, a sizing call: 20 x 10 ms = 0.2 s
    assert [r for r, _ in seen[2:]] == [20] * 5 and times == pytest.approx([0.01, 0.001, 0.004, 0.004, 0.004])
    assert median == pytest.approx(0.004)  # the median, not the best sample (0.001)
    slowest = kit.sampled(lambda reps: now.__setitem__(0, now[0] + reps * 0.001), 0.2, 3, agree=lambda s: 2 * s)
    assert slowest[1] == 100 and slowest[0] == pytest.approx(0.002)  # each sample its slowest rank's


# -- the halving -------------------------------------------------------------------------------

def halve(n: int, fails) -> Halving:
    """The halving over n nodes, each collective failing when ``fails(group)``."""
    nodes = [f"n{i}" for i in range(n)]
    found = Halving(nodes, budget.halving_rounds(n) + 1)

    def run(group):
        bad = fails(set(group))
        return Trial(tuple(group), not bad, "timed out" if bad else None,
                    silent=tuple(x for x in group if x in fails.silent) if bad else ())

    found.first(run(nodes))
    while groups := found.next_round():
        found.record([run(g) for g in groups])
    return found


def a_node(bad: str):
    fails = lambda group: bad in group  # noqa: E731
    fails.silent = {bad}
    return fails


@pytest.mark.parametrize("n", range(2, 17))
def test_one_node_stopped_is_named_within_log2_n_plus_one_collectives(n):
    for bad in (0, n - 1, n // 2):
        found = halve(n, a_node(f"n{bad}"))
        assert [(x.nodes, x.kind, x.silent) for x in found.named] == [((f"n{bad}",), "node", True)]
        assert len(found.rounds) <= math.ceil(math.log2(n)) + 1


def test_a_bad_link_between_two_nodes_names_the_pair():
    fails = lambda group: {"n0", "n1"} <= group  # noqa: E731
    fails.silent = set()
    found = halve(4, fails)
    assert [(x.nodes, x.kind) for x in found.named] == [(("n0", "n1"), "pair")]
    assert "link between them" in found.named[0].why


def test_two_bad_nodes_are_both_named_and_a_passing_collective_names_none():
    fails = lambda group: bool({"n1", "n6"} & group)  # noqa: E731
    fails.silent = set()
    assert sorted(x.nodes for x in halve(8, fails).named) == [("n1",), ("n6",)]
    fine = lambda group: False  # noqa: E731
    fine.silent = set()
    assert halve(8, fine).named == [] and len(halve(8, fine).rounds) == 1


def test_suspects_left_when_the_rounds_run_out_are_named_as_they_stand():
    found = Halving(["a", "b", "c", "d"], 1)
    found.first(Trial(("a", "b", "c", "d"), False, "timed out"))
    assert found.next_round() == []
    assert [(x.nodes, x.kind) for x in found.named] == [(("a", "b", "c", "d"), "somewhere")]


def test_a_straggler_the_halving_names_stays_a_straggler_a_node_only_the_collective_named_is_a_bad_link():
    from envcheck.preflight.run import judge

    nodes = {i: NodeVerdict(Node(i, "10.0.0.1"), hostname=f"{i}.cluster") for i in ("a", "b", "c", "d")}
    probe = lambda value: {"devices": {"cpu:0": {"kind": "cpu", "model": CPU,  # noqa: E731
                                                 "figures": {"matmul_fp32": {"value": value, "unit": "TFLOPS"}}}}}
    probes = {"a": probe(0.10), "b": probe(0.101), "c": probe(0.099), "d": probe(0.05)}

    def named(bad):
        found = Halving(list(nodes), 3)
        found.first(Trial(tuple(nodes), False, "timed out"))
        while groups := found.next_round():
            found.record([Trial(tuple(g), bad not in g, "timed out" if bad in g else None) for g in groups])
        return found

    judge(nodes, probes, 0.15, named("d"))  # the slow node slows the collective too
    assert nodes["d"].verdict == "straggler" and "50% of the median" in nodes["d"].cause
    assert "the collective across nodes failed with it" in nodes["d"].cause
    assert [nodes[n].verdict for n in "abc"] == ["healthy"] * 3
    judge(nodes, probes, 0.15, named("b"))  # a node whose probes were fine, named by the collective alone
    assert nodes["b"].verdict == "bad-link" and "named by the halving" in nodes["b"].cause


# -- the budget --------------------------------------------------------------------------------

def test_the_smallest_budget_grows_with_the_turns_and_holds_four_nodes_on_one_machine_in_60s():
    assert budget.smallest(1) < budget.smallest(4) <= 60
    assert [budget.halving_rounds(n) for n in (2, 3, 4, 5, 8, 9)] == [1, 2, 2, 3, 3, 4]


# -- the exclude lists -------------------------------------------------------------------------

def result(engine: str, verdicts: dict[str, tuple[str, str]]) -> PreflightResult:
    nodes = [NodeVerdict(Node(i, "10.0.0.1", engine=engine), hostname=host, verdict=v)
             for i, (host, v) in verdicts.items()]
    for n in nodes:
        n.scores = [{"device": "cpu:0"}]
    return PreflightResult(engine, "here", "torch", 60, 0.15, nodes, None, None, {}, {}, 1.0)


def test_the_slurm_host_list_and_the_host_lines_name_each_host_once():
    found = result("slurm", {"n1": ("a1.cluster", "straggler"), "n2": ("a1.cluster", "healthy"),
                             "n3": ("a2.cluster", "lost"), "n4": ("a2.cluster", "bad-link")})
    assert found.exclude("slurm") == "n[1,3-4]"
    assert found.exclude("hostlist") == "a1\na2"
    assert found.exit_code == 1 and found.envelope()["verdict"] == "not-ready"
    with pytest.raises(Exception, match="--exclude ray lists Ray node ids"):
        found.exclude("ray")
    healthy = result("slurm", {"n1": ("a1", "healthy"), "n2": ("a2", "unjudged")})
    assert (healthy.exclude("slurm"), healthy.exit_code, healthy.envelope()["verdict"]) == ("", 0, "degraded")


def test_the_ray_exclude_list_is_a_label_selector_ray_itself_accepts():
    ray_labels = pytest.importorskip("ray._private.label_utils")
    ids = ["a" * 56, "b" * 56, "c" * 56]
    found = result("ray", {ids[0]: ("vm", "straggler"), ids[1]: ("vm", "healthy"), ids[2]: ("vm", "lost")})
    selector = json.loads(found.exclude("ray"))
    assert selector == {"ray.io/node-id": f"!in({ids[0]}, {ids[2]})"}
    assert ray_labels.validate_label_selector(selector) is None
    assert found.exclude("hostlist") == "vm"  # one host, however many nodes on it


# -- each node keeps its verdict ---------------------------------------------------------------

def test_a_recorded_verdict_shows_in_the_nodes_labels_and_metrics(cli, home):
    assert "envcheck.io/preflight" not in cli("labels").out
    done = cli("preflight", "record", "--json", env={"ENVCHECK_PREFLIGHT_VERDICT": "straggler",
                                                     "ENVCHECK_PREFLIGHT_RATIOS": "matmul_fp32:0.71,allreduce:0.5",
                                                     "ENVCHECK_PREFLIGHT_FLEET": "ray:10.0.0.1:6379"})
    assert done.code == 0 and done.json()["verdict"] == "straggler", done.err
    assert done.json()["envelope"]["verdict"] == "not-ready"  # a named node answers not-ready
    assert "envcheck.io/preflight=straggler" in cli("labels").out.splitlines()
    metrics = cli("metrics").out
    assert 'envcheck_preflight_ok{verdict="straggler"} 0.0' in metrics
    assert 'envcheck_preflight_ratio{figure="matmul_fp32"} 0.71' in metrics
    assert cli("labels", "--json").json()["labels"]["envcheck.io/preflight"] == "straggler"
    assert cli("preflight", "record", "--verdict", "healthy").code == 0
    assert 'envcheck_preflight_ok{verdict="healthy"} 1.0' in cli("metrics").out
    (home / "preflight.json").write_text("{not json")
    assert "envcheck.io/preflight" not in cli("labels").out and cli("metrics").code == 0


@pytest.mark.parametrize("args, says", [
    (("preflight", "record", "--verdict", "fine"), "unknown preflight verdict 'fine'"),
    (("preflight", "record", "--verdict", "healthy", "--ratios", "matmul:fast"), "bad ratio 'matmul:fast'"),
])
def test_a_bad_verdict_to_record_is_exit_2_and_nothing_written(cli, home, args, says):
    done = cli(*args)
    assert done.code == 2 and says in done.err and not (home / "preflight.json").exists()


# -- the node's commands -----------------------------------------------------------------------

def test_facts_name_each_gpu_its_model_and_clocks_and_the_machine(fake_nvml, tmp_path):
    env = fake_nvml.env(gpus=(A100, T4 + ",appclocks=585/5001,maxclocks=1590/5001"),
                        ENVCHECK_HOME=str(tmp_path / "home"))
    done = subprocess.run([sys.executable, "-m", "envcheck", "preflight", "facts", "--env", "torch", "--json"],
                          capture_output=True, text=True, env=clean_env(**env), timeout=120)
    doc = json.loads(done.stdout)
    assert done.returncode == 1 and doc["problem"].startswith("env torch: no env named 'torch'"), done.stderr
    assert doc["envelope"]["verdict"] == "not-ready" and doc["identity"] is None
    assert doc["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    gpus = doc["devices"]
    assert [(d["model"], d["readings"]["clocks_sm_app_mhz"], d["readings"]["clocks_sm_max_mhz"])
            for d in gpus.values()] == [("NVIDIA A100-SXM4-80GB", 1410, 1410), ("NVIDIA T4", 585, 1590)]
    assert list(gpus) == ["gpu:0", "gpu:1"] and len(set(doc["ports"])) == 8


def test_collective_without_its_rank_variables_is_exit_2(cli):
    done = cli("preflight", "collective", "--env", "torch", env={"RANK": "0", "WORLD_SIZE": "2"})
    assert done.code == 2 and "MASTER_ADDR, MASTER_PORT not set" in done.err, done.err
    done = cli("preflight", "collective", env={"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"})
    assert done.code == 2 and "RANK 2 is not below WORLD_SIZE 2" in done.err


def test_srun_hands_each_node_its_own_variables_and_nothing_else():
    value = node_vars({"n1": {"RANK": "0", "MASTER_ADDR": "10.0.0.1"}, "n2": {"RANK": "1", "MASTER_ADDR": "10.0.0.1"}})
    script = PER_NODE + 'echo "$RANK $MASTER_ADDR"'
    for node, said in (("n1", "0 10.0.0.1"), ("n2", "1 10.0.0.1"), ("n3", "")):
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin", NODE_VARS: value, "SLURMD_NODENAME": node})
        assert done.stdout.strip() == said
    with pytest.raises(ValueError, match="can't be passed"):
        node_vars({"n1": {"RANK": "0; rm -rf /"}})


# -- bad input, before any cluster is asked ----------------------------------------------------

@pytest.mark.parametrize("args, says", [
    (("--budget", "10"), "--budget 10s is too small for one round (two nodes on two machines at least"),
    (("--budget", "soon"), "--budget soon: 'soon' is not a number of seconds"),
    (("--tolerance", "0%"), "bad tolerance '0%'"),
    (("--tolerance", "150"), "bad tolerance '150'"),
    (("--exclude", "pbs"), "unknown exclude list 'pbs'"),
    (("--exclude", "slurm", "--json"), "--exclude prints the exclude list alone"),
    (("--min-busbw", "-1"), "bad bus bandwidth '-1'"),
    (("--engine", "slurm"), "not inside a Slurm allocation"),
])
def test_bad_input_is_exit_2_in_one_line_before_any_cluster_is_asked(cli, args, says):
    done = cli("fleet", "preflight", *args, env={"RAY_ADDRESS": "127.0.0.1:1"})
    assert done.code == 2 and says in done.err and done.out == "", done.err
    assert "Traceback" not in done.err and len(done.err.strip().splitlines()) <= 2
