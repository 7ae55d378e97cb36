"""NVML is initialised at most once per envcheck process, whatever the command does.

The fake libnvidia-ml.so.1 appends each call's name to $FAKE_NVML_TRACE, so counting
``nvmlInit`` lines counts initialisations of the real pynvml in envcheck's own process.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from envcheck.paths import Home
from fake_nvml import A100
from wheelhouse import offline

CPU = """title = "tensorflow-cpu stand-in"
kind = "cpu"
framework = "tensorflow"
packages = ["tensorflow-cpu==2.21.0"]
"""


def make_traced(home: Path, wheelhouse: Path, fake_nvml, trace: Path):
    """Env ``cpu`` made in ``home``; a runner of envcheck commands there that counts their
    ``nvmlInit`` calls."""
    (home / "presets").mkdir()
    (home / "presets" / "cpu.toml").write_text(CPU)
    env = fake_nvml.env([A100, A100], FAKE_NVML_DRIVER="550.54.15", FAKE_NVML_CUDA="12040",
                        ENVCHECK_HOME=str(home), FAKE_NVML_TRACE=str(trace))
    created = fake_nvml.cli(env, "env", "create", "cpu", "--preset", "cpu", *offline(wheelhouse))
    assert created.code == 0, created.err

    def run(*args: str) -> int:
        trace.unlink(missing_ok=True)
        result = fake_nvml.cli(env, *args)
        assert "Traceback" not in result.err, result.err
        assert result.code in (0, 1), (args, result.code, result.err)
        lines = trace.read_text().splitlines() if trace.exists() else []
        return sum(line.startswith("nvmlInit") for line in lines)

    run.offline = offline(wheelhouse)
    return run


@pytest.fixture
def traced(home: Path, wheelhouse: Path, fake_nvml, tmp_path: Path):
    return make_traced(home, wheelhouse, fake_nvml, tmp_path / "nvml-trace")


@pytest.fixture(scope="module")
def made_once(tmp_path_factory, wheelhouse: Path, fake_nvml):
    root = tmp_path_factory.mktemp("nvml-once")
    (root / "home").mkdir()
    return root / "home", make_traced(root / "home", wheelhouse, fake_nvml, root / "nvml-trace")


@pytest.fixture
def traced_env(made_once):
    """``traced`` on an env made once per module: each command meets it as just created
    (never validated), its stored report, if the command left one, removed after it."""
    home, run = made_once
    report = Home(home).report("cpu")
    assert not report.exists()
    yield run
    report.unlink(missing_ok=True)


@pytest.mark.parametrize("args", [
    ("gpu",),
    ("select",),
    ("validate", "--no-smoke"),
    ("validate", "cpu", "--no-smoke"),
    ("check",),
    ("check", "--env", "cpu", "--max-age", "1s"),
    ("run", "--env", "auto", "--", "true"),
    ("doctor", "--no-smoke"),
    ("compat", "--env", "cpu"),
], ids=lambda args: " ".join(args))
def test_at_most_one_nvml_init_per_command(traced_env, args):
    assert traced_env(*args) == 1


def test_provision_initialises_nvml_once(traced):
    assert traced("provision", "--preset", "cpu", "--no-smoke", *traced.offline) == 1
    assert traced("provision", "--auto", "--no-smoke", *traced.offline) <= 1
