"""A real tensorflow-cpu env, created once per test session by `envcheck env create`.

Set ENVCHECK_TEST_TF_HOME to an env home that already holds a ready env ``tf`` to reuse it
between runs (developers); CI makes it fresh.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env

TF_ENV = "tf"


@pytest.fixture(scope="session")
def tf_home(tmp_path_factory) -> Path:
    reuse = os.environ.get("ENVCHECK_TEST_TF_HOME")
    home = Path(reuse) if reuse else tmp_path_factory.mktemp("tf-home")
    if not (home / "envs" / TF_ENV / "envcheck.json").exists():
        proc = subprocess.run([sys.executable, "-m", "envcheck", "env", "create", TF_ENV,
                               "--preset", "tensorflow-cpu"], capture_output=True, text=True,
                              env=clean_env(ENVCHECK_HOME=str(home)), timeout=1800)
        assert proc.returncode == 0, proc.stderr
    return home


@pytest.fixture(scope="session")
def tf_python(tf_home: Path) -> Path:
    return tf_home / "envs" / TF_ENV / "bin" / "python"
