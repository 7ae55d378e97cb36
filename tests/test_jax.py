"""JAX as a framework of the registry, in process: its facts file (the folder's own, with
sources), how a build is read (the CUDA plugin decides), what compat says of it, its presets
and the variables `run` gives its envs. No jax is imported here: the real env is
test_jax_env.py's."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from envcheck import frameworks
from envcheck.child_env import child_environ
from envcheck.paths import Home
from envcheck.envs.presets import resolve_preset
from envcheck.frameworks import build_for_requirements, build_from_packages, framework_build
from envcheck.frameworks.base import Framework, SPLIT, folder_facts
from envcheck.host.compat import HostProfile, judge

JAX = frameworks.get("jax")
FACTS = Path(frameworks.FOLDER) / "jax" / "facts.json"
CPU_ENV = {"jax": "0.10.2", "jaxlib": "0.10.2", "numpy": "2.3.5", "scipy": "1.16.3"}
GPU_ENV = {**CPU_ENV, "jax-cuda12-plugin": "0.10.2", "jax-cuda12-pjrt": "0.10.2",
           "nvidia-cuda-runtime-cu12": "12.9.79", "nvidia-cudnn-cu12": "9.16.0.29"}


def verdict(build, driver=None, ccs=(), os="linux", python=None, **kw):
    return judge(build, HostProfile(driver, tuple(ccs), os, python), **kw)


# --- the facts: the folder's own file, every row from read METADATA -------------------------

def test_the_facts_live_in_the_jax_folder_with_their_sources():
    facts = json.loads(FACTS.read_text())
    assert JAX.facts_file == str(FACTS) and JAX.table is None  # nothing in envcheck/data
    assert JAX.facts() == facts
    assert any("METADATA" in s for s in facts["sources"])
    assert any("docs.jax.dev" in s and "525" in s for s in facts["sources"])
    for key, row in facts["releases"].items():
        assert row["plugin"] == f"jax-cuda12-plugin[with-cuda]=={key}"
        assert Version(row["python"]["min"]) <= Version(row["python"]["max"])
        assert row["cuda"].startswith("12.") and row["cudnn"].startswith("9.")


def test_releases_are_the_exact_versions_newest_first():
    releases = JAX.releases()
    assert releases[0] == "0.10.2" and releases[-1] == "0.4.38"
    assert releases == sorted(releases, key=Version, reverse=True)


def no_facts(dist, version, shown, local, packages):
    """The build reader of a framework without build facts."""
    return None


def test_a_framework_reads_its_release_table_from_its_own_facts_file(tmp_path: Path):
    """The mechanism: a folder's facts.json, not compat.json, for a framework that says so."""
    (tmp_path / "facts.json").write_text(json.dumps({"releases": {"1.2": {}, "1.10": {}}}))
    made = Framework("made-up", "Made up", ("made-up",), None, no_facts, "none", SPLIT, 9,
                     facts_file=folder_facts(str(tmp_path / "__init__.py")))
    assert made.releases() == ["1.10", "1.2"]
    assert Framework("bare", "Bare", ("bare",), None, no_facts, "none", SPLIT, 9).releases() == []
    assert frameworks.get("torch").facts()["releases"]  # compat.json's tables still answer


# --- reading a build: the plugin decides ------------------------------------------------------

def test_a_named_release_is_its_cuda12_build():
    build = framework_build("jax", "0.10.2")
    assert (build.cuda, build.cudnn, build.gpu_capable) == ("12.3", "9.8", True)
    assert (build.python_min, build.python_max) == ("3.11", "3.14")
    assert build.archs is None  # JAX publishes no compiled-architecture list
    assert "jax[cuda12]==0.10.2" in build.notes[0]
    plugin = framework_build("jax-cuda12-plugin", "0.10.2")
    assert plugin.distribution == "jax-cuda12-plugin" and plugin.cuda == "12.3"
    old = framework_build("jax", "0.5.3")
    assert (old.cudnn, old.python_min, old.python_max) == ("9.1", "3.10", "3.13")


def test_an_env_without_the_plugin_is_cpu_only():
    build = build_from_packages(CPU_ENV)
    assert build.framework == "jax" and not build.gpu_capable and build.cuda is None
    assert "no JAX CUDA plugin" in build.notes[-1]
    unknown = build_from_packages({"jax": "0.3.25", "jaxlib": "0.3.25"})  # not in the table
    assert unknown is not None and not unknown.gpu_capable


def test_an_env_with_the_plugin_is_cuda12_whatever_its_release():
    build = build_from_packages(GPU_ENV)
    assert build.gpu_capable and build.cuda == "12.3" and build.python_max == "3.14"
    assert "CUDA 12 from jax-cuda12" in build.notes[0]
    newer = build_from_packages({"jax": "0.10.9", "jaxlib": "0.10.9", "jax-cuda12-plugin": "0.10.9"})
    assert newer.gpu_capable and newer.cuda == "12.3" and newer.python_min is None
    assert "0.10.9 is not in the tables (newer than the newest known" in newer.notes[0]


def test_a_requirement_reads_as_the_newest_release_it_admits():
    build = build_for_requirements([Requirement("jax[cuda12]~=0.10.0")])
    assert build.version == "0.10.2" and build.cuda == "12.3"
    assert build_for_requirements([Requirement("jax==0.9.2")]).version == "0.9.2"
    assert build_for_requirements([Requirement("jax>=5")]) is None


def test_a_release_before_its_cuda_plugin_is_no_build():
    """The CUDA 12 plugin's family starts at its first release on PyPI (0.4.22, pjrt 0.4.23)."""
    assert framework_build("jax", "0.3.25") is None
    assert framework_build("jax", "0.4.21") is None
    assert framework_build("jax-cuda12-pjrt", "0.4.22") is None
    assert framework_build("jax-cuda12-pjrt", "0.4.23").gpu_capable


# --- compat's verdicts ------------------------------------------------------------------------

def test_cuda12_needs_the_cuda12_driver_floor():
    build = framework_build("jax", "0.10.2")
    old = verdict(build, "520.61.05", ["8.0"])
    assert old.verdict == "fail" and "needs driver >= 525.60.13" in old.reasons[0]
    assert "upgrade the NVIDIA driver to >= 525.60.13" in old.fixes
    ok = verdict(build, "525.60.13", ["8.0"], python="3.11")
    assert ok.verdict == "ok" and ok.uses_gpu


def test_python_outside_the_release_range_fails():
    result = verdict(framework_build("jax", "0.10.2"), "550.54.15", ["8.6"], python="3.10")
    assert result.verdict == "fail" and "outside jax 0.10.2's supported range 3.11-3.14" in result.reasons[0]


def test_no_gpu_on_native_windows():
    result = verdict(framework_build("jax", "0.10.2"), "550.54.15", ["8.6"], os="windows")
    assert result.verdict == "warn" and not result.uses_gpu
    assert "no NVIDIA GPU support on native Windows" in result.reasons[0]
    assert any("WSL2" in fix for fix in result.fixes)
    assert verdict(framework_build("jax", "0.10.2"), "550.54.15", ["8.6"], os="windows",
                   require_gpu=True).verdict == "fail"


def test_a_cpu_env_needs_no_gpu_unless_asked():
    build = build_from_packages(CPU_ENV)
    assert verdict(build).verdict == "ok"
    assert verdict(build, require_gpu=True).verdict == "fail"


def test_compat_cli_judges_a_named_release(cli):
    r = cli("compat", "--framework", "jax==0.10.2", "--driver", "550.54.15", "--gpu-cc", "8.6",
            "--json")
    assert r.code == 0, r.err
    body = r.json()
    assert (body["framework"], body["version"], body["verdict"]) == ("jax", "0.10.2", "ok")
    assert body["build"]["cuda"] == "12.3" and body["build"]["driver"]["min_driver"] == "525.60.13"
    plugin = cli("compat", "--framework", "jax-cuda12-plugin==0.10.2", "--driver", "520.61.05",
                 "--gpu-cc", "8.6")
    assert plugin.code == 1 and "needs driver >= 525.60.13" in plugin.out


def test_compat_cli_unknown_release_is_one_line_exit_2(cli):
    r = cli("compat", "--framework", "jax==0.3.25")
    assert r.code == 2 and r.out == ""
    assert r.err.count("\n") == 1, r.err
    assert "jax==0.3.25" in r.err and "jax 0.4.38-0.10.2" in r.err


# --- presets and run variables ------------------------------------------------------------------

def test_the_presets_parse_and_agree_with_the_facts(home: Path):
    cpu = resolve_preset(Home(home), "jax-cpu")
    assert (cpu.kind, cpu.framework) == ("cpu", "jax")
    assert {r.name for r in cpu.requirements} == {"jax", "jaxlib"}
    assert not any(r.extras for r in cpu.requirements)  # no CUDA plugin in the CPU preset
    assert cpu.requires_python.contains("3.11") and not cpu.requires_python.contains("3.10")
    gpu = resolve_preset(Home(home), "jax-cuda12")
    assert (gpu.kind, gpu.framework, gpu.cuda, gpu.cudnn) == ("gpu", "jax", "12.3", "9.8")
    assert [set(r.extras) for r in gpu.requirements] == [{"cuda12"}]
    build = build_for_requirements(gpu.requirements)
    assert (build.cuda, build.cudnn) == (gpu.cuda, gpu.cudnn)
    assert JAX.cpu_presets == ("jax-cpu",) and JAX.gpu_presets == ("jax-cuda12",)


def test_run_turns_preallocation_off_unless_the_user_set_it(tmp_path: Path):
    assert dict(JAX.run_environ(None)) == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    assert dict(JAX.run_environ(Version("0.10.2"))) == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    ran = child_environ(None, framework=JAX.run_environ(Version("0.10.2")), base={"PATH": "/usr/bin"})
    assert ran["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in ran
    mine = child_environ(None, framework=JAX.run_environ(None), base={"PATH": "/usr/bin",
                                                                      "XLA_PYTHON_CLIENT_PREALLOCATE": "true"})
    assert mine["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"


@pytest.mark.parametrize("name", ["jax", "jaxlib", "jax-cuda12-plugin", "jax_cuda12_pjrt"])
def test_every_distribution_is_jax(name: str):
    assert frameworks.of_distribution(name) is JAX
    assert frameworks.detect({name: "0.10.2"}) == ["jax"]


# --- a GPU host (the fake NVML): the jax-cuda12 preset judged before anything is installed ---

def test_jax_cuda12_is_refused_on_a_driver_below_its_floor_and_suggested_above(fake_nvml, home: Path):
    from fake_nvml import A100

    old = fake_nvml.env(gpus=(A100,), ENVCHECK_HOME=str(home), FAKE_NVML_DRIVER="520.61.05",
                        FAKE_NVML_CUDA="11080")
    refused = fake_nvml.cli(old, "env", "create", "g", "--preset", "jax-cuda12")
    assert refused.code == 2, refused.err
    assert "needs driver >= 525.60.13" in refused.err and not (home / "envs" / "g").exists()
    new = fake_nvml.env(gpus=(A100,), ENVCHECK_HOME=str(home), FAKE_NVML_DRIVER="550.54.15",
                        FAKE_NVML_CUDA="12040")
    hint = fake_nvml.cli(new, "select", "--framework", "jax", "--json")
    assert hint.code == 1, hint.err
    assert hint.json()["selected"] is None and "--preset jax-cuda12" in hint.out
