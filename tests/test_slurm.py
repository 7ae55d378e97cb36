"""`envcheck slurm` without a cluster: how gres.conf, host lists, scontrol's answers and drain
reasons are read and made, the drain policy, and the bad input refused before Slurm is asked.
What needs slurmctld and slurmd is in test_slurm_cluster.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from envcheck.errors import UsageError
from envcheck.slurm import gres, gresconf, names
from envcheck.slurm.client import NodeState, parse_node, parse_state, update_argv
from envcheck.slurm.reasons import PREFIX, REASON_MAX, Problem, decide, reason
from fake_nvml import A100, FakeNvml

pytestmark = pytest.mark.timeout(120)

SCONTROL_LINE = ("NodeName=n3 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=3.06 "
                 "AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:a100:2(S:0-1) NodeAddr=127.0.0.1 "
                 "NodeHostName=localhost Port=16823 Version=22.05.8 OS=Linux 6.18.44 #1 SMP PREEMPT_DYNAMIC @0  "
                 "RealMemory=1 State=IDLE+DRAIN ThreadsPerCore=1 Partitions=test,gpu  "
                 "Reason=admin: fan = broken [root@2026-11-28T23:35:55]")


# -- names and host lists ------------------------------------------------------------------------

def test_host_lists_expand_as_slurm_writes_them():
    assert names.expand("n[1-3,7],gpu05") == ["n1", "n2", "n3", "n7", "gpu05"]
    assert names.expand("r[1-2]n[08-10]") == ["r1n08", "r1n09", "r1n10", "r2n08", "r2n09", "r2n10"]
    assert names.fold(["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia3"]) == "/dev/nvidia[0-1,3]"
    assert names.fold(["/dev/nvidia2"]) == "/dev/nvidia2"
    for bad in ("n[1-", "n[3-1]", "n[a-b]", "n1,,n2", "n[[1]]"):
        with pytest.raises(UsageError):
            names.expand(bad)


@pytest.mark.parametrize("bad", ["n1\nState=RESUME", "n 1", "n1;reboot", "-n1", "n[1-2]", "x" * 65, ""])
def test_a_node_name_that_could_carry_anything_else_is_refused(bad):
    with pytest.raises(UsageError, match="is not a Slurm node name"):
        names.node_name(bad, "SLURMD_NODENAME")
    with pytest.raises(UsageError):
        update_argv(bad, "DRAIN", f"{PREFIX} x")


def test_this_node_is_slurmd_nodename_first_else_the_short_host_name(monkeypatch):
    assert names.this_node({"SLURMD_NODENAME": "gpu-017"}) == ("gpu-017", "SLURMD_NODENAME")
    monkeypatch.setattr("socket.gethostname", lambda: "gpu-018.cluster.example")
    assert names.this_node({}) == ("gpu-018", "the host name")


# -- what scontrol says ----------------------------------------------------------------------------

def test_a_node_line_is_read_with_its_reason_whole():
    node = parse_node(SCONTROL_LINE, "n3")
    assert (node.state, node.flags, node.drained) == ("idle", frozenset({"drain"}), True)
    assert (node.reason, node.reason_user, node.reason_time) == ("admin: fan = broken", "root", "2026-11-28T23:35:55")
    assert node.gres == "gpu:a100:2(S:0-1)" and node.partitions == ("test", "gpu")
    assert parse_state("DOWN*+DRAIN") == ("down", frozenset({"drain", "not-responding"}))
    assert parse_state("drained*") == ("drained", frozenset({"not-responding"}))
    with pytest.raises(UsageError, match="knows no node"):
        parse_node(SCONTROL_LINE, "n4")


def test_gres_strings_are_read_as_slurm_writes_them():
    assert [g.spelt() for g in gresconf.parse_gres("gpu:a100:8(S:0-1),gpu:2,nic:1")] == ["gpu:a100:8", "gpu:2", "nic:1"]
    assert gresconf.parse_gres("(null)") == [] and gresconf.parse_gres("") == []


# -- gres.conf -----------------------------------------------------------------------------------

GOOD = """# a comment
AutoDetect=off
NodeName=n[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-3] \\
    Cores=0-15
NodeName=n3 name=gpu type=h100 file=/dev/nvidia0 Count=1  # keys in any case
Include extra.conf
"""


def test_gres_conf_is_read_per_node_with_ranges_continuations_and_includes(tmp_path):
    (tmp_path / "extra.conf").write_text("NodeName=n3 Name=gpu Type=h100 File=/dev/nvidia1\n")
    path = tmp_path / "gres.conf"
    path.write_text(GOOD)
    conf = gresconf.load(str(path), {})
    assert conf.files_of("n2") == [f"/dev/nvidia{i}" for i in range(4)]
    assert conf.files_of("n3") == ["/dev/nvidia0", "/dev/nvidia1"]
    assert [line.where for line in conf.for_node("n3")] == [f"{path}:5", f"{tmp_path / 'extra.conf'}:1"]
    assert conf.autodetect("n1") == "off"
    assert gresconf.load(None, {"SLURM_CONF": str(tmp_path / "slurm.conf")}).path == str(path)
    assert gresconf.load(None, {"SLURM_CONF": str(tmp_path / "none" / "slurm.conf")}).path is None


@pytest.mark.parametrize("line, said", [
    ("NodeName=n1 Name=gpu File=/dev/nvidia[0-", "unbalanced brackets"),
    ("NodeName=n1 Name=gpu Colour=red", "is not a Key=Value Slurm knows"),
    ("NodeName=n1 Name=gpu File", "is not a Key=Value Slurm knows"),
    ("NodeName=n1 Type=a100 File=/dev/nvidia0", "a line without Name="),
    ("NodeName=n1 Name=gpu Count=eight", "is not a number"),
    ("NodeName=n1 Name=gpu Type=", "has no value"),
    ("NodeName=n1 Name=gpu Type=a Type=b", "given twice"),
    ("NodeName=n[1-3,] Name=gpu", "bad range"),
])
def test_a_malformed_gres_conf_is_bad_input_naming_its_line(tmp_path, line, said):
    path = tmp_path / "gres.conf"
    path.write_text(f"# ok\n{line}\n")
    with pytest.raises(UsageError, match=said) as caught:
        gresconf.load(str(path), {})
    assert f"{path}:2" in str(caught.value)


# -- GRES against NVML ---------------------------------------------------------------------------

def seen(n: int, model: str = "NVIDIA A100-SXM4-80GB") -> list[gres.SeenGpu]:
    return [gres.SeenGpu(i, model, f"GPU-{i:04d}", i) for i in range(n)]


def conf_with(tmp_path: Path, text: str) -> gresconf.GresConf:
    path = tmp_path / "gres.conf"
    path.write_text(text)
    return gresconf.load(str(path), {})


def devices(tmp_path: Path, n: int) -> Path:
    dev = tmp_path / "dev"
    dev.mkdir()
    for i in range(n):
        (dev / f"nvidia{i}").symlink_to("/dev/null")
    return dev


def test_models_match_a_type_by_its_words_in_order():
    assert gres.type_matches("a100", "NVIDIA A100-SXM4-80GB")
    assert gres.type_matches("nvidia_a100-sxm4-80gb", "NVIDIA A100-SXM4-80GB")
    assert gres.type_matches("a100_80gb", "NVIDIA A100-SXM4-80GB")
    assert not gres.type_matches("a10", "NVIDIA A100-SXM4-80GB")
    assert not gres.type_matches("h100", "NVIDIA A100-SXM4-80GB")


def test_gres_agrees_with_nvml_and_its_lines_are_written_back(tmp_path):
    dev = devices(tmp_path, 4)
    conf = conf_with(tmp_path, f"NodeName=n1 Name=gpu Type=a100 File={dev}/nvidia[0-3]\n")
    found = gres.compare("n1", "gpu:a100:4", conf, seen(4))
    assert found.consistent, found.problems
    assert gres.lines(found, str(dev))[1] == f"NodeName=n1 Name=gpu Type=a100 File={dev}/nvidia[0-3]"
    assert gres.lines(found, str(dev))[-1] == "# slurm.conf: NodeName=n1 ... Gres=gpu:a100:4"


def test_each_difference_says_what_slurm_says_and_what_nvml_sees(tmp_path):
    dev = devices(tmp_path, 8)
    conf = conf_with(tmp_path, f"NodeName=n1 Name=gpu Type=a100 File={dev}/nvidia[0-7]\n")
    fewer = gres.compare("n1", "gpu:a100:8", conf, seen(7))
    assert [p.id for p in fewer.problems] == ["gres-count"]
    assert fewer.problems[0].measured == (f"slurm says gpu:a100:8, NVML sees 7 (NVIDIA A100-SXM4-80GB): "
                                          f"no GPU for {dev}/nvidia7 (gres.conf)")
    more = gres.compare("n1", "gpu:a100:2", conf_with(tmp_path, f"NodeName=n1 Name=gpu File={dev}/nvidia[0-1]\n"), seen(3))
    assert "not in Slurm: GPU-0002 (minor 2)" in more.problems[0].measured
    h100 = conf_with(tmp_path, f"NodeName=n1 Name=gpu Type=h100 File={dev}/nvidia[0-7]\n")
    other = gres.compare("n1", "gpu:h100:8", h100, seen(8))
    assert [p.id for p in other.problems] == ["gres-type"] + ["gres-file-type"] * 8
    (dev / "nvidia3").unlink()
    (dev / "nvidia3").write_text("")
    plain = gres.compare("n1", "gpu:a100:8", conf, seen(8))
    assert [p.measured for p in plain.problems] == [f"gres.conf {conf.path}:1: File={dev}/nvidia3 is not a character device"]
    lines = gres.lines(other, "/dev")
    assert lines[1] == "NodeName=n1 Name=gpu Type=nvidia_a100-sxm4-80gb File=/dev/nvidia[0-7]"


# -- drain reasons and the policy ------------------------------------------------------------------

ECC = Problem("ecc-uncorrected-volatile", "reset the GPU (`sudo nvidia-smi -r -i 3`) or reboot", 3)
UVM = Problem("nvidia-uvm-missing", "`sudo nvidia-modprobe -u -c=0`")


def node(state: str = "idle", flags=(), reason_text: str | None = None) -> NodeState:
    return NodeState("n1", state, frozenset(flags), reason_text, "root" if reason_text else None)


def test_a_reason_starts_with_envcheck_names_the_gpu_and_the_action():
    assert reason([ECC]) == "envcheck: gpu3 ecc-uncorrected-volatile: reset the GPU (`sudo nvidia-smi -r -i 3`) or reboot"
    assert reason([UVM, ECC]) == "envcheck: nvidia-uvm-missing: `sudo nvidia-modprobe -u -c=0`; +1 more"
    assert reason([Problem("clocks-hw-slowdown", "check cooling", 0, "degraded")]) is None
    hostile = reason([Problem("x\nState=RESUME", "a\x1b[31m\nline\r" + "y" * 1000, 1)])
    assert hostile.startswith("envcheck: gpu1 x State=RESUME: a [31m line yyy") and hostile.endswith("...")
    assert len(hostile) == REASON_MAX and hostile.isprintable()


def test_the_policy_drains_updates_resumes_its_own_and_never_touches_another_reason():
    mine = reason([ECC])
    assert decide(node(), [ECC]).kind == "drain"
    assert decide(node(flags={"drain"}, reason_text=mine), [ECC]).kind == "none"
    assert decide(node(flags={"drain"}, reason_text=mine), [UVM]).kind == "update"
    assert decide(node(flags={"drain"}, reason_text=mine), []).kind == "resume"
    assert decide(node("down", reason_text="envcheck: gpu0 xid-79: reboot"), []).kind == "resume"
    for other in (node(flags={"drain"}, reason_text="admin: fan"), node("down", reason_text="Not responding")):
        assert decide(other, [ECC]).kind == "leave"
        assert decide(other, []).kind == "none"
    assert decide(node(), []).kind == "none"


# -- bad input, before Slurm is asked --------------------------------------------------------------

def slurm_cli(fake_nvml: FakeNvml, *args: str, **env: str):
    base = fake_nvml.env([A100], **env)
    return fake_nvml.cli(base, "slurm", *args)


@pytest.mark.parametrize("args, env, said", [
    (("healthcheck",), {"PATH": "/nonexistent"}, "not inside Slurm: no `scontrol` on PATH"),
    (("healthcheck", "--budget", "0"), {}, "--budget 0: '0' is not a number of seconds above 0"),
    (("healthcheck", "--budget", "soon"), {}, "--budget soon"),
    (("healthcheck", "--budget", "70"), {"PATH": "/nonexistent"}, "slurmd kills a health check after 60 s"),
    (("healthcheck",), {"SLURMD_NODENAME": "n1\nState=RESUME"}, "is not a Slurm node name"),
    (("prolog",), {"PATH": "/nonexistent"}, "SLURM_JOB_ID"),
    (("epilog",), {"SLURM_JOB_ID": "12; reboot"}, "is not a Slurm job id"),
    (("gres", "--gres-conf", "/nonexistent/gres.conf"), {"SLURMD_NODENAME": "n1", "PATH": "/nonexistent"},
     "not inside Slurm"),
])
def test_bad_input_is_one_line_and_exit_2(fake_nvml, args, env, said):
    result = slurm_cli(fake_nvml, *args, **env)
    assert result.code == 2, (result.out, result.err)
    assert said in result.err and result.err.count("\n") == 1 and "Traceback" not in result.err
    assert result.out == ""
