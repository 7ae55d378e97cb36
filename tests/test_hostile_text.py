"""Hostile text from outside envcheck: package names from ``*.dist-info`` folder names (a
terminal control sequence, a byte that isn't UTF-8), GPU names and UUIDs from NVML (the fake
one, answering with escape sequences and a C1 control), a lone surrogate in a stored report.

Text for people shows each as a visible escape and never fails to print; JSON keeps the exact
value; `env export` writes only lines pip can read. envcheck runs with a strict UTF-8 stdout
(``PYTHONIOENCODING=utf-8``, as under an en_US.UTF-8 locale), where a surrogate that reaches
``print`` is a UnicodeEncodeError.
"""
from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from conftest import clean_env
from fake_nvml import A100, FakeNvml
from wheelhouse import offline

pytestmark = pytest.mark.timeout(300)

ESC_NAME = "evil\x1b]0;pwned\x07x"  # sets the terminal's title, raw
BAD_BYTES = b"bad\xffname"  # not UTF-8: Python reads it as "bad\udcffname"
GPU_NAME = "NVIDIA \x1b[2J\x1b[HA100\u009b"  # clears the screen; ends in a C1 control (CSI)
GPU_UUID = "GPU-\x1b]2:pwn\x07-0000"
RAW = (b"\x1b", b"\x07", b"\xc2\x9b", b"\xff")  # what must not reach a terminal


@pytest.fixture(scope="module")
def home(tmp_path_factory, wheelhouse) -> Path:
    """Env `h` (alpha 1.0 from the wheelhouse) with two hostile dist-info folders beside it;
    the one that isn't UTF-8 requires a package that isn't there, so its name is in the
    integrity check's text."""
    root = tmp_path_factory.mktemp("hostile-home")
    (root / "presets").mkdir()
    (root / "presets" / "tiny.toml").write_text('title = "tiny"\nkind = "cpu"\nframework = "torch"\n'
                                                'packages = ["alpha==1.0"]\n')
    proc = subprocess.run([sys.executable, "-m", "envcheck", "env", "create", "h", "--preset", "tiny",
                           *offline(wheelhouse)], capture_output=True, text=True,
                          env=clean_env(ENVCHECK_HOME=str(root)), timeout=300)
    assert proc.returncode == 0, proc.stderr
    site = next((root / "envs" / "h" / "lib").glob("python*/site-packages"))
    (site / f"{ESC_NAME}-1.0.dist-info").mkdir()
    bad = os.path.join(bytes(site), BAD_BYTES + b"-2.0.dist-info")
    os.mkdir(bad)
    with open(os.path.join(bad, b"METADATA"), "w") as fh:
        fh.write("Metadata-Version: 2.1\nName: bad\nVersion: 2.0\nRequires-Dist: missing-dep>=1\n\n")
    return root


@pytest.fixture
def envcheck(fake_nvml: FakeNvml, home: Path):
    """``envcheck(*args, tty=False)``: (exit code, stdout bytes, stderr text) on a host whose
    one GPU has a hostile name and UUID; ``tty``: stdout is a terminal (a pty)."""

    def call(*args: str, tty: bool = False) -> tuple[int, bytes, str]:
        env = fake_nvml.env([f"{GPU_NAME},8.0,81920,uuid={GPU_UUID}"], ENVCHECK_HOME=str(home),
                            PYTHONIOENCODING="utf-8")
        command = [sys.executable, "-m", "envcheck", *args]
        if not tty:
            proc = subprocess.run(command, capture_output=True, env=env, timeout=120)
            return proc.returncode, proc.stdout, proc.stderr.decode()
        leader, follower = pty.openpty()
        with subprocess.Popen(command, stdout=follower, stderr=subprocess.PIPE, env=env) as proc:
            os.close(follower)
            out = b""
            while True:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: the terminal's other side is closed
                    break
                if not chunk:
                    break
                out += chunk
            err = proc.stderr.read().decode()
            code = proc.wait(timeout=120)
        os.close(leader)
        return code, out, err

    return call


def shown(out: bytes) -> str:
    assert not [raw for raw in RAW if raw in out], out
    return out.decode("utf-8")


def test_env_show_shows_control_sequences_and_bad_bytes_as_visible_escapes(envcheck):
    code, out, err = envcheck("env", "show", "h")
    assert code == 0, err
    text = shown(out)
    assert "  evil\\x1b]0;pwned\\x07x==1.0\n" in text and "  bad\\xffname==2.0\n" in text
    code, out, _ = envcheck("env", "show", "h", "--json")
    packages = json.loads(out)["env"]["packages"]  # JSON carries the names as they are
    assert packages[ESC_NAME] == "1.0" and packages["bad\udcffname"] == "2.0"


def test_env_export_writes_only_valid_requirements_and_warns_of_the_rest(envcheck):
    code, out, err = envcheck("env", "export", "h")
    assert code == 0, err
    pins = [line for line in shown(out).splitlines() if not line.startswith("#")]
    assert pins == ["alpha==1.0"]
    assert all(str(Requirement(line)) == line for line in pins)
    warnings = err.splitlines()
    assert len(warnings) == 2 and all(w.startswith("envcheck: warning: left out ") for w in warnings)
    assert "'evil\\x1b]0;pwned\\x07x' '1.0': not a PEP 508 name" in err
    assert "'bad\\udcffname' '2.0': not a PEP 508 name" in err
    assert "\x1b" not in err and "\x07" not in err


def test_gpu_names_and_uuids_from_nvml_are_escaped_in_text_exact_in_json(envcheck):
    code, out, err = envcheck("gpu")
    assert code == 0, err
    row = shown(out).splitlines()[2]
    assert re.split(r"\s{2,}", row)[1] == "NVIDIA \\x1b[2J\\x1b[HA100\\x9b"
    assert "GPU-\\x1b]2:pwn\\x07" in row
    gpu = json.loads(envcheck("gpu", "--json")[1])["gpus"][0]
    assert (gpu["name"], gpu["uuid"]) == (GPU_NAME, GPU_UUID)


def test_validate_text_shows_hostile_names_escaped(envcheck):
    code, out, err = envcheck("validate", "h", "--no-smoke")
    text = shown(out)
    assert code == 1 and "error" not in err, err  # not ready: `bad` requires what isn't installed
    assert "1 usable GPU(s): NVIDIA \\x1b[2J\\x1b[HA100\\x9b" in text
    assert "bad\\xffname 2.0 requires missing-dep>=1" in text


def test_on_a_terminal_verdicts_keep_their_colour_and_hostile_sequences_stay_escaped(envcheck):
    code, out, err = envcheck("validate", "h", "--no-smoke", tty=True)
    assert code == 1 and "error" not in err, err
    assert b"verdict: \x1b[31mnot-ready\x1b[0m" in out  # envcheck's own colour, raw
    assert b"NVIDIA \\x1b[2J\\x1b[HA100\\x9b" in out
    assert out.count(b"\x1b") == 2 and b"\x07" not in out and b"\xc2\x9b" not in out


def test_reports_with_undecodable_names_and_lone_surrogates_print_and_write(envcheck, home, tmp_path):
    """A stored report is JSON: it can hold a lone surrogate ("\\ud800") that no encoder writes."""
    assert envcheck("validate", "h", "--no-smoke")[0] == 1
    stored = home / "envs" / "h" / "envcheck-report.json"
    report = json.loads(stored.read_text())
    report["checks"][0]["summary"] += " \ud800\x1b[8m"
    stored.write_text(json.dumps(report))
    code, out, err = envcheck("report", "h")
    assert code == 1 and "error" not in err, err  # exit 1: a not-ready report
    text = shown(out)
    assert "bad\\xffname 2.0 requires missing-dep>=1" in text and " \\ud800\\x1b[8m" in text
    for command in (["report", "h"], ["doctor", "--no-smoke"]):
        page = tmp_path / f"{command[0]}.html"
        code, _, err = envcheck(*command, "--html", str(page))
        assert code == 1 and f"envcheck: wrote {page}" in err and "error" not in err, err
        html = page.read_bytes().decode("utf-8")
        assert "bad\\xffname 2.0 requires missing-dep&gt;=1" in html and "\x1b" not in html


@pytest.mark.parametrize("devices", ["gpu:\uff11", "gpu:\u00b2", "cpu:\u0660"])
def test_device_numbers_are_ascii_digits_only(envcheck, home, devices):
    """A full-width '１' is not GPU 1 and '²' is no number: bad input, nothing validated."""
    stored = home / "envs" / "h" / "envcheck-report.json"
    before = stored.exists() and stored.stat().st_mtime_ns
    code, _, err = envcheck("validate", "h", "--no-smoke", "--devices", devices)
    assert code == 2 and err.startswith("envcheck: error: bad device list") and err.count("\n") == 1
    assert (stored.exists() and stored.stat().st_mtime_ns) == before
