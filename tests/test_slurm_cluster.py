"""`envcheck slurm` in a real Slurm cluster on this machine (tests/slurm_cluster.py): slurmctld
and three slurmd, each node with its own stand-in GPUs (two A100s), device nodes and kernel log.

`watched`: HealthCheckProgram every 5 s (HealthCheckNodeState=ANY), Prolog and Epilog. A fault
injected into a node's fake NVML drains it with envcheck's exact reason in `sinfo -R` within
HealthCheckInterval + 5 s, clearing it resumes the node, and a node drained by hand stays as
the admin left it. `jobs`: Prolog and Epilog only (no health check racing them): a job on a
faulty GPU is refused and requeued held with the reason kept, a fault outside its GPUs doesn't
stop it, an Xid or ECC errors while it ran drain the node after it. Every daemon is stopped
by pid, and the module fails if one is left (`pgrep -a slurm` finds none of its).
"""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time

import pytest

from fake_nvml import A100
from slurm_cluster import SlurmCluster, slurm_missing

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(600)]

INTERVAL = 5
WITHIN = INTERVAL + 5  # seconds: the bound from a fault to its reason in sinfo -R
ECC1 = ("envcheck: gpu1 ecc-uncorrected-volatile: reset the GPU (`sudo nvidia-smi -r -i 1`) or reboot; "
        "if errors come back, have the GPU replaced")


def started(fake_nvml, tmp_path_factory, name: str, **options):
    missing = slurm_missing()
    if missing:
        pytest.skip(missing)
    cluster = SlurmCluster(tmp_path_factory.mktemp(name), interval=INTERVAL, **options)
    for node in ("n1", "n2", "n3"):
        cluster.add_node(node, [A100, A100])
    try:
        cluster.start(fake_nvml.lib_dir())
    except BaseException:
        cluster.stop()
        raise
    return cluster


def stopped(cluster: SlurmCluster) -> None:
    left = cluster.stop()
    assert not left, f"Slurm processes left running: {left}"
    found = subprocess.run(["pgrep", "-a", "slurm"], capture_output=True, text=True).stdout
    assert str(cluster.root) not in found, f"pgrep -a slurm still finds this cluster's daemons:\n{found}"


@pytest.fixture(scope="module")
def watched(fake_nvml, tmp_path_factory):
    cluster = started(fake_nvml, tmp_path_factory, "watched")
    yield cluster
    stopped(cluster)


@pytest.fixture(scope="module")
def jobs(fake_nvml, tmp_path_factory):
    cluster = started(fake_nvml, tmp_path_factory, "jobs", hooks=("prolog", "epilog"))
    yield cluster
    stopped(cluster)


def healthcheck(cluster: SlurmCluster, node: str, *args: str, **env: str):
    """`envcheck slurm healthcheck` run by hand on ``node``, as its wrapper runs it."""
    environ = {**cluster.environ(), **cluster.node_environ(node), "SLURMD_NODENAME": node, **env}
    return cluster.run(sys.executable, "-m", "envcheck", "slurm", "healthcheck", *args, env=environ)


# -- the health check -------------------------------------------------------------------------

def test_a_fault_drains_with_envcheck_reason_and_clearing_it_resumes(watched):
    watched.set_node("n2", [A100, A100 + ",ecc=3/3"])
    watched.wait_for(lambda: watched.reasons().get("n2") == ECC1, WITHIN, f"n2 drained with {ECC1!r}")
    assert watched.states()["n2"] == "drained" and "n1" not in watched.reasons()
    watched.set_node("n2", [A100, A100])
    watched.wait_for(lambda: watched.states()["n2"] == "idle" and "n2" not in watched.reasons(), WITHIN, "n2 resumed")


def test_a_node_drained_by_hand_stays_drained_through_a_fault_and_its_clearing(watched):
    watched.run("scontrol", "update", "NodeName=n3", "State=DRAIN", "Reason=admin: fan replaced, burn-in")
    watched.set_node("n3", [A100 + ",remap=0/0/1/0", A100])
    ran = watched.nodes["n3"].folder / "healthcheck.log"
    seen = ran.read_text().count("envcheck slurm healthcheck")
    watched.wait_for(lambda: ran.read_text().count("envcheck slurm healthcheck") >= seen + 2, 3 * INTERVAL,
                     "two health checks of n3")
    assert watched.reasons()["n3"] == "admin: fan replaced, burn-in"
    assert "envcheck leaves it as it is" in ran.read_text()
    watched.set_node("n3", [A100, A100])
    seen = ran.read_text().count("envcheck slurm healthcheck")
    watched.wait_for(lambda: ran.read_text().count("envcheck slurm healthcheck") >= seen + 2, 3 * INTERVAL,
                     "two more health checks of n3")
    assert watched.reasons()["n3"] == "admin: fan replaced, burn-in" and watched.states()["n3"] == "drained"
    watched.run("scontrol", "update", "NodeName=n3", "State=RESUME")


def test_gres_that_slurm_and_nvml_disagree_on_drains_and_write_prints_what_nvml_sees(watched):
    gone = str(watched.nodes["n1"].dev / "nvidia1")
    expected = (f"envcheck: gres-count: slurm says gpu:a100:2, NVML sees 1 (NVIDIA A100-SXM4-80GB): no GPU for "
                f"{gone} (gres.conf); see `envcheck slurm gres`")
    environ = {**watched.environ(), **watched.node_environ("n1"), "SLURMD_NODENAME": "n1"}
    agreed = watched.run(sys.executable, "-m", "envcheck", "slurm", "gres", "--json", env=environ)
    assert agreed.returncode == 0, agreed.stderr
    assert json.loads(agreed.stdout)["consistent"] is True
    watched.set_node("n1", [A100])
    watched.wait_for(lambda: watched.reasons().get("n1") == expected, WITHIN, f"n1 drained with {expected!r}")
    one = {**environ, "FAKE_NVML_GPUS": A100}
    differ = watched.run(sys.executable, "-m", "envcheck", "slurm", "gres", env=one)
    assert differ.returncode == 1 and "gres-count: slurm says gpu:a100:2, NVML sees 1" in differ.stdout
    written = watched.run(sys.executable, "-m", "envcheck", "slurm", "gres", "--write", env=one)
    assert written.returncode == 0
    assert written.stdout.splitlines()[1:] == [f"NodeName=n1 Name=gpu Type=a100 File={watched.nodes['n1'].dev}/nvidia0",
                                               "# slurm.conf: NodeName=n1 ... Gres=gpu:a100:1"]
    watched.set_node("n1", [A100, A100])
    watched.wait_for(lambda: "n1" not in watched.reasons(), WITHIN, "n1 resumed")


def test_dry_run_prints_the_scontrol_line_and_a_hung_read_is_a_finding_within_the_budget(watched):
    started_at = time.monotonic()
    hung = healthcheck(watched, "n1", "--budget", "3", "--dry-run", "--json",
                       FAKE_NVML_HANG_nvmlDeviceGetHandleByIndex_v2="60")
    assert time.monotonic() - started_at < 15  # the read is given up at the budget, not waited for
    assert hung.returncode == 1, hung.stderr
    doc = json.loads(hung.stdout)
    assert doc["schema"] == "envcheck.slurm.healthcheck/1" and doc["dry_run"] and not doc["done"]
    assert [p["id"] for p in doc["problems"]] == ["level1-timeout"]
    assert doc["scontrol"][:4] == ["scontrol", "update", "NodeName=n1", "State=DRAIN"]
    assert doc["scontrol"][4].startswith("Reason=envcheck: level1-timeout: the level-1 read")
    text = healthcheck(watched, "n1", "--dry-run", FAKE_NVML_GPUS=f"{A100};{A100},ecc=1/1")
    assert text.returncode == 1
    assert f"would run: scontrol update NodeName=n1 State=DRAIN 'Reason={ECC1}'" in text.stdout
    assert "n1" not in watched.reasons()


def test_bad_input_against_the_cluster_is_exit_2_and_drains_nothing(watched, tmp_path):
    faulty = {"FAKE_NVML_GPUS": f"{A100};{A100},ecc=1/1"}  # it would drain, if it got that far
    unknown = healthcheck(watched, "n1", SLURMD_NODENAME="n9", **faulty)
    assert unknown.returncode == 2 and "Slurm knows no node 'n9'" in unknown.stderr
    malformed = tmp_path / "gres.conf"
    malformed.write_text("NodeName=n1 Name=gpu File=/dev/nvidia[0-\n")
    bad = healthcheck(watched, "n1", "--gres-conf", str(malformed), **faulty)
    assert bad.returncode == 2 and f"gres.conf {malformed}:1" in bad.stderr and bad.stderr.count("\n") == 1
    elsewhere = tmp_path / "slurm.conf"
    elsewhere.write_text(watched.conf.read_text().replace(f"SlurmctldPort={watched.port}", "SlurmctldPort=9"))
    started_at = time.monotonic()
    away = healthcheck(watched, "n1", "--budget", "6", SLURM_CONF=str(elsewhere), **faulty)
    assert away.returncode == 2 and "can't read node n1 from Slurm" in away.stderr
    assert time.monotonic() - started_at < 20
    assert "n1" not in watched.reasons()


# -- the job hooks --------------------------------------------------------------------------------

def sbatch(cluster: SlurmCluster, node: str, gpus: int, script: str = "true") -> str:
    done = cluster.run("sbatch", "--parsable", "-w", node, f"--gres=gpu:{gpus}", "--output=/dev/null", "--wrap", script)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def job(cluster: SlurmCluster, job_id: str) -> dict[str, str]:
    line = cluster.run("scontrol", "show", "job", job_id, "--oneliner").stdout
    return dict(word.split("=", 1) for word in line.split() if "=" in word)


def test_a_job_on_a_faulty_gpu_is_refused_requeued_held_and_the_reason_kept(jobs):
    jobs.set_node("n1", [A100, A100 + ",ecc=3/3"])
    fine = sbatch(jobs, "n1", 1)  # gets GPU 0: the fault on GPU 1 is not its business
    jobs.wait_for(lambda: job(jobs, fine)["JobState"] == "COMPLETED", 30, f"job {fine} completed")
    refused = sbatch(jobs, "n1", 2)
    held = {"JobState": "PENDING", "Reason": "launch_failed_requeued_held"}
    jobs.wait_for(lambda: held.items() <= job(jobs, refused).items(), 30, f"job {refused} requeued held")
    assert int(job(jobs, refused)["Restarts"]) >= 1
    assert jobs.reasons()["n1"] == ECC1  # envcheck's own words, not "Prolog error"
    jobs.run("scancel", refused)
    jobs.set_node("n1", [A100, A100])
    jobs.run("scontrol", "update", "NodeName=n1", "State=RESUME")


def test_the_epilog_drains_with_the_xid_meaning_when_one_came_during_the_job(jobs):
    node = jobs.nodes["n2"]
    line = "NVRM: Xid (PCI:0000:11:00): 79, pid=4242, GPU has fallen off the bus."
    ran = sbatch(jobs, "n2", 2, f"echo '[ 99.0] {line}' >> {node.kernel_log}")
    jobs.wait_for(lambda: jobs.reasons().get("n2"), 30, "n2 drained by the epilog")
    reason = jobs.reasons()["n2"]
    assert reason.startswith(f"envcheck: gpu1 xid-79: during job {ran}: the GPU has fallen off the bus "
                             "(stopped answering on PCIe); reboot it; check the GPU's power cables"), reason
    assert not list((node.home / "slurm" / "n2").glob("job-*.json"))  # the snapshot is gone
    node.kernel_log.write_text("[    0.000000] Linux version 6.8.0\n")
    jobs.run("scontrol", "update", "NodeName=n2", "State=RESUME")


def test_the_epilog_drains_on_ecc_errors_counted_while_the_job_ran(jobs):
    node = jobs.nodes["n3"]
    env = node.folder / "env.sh"
    counted = node.folder / "env-ecc.sh"  # the same node, two ECC errors on GPU 1: put in place by the job
    counted.write_text(env.read_text().replace(shlex.quote(f"{A100};{A100}"), shlex.quote(f"{A100};{A100},ecc=2/2")))
    ran = sbatch(jobs, "n3", 2, f"cp {counted} {env}")
    jobs.wait_for(lambda: jobs.reasons().get("n3"), 30, "n3 drained by the epilog")
    assert jobs.reasons()["n3"] == (f"envcheck: gpu1 ecc-uncorrected-during-job: 2 uncorrected ECC error(s) during "
                                    f"job {ran}: reset the GPU (`sudo nvidia-smi -r -i 1`) or reboot; replace it if "
                                    "errors come back")
    jobs.set_node("n3", [A100, A100])
    jobs.run("scontrol", "update", "NodeName=n3", "State=RESUME")


PRESET = """title = "tensorflow-cpu stand-in"
kind = "cpu"
framework = "tensorflow"
packages = ["tensorflow-cpu==2.21.0"]
"""


def test_an_env_the_health_check_gates_drains_when_not_ready_and_an_unknown_env_is_bad_input(watched, tmp_path):
    from wheelhouse import build_wheel, offline

    wheels = tmp_path / "wheels"
    build_wheel(wheels, "tensorflow-cpu", "2.21.0")
    preset = tmp_path / "standin.toml"
    preset.write_text(PRESET)
    env = {**watched.environ(), **watched.node_environ("n1"), "SLURMD_NODENAME": "n1"}
    made = watched.run(sys.executable, "-m", "envcheck", "env", "create", "drifted", "--preset-file", str(preset),
                       *offline(wheels), env=env, timeout=300)
    assert made.returncode == 0, made.stderr
    installed = next((watched.nodes["n1"].home / "envs" / "drifted").glob("lib/python*/site-packages/tensorflow_cpu"))
    with open(installed / "__init__.py", "a") as changed:  # a file edited after install: the env drifted
        changed.write("patched = True\n")
    try:
        gated = healthcheck(watched, "n1", "--env", "drifted", "--dry-run", "--json")
        doc = json.loads(gated.stdout)
        assert gated.returncode == 1, gated.stderr
        assert [(p["id"], p["effect"]) for p in doc["problems"]] == [("env-drifted", "not-ready")]
        assert doc["action"]["reason"].startswith("envcheck: env-drifted: env drifted: ")
        every = healthcheck(watched, "n1", "--check-envs", "--dry-run", "--json")
        assert [p["id"] for p in json.loads(every.stdout)["problems"]] == ["env-drifted"]
        unknown = healthcheck(watched, "n1", "--env", "nosuch")
        assert unknown.returncode == 2 and "no env named 'nosuch'" in unknown.stderr
    finally:
        watched.run(sys.executable, "-m", "envcheck", "env", "remove", "drifted", "--yes", env=env)
    assert "n1" not in watched.reasons()


def test_the_prolog_and_epilog_run_by_hand_keep_and_remove_the_jobs_snapshot(jobs):
    environ = {**jobs.environ(), **jobs.node_environ("n3"), "SLURMD_NODENAME": "n3", "SLURM_JOB_ID": "999",
               "SLURM_JOB_GPUS": "1", "CUDA_VISIBLE_DEVICES": "1"}
    hook = [sys.executable, "-m", "envcheck", "slurm"]
    before = jobs.run(*hook, "prolog", "--json", env=environ)
    assert before.returncode == 0, before.stderr
    doc = json.loads(before.stdout)
    kept = jobs.nodes["n3"].home / "slurm" / "n3" / "job-999.json"
    assert (doc["schema"], doc["job"], doc["gpus"], doc["gpus_from"]) == ("envcheck.slurm.prolog/1", "999", [1],
                                                                          "SLURM_JOB_GPUS")
    assert doc["snapshot"] == str(kept) and json.loads(kept.read_text())["gpus"][0]["index"] == 1
    after = jobs.run(*hook, "epilog", "--json", env=environ)
    assert after.returncode == 0, after.stderr
    doc = json.loads(after.stdout)
    assert (doc["schema"], doc["problems"], doc["action"]["kind"]) == ("envcheck.slurm.epilog/1", [], "none")
    assert not kept.exists()
    no_gpu = jobs.run(*hook, "prolog", env={k: v for k, v in environ.items()
                                            if k not in ("SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")})
    assert no_gpu.returncode == 0 and "the job has no GPU: nothing to check" in no_gpu.stdout
    bad = jobs.run(*hook, "prolog", env={**environ, "SLURM_JOB_GPUS": "0,one"})
    assert bad.returncode == 2 and "'one' is not a GPU index or UUID" in bad.stderr
