"""envcheck.processes for real: children stopped with everything they started, on a deadline,
on SIGTERM/SIGHUP/SIGKILL of envcheck, setsid() grandchildren and daemons included; output
read safely; `envcheck run` starting its command with default signals; hanging or
garbage-printing interpreters."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from packaging.version import Version

from conftest import ROOT, clean_env
from envcheck import frameworks, processes
from envcheck.envs.pythons import interpreter_problem, probe_version
from wheelhouse import build_wheel, offline

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard is Linux's")]

# Starts, and writes the pids of, three processes that outlive a plain process-group kill
# or a parent's death: one in the group, one in a session of its own, and a daemon (double
# fork + setsid: its parent exits at once, so it is an orphan from the start).
TREE = """
import os, subprocess, sys, time
sleeper = [sys.executable, "-c", "import time; time.sleep(1000)"]
in_group = subprocess.Popen(sleeper).pid
own_session = subprocess.Popen(sleeper, start_new_session=True).pid
r, w = os.pipe()
middle = os.fork()
if middle == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, str(os.getpid()).encode())
        time.sleep(1000)
    os._exit(0)
os.waitpid(middle, 0)
os.close(w)
daemon = int(os.read(r, 32))
with open(os.environ["PID_FILE"] + ".tmp", "w") as fh:
    fh.write("%d %d %d %d" % (os.getpid(), in_group, own_session, daemon))
os.replace(os.environ["PID_FILE"] + ".tmp", os.environ["PID_FILE"])
"""
HANG = TREE + "time.sleep(1000)\n"


def running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def wait_for(path: Path, seconds: float = 60) -> list[int]:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.05)
    return [int(p) for p in path.read_text().split()]


def assert_gone(pids: list[int], seconds: float = 10) -> None:
    """Each pid ends within ``seconds``; whatever is left is killed, so no test leaks it."""
    deadline = time.monotonic() + seconds
    while any(map(running, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in pids if running(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"left running: {left}"


def assert_emptied(folder: Path, seconds: float = 10) -> None:
    """``folder`` is empty within ``seconds`` (after a SIGKILL, a guard empties it)."""
    deadline = time.monotonic() + seconds
    while list(folder.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(folder.iterdir()) == []


@pytest.fixture
def pid_file(tmp_path: Path):
    """Where a test's processes write their pids; any still running at teardown is killed,
    so a failing test leaks nothing."""
    path = tmp_path / "pids"
    yield path
    if path.exists():
        for pid in map(int, path.read_text().split()):
            if running(pid):
                os.kill(pid, signal.SIGKILL)


def script(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    path.chmod(0o755)
    return path


# --- the module -------------------------------------------------------------------------------

def test_clean_environ_strips_one_list_and_env_environ_puts_the_env_first(tmp_path: Path):
    base = {name: "x" for name in processes.STRIPPED} | {"PATH": "/usr/bin", "KEEP": "1"}

    clean = processes.clean_environ({"EXTRA": "2", "PYTHONHOME": "/nowhere"}, base=base)
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    in_env = processes.env_environ(tmp_path / "env", base=base, extra={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})

    assert clean == {"PATH": "/usr/bin", "KEEP": "1", "EXTRA": "2"}
    assert in_env["VIRTUAL_ENV"] == str(tmp_path / "env")
    assert in_env["PATH"] == f"{tmp_path / 'env' / 'bin'}{os.pathsep}/usr/bin"
    assert in_env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and "PYTHONPATH" not in in_env


def test_child_environ_adds_what_each_purpose_needs_and_the_caller_keeps_its_own(tmp_path: Path):
    env_dir = tmp_path / "env"
    library = env_dir / "lib" / "python3.11" / "site-packages" / "nvidia" / "cudnn" / "lib"
    library.mkdir(parents=True)
    (env_dir / "pyvenv.cfg").write_text("home = /usr/bin\n")
    base = {"PATH": "/usr/bin", "PYTHONPATH": "/elsewhere", "CUDA_DEVICE_ORDER": "FASTEST_FIRST",
            "TF_FORCE_GPU_ALLOW_GROWTH": "false", "LD_LIBRARY_PATH": "/opt/lib"}
    # an env envcheck did not make runs with the loader's path its user gives it
    adopted = processes.child_environ(env_dir, base=base)
    assert adopted["LD_LIBRARY_PATH"] == "/opt/lib" and adopted["VIRTUAL_ENV"] == str(env_dir)
    conda = tmp_path / "conda"
    (conda / "conda-meta").mkdir(parents=True)
    in_conda = processes.child_environ(conda, base=base)
    assert in_conda["CONDA_PREFIX"] == str(conda) and "VIRTUAL_ENV" not in in_conda
    (env_dir / "envcheck.json").write_text("{}")  # an env envcheck made: its CUDA wheels on the loader's path

    tensorflow = frameworks.get("tensorflow").run_environ(Version("2.11.1"))
    run = processes.child_environ(env_dir, gpus=[0, 2], framework=tensorflow, base=base,
                                  extra={"ENVCHECK_GLOBAL_BATCH": "8"})
    assert run["PATH"] == f"{env_dir / 'bin'}{os.pathsep}/usr/bin" and run["VIRTUAL_ENV"] == str(env_dir)
    assert run["LD_LIBRARY_PATH"] == f"{library}{os.pathsep}/opt/lib" and "PYTHONPATH" not in run
    assert (run["CUDA_DEVICE_ORDER"], run["CUDA_VISIBLE_DEVICES"]) == (processes.PCI_ORDER, "0,2")
    assert run["TF_FORCE_GPU_ALLOW_GROWTH"] == "false"  # the framework's are defaults
    assert run["ENVCHECK_GLOBAL_BATCH"] == "8"
    assert "CUDA_VISIBLE_DEVICES" not in processes.child_environ(env_dir, base={})

    kernel = processes.child_environ(env_dir, framework=tensorflow, purpose="kernel")
    assert kernel == {"PATH": f"{env_dir / 'bin'}{os.pathsep}${{PATH}}", "VIRTUAL_ENV": str(env_dir),
                      "LD_LIBRARY_PATH": f"{library}{os.pathsep}${{LD_LIBRARY_PATH}}",
                      **{n: "" for n in processes.STRIPPED if n.startswith("PYTHON")},
                      "CUDA_DEVICE_ORDER": processes.PCI_ORDER, "TF_FORCE_GPU_ALLOW_GROWTH": "true"}

    smoke = processes.child_environ(processes.venv_of(env_dir / "bin" / "python"), purpose="smoke",
                                    framework=frameworks.smoke_environ(), base=base, extra={"KERAS_HOME": "/k"})
    assert smoke["VIRTUAL_ENV"] == str(env_dir) and smoke["KERAS_HOME"] == "/k"
    assert (smoke["CUDA_DEVICE_ORDER"], smoke["PYTHONNOUSERSITE"], smoke["TF_CPP_MIN_LOG_LEVEL"]) == (
        processes.PCI_ORDER, "1", "2")
    assert smoke["TF_FORCE_GPU_ALLOW_GROWTH"] == "false"  # no run variables: the caller's, passed on

    probe = processes.child_environ(None, purpose="probe", base=base)
    assert probe == processes.clean_environ(base=base)  # no env: the clean base alone
    assert processes.venv_of(tmp_path / "bin" / "python") is None
    fleet = processes.child_environ(None, purpose="fleet", base=base, extra={"SECRET": "s"})
    assert fleet == processes.clean_environ({"SECRET": "s"}, base=base)
    with pytest.raises(ValueError):
        processes.child_environ(None, purpose="fleet", gpus=[0])
    with pytest.raises(ValueError):
        processes.child_environ(None, purpose="probe", framework=tensorflow)
    with pytest.raises(ValueError):
        processes.child_environ(None, purpose="nonsense")


def test_output_is_decoded_safely_and_the_status_kept():
    done = processes.run(["sh", "-c", r"printf 'ok \377\376\n'; printf 'bad \300\n' >&2; exit 3"],
                         timeout=30, env=processes.clean_environ())

    assert (done.returncode, done.timed_out) == (3, False)
    assert done.stdout == "ok \ufffd\ufffd\n" and done.stderr == "bad \ufffd\n"


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL])
def test_a_child_killed_by_a_signal_reads_as_killed_by_it(sig: int):
    done = processes.run(["sh", "-c", f"kill -{int(sig)} $$"], timeout=30, env=processes.clean_environ())

    assert done.returncode == -sig


def test_a_command_that_cannot_run_raises_as_popen_does(tmp_path: Path):
    not_executable = tmp_path / "data.txt"
    not_executable.write_text("hello")

    with pytest.raises(FileNotFoundError):
        processes.run([str(tmp_path / "missing")], timeout=30, env=processes.clean_environ())
    with pytest.raises(PermissionError):
        processes.run([str(not_executable)], timeout=30, env=processes.clean_environ())


def test_a_command_begun_runs_while_its_caller_works_and_finishes_as_run_does(tmp_path: Path):
    ran = tmp_path / "ran"

    begun = processes.begin(["sh", "-c", f"touch '{ran}'; printf out; printf err >&2; exit 3"],
                            env=processes.clean_environ())
    deadline = time.monotonic() + 30
    while not ran.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ran.exists()  # before anyone waited for it
    done = begun.finish(timeout=30)

    assert (done.returncode, done.stdout, done.stderr, done.timed_out) == (3, "out", "err", False)
    with pytest.raises(FileNotFoundError):
        processes.begin([str(tmp_path / "missing")], env=processes.clean_environ()).finish(timeout=30)


@pytest.mark.parametrize("bad", [math.nan, math.inf, 0, -1])
def test_a_timeout_must_be_finite_and_positive(bad: float):
    with pytest.raises(ValueError):
        processes.run(["true"], timeout=bad, env=processes.clean_environ())


def test_at_the_deadline_the_whole_tree_goes(pid_file: Path):
    started = time.monotonic()

    done = processes.run([sys.executable, "-c", HANG], timeout=3,
                         env=processes.clean_environ({"PID_FILE": str(pid_file)}))

    assert (done.returncode, done.timed_out, done.limit) == (None, True, 3)
    assert time.monotonic() - started < 20
    assert_gone(wait_for(pid_file))


def test_what_a_command_leaves_behind_goes_when_it_ends(pid_file: Path):

    done = processes.run([sys.executable, "-c", TREE], timeout=60,
                         env=processes.clean_environ({"PID_FILE": str(pid_file)}))

    assert done.returncode == 0
    assert_gone(wait_for(pid_file))


def test_progress_extends_the_deadline_but_not_the_bound():
    marks = []

    def progress(line: str) -> float | None:
        marks.append(line)
        return 1.0 if line == "mark" else None

    done = processes.run(["sh", "-c", "while :; do echo mark >&2; echo other >&2; sleep 0.1; done"],
                         timeout=1.0, bound=2.5, progress=progress, env=processes.clean_environ())

    assert (done.timed_out, done.limit) == (True, 2.5)  # ran past its 1 s timeout, to the bound
    assert marks.count("mark") > 10 and "other" in marks


PARENT = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # even if the test runs in background
sys.path.insert(0, {root!r})
from envcheck import processes
try:
    with processes.temporary_directory() as scratch:
        (scratch / "work").write_text("in progress")
        processes.run([sys.executable, "-c", {hang!r}], timeout=600, env=processes.clean_environ())
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 130), (signal.SIGHUP, 130),
                                       (signal.SIGINT, 130), (signal.SIGKILL, -signal.SIGKILL)])
def test_the_tree_dies_with_its_parent_however_the_parent_ends(
        tmp_path: Path, pid_file: Path, sig: int, code: int):
    """And the parent's temporary folder goes too: removed by the parent, or, after a
    SIGKILL, by the guard."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    parent = subprocess.Popen([sys.executable, "-c", PARENT.format(root=str(ROOT), hang=HANG)],
                              env=clean_env(PID_FILE=str(pid_file), TMPDIR=str(tmp)))
    try:
        pids = wait_for(pid_file)
        parent.send_signal(sig)
        assert parent.wait(timeout=30) == code
    finally:
        parent.kill()
        parent.wait()
    assert_gone(pids)
    assert_emptied(tmp)


# --- interrupts in envcheck's command line ---------------------------------------------------

# The command line's way with interrupts, in a process of its own: the first raises, then a
# storm of SIGINT, SIGTERM and SIGHUP lands in a finalizer, the clean-up, after the block that
# made SIGTERM an interrupt, in an atexit function and (with a thread) threading._shutdown, as
# a held Ctrl-C or a repeating supervisor sends them.
STORM = """
import atexit, os, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # even if the test runs in background
sys.path.insert(0, {root!r})
from envcheck import processes

def storm():
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) * 3:
        os.kill(os.getpid(), sig)
    time.sleep(0.05)

class Finalized:
    def __del__(self):
        storm()

processes.end_at_first_interrupt()
code = 0
with processes.signals_interrupt():
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(60)
    except KeyboardInterrupt:
        Finalized()
        storm()
        code = 130
storm()  # out of the block too: SIGTERM and SIGHUP must not find SIG_DFL back
atexit.register(storm)
if {thread!r}:
    threading.Thread(target=lambda: (time.sleep(0.1), storm(), time.sleep(0.1))).start()
processes.exit_quietly(code)
"""


@pytest.mark.parametrize("thread", [False, True], ids=["alone", "with-a-thread"])
def test_interrupts_after_the_first_change_nothing_and_print_nothing(thread: bool):
    proc = subprocess.run([sys.executable, "-c", STORM.format(root=str(ROOT), thread=thread)],
                          capture_output=True, text=True, env=clean_env(), timeout=60)
    assert (proc.returncode, proc.stderr) == (130, "")


DROPPED = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {root!r})
from envcheck import processes

class Finalized:
    def __del__(self):
        signal.raise_signal(signal.SIGINT)
        len([])  # a call: Python handles the signal here, inside the finalizer

processes.end_at_first_interrupt()
Finalized()
print("dropped", flush=True)
try:
    signal.raise_signal(signal.SIGINT)
    time.sleep(60)
except KeyboardInterrupt:
    print("the next one raised")
"""


def test_an_interrupt_dropped_in_a_finalizer_prints_nothing_and_the_next_one_raises():
    proc = subprocess.run([sys.executable, "-c", DROPPED.format(root=str(ROOT))],
                          capture_output=True, text=True, env=clean_env(), timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "dropped\nthe next one raised\n", "")


STOPPED = """
import json, os, signal, sys, threading
sys.path.insert(0, {root!r})
from envcheck import processes

stubborn = "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(os.getpid(), flush=True); time.sleep(1000)"
child = processes.start([sys.executable, "-c", stubborn], env=processes.clean_environ(),
                        stdout=processes.PIPE, grace=600)
pid = int(child.popen.stdout.readline())
threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    child.stop()
except KeyboardInterrupt:
    print(json.dumps({{"returncode": child.returncode, "pid": pid}}))
"""


def test_an_interrupt_during_stops_grace_kills_and_reaps_the_child_at_once():
    """A command that ignores SIGTERM, and a 600 s grace: the interrupt ends the wait, and
    ``stop`` still reaps it (nothing left for ``Popen.__del__`` to find running)."""
    proc = subprocess.run([sys.executable, "-c", STOPPED.format(root=str(ROOT))],
                          capture_output=True, text=True, env=clean_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    stopped = json.loads(proc.stdout)
    assert stopped["returncode"] == -signal.SIGKILL
    assert_gone([stopped["pid"]])


def test_a_guard_whose_envcheck_stopped_listening_carries_on_quietly():
    """envcheck interrupted while it waits for the guard's word closes its end: the guard's
    write fails (EPIPE) and it goes on without a traceback (envcheck's SIGTERM follows)."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", str(Path(processes.__file__).with_name("_guard.py")),
                               str(os.getpid()), str(write), "2.0", "0", sys.executable, "-c", "pass"],
                              pass_fds=(write,), capture_output=True, text=True, timeout=60)
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (0, "")


# --- interpreters that hang or print garbage --------------------------------------------------

HANG_SH = """
#!/bin/sh
sleep 1000 &
echo $$ $! > "$PID_FILE"
wait
"""
GARBAGE_SH = r"""
#!/bin/sh
printf '\377\376\375 not a python\n'
"""


def test_a_hanging_interpreter_probe_ends_at_its_timeout_with_its_children(
        tmp_path: Path, pid_file: Path, monkeypatch: pytest.MonkeyPatch):
    hang = script(tmp_path / "python", HANG_SH)
    monkeypatch.setenv("PID_FILE", str(pid_file))
    started = time.monotonic()

    assert interpreter_problem(hang, timeout=1) == "no answer within 1 s (hang)"
    assert probe_version(hang, timeout=1) is None
    assert time.monotonic() - started < 20
    assert_gone(wait_for(pid_file))


def test_an_interpreter_printing_garbage_is_not_a_python(tmp_path: Path):
    garbage = script(tmp_path / "python", GARBAGE_SH)

    assert probe_version(garbage, timeout=30) is None
    assert interpreter_problem(garbage, timeout=30) == (
        "it answered '\ufffd\ufffd\ufffd not a python' when asked for its Python version")


# --- envcheck itself, as a command ---------------------------------------------------------------

def envcheck(home: Path, *args: str, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True,
                          env=clean_env(ENVCHECK_HOME=str(home), **extra), timeout=timeout)


def start_envcheck(home: Path, *args: str, **extra: str) -> subprocess.Popen:
    """envcheck started as a shell starts a command (no signal ignored, even if pytest runs
    under nohup), to be signalled."""
    return subprocess.Popen([sys.executable, "-m", "envcheck", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=processes.reset_signals,
                            env=clean_env(ENVCHECK_HOME=str(home), **extra))


def integrity_check(stdout: str) -> dict:
    report = json.loads(stdout)
    report = report["reports"][0] if "reports" in report else report
    return next(c for c in report["checks"] if c["id"] == "integrity")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    """A home with env `tree`, whose `tensorflow` starts the TREE of processes and hangs on
    import, and env `plain` (a metadata-only stand-in) for `envcheck run` and broken pythons."""
    root = tmp_path_factory.mktemp("processes-home")
    wheels = root / "wheels"
    build_wheel(wheels, "tensorflow-cpu", "2.21.0", files={"tensorflow/__init__.py": HANG})
    preset = root / "tree.toml"
    preset.write_text('title = "hangs on import"\nkind = "cpu"\nframework = "tensorflow"\n'
                      'packages = ["tensorflow-cpu==2.21.0"]\n')
    plain = root / "plain.toml"
    plain.write_text('title = "stand-in"\nkind = "cpu"\nframework = "tensorflow"\n'
                     'packages = ["tensorflow-cpu==2.21.0"]\n')
    for name, file, links in (("tree", preset, wheels), ("plain", plain, wheelhouse)):
        done = envcheck(root, "env", "create", name, "--preset-file", str(file), *offline(links),
                        timeout=300)
        assert done.returncode == 0, done.stderr
    return root


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 130), (signal.SIGHUP, 130),
                                       (signal.SIGKILL, -signal.SIGKILL)])
def test_validate_killed_leaves_no_runner_no_grandchild_no_temp_folder(
        home: Path, tmp_path: Path, pid_file: Path, sig: int, code: int):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = start_envcheck(home, "validate", "tree", "--devices", "cpu", "--timeout", "120",
                          PID_FILE=str(pid_file), TMPDIR=str(tmp))
    try:
        pids = wait_for(pid_file)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()

    assert proc.returncode == code, err
    if sig != signal.SIGKILL:
        assert "envcheck: interrupted" in err
    assert_gone(pids)
    assert_emptied(tmp)


def test_env_create_interrupted_during_the_interpreter_probe_leaves_nothing(
        home: Path, tmp_path: Path, pid_file: Path):
    hang = script(tmp_path / "python3.11", HANG_SH)
    proc = start_envcheck(home, "env", "create", "hung", "--preset-file", str(home / "plain.toml"),
                          "--python", str(hang), PID_FILE=str(pid_file))
    try:
        pids = wait_for(pid_file)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()

    assert proc.returncode == 130, err
    assert_gone(pids)
    assert not (home / "envs" / "hung").exists()


def test_env_create_with_a_garbage_printing_python_is_bad_input(home: Path, tmp_path: Path):
    garbage = script(tmp_path / "python3.11", GARBAGE_SH)

    done = envcheck(home, "env", "create", "junk", "--preset-file", str(home / "plain.toml"),
                    "--python", str(garbage))

    assert done.returncode == 2, done.stderr
    assert "does not run as a Python interpreter" in done.stderr
    assert "internal error" not in done.stderr


def test_run_starts_the_command_with_default_signals(home: Path):
    """Python ignores SIGPIPE; passed on, `yes` would print "Broken pipe" and exit 1."""
    piped = envcheck(home, "run", "--env", "plain", "--gpus", "none", "--",
                     "sh", "-c", '(yes; echo "yes ended: $?" >&2) | head -n1')
    status = envcheck(home, "run", "--env", "plain", "--gpus", "none", "--", "cat", "/proc/self/status")

    assert (piped.returncode, piped.stdout) == (0, "y\n"), piped.stderr
    assert "yes ended: 141" in piped.stderr and "Broken pipe" not in piped.stderr
    fields = dict(line.split(":\t") for line in status.stdout.splitlines() if ":\t" in line)
    assert int(fields["SigIgn"], 16) == 0 and int(fields["SigBlk"], 16) == 0


# --- validate's interpreter check (needs validate to call pythons.interpreter_problem) ---------

def replace_python(home: Path, name: str, text: str) -> Path:
    python = home / "envs" / name / "bin" / "python"
    original = python.with_name("python.orig")
    python.rename(original)
    script(python, text)
    return original


@pytest.fixture
def broken_python(home: Path):
    """Replaces env `plain`'s interpreter with a script for one test, then puts it back."""
    replaced = []

    def replace(text: str) -> None:
        replaced.append(replace_python(home, "plain", text))

    yield replace
    for original in replaced:
        original.replace(original.with_name("python"))


def test_validate_no_smoke_honours_timeout_for_a_hanging_interpreter(home: Path, pid_file: Path,
                                                                      broken_python):
    broken_python(HANG_SH)
    started = time.monotonic()

    done = envcheck(home, "validate", "plain", "--no-smoke", "--timeout", "2", "--json",
                    PID_FILE=str(pid_file))

    assert time.monotonic() - started < 20  # not the old fixed 30 s
    integrity = integrity_check(done.stdout)
    assert integrity["status"] == "fail" and "within 2 s" in integrity["summary"], integrity
    assert_gone(wait_for(pid_file))


def test_validate_no_smoke_reports_a_garbage_printing_interpreter(home: Path, broken_python):
    broken_python(GARBAGE_SH)

    done = envcheck(home, "validate", "plain", "--no-smoke", "--json")

    assert "internal error" not in done.stderr, done.stderr
    integrity = integrity_check(done.stdout)
    assert integrity["status"] == "fail" and integrity["fix"], integrity
    assert "not a python" in integrity["summary"]


# envcheck's CLI in a process of its own, as `python -m envcheck` runs it, with the interpreter
# probe's limit (pythons.PROBE_TIMEOUT, 20 s, read at each probe) at 2 s: the test waits out
# the limit, whatever its value, not the 20 s.
CLI_WITH_A_2S_PROBE = ("import sys; import envcheck.envs.pythons as pythons; pythons.PROBE_TIMEOUT = 2.0; "
                       "from envcheck.cli import run; run(sys.argv[1:])")


def test_env_create_with_a_hanging_python_ends_at_the_probe_limit_leaving_nothing(
        home: Path, tmp_path: Path, pid_file: Path):
    hang = script(tmp_path / "python3.11", HANG_SH)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", CLI_WITH_A_2S_PROBE, "env", "create", "hung",
                           "--preset-file", str(home / "plain.toml"), "--python", str(hang)],
                          capture_output=True, text=True, timeout=120,
                          env=clean_env(ENVCHECK_HOME=str(home), PID_FILE=str(pid_file)))
    assert time.monotonic() - started < 15  # ended by the 2 s limit
    assert done.returncode == 2 and "does not run as a Python interpreter" in done.stderr, done.stderr
    assert_gone(wait_for(pid_file))
    assert not (home / "envs" / "hung").exists()
