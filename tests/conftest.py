"""Shared fixtures: an isolated env home, and envcheck run as a real subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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


pytest_plugins = ["wheelhouse", "slow_links", "tf_home", "fake_nvml"]
