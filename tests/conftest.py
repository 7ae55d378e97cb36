"""Shared fixtures: an isolated env home, and envcheck run as a real subprocess."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# A suite started in the background by a script (`cmd &` without job control) inherits SIGINT
# ignored, and so would every envcheck the tests start: the Ctrl-C tests would wait for an
# interrupt that can't arrive. A handler here (reset to the default at exec) gives the children
# the disposition a terminal gives them. Ignoring SIGINT stays envcheck's users' right.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Likewise SIGHUP under `nohup`: envcheck keeps a hang-up ignored where it was (as nohup's users
# want), so the hang-up tests need the disposition a terminal gives.
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "ENVCHECK_HOME")}
    env.update(extra)
    return env


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty env home; envcheck run through ``cli`` uses it."""
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def cli(home: Path):
    """Run ``envcheck ARGS`` in a subprocess against the test's home."""

    def run(*args: str, env: dict[str, str] | None = None, input: str | None = None,
            timeout: float = 600) -> Result:
        full_env = clean_env(ENVCHECK_HOME=str(home))
        if env:
            full_env.update(env)
        proc = subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True,
                              text=True, env=full_env, input=input, timeout=timeout)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return run


pytest_plugins = ["wheelhouse", "slow_links", "tf_home", "fake_nvml", "torch_homes"]


def pytest_sessionstart(session) -> None:
    """envcheck's bytecode, compiled once, as an installed wheel has it: the tests start envcheck
    in a thousand subprocesses, and with PYTHONDONTWRITEBYTECODE set (or an editable install
    never compiled) each would compile every module it imports again."""
    import compileall

    compileall.compile_dir(str(ROOT / "envcheck"), quiet=1)
