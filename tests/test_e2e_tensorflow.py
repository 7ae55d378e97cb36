"""End to end: the tensorflow-cpu preset becomes a ready env in which TensorFlow imports."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import clean_env


@pytest.mark.slow
def test_tensorflow_cpu_preset_env_imports_tensorflow(tf_home, tf_python):
    listing = subprocess.run([sys.executable, "-m", "envcheck", "env", "show", "tf", "--json"],
                             capture_output=True, text=True, env=clean_env(ENVCHECK_HOME=str(tf_home)))
    env = json.loads(listing.stdout)["env"]
    assert env["state"] == "ready" and env["preset"] == "tensorflow-cpu"
    assert env["packages"]["tensorflow-cpu"].startswith("2.21.")

    code = "import tensorflow as tf; print(tf.__version__); print(tf.reduce_sum(tf.ones([3])).numpy())"
    proc = subprocess.run([str(tf_python), "-c", code], capture_output=True, text=True, timeout=300,
                          env=clean_env(TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr
    version, total = proc.stdout.split()
    assert version == env["packages"]["tensorflow-cpu"] and float(total) == 3.0
