"""envcheck select: GPU envs this host can run, then CPU envs, else a warning that says what to create.

The ranking is judged in process (the use case on a Session with the host the real pynvml read
from the fake NVML injected); the command itself (JSON on stdout, exit 1 with an empty stdout,
exit 2 on a bad requirement, NVML's undecodable bytes) runs as a subprocess."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Result, clean_env
from envcheck.host.probe import Gpu, HostState
from envcheck.host.records import fields
from envcheck.paths import Home
from envcheck.usecases.session import Session
from fake_nvml import A100


def envcheck(env: dict, *args: str) -> Result:
    proc = subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True,
                          env=env, timeout=300)
    return Result(proc.returncode, proc.stdout, proc.stderr)


GPU_FIELDS = set(fields(Gpu))
_probed: dict[tuple, HostState] = {}


def host_of(fake_nvml, env: dict) -> HostState:
    """The host the real pynvml reads from the fake NVML in ``env`` (probed in a fresh process,
    as envcheck reads it; once per distinct host), as a HostState to inject into a Session."""
    key = tuple(sorted((k, v) for k, v in env.items() if k != "ENVCHECK_HOME"))
    if key not in _probed:
        doc = fake_nvml.probe(env)["host"]
        _probed[key] = HostState(
            nvml_status=doc["nvml"]["status"], message=doc["nvml"]["message"], fix=doc["nvml"]["fix"],
            driver_version=doc["driver_version"], cuda_driver_version=doc["cuda_driver_version"],
            nvml_version=doc["nvml_version"], warnings=doc["warnings"],
            cuda_visible_devices=doc["cuda_visible_devices"], cuda_device_order=doc["cuda_device_order"],
            gpus=[Gpu(**{k: v for k, v in gpu.items() if k in GPU_FIELDS}) for gpu in doc["gpus"]])
    return _probed[key]


def select(fake_nvml, env: dict, *, framework: str | None = None, requires: tuple[str, ...] = (),
           require_gpu: bool = False) -> Result:
    """`envcheck select --json` in process: the use case on the home of ``env`` with its host
    injected; its exit code and JSON document (the CLI's contract is tested once, below)."""
    session = Session(Home(Path(env["ENVCHECK_HOME"])), host=host_of(fake_nvml, env))
    selection = session.select(framework=framework, requires=requires, require_gpu=require_gpu)
    return Result(selection.exit_code, json.dumps(selection.to_json()), "")


def make_env(home: Path, wheelhouse: Path, name: str, requirement: str) -> None:
    presets = home / "presets"
    presets.mkdir(exist_ok=True)
    (presets / f"{name}.toml").write_text(
        f'title = "{name}"\ndescription = ""\nkind = "cpu"\nframework = "tensorflow"\n'
        f'requires-python = ">=3.8"\npackages = ["{requirement}"]\n')
    r = envcheck(clean_env(ENVCHECK_HOME=str(home)), "env", "create", name, "--preset", name,
                 "--no-index", "--find-links", str(wheelhouse))
    assert r.code == 0, r.err


def make_envs(home: Path, wheelhouse: Path) -> Path:
    make_env(home, wheelhouse, "tfgpu", "tensorflow==2.21.0")
    make_env(home, wheelhouse, "tfcpu", "tensorflow-cpu==2.21.0")
    make_env(home, wheelhouse, "pt", "torch==2.13.0")
    return home


@pytest.fixture(scope="module")
def envs(tmp_path_factory, wheelhouse):
    """The three envs, made once: the tests using them only read the home (``select`` stores
    nothing); a test that validates (stores reports) makes its own, ``fresh_envs``."""
    return make_envs(tmp_path_factory.mktemp("select-home"), wheelhouse)


@pytest.fixture
def fresh_envs(home, wheelhouse):
    return make_envs(home, wheelhouse)


def ranking(result: Result) -> list[tuple[str, str]]:
    return [(r["name"], r["tier"]) for r in result.json()["ranking"]]


def test_gpu_host_ranks_gpu_env_first(envs, fake_nvml):
    env = fake_nvml.env([A100], FAKE_NVML_DRIVER="550.54.15", FAKE_NVML_CUDA="12040", ENVCHECK_HOME=str(envs))
    r = select(fake_nvml, env, framework="tensorflow")
    assert r.code == 0, r.err
    data = r.json()
    assert data["schema"] == "envcheck.selection/1"
    assert ranking(r) == [("tfgpu", "gpu"), ("tfcpu", "cpu")]
    assert all(item["reason"] for item in data["ranking"])
    assert data["warning"] is None
    assert {"name": "pt", "reason": "no tensorflow (tensorflow / tensorflow-cpu / tensorflow-gpu / tf-nightly)"} in data["excluded"]


def test_with_no_framework_any_known_framework_counts(envs, fake_nvml):
    """An env whose only framework is torch is ranked; --framework tensorflow leaves it out."""
    env = fake_nvml.env([A100], FAKE_NVML_DRIVER="550.54.15", FAKE_NVML_CUDA="12040", ENVCHECK_HOME=str(envs))
    r = select(fake_nvml, env)
    assert r.code == 0, r.err
    assert ranking(r) == [("tfgpu", "gpu"), ("tfcpu", "cpu"), ("pt", "cpu")]
    assert next(x for x in r.json()["ranking"] if x["name"] == "pt")["framework"] == "torch"
    assert "pt" in [x["name"] for x in select(fake_nvml, env, framework="tensorflow").json()["excluded"]]


def test_no_nvml_puts_everything_in_cpu_tier(envs, fake_nvml, tmp_path):
    env = fake_nvml.env([A100], lib_dir=tmp_path, ENVCHECK_HOME=str(envs))  # no libnvidia-ml there
    r = select(fake_nvml, env)
    assert r.code == 0
    assert ranking(r) == [("tfcpu", "cpu"), ("tfgpu", "cpu"), ("pt", "cpu")]
    gpu_env = next(x for x in r.json()["ranking"] if x["name"] == "tfgpu")
    assert "no usable GPU" in gpu_env["reason"]


def test_driver_too_old_for_the_gpu_build(envs, fake_nvml):
    env = fake_nvml.env([A100], FAKE_NVML_DRIVER="470.82.01", FAKE_NVML_CUDA="11040", ENVCHECK_HOME=str(envs))
    r = select(fake_nvml, env)
    assert r.code == 0
    assert ranking(r)[0] == ("tfcpu", "cpu") and ("tfgpu", "cpu") in ranking(r)
    gpu_env = next(x for x in r.json()["ranking"] if x["name"] == "tfgpu")
    assert "525.60.13" in gpu_env["reason"]


def test_require_gpu_without_a_gpu_env(envs, fake_nvml):
    """No GPU env: exit 1 and nothing a script could take for one; the CPU envs ranked go to
    stderr (text) or stay in the ranking (JSON), never as the answer."""
    env = fake_nvml.env([A100], FAKE_NVML_DRIVER="470.82.01", FAKE_NVML_CUDA="11040", ENVCHECK_HOME=str(envs))
    r = envcheck(env, "select", "--require-gpu", "--json")
    assert r.code == 1
    assert "GPU env is required" in r.json()["warning"]
    assert r.json()["selected"] is None and ranking(r)[0] == ("tfcpu", "cpu")
    text = envcheck(env, "select", "--require-gpu")
    assert text.code == 1 and text.out == ""
    assert "tfcpu" in text.err and "GPU env is required" in text.err and "*" not in text.err
    answered = envcheck(fake_nvml.env([A100], ENVCHECK_HOME=str(envs)), "select", "--require-gpu")
    assert answered.code == 0 and answered.out.split()[:3] == ["*", "tfgpu", "gpu"]


def test_invalid_utf8_from_nvml_in_the_uuid_and_driver(envs, fake_nvml):
    """NVML's bytes that aren't UTF-8 (as `gpu --json` shows them, U+FFFD) rank as any GPU
    host's: valid JSON, exit 0, the GPU env on the GPU tier, the driver said to be unknown."""
    env = fake_nvml.env(["NVIDIA \udcff\udcfeA100,8.0,81920,uuid=GPU-\udcc3(-42"],
                        FAKE_NVML_DRIVER="550.\udcff1", ENVCHECK_HOME=str(envs))
    for args in (["--json"], ["--require-gpu", "--json"], ["--framework", "tensorflow", "--json"]):
        r = envcheck(env, "select", *args)
        assert r.code == 0 and "Traceback" not in r.err and "internal error" not in r.err, r.err
        data = r.json()
        assert data["host"]["driver_version"] == "550.\ufffd1" and data["selected"] == "tfgpu"
        assert ranking(r)[0] == ("tfgpu", "gpu") and ("tfcpu", "cpu") in ranking(r)
        assert "unknown" in data["ranking"][0]["reason"]  # the driver: not checked, and said so
    text = envcheck(env, "select")
    assert text.code == 0 and text.out.split()[:2] == ["*", "tfgpu"], text.err


def test_torch_framework_and_requirements(envs, fake_nvml):
    env = fake_nvml.env([A100], FAKE_NVML_DRIVER="550.54.15", FAKE_NVML_CUDA="12040", ENVCHECK_HOME=str(envs))
    r = select(fake_nvml, env, framework="torch")
    assert r.code == 0
    (only,) = r.json()["ranking"]
    assert only["name"] == "pt" and only["tier"] == "cpu" and "580" in only["reason"]  # torch 2.13 = CUDA 13
    r = select(fake_nvml, env, requires=("tensorflow-cpu>=2.21",))
    assert ranking(r) == [("tfcpu", "cpu")]
    bad = envcheck(env, "select", "--requires", "tensorflow>>1")
    assert bad.code == 2 and "tensorflow>>1" in bad.err


def test_nothing_matching_warns_what_to_create(home, wheelhouse, fake_nvml):
    make_env(home, wheelhouse, "pt", "torch==2.13.0")
    env = fake_nvml.env([A100], FAKE_NVML_DRIVER="550.54.15", FAKE_NVML_CUDA="12040", ENVCHECK_HOME=str(home))
    r = envcheck(env, "select", "--framework", "tensorflow")
    assert r.code == 1
    assert r.code == 1 and "envcheck env create tensorflow-cpu --preset tensorflow-cpu" in r.err


def test_ties_prefer_a_passed_validation_then_the_newest_framework(home, wheelhouse, fake_nvml, tmp_path):
    make_env(home, wheelhouse, "a-old", "tensorflow==2.15.0")
    make_env(home, wheelhouse, "b-new", "tensorflow==2.21.0")
    env = fake_nvml.env([A100], lib_dir=tmp_path, ENVCHECK_HOME=str(home))  # no GPU: both cpu tier
    assert [n for n, _ in ranking(select(fake_nvml, env))] == ["b-new", "a-old"]
    assert envcheck(env, "validate", "a-old", "--no-smoke").code == 0
    assert [n for n, _ in ranking(select(fake_nvml, env))] == ["a-old", "b-new"]


def test_an_out_of_date_validation_counts_for_nothing(fresh_envs, fake_nvml):
    """A stored failure puts a GPU env on the CPU tier only while it describes the env and host
    of now: on another driver it no longer pushes the env down (nor does an old pass lift one)."""
    before = fake_nvml.env([A100], FAKE_NVML_DRIVER="550.54.15", FAKE_NVML_CUDA="12040", ENVCHECK_HOME=str(fresh_envs))
    failed = envcheck(before, "validate", "tfgpu", "--no-smoke", "--json")
    assert failed.code == 1 and failed.json()["reports"][0]["verdict"] == "not-ready", failed.err
    assert envcheck(before, "validate", "tfcpu", "--no-smoke").code == 0
    r = select(fake_nvml, before, framework="tensorflow")
    assert ranking(r) == [("tfcpu", "cpu"), ("tfgpu", "cpu")]
    rows = {x["name"]: x for x in r.json()["ranking"]}
    assert rows["tfgpu"]["why_cpu"] == "failed" and rows["tfgpu"]["validated"] == "not-ready"
    after = fake_nvml.env([A100], FAKE_NVML_DRIVER="560.35.03", FAKE_NVML_CUDA="12060", ENVCHECK_HOME=str(fresh_envs))
    r = select(fake_nvml, after, framework="tensorflow")
    assert r.code == 0, r.err
    assert ranking(r) == [("tfgpu", "gpu"), ("tfcpu", "cpu")]
    rows = {x["name"]: x for x in r.json()["ranking"]}
    assert rows["tfgpu"]["why_cpu"] is None and "last validation failed" not in rows["tfgpu"]["reason"]
    assert rows["tfgpu"]["validated"] is None and rows["tfcpu"]["validated"] is None


def test_a_framework_is_named_by_its_other_names_too():
    """`--framework` (select, check, doctor, provision) takes a framework's aliases, as the
    registry declares them, and answers with its name."""
    from envcheck.cli.options import framework_name
    from envcheck.errors import UsageError

    names = [framework_name(n) for n in ("pytorch", " TF ", "torch", "jax")]
    assert names == ["torch", "tensorflow", "torch", "jax"]
    with pytest.raises(UsageError, match="unknown framework 'pyt'"):
        framework_name("pyt")
