"""Advice that holds and output people read (issue 9): hints that fit the host, ranking
within the CPU tier, unknown devices, aligned tables, colour only on a terminal, help text."""
from __future__ import annotations

import os
import pty
import subprocess
import sys

from conftest import clean_env
from fake_nvml import A100
from test_select import envcheck, make_env, ranking, select

OLD = {"FAKE_NVML_DRIVER": "418.39", "FAKE_NVML_CUDA": "10010"}


def test_an_old_driver_gets_the_driver_upgrade_it_needs_not_a_create(home, wheelhouse, fake_nvml):
    make_env(home, wheelhouse, "tf-gpu", "tensorflow==2.21.0")
    env = fake_nvml.env([A100], ENVCHECK_HOME=str(home), **OLD)
    r = select(fake_nvml, env, require_gpu=True)
    warning = r.json()["warning"]
    assert r.code == 1 and "upgrade the NVIDIA driver (now 418.39): >= 450.80.02 for preset" in warning
    assert ">= 525.60.13 for preset tensorflow-gpu-cuda12" in warning
    assert not warning.split("then:")[0].count("env create")  # the upgrade comes first
    steps = envcheck(env, "doctor", "--no-smoke", "--json").json()["next_steps"]
    gpu_steps = [s for s in steps if "GPU" in s]
    assert gpu_steps and all("525.60.13" in s for s in gpu_steps)


def test_hints_name_existing_presets_of_the_asked_framework(home, wheelhouse, fake_nvml):
    make_env(home, wheelhouse, "tf", "tensorflow-cpu==2.21.0")
    env = fake_nvml.env([A100], ENVCHECK_HOME=str(home))
    r = envcheck(env, "select", "--framework", "torch")
    hint = r.err.split("create one:")[1]
    assert r.code == 1 and "tensorflow" not in hint
    # the CPU preset, and the GPU one this host's A100 and driver can run
    assert "envcheck env create pytorch-cpu --preset pytorch-cpu" in hint
    assert "for this host's GPUs: envcheck env create pytorch-cuda12 --preset pytorch-cuda12" in hint


def test_a_cpu_only_build_ranks_above_a_gpu_build_that_cant_use_a_gpu(home, wheelhouse, fake_nvml, tmp_path):
    make_env(home, wheelhouse, "a-gpu", "tensorflow==2.21.0")
    make_env(home, wheelhouse, "b-cpu", "tensorflow-cpu==2.21.0")
    env = fake_nvml.env([A100], lib_dir=tmp_path, ENVCHECK_HOME=str(home))  # no NVML here
    r = select(fake_nvml, env)
    assert ranking(r) == [("b-cpu", "cpu"), ("a-gpu", "cpu")]
    assert r.json()["ranking"][1]["why_cpu"] == "no-gpu"
    text = envcheck(env, "select").out
    # its tier, its build and its validation said apart: no "cpu (failed)" or "cpu (no-gpu)" shorthand
    row = next(line for line in text.splitlines() if "a-gpu" in line)
    assert "cpu (GPU build)" in row and "never validated" in row and "no usable GPU here" in row


def test_an_unknown_gpu_is_exit_2_with_or_without_the_smoke(home, wheelhouse, fake_nvml):
    make_env(home, wheelhouse, "tf", "tensorflow-cpu==2.21.0")
    env = fake_nvml.env([A100], ENVCHECK_HOME=str(home))
    for extra in (["--no-smoke"], []):
        r = envcheck(env, "validate", "tf", "--devices", "gpu:9", *extra)
        assert r.code == 2 and "unknown GPU gpu:9" in r.err and "gpu:0" in r.err
    assert not (home / "envs" / "tf" / "envcheck-report.json").exists()


def test_tables_stay_aligned_whatever_the_length_of_names(home, wheelhouse, fake_nvml, tmp_path):
    make_env(home, wheelhouse, "a-very-long-env-name-indeed-for-alignment", "tensorflow-cpu==2.21.0")
    make_env(home, wheelhouse, "x", "tensorflow==2.15.0")
    env = fake_nvml.env([A100], lib_dir=tmp_path, ENVCHECK_HOME=str(home))
    lines = envcheck(env, "select").out.splitlines()
    assert len({line.index("cpu") for line in lines}) == 1, lines


def _on_a_terminal(args: list[str], **extra: str) -> str:
    """envcheck's stdout when it is a terminal (a pseudo-terminal)."""
    main, sub = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "envcheck", *args], stdout=sub, stderr=subprocess.DEVNULL,
                            env=clean_env(**extra))
    os.close(sub)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(main)
    return b"".join(chunks).decode()


def test_verdicts_are_coloured_on_a_terminal_only_and_never_with_no_color():
    args = ["compat", "--framework", "tensorflow-cpu==2.15.0", "--no-gpu"]
    assert "\x1b[32mok\x1b[0m" in _on_a_terminal(args)
    assert "\x1b[" not in _on_a_terminal(args, NO_COLOR="1")
    piped = subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True,
                           env=clean_env())
    assert "verdict: ok" in piped.stdout and "\x1b[" not in piped.stdout


def test_help_and_usage_errors_read_whole():
    top = subprocess.run([sys.executable, "-m", "envcheck", "--help"], capture_output=True, text=True,
                         env=clean_env(COLUMNS="100"))
    assert "...\n" not in top.stdout.split("Commands:")[1] and "Is the env ready to train here? Answers from a stored" in top.stdout
    missing = subprocess.run([sys.executable, "-m", "envcheck", "env", "remove"], capture_output=True,
                             text=True, env=clean_env())
    assert missing.returncode == 2
    assert missing.stderr.strip() == ("envcheck: error: Missing argument 'NAME'; fix: see "
                                      "`envcheck env remove --help`")
    for command in (["gpu"], ["select"], ["check"], ["validate"], ["doctor"], ["provision"], ["compat"],
                    ["diagnose"], ["env", "list"], ["env", "show"], ["presets", "list"]):
        text = subprocess.run([sys.executable, "-m", "envcheck", *command, "--help"], capture_output=True,
                              text=True, env=clean_env(COLUMNS="200")).stdout
        json_line = next(line for line in text.splitlines() if line.strip().startswith("--json"))
        assert len(json_line.split()) > 1, (command, json_line)
