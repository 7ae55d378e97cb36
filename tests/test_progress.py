"""Live progress, through the real CLI: real uv and pip installs from local wheels (one over
HTTP, big enough that both installers announce its download), a stand-in framework whose
smoke runner reports each device, stderr on a pseudo-terminal (``pty``) and on a pipe."""
from __future__ import annotations

import base64
import fcntl
import functools
import http.server
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import clean_env
from envcheck.envs.install_output import reader
from envcheck.paths import Home
from envcheck.progress import Progress
from wheelhouse import build_wheel, offline

TINY = ('title = "tiny"\ndescription = ""\nkind = "cpu"\nframework = "tensorflow"\n'
        'requires-python = ">=3.8"\npackages = [{packages}]\n')

# A `tensorflow` that imports and describes its build, so the smoke runner gets as far as
# each device; the fit itself then fails there (the stand-in has no tf.device), as a result per device.
STANDIN_TF = '''
__version__ = "2.21.0"


class _Config:
    class experimental:
        @staticmethod
        def set_memory_growth(device, on):
            pass

    LogicalDeviceConfiguration = dict

    def __init__(self):
        self.cpus = 1

    def list_physical_devices(self, kind):
        return ["/physical_device:CPU:0"] if kind == "CPU" else []

    def set_logical_device_configuration(self, device, configs):
        self.cpus = len(configs)

    def list_logical_devices(self, kind):
        return ["/device:CPU:%d" % i for i in range(self.cpus)] if kind == "CPU" else []


class sysconfig:
    @staticmethod
    def get_build_info():
        return {"is_cuda_build": False}


class keras:
    __version__ = "3.0.0"

    class backend:
        @staticmethod
        def backend():
            return "tensorflow"


config = _Config()
'''

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ELAPSED = r"\d+\.\ds"


@dataclass
class Run:
    code: int
    out: str  # stdout, always a pipe
    err: str  # stderr: the terminal's bytes, or the pipe's


def environ(home: Path, **extra: str) -> dict[str, str]:
    """The test's home; no variable of the runner's own that changes how rich or uv behave."""
    env = clean_env(ENVCHECK_HOME=str(home), TERM="xterm-256color", COLUMNS="250",
                    PIP_NO_CACHE_DIR="1")
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "UV_CACHE_DIR"):
        env.pop(name, None)
    env.update(extra)
    return env


def piped(home: Path, *args: str, **extra: str) -> Run:
    proc = subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True,
                          env=environ(home, **extra), timeout=300)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def on_terminal(home: Path, *args: str, **extra: str) -> Run:
    """envcheck with stderr on a pseudo-terminal 250 columns wide, stdout on a pipe."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "envcheck", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave, env=environ(home, **extra))
    os.close(slave)
    chunks, deadline = [], time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 1)[0]:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the last writer of the terminal is gone
                break
            if not data:
                break
            chunks.append(data)
        out = proc.stdout.read().decode()
        code = proc.wait(timeout=30)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return Run(code, out, b"".join(chunks).decode("utf-8", "replace"))


def frames(terminal: str) -> list[str]:
    """The status line as drawn, one text per redraw (rich erases the line and draws again)."""
    return [ANSI.sub("", f).strip() for f in re.split(r"\r|\x1b\[2K", terminal) if ANSI.sub("", f).strip()]


def colours(terminal: str) -> set[str]:
    """The colour codes (foreground, background) among the terminal's SGR sequences."""
    codes = {c for params in re.findall(r"\x1b\[([0-9;]*)m", terminal) for c in params.split(";")}
    return {c for c in codes if c.isdigit() and (30 <= int(c) <= 49 or 90 <= int(c) <= 107)}


def plain_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("envcheck: ")]


@pytest.fixture
def presets(home: Path) -> Path:
    folder = home / "presets"
    folder.mkdir()
    (folder / "tiny.toml").write_text(TINY.format(packages='"alpha==1.0", "beta"'))
    (folder / "big.toml").write_text(TINY.format(packages='"alpha==1.0", "bulky"'))
    return folder


@pytest.fixture
def served(tmp_path: Path) -> str:
    """alpha, and bulky (2.3 MiB that don't compress), as find-links over HTTP on loopback."""
    folder = tmp_path / "served"
    build_wheel(folder, "alpha", "1.0")
    blob = base64.b64encode(os.urandom(1_800_000)).decode()
    build_wheel(folder, "bulky", "1.0", files={"bulky/__init__.py": "", "bulky/blob.txt": blob})
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def standin_home(tmp_path_factory) -> Path:
    """A home with a ready env ``s`` whose framework is ``STANDIN_TF``, made once per module."""
    tmp = tmp_path_factory.mktemp("standin")
    home = tmp / "home"
    home.mkdir()
    wheels = tmp / "standin"
    build_wheel(wheels, "tensorflow-cpu", "2.21.0", files={"tensorflow/__init__.py": STANDIN_TF})
    preset = tmp / "s.toml"
    preset.write_text(TINY.format(packages='"tensorflow-cpu==2.21.0"'))
    r = piped(home, "-q", "env", "create", "s", "--preset-file", str(preset), "--no-index",
              "--find-links", str(wheels))
    assert r.code == 0, r.err
    return home


@pytest.fixture
def standin(standin_home: Path) -> str:
    """Env ``s`` of ``standin_home``, as just made: never validated (a report the test's
    validation stored is removed after it)."""
    report = Home(standin_home).report("s")
    assert not report.exists()
    yield "s"
    report.unlink(missing_ok=True)


# -- env create on a terminal ---------------------------------------------------------------

def test_a_terminal_gets_one_status_line_redrawn_with_phase_elapsed_time_and_log(home, presets, wheelhouse):
    r = on_terminal(home, "env", "create", "dl", "--preset", "tiny", *offline(wheelhouse))
    assert r.code == 0, r.err
    drawn = frames(r.err)
    line = re.compile(rf"env dl: (?P<phase>.+?) · {ELAPSED} · log (?P<log>\S+)$")
    states = [m for m in map(line.search, drawn) if m]
    phases = [m["phase"] for m in states]
    for phase in ("making the venv", "resolving", "installing 2 packages", "compiling bytecode"):
        assert phase in phases, drawn
    assert phases.index("resolving") < phases.index("installing 2 packages") < phases.index("compiling bytecode")
    log = states[0]["log"]
    assert re.fullmatch(rf"{re.escape(str(home))}/logs/dl-create-\S+\.log", log)
    # one line redrawn in place: the states are frames of one line, not lines of their own
    assert r.err.count("\n") <= 3 and "\x1b[2K" in r.err
    assert re.search(rf"env dl: created in {ELAPSED}", r.err)  # the task's end stays
    assert "\x1b[?25h" in r.err  # the cursor is given back
    assert colours(r.err)  # NO_COLOR (below) takes them away
    assert "created env dl" in r.out and "\x1b" not in r.out  # the result: stdout, plain


def test_json_on_a_terminal_draws_the_line_erases_it_and_keeps_stdout_one_document(home, presets, wheelhouse):
    r = on_terminal(home, "env", "create", "dl", "--preset", "tiny", "--json", *offline(wheelhouse))
    assert r.code == 0, r.err
    assert json.loads(r.out)["env"]["state"] == "ready"  # the whole of stdout: one document
    assert any("env dl: installing 2 packages" in f for f in frames(r.err))
    assert "created in" not in r.err  # nothing kept: the terminal is left as it was


@pytest.mark.parametrize("setting", ["quiet", "dumb", "no-color"])
def test_quiet_dumb_terminal_and_no_color(home, presets, wheelhouse, setting):
    args = ["-q"] if setting == "quiet" else []
    extra = {"dumb": {"TERM": "dumb"}, "no-color": {"NO_COLOR": "1"}}.get(setting, {})
    r = on_terminal(home, *args, "env", "create", "dl", "--preset", "tiny", *offline(wheelhouse), **extra)
    assert r.code == 0, r.err
    if setting == "quiet":
        assert "env dl" not in r.err
    elif setting == "dumb":  # a terminal that can't redraw: the plain lines
        assert "\x1b" not in r.err and "\r\n" in r.err
        assert any(ln.startswith("envcheck: env dl: installing 2 packages") for ln in r.err.splitlines())
    else:  # the live line, without colour
        assert "\x1b[2K" in r.err and any("env dl: resolving" in f for f in frames(r.err))
        assert not colours(r.err) and "\x1b[1m" in r.err  # bold is no colour


def test_a_failure_on_a_terminal_leaves_the_error_line_and_the_cursor(home, presets, wheelhouse):
    r = on_terminal(home, "env", "create", "dl", "--preset", "tiny", "--add", "gamma", *offline(wheelhouse))
    assert r.code == 2
    last = ANSI.sub("", r.err).strip().splitlines()[-1]
    assert last.startswith("envcheck: error: uv could not resolve") and "gamma" in last
    assert "\x1b[?25h" in r.err and r.out == ""


# -- env create and add without a terminal --------------------------------------------------

@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_a_pipe_gets_one_plain_line_per_phase_with_the_download_size(home, presets, served, installer):
    r = piped(home, "env", "create", "big", "--preset", "big", "--installer", installer,
              "--no-index", "--find-links", served)
    assert r.code == 0, r.err
    assert "\x1b" not in r.err and "\r" not in r.err
    lines = plain_lines(r.err)
    assert re.fullmatch(rf"envcheck: creating env big from preset big with {installer}, python 3\.\d+\.\d+ "
                        rf"\(log: {re.escape(str(home))}/logs/big-create-\S+\.log\)", lines[0])
    phases = [re.fullmatch(rf"envcheck: env big: (.+) \[{ELAPSED}\]", ln)[1] for ln in lines[1:-1]]
    expected = ["making the venv", "resolving", "downloading", "installing 2 packages (2.3 MiB downloaded)"]
    assert phases == expected + (["compiling bytecode"] if installer == "uv" else []) \
        + ["recording what was installed"]  # the baseline env verify compares with
    assert re.fullmatch(rf"envcheck: env big: created in {ELAPSED}", lines[-1])
    assert "created env big" in r.out


def test_json_through_a_pipe_prints_nothing_but_the_document(home, presets, wheelhouse):
    r = piped(home, "env", "create", "dl", "--preset", "tiny", "--json", *offline(wheelhouse))
    assert r.code == 0, r.err
    assert json.loads(r.out)["schema"] == "envcheck.env/1" and r.err == ""


def test_env_add_shows_the_backup_then_the_install(home, presets, wheelhouse):
    assert piped(home, "-q", "env", "create", "dl", "--preset", "tiny", *offline(wheelhouse)).code == 0
    r = piped(home, "env", "add", "dl", "alpha==2.0", *offline(wheelhouse))
    assert r.code == 0, r.err
    lines = plain_lines(r.err)
    assert lines[0].startswith("envcheck: adding alpha==2.0 to env dl with uv (log: ")
    assert [re.sub(r" \[.*", "", ln) for ln in lines[1:4]] == [
        "envcheck: env dl: backing up the env", "envcheck: env dl: resolving",
        "envcheck: env dl: installing 1 package"]
    assert lines[-1].startswith("envcheck: env dl: packages added in ")


# -- validate and doctor: each device ---------------------------------------------------------

def test_validate_shows_each_device_as_it_starts_and_ends(standin_home, standin):
    r = piped(standin_home, "validate", standin, "--devices", "cpu:0,cpu:1", "--timeout", "60")
    assert r.code == 1  # the stand-in's fit fails on every device
    said = [re.sub(rf" \[{ELAPSED}\]$", "", ln) for ln in plain_lines(r.err)]
    assert said[0] == "envcheck: validating env s"
    assert said[1:] == [
        "envcheck: env s: checking host, compat, integrity, libraries",
        "envcheck: env s: starting tensorflow for the smoke fit on cpu:0, cpu:1",
        "envcheck: env s: cpu:0: smoke fit",
        "envcheck: env s: cpu:0: fail, AttributeError: module 'tensorflow' has no attribute 'device'",
        "envcheck: env s: cpu:1: smoke fit",
        "envcheck: env s: cpu:1: fail, AttributeError: module 'tensorflow' has no attribute 'device'",
        "envcheck: env s: multi-replica: smoke fit",
        f"envcheck: env s: not-ready in {said[-1].rpartition(' in ')[2]}",
    ]
    assert re.fullmatch(ELAPSED, said[-1].rpartition(" in ")[2])
    assert "cpu:0" in r.out and "verdict: not-ready" in r.out  # the report itself: stdout


def test_validate_json_stays_one_document_on_a_terminal_and_off_it(standin_home, standin):
    quiet = piped(standin_home, "validate", standin, "--devices", "cpu:0,cpu:1", "--json")
    assert quiet.err == ""
    live = on_terminal(standin_home, "validate", standin, "--devices", "cpu:0,cpu:1", "--json")
    for run in (quiet, live):
        assert run.code == 1
        (report,) = json.loads(run.out)["reports"]
        assert [d["device"] for d in report["devices"]] == ["cpu:0", "cpu:1"]
    shown = frames(live.err)
    assert any(re.search(rf"env s: cpu:1: smoke fit · {ELAPSED}", f) for f in shown), shown


def test_doctor_shows_the_ranking_then_the_chosen_envs_devices(standin_home, standin, tmp_path):
    r = piped(standin_home, "doctor", "--timeout", "60", LD_LIBRARY_PATH=str(tmp_path))  # no NVML here
    lines = plain_lines(r.err)
    assert lines[0] == "envcheck: doctor: reading the GPUs and ranking the envs"
    assert re.fullmatch(rf"envcheck: doctor: chose env s in {ELAPSED}", lines[1])
    assert "envcheck: validating env s" in lines
    assert any(ln.startswith("envcheck: env s: cpu:0: fail, ") for ln in lines)


@pytest.mark.slow
def test_a_real_fit_shows_its_ms_per_step(tf_home):
    r = piped(tf_home, "validate", "tf", "--devices", "cpu")
    assert r.code == 0, r.err
    assert any(re.fullmatch(rf"envcheck: env tf: cpu:0: pass, \d+\.\d\d ms/step \[{ELAPSED}\]", ln)
               for ln in plain_lines(r.err)), r.err


# -- the installers' words --------------------------------------------------------------------

class Heard(Progress):
    def __init__(self):
        self.phases, self.steps = [], []

    def phase(self, name: str) -> None:
        self.phases.append(name)

    def step(self, detail: str) -> None:
        self.steps.append(detail)


# As uv and pip print them through a pipe (uv's from astral-sh/uv#16785, sizes as each shows them).
UV_LINES = """Using Python 3.11.7 environment at: /e
Resolved 12 packages in 3ms
Downloading numpy (15.8MiB)
Downloading matplotlib (9.4MiB)
 Downloaded matplotlib
   Building sentencepiece==0.2.0
      Built sentencepiece==0.2.0
 Downloaded numpy
Prepared 11 packages in 2.10s
Installed 12 packages in 40ms
Bytecode compiled 1520 files in 1.31s
 + numpy==2.1.0"""
PIP_LINES = """Collecting torch==2.4.0
  Downloading torch-2.4.0-cp311-cp311-manylinux1_x86_64.whl (797.2 MB)
     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 797.2/797.2 MB 5.1 MB/s eta 0:00:00
Collecting filelock (from torch==2.4.0)
  Using cached filelock-3.15.4-py3-none-any.whl (16 kB)
Collecting nvidia-cublas-cu12==12.1.3.1 (from torch==2.4.0)
  Downloading nvidia_cublas_cu12-12.1.3.1-py3-none-manylinux1_x86_64.whl (410.6 MB)
Installing collected packages: nvidia-cublas-cu12, filelock, torch
Successfully installed filelock-3.15.4 nvidia-cublas-cu12-12.1.3.1 torch-2.4.0"""


@pytest.mark.parametrize("backend, lines, phases, step", [
    ("uv", UV_LINES, ["resolving", "downloading", "installing 11 packages (25.2 MiB downloaded)",
                      "compiling bytecode"], "matplotlib (9.4 MiB); 2 downloads, 25.2 MiB so far"),
    ("pip", PIP_LINES, ["resolving", "downloading", "installing 3 packages (1.12 GiB downloaded)"],
     "nvidia_cublas_cu12 (391.6 MiB); 2 downloads, 1.12 GiB so far"),
], ids=["uv", "pip"])
def test_installer_output_moves_through_the_phases_once(backend, lines, phases, step):
    heard = Heard()
    read = reader(backend, heard)
    for line in lines.splitlines():
        read(line)
    assert heard.phases == phases  # pip's Collecting after a download is a step, not a phase
    assert step in heard.steps


def test_a_notice_reaches_stderr_through_the_sessions_observer_prefixed_once(home, monkeypatch, capsys):
    """A report that can't be stored (a read-only home) is said once, as `envcheck: ...`."""
    import errno
    from types import SimpleNamespace

    from envcheck.cli.progress_view import Notices
    from envcheck.paths import Home
    from envcheck.usecases.session import Session

    def read_only(home, report):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr("envcheck.validation.validate.validate", lambda info, host, **options: "report")
    monkeypatch.setattr("envcheck.validation.reports.store_report", read_only)
    monkeypatch.setattr(Session, "_to_store", lambda self, info, report: report)
    session = Session(Home(home), host=object(), observer=Notices())
    info = SimpleNamespace(name="tf", path=home, state="ready", adopted=None, records=None)
    assert session.validate_and_store(info, smoke=False) == "report"
    err = capsys.readouterr().err
    assert err == (f"envcheck: the report of env tf was not stored: Read-only file system "
                   f"({Home(home).report('tf')})\n")


def test_the_store_tells_its_recoveries_to_the_observer_it_is_given(home):
    from envcheck.paths import Home
    from envcheck.usecases.session import Session

    heard = []

    class Recorder(Progress):
        def notice(self, line: str) -> None:
            heard.append(line)

    session = Session(Home(home), host=object(), observer=Recorder())
    session.store.scratch.notice("env dl: removed a leftover")
    assert heard == ["env dl: removed a leftover"]


def test_the_core_never_prints():
    """Below the CLI, what the user should hear goes through the progress observer."""
    import ast

    package = Path(__file__).resolve().parent.parent / "envcheck"
    printing = [f"{path.relative_to(package)}:{node.lineno}"
                for path in package.rglob("*.py") if path.parts[len(package.parts)] not in ("cli", "data")
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"]
    assert printing == []
