"""``envcheck compat``: what-if profiles, the live host (fake NVML), real envs, exit codes.

What-if profiles and bad input are judged in process (``judge_compat`` on a Session of the
test's home, with a GPU-less host injected that a what-if never reads); the command itself
(JSON and text on stdout, exit 1 on fail, exit 2 with one line for bad input, the live host
from NVML) runs as a subprocess."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Result, clean_env
from envcheck.errors import EnvcheckError
from envcheck.host.probe import HostState
from envcheck.paths import Home
from envcheck.usecases.compat import judge_compat
from envcheck.usecases.session import Session
from fake_nvml import A100, FakeNvml, real_nvml_loadable
from wheelhouse import offline

pytestmark = pytest.mark.timeout(180)

DOC_KEYS = {"schema", "framework", "version", "build", "host", "verdict", "uses_gpu", "reasons",
            "fixes", "envelope"}  # the result envelope (test_envelope.py)
TINY = """title = "tiny"
description = "test preset"
kind = "cpu"
framework = "torch"
requires-python = ">=3.8"
packages = ["alpha==1.0"]
"""


@pytest.mark.parametrize("args, code, verdict, needle", [
    (["--framework", "tensorflow==2.11.1", "--driver", "450.36.06", "--gpu-cc", "7.5"], 1, "fail",
     "needs driver >= 450.80.02"),
    (["--framework", "tensorflow==2.11.1", "--driver", "450.80.02", "--gpu-cc", "7.5"], 0, "ok",
     "450.80.02"),
    (["--framework", "tensorflow==2.15.0", "--driver", "470.82.01", "--gpu-cc", "8.6"], 1, "fail",
     "needs driver >= 525.60.13"),
    (["--framework", "torch==2.13.0", "--driver", "550.54.15", "--gpu-cc", "8.6"], 1, "fail",
     "needs driver >= 580"),
    (["--framework", "tensorflow==2.11.1", "--driver", "470.82.01", "--gpu-cc", "3.0"], 1, "fail",
     "minimum 3.5"),
    (["--framework", "tensorflow==2.21.0", "--driver", "570.124.06", "--gpu-cc", "5.0"], 1, "fail",
     "older than every architecture"),
    (["--framework", "tensorflow==2.21.0", "--driver", "570.124.06", "--gpu-cc", "12.0"], 0, "warn",
     "compute_90 PTX"),
    (["--framework", "tensorflow-cpu==2.21.0", "--no-gpu"], 0, "ok", "CPU-only build"),
    (["--framework", "tensorflow==2.21.0", "--no-gpu"], 0, "warn", "will run on the CPU"),
    (["--framework", "tensorflow==2.21.0", "--no-gpu", "--require-gpu"], 1, "fail", "will run on the CPU"),
    (["--framework", "tensorflow==2.15.0", "--driver", "560.94", "--gpu-cc", "8.6", "--os", "windows"],
     0, "warn", "native-Windows"),
    (["--framework", "tensorflow==2.11.1", "--driver", "470.82.01", "--gpu-cc", "7.5", "--python", "3.12"],
     1, "fail", "Python 3.12 is outside"),
])
def test_what_if_profiles(home, args, code, verdict, needle):
    result = compat(home, *args)
    assert result.code == code, result.err
    doc = result.json()
    assert set(doc) == DOC_KEYS and doc["schema"] == "envcheck.compat/1"
    assert doc["verdict"] == verdict
    assert needle in doc["reasons"][0]


OPTIONS = {"--framework": "framework", "--env": "env_name", "--driver": "driver", "--os": "os_name",
           "--python": "python"}
FLAGS = {"--no-gpu": "no_gpu", "--require-gpu": "require_gpu"}
NO_GPU_HOST = HostState(nvml_status="no-library", message="injected: a what-if reads no host")


def compat(home: Path, *args: str) -> Result:
    """`envcheck compat ARGS --json` in process: ``judge_compat`` on a Session of ``home``; its
    exit code and JSON document, or an error's exit code and the line the command prints."""
    kwargs: dict = {"gpu_ccs": ()}
    words = list(args)
    while words:
        word = words.pop(0)
        if word in FLAGS:
            kwargs[FLAGS[word]] = True
        elif word == "--gpu-cc":
            kwargs["gpu_ccs"] += (words.pop(0),)
        else:
            kwargs[OPTIONS[word]] = words.pop(0)
    try:
        result = judge_compat(Session(Home(home), host=NO_GPU_HOST), **kwargs)
    except EnvcheckError as exc:
        return Result(exc.exit_code, "", f"envcheck: error: {exc}\n")
    return Result(result.exit_code, json.dumps(result.to_json()), "")


def in_home(cli, home: Path):
    """``cli`` run against ``home`` (``--home`` as the command line gives it)."""
    return lambda *args, **kw: cli("--home", str(home), *args, **kw)


def test_json_document(cli):
    doc = cli("compat", "--framework", "torch==2.5.1+cu118", "--driver", "520.61.05",
              "--gpu-cc", "8.6", "--gpu-cc", "8.6", "--os", "linux", "--json").json()
    assert (doc["framework"], doc["version"]) == ("torch", "2.5.1+cu118")
    assert doc["build"]["cuda"] == "11.8" and doc["build"]["archs"] is None
    assert doc["build"]["driver"]["min_driver"] == "450.80.02"
    assert doc["host"] == {"driver_version": "520.61.05", "gpu_ccs": ["8.6", "8.6"], "os": "linux",
                           "python": None, "driver_unreadable": None,
                           "source": {"driver": "given", "gpus": "given"}}
    assert doc["uses_gpu"] is True and doc["fixes"] == []


def test_text_output_shows_verdict_reasons_and_fixes(cli):
    result = cli("compat", "--framework", "torch==2.13.0", "--driver", "550.54.15", "--gpu-cc", "8.6")
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[0].startswith("build: torch 2.13.0 (CUDA 13.0.3")
    assert "verdict: fail" in lines
    assert "fix: upgrade the NVIDIA driver to >= 580" in lines


@pytest.mark.parametrize("args, needle", [
    (["--framework", "tensorflow==two"], "'two'"),
    (["--framework", "tensorflow"], "DIST==VERSION"),
    (["--framework", "numpy==2.0.0"], "no compatibility facts for numpy==2.0.0"),
    (["--framework", "tensorflow==9.0.0"], "no compatibility facts"),
    (["--framework", "tensorflow==2.15.0", "--driver", "latest", "--gpu-cc", "8.6"], "'latest'"),
    (["--framework", "tensorflow==2.15.0", "--driver", "550.54.15", "--gpu-cc", "86"], "'86'"),
    (["--framework", "tensorflow==2.15.0", "--no-gpu", "--python", "3.x"], "'3.x'"),
    (["--framework", "tensorflow==2.15.0", "--no-gpu", "--driver", "550.54.15"], "--no-gpu"),
    ([], "exactly one of"),
    (["--framework", "torch==2.5.1", "--env", "dl"], "exactly one of"),
    (["--env", "nope"], "no env named 'nope'"),
])
def test_bad_input_exits_2(home, args, needle):
    result = compat(home, *args)
    assert result.code == 2, (result.out, result.err)
    assert needle in result.err


@pytest.mark.parametrize("args, needle", [
    (["--framework", "tensorflow==two"], "'two'"),  # the use case's UsageError
    (["--framework", "tensorflow==2.15.0", "--os", "macos"], "macos"),  # the option's choices
])
def test_bad_input_is_one_line_exit_2_from_the_command(cli, args, needle):
    result = cli("compat", *args)
    assert result.code == 2, (result.out, result.err)
    assert needle in result.err and result.err.count("\n") == 1 and result.out == ""


@pytest.fixture(scope="module")
def envs_home(tmp_path_factory, wheelhouse) -> Path:
    """Env ``dl`` (torch 2.13.0) and env ``plain`` (no framework), made once: compat only reads them."""
    home = tmp_path_factory.mktemp("compat-home")
    (home / "presets").mkdir()
    (home / "presets" / "tiny.toml").write_text(TINY)
    for name, extra in (("dl", ["--add", "torch==2.13.0"]), ("plain", [])):
        created = subprocess.run([sys.executable, "-m", "envcheck", "env", "create", name, "--preset", "tiny",
                                  *extra, *offline(wheelhouse)], capture_output=True, text=True,
                                 env=clean_env(ENVCHECK_HOME=str(home)), timeout=600)
        assert created.returncode == 0, created.stderr
    return home


def test_env_is_judged_by_its_installed_framework(cli, envs_home: Path):
    cli = in_home(cli, envs_home)
    result = cli("compat", "--env", "dl", "--driver", "550.54.15", "--gpu-cc", "8.6", "--json")
    assert result.code == 1, result.err
    doc = result.json()
    assert (doc["framework"], doc["version"]) == ("torch", "2.13.0")
    assert doc["host"]["python"].startswith("3.")  # the env's own Python, from its manifest
    assert "needs driver >= 580" in doc["reasons"][0]
    assert cli("compat", "--env", "dl", "--driver", "580.65.06", "--gpu-cc", "8.6").code == 0


def test_env_without_a_known_framework_exits_2(cli, envs_home: Path):
    result = in_home(cli, envs_home)("compat", "--env", "plain", "--no-gpu")
    assert result.code == 2 and "no framework the compatibility tables know" in result.err


def test_live_host_comes_from_nvml(fake_nvml: FakeNvml):
    env = fake_nvml.env([A100], FAKE_NVML_DRIVER="550.54.15")
    doc = fake_nvml.cli(env, "compat", "--framework", "tensorflow==2.21.0", "--json").json()
    assert doc["host"]["driver_version"] == "550.54.15" and doc["host"]["gpu_ccs"] == ["8.0"]
    assert doc["host"]["source"] == {"driver": "probe", "gpus": "probe", "nvml": "ok"}
    assert doc["verdict"] == "ok" and doc["uses_gpu"] is True

    old = fake_nvml.cli(fake_nvml.env([A100], FAKE_NVML_DRIVER="470.82.01"),
                        "compat", "--framework", "tensorflow==2.21.0", "--json")
    assert old.code == 1 and "needs driver >= 525.60.13" in old.json()["reasons"][0]


def test_what_if_driver_with_live_gpus(fake_nvml: FakeNvml):
    env = fake_nvml.env(["NVIDIA GeForce RTX 5090,12.0,32768"], FAKE_NVML_DRIVER="570.124.06")
    doc = fake_nvml.cli(env, "compat", "--framework", "tensorflow==2.21.0", "--driver", "550.54.15",
                        "--json").json()
    assert doc["host"]["gpu_ccs"] == ["12.0"] and doc["host"]["source"]["gpus"] == "probe"
    assert doc["verdict"] == "fail" and "555.42.06" in doc["reasons"][0]


def test_hidden_gpus_mean_cpu(fake_nvml: FakeNvml):
    env = fake_nvml.env([A100], CUDA_VISIBLE_DEVICES="")
    result = fake_nvml.cli(env, "compat", "--framework", "torch==2.10.0", "--json")
    assert result.code == 0
    doc = result.json()
    assert doc["verdict"] == "warn" and doc["host"]["gpu_ccs"] == []
    assert "will run on the CPU" in doc["reasons"][0]


def test_no_nvml_library_means_cpu(fake_nvml: FakeNvml, tmp_path: Path):
    if real_nvml_loadable():
        pytest.skip("this machine has a real NVIDIA driver")
    env = fake_nvml.env([A100], lib_dir=tmp_path)  # a folder without libnvidia-ml.so.1
    doc = fake_nvml.cli(env, "compat", "--framework", "torch==2.10.0", "--json").json()
    assert doc["host"]["source"]["nvml"] == "no-library" and doc["host"]["driver_version"] is None
    assert doc["verdict"] == "warn" and "no NVIDIA driver or GPU" in doc["reasons"][0]


@pytest.mark.parametrize("driver", ["abc", ""])
def test_a_driver_version_nvml_reports_unreadably_is_unknown_not_bad_input(fake_nvml: FakeNvml, driver):
    env = fake_nvml.env([A100], FAKE_NVML_DRIVER=driver)
    result = fake_nvml.cli(env, "compat", "--framework", "tensorflow==2.15.0", "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["host"]["driver_version"] is None and doc["host"]["source"]["driver"] == "probe"
    assert doc["host"]["driver_unreadable"] == f"NVML reported {driver!r}, which is not a version"
    assert doc["verdict"] == "warn" and doc["uses_gpu"] is True
    assert doc["reasons"][0].startswith("the NVIDIA driver's version is unknown")
    text = fake_nvml.cli(env, "compat", "--framework", "tensorflow==2.15.0")
    assert text.code == 0 and "host:  driver unknown (probe)" in text.out and not text.err
    # the rest is still judged: a GPU the build has no code for fails, exit 1
    old_gpu = fake_nvml.cli(fake_nvml.env(["NVIDIA Tesla K80,3.7,12288"], FAKE_NVML_DRIVER=driver),
                            "compat", "--framework", "tensorflow==2.21.0", "--json")
    assert old_gpu.code == 1 and old_gpu.json()["verdict"] == "fail"
    # a driver the user types is input, checked as such
    typed = fake_nvml.cli(env, "compat", "--framework", "tensorflow==2.15.0", "--driver", "abc")
    assert typed.code == 2 and "bad driver version" in typed.err
