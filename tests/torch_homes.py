"""Env homes that each hold a real CPU PyTorch env ``torch`` made by `envcheck env create torch
--preset pytorch-cpu` (offline here: the +cpu wheel is in the configured find-links), one per
node of a test fleet: the preflight tests and bench give each Ray or Slurm node its own home.

The first home is made as a user would; the others share its uv cache folder (a link to it: the
same filesystem, so uv links the files in), so each further env takes seconds, not a download.
Every env made from the same preset and wheels holds the same files: one content digest on
every node, as preflight requires.

Set ENVCHECK_TEST_TORCH_HOMES to a folder that already holds home1..homeN made this way to reuse
them between runs (developers, the bench); the tests otherwise make them fresh, once a session.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env

ENV = "torch"
HOMES = 7


def make_home(root: Path, k: int) -> Path:
    """``root/home{k}`` with env ``torch`` in it (made if missing)."""
    home = root / f"home{k}"
    if (home / "envs" / ENV / "envcheck.json").exists():
        return home
    home.mkdir(parents=True, exist_ok=True)
    if k > 1:
        first = make_home(root, 1)
        if not (home / "cache").exists():
            (home / "cache").symlink_to(first / "cache")
    made = subprocess.run([sys.executable, "-m", "envcheck", "env", "create", ENV, "--preset", "pytorch-cpu"],
                          capture_output=True, text=True, env=clean_env(ENVCHECK_HOME=str(home)), timeout=1800)
    assert made.returncode == 0, made.stderr
    return home


def torch_homes_at(root: Path, count: int = HOMES) -> list[Path]:
    return [make_home(root, k) for k in range(1, count + 1)]


@pytest.fixture(scope="session")
def torch_homes(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    reuse = os.environ.get("ENVCHECK_TEST_TORCH_HOMES")
    root = Path(reuse) if reuse else tmp_path_factory.mktemp("torch-homes")
    return torch_homes_at(root)
