"""Every fact a framework's facts file holds is read by a rule, and a release its table lacks
is judged by its family's rules with the facts named, not refused.

The facts are read through ``frameworks.facts.Facts``, which records each key read; the rules
are exercised over every framework (each distribution, each release of the table and some
outside it, local tags, envs with and without the framework's CUDA wheels, hosts that take
each branch of the judgement), then every key of its facts must have been read. A made-up
framework with a key its rule forgets shows the check names it."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from conftest import clean_env
from envcheck import frameworks
from envcheck.data import compat_facts
from envcheck.frameworks import framework_build
from envcheck.frameworks.base import SPLIT, Framework, folder_facts, row_build
from envcheck.frameworks.facts import READ, unread
from envcheck.host.compat import HostProfile, judge
from fake_nvml import FakeNvml
from wheelhouse import build_wheel

pytestmark = pytest.mark.timeout(300)

MAXWELL_50 = "NVIDIA GeForce GTX 750 Ti,5.0,2048"  # compute capability 5.0: CUDA 12's floor, below JAX's
HOSTS = (
    HostProfile(None),  # no driver, no GPU
    HostProfile("595.71.05", ("3.0", "5.0", "6.1", "8.6", "12.0"), "linux", "3.11"),
    HostProfile("390.48", ("7.0",), "linux"),  # a driver older than CUDA 11's floor
    HostProfile("595.71.05", ("8.6",), "windows"),
    HostProfile(None, ("8.6",), "linux", driver_unreadable="NVML reported 'x'"),
)
LOCALS = ("", "cpu", "rocm6.2", "weird") + tuple(sorted({  # +cuXY of every CUDA minor from 11.0
    f"cu{Version(key).major}{Version(key).minor}" for key in compat_facts()["cuda_drivers"]["releases"]
    if Version(key) >= Version("11.0")}))
CUDA_WHEELS = ({}, {"nvidia-cuda-runtime-cu11": "11.7.99", "nvidia-cudnn-cu11": "8.5.0.96"},
               {"nvidia-cuda-runtime-cu12": "12.8.90", "nvidia-cudnn-cu12": "9.10.2.21",
                "nvidia-cuda-nvcc-cu12": "12.8.93"},
               {"nvidia-cuda-runtime-cu12": "12.0.1", "nvidia-cudnn-cu12": "9.0.0.312",
                "nvidia-cuda-nvcc-cu12": "12.1.105"},
               {"nvidia-cuda-runtime-cu13": "13.0.96", "nvidia-cudnn-cu13": "9.19.0.56"})


def releases_to_try(framework: Framework) -> list[str]:
    """Each release of the table as a version, and some it lacks: just older than the first,
    far older, between two (a patch after the middle one), newer than the last."""
    keys = sorted(framework.releases(), key=Version)
    versions = [key if len(Version(key).release) > 2 else f"{key}.0" for key in keys]
    first, last, middle = Version(keys[0]), Version(keys[-1]), Version(keys[len(keys) // 2])
    older = (f"{first.major}.{first.minor}.{max(first.micro - 1, 0)}" if len(first.release) > 2
             else f"{first.major}.{max(first.minor - 1, 0)}.0")
    return versions + [older, "0.1.0", f"{last.major}.{last.minor + 1}.0", f"{middle.base_version}.1"]


def exercise(framework: Framework) -> int:
    """Read every build of ``framework`` the inputs above give, and judge those of a
    registered framework on every host (``judge`` asks the registry for the framework's
    Windows rule); the number of builds read."""
    builds = []
    for dist in framework.distributions:
        for version in releases_to_try(framework):
            for local in LOCALS:
                shown = f"{version}+{local}" if local else version
                builds.append(framework.read_build(dist, Version(shown), shown, local or None, {}))
            for wheels in CUDA_WHEELS:
                env = {**{d: version for d in framework.distributions}, **wheels}
                builds.append(framework.read_build(dist, Version(version), version, None, env))
                builds.append(framework.read_build(dist, Version(version), version, None, {dist: version, **wheels}))
    # one judgement per distinct build, a local tag that changed nothing but its label aside
    known = {replace(build, version=Version(build.version).base_version): build for build in builds if build}
    if framework.name in frameworks.registry():
        for build in known.values():
            for host in HOSTS:
                judge(build, host, require_gpu=host is HOSTS[0])
    return len(known)


@pytest.mark.parametrize("name", frameworks.names())
def test_every_fact_in_a_frameworks_facts_is_read_by_its_rules(name: str):
    framework = frameworks.get(name)
    READ.clear()
    assert exercise(framework) > 0
    assert unread(framework.facts()) == [], f"facts of {name} no rule reads"


def test_the_check_names_a_fact_no_rule_reads(tmp_path: Path):
    (tmp_path / "facts.json").write_text(json.dumps({
        "title": "made up", "sources": ["nowhere"], "min_cc": "5.2", "forgotten_floor": "7.0",
        "releases": {"1.0": {"cuda": "12.4", "cudnn": "9.1", "python": None, "archs": None,
                             "forgotten_pin": ">=9.1"}}}))

    def read_build(dist, version, shown, local, packages):
        facts = made.facts()
        row = facts["releases"].get(f"{version.major}.{version.minor}")
        return row_build("made-up", dist, shown, row, min_cc=facts["min_cc"]) if row else None

    made = Framework("made-up", "Made up", ("made-up",), None, read_build, "none", SPLIT, 9,
                     facts_file=folder_facts(str(tmp_path / "__init__.py")))
    READ.clear()
    assert exercise(made) > 0
    assert unread(made.facts()) == [("made-up", "forgotten_floor"), ("made-up", "releases", "1.0", "forgotten_pin")]
    assert made.facts()["forgotten_floor"] and unread(made.facts()) == [("made-up", "releases", "1.0", "forgotten_pin")]


# --- JAX's compute-capability floor -------------------------------------------------------------

def compat(*args: str, env: dict[str, str] | None = None):
    proc = subprocess.run([sys.executable, "-m", "envcheck", "compat", *args, "--json"],
                          capture_output=True, text=True, env=env or clean_env(), timeout=120)
    return proc.returncode, (json.loads(proc.stdout) if proc.stdout else None), proc.stderr


def test_jax_on_a_gpu_below_its_floor_fails_naming_it():
    code, doc, err = compat("--framework", "jax==0.10.2", "--gpu-cc", "5.0", "--driver", "550.54.15")
    assert code == 1, err
    assert doc["verdict"] == "fail" and not doc["uses_gpu"]
    assert "below jax's minimum compute capability 5.2" in doc["reasons"][0]
    assert "use a GPU of compute capability 5.2 or newer" in doc["fixes"][0]
    assert doc["build"]["min_cc"] == "5.2"
    code, doc, err = compat("--framework", "jax==0.10.2", "--gpu-cc", "5.2", "--driver", "550.54.15")
    assert code == 0 and doc["verdict"] == "ok" and doc["uses_gpu"], err


def test_a_jax_cuda12_env_is_refused_on_a_gpu_below_the_floor(fake_nvml: FakeNvml, home: Path, wheelhouse):
    """Through an env's build: the jax-cuda12 preset, judged before anything is installed."""
    env = fake_nvml.env(gpus=(MAXWELL_50,), ENVCHECK_HOME=str(home), FAKE_NVML_DRIVER="550.54.15",
                        FAKE_NVML_CUDA="12040")
    refused = fake_nvml.cli(env, "env", "create", "g", "--preset", "jax-cuda12",
                            "--no-index", "--find-links", str(wheelhouse))
    assert refused.code == 2, refused.err
    assert "minimum compute capability 5.2" in refused.err and not (home / "envs" / "g").exists()
    assert len(refused.err.strip().splitlines()) == 1


# --- an env's JAX: the plugin's pins and the family, read from what is installed -----------------

JAX_PRESET = """title = "jax stand-ins"
description = "jax and its CUDA 12 plugin, metadata only"
kind = "cpu"
framework = "jax"
requires-python = ">=3.8"
packages = ["jax=={version}", "jaxlib=={version}", "jax-cuda12-plugin=={version}", "nvidia-cudnn-cu12=={cudnn}"]
"""


@pytest.fixture(scope="module")
def jax_envs(tmp_path_factory, fake_nvml: FakeNvml):
    """Envs of stand-in jax wheels: ``pinned`` (0.10.2 with a cuDNN its plugin's pin refuses),
    ``between`` (0.6.0, a release the table lacks, with a cuDNN it takes)."""
    wheels = tmp_path_factory.mktemp("jax-wheels")
    home = tmp_path_factory.mktemp("jax-home")
    for name, version, cudnn in (("pinned", "0.10.2", "9.1.0.70"), ("between", "0.6.0", "9.8.0.87")):
        for dist in ("jax", "jaxlib", "jax-cuda12-plugin"):
            build_wheel(wheels, dist, version, files={f"{dist.replace('-', '_')}_standin/__init__.py": ""})
        build_wheel(wheels, "nvidia-cudnn-cu12", cudnn)
        preset = tmp_path_factory.mktemp("presets") / f"{name}.toml"
        preset.write_text(JAX_PRESET.format(version=version, cudnn=cudnn))
        made = subprocess.run([sys.executable, "-m", "envcheck", "env", "create", name, "--preset-file",
                               str(preset), "--no-index", "--find-links", str(wheels)],
                              capture_output=True, text=True, env=clean_env(ENVCHECK_HOME=str(home)), timeout=600)
        assert made.returncode == 0, made.stderr
    return home


def test_an_envs_cudnn_outside_its_plugins_pin_fails_on_a_gpu(jax_envs: Path):
    env = clean_env(ENVCHECK_HOME=str(jax_envs))
    code, doc, err = compat("--env", "pinned", "--driver", "550.54.15", "--gpu-cc", "8.6", env=env)
    assert code == 1, err
    assert doc["version"] == "0.10.2" and doc["verdict"] == "fail"
    reason = next(r for r in doc["reasons"] if "nvidia-cudnn-cu12" in r)
    assert "nvidia-cudnn-cu12 9.1.0.70 in the env is outside what jax-cuda12-plugin[with-cuda]==0.10.2 " \
           "requires (nvidia-cudnn-cu12<10.0,>=9.8)" in reason
    assert "pip install 'nvidia-cudnn-cu12<10.0,>=9.8'" in " ".join(doc["fixes"])
    code, doc, err = compat("--env", "pinned", "--no-gpu", env=env)  # on the CPU, JAX needs no cuDNN
    assert code == 0 and doc["verdict"] == "warn", err


def test_an_envs_release_between_two_known_is_judged_by_its_family(jax_envs: Path):
    env = clean_env(ENVCHECK_HOME=str(jax_envs))
    code, doc, err = compat("--env", "between", "--driver", "550.54.15", "--gpu-cc", "5.0", env=env)
    assert code == 1, err
    assert doc["version"] == "0.6.0" and "minimum compute capability 5.2" in doc["reasons"][0]
    note = doc["build"]["notes"][0]
    assert "CUDA 12 from jax-cuda12-plugin 0.6.0" in note and "between two known releases" in note
    assert "(CUDA 12.3, cuDNN 9.8)" in note and "Python range is not known" in note
    assert compat("--env", "between", "--driver", "550.54.15", "--gpu-cc", "8.6", env=env)[0] == 0


# --- releases the tables lack: the family's rules, the facts named --------------------------------

@pytest.mark.parametrize("spec, place", [
    ("jax==0.4.30", "older than the first known"),  # the CUDA 12 plugin's, before 0.4.38
    ("jax==0.6.0", "between two known releases"),  # 0.5.3 < 0.6.0 < 0.6.2
])
def test_a_jax_release_the_table_lacks_is_judged_by_its_family(spec: str, place: str):
    code, doc, err = compat("--framework", spec, "--driver", "550.54.15", "--gpu-cc", "8.6")
    assert code == 0, err
    assert doc["verdict"] == "ok" and doc["build"]["cuda"] == "12.3" and doc["build"]["min_cc"] == "5.2"
    note = doc["build"]["notes"][0]
    assert f"jax[cuda12]=={spec.split('==')[1]}" in note and place in note
    assert "JAX's CUDA 12 plugin (from 0.4.22)" in note and "compute capability 5.2 and newer" in note
    code, doc, err = compat("--framework", spec, "--driver", "520.61.05", "--gpu-cc", "8.6")
    assert code == 1 and "needs driver >= 525.60.13" in doc["reasons"][0], err
    code, doc, err = compat("--framework", spec, "--driver", "550.54.15", "--gpu-cc", "5.0")
    assert code == 1 and "minimum compute capability 5.2" in doc["reasons"][0], err
    text = subprocess.run([sys.executable, "-m", "envcheck", "compat", "--framework", spec, "--driver",
                           "550.54.15", "--gpu-cc", "8.6"], capture_output=True, text=True, env=clean_env())
    assert f"  note: {note}" in text.stdout.splitlines()


@pytest.mark.parametrize("spec, cuda, needle", [
    ("torch==1.9.0+cu111", "11.1", "torch 1.9 is not in the tables (older than the first known, 1.10-2.15): "
                                   "judged as a CUDA 11.1 build by its +cu111 tag"),
    ("torch==2.16.0+cu130", "13.0", "newer than the last known"),
    ("torch==2.5.1", "12.4.1", None),  # a patch between two known releases: its minor's row
    ("tensorflow-gpu==1.12.0", "9.0", None),  # the reference's 1.5-1.12 row
    ("tensorflow==2.16.2", "12.3", None),
])
def test_a_torch_or_tensorflow_release_the_table_lacks_is_judged_by_its_family(spec, cuda, needle):
    code, doc, err = compat("--framework", spec, "--driver", "595.71.05", "--gpu-cc", "7.0")
    assert code in (0, 1) and doc is not None, err
    assert doc["build"]["cuda"] == cuda and doc["build"]["gpu_capable"]
    if needle:
        assert needle in doc["build"]["notes"][0]


@pytest.mark.parametrize("spec, needle", [
    ("tensorflow==1.4.0", "tensorflow 1.4 is not in the tables (older than the first known"),
    ("tensorflow-cpu==2.30.0", "tensorflow 2.30 is not in the tables (newer than the last known"),
    ("torch==1.8.0+cpu", "torch 1.8 is not in the tables (older than the first known"),
])
def test_a_cpu_package_the_table_lacks_is_cpu_only_by_its_family(spec, needle):
    code, doc, err = compat("--framework", spec, "--no-gpu")
    assert code == 0 and doc["verdict"] == "ok" and not doc["build"]["gpu_capable"], err
    assert needle in doc["reasons"][0]


def test_what_no_family_rule_says_is_refused_with_what_would_be_judged():
    code, doc, err = compat("--framework", "torch==1.9.0", "--no-gpu")
    assert code == 2 and doc is None and err.count("\n") == 1
    assert "no compatibility facts for torch==1.9.0" in err and "torch==1.9.0+cu111" in err
    assert framework_build("jax", "0.4.21") is None  # before the CUDA 12 plugin's first release
