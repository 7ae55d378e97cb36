"""Several envcheck commands at once in a fresh env home: none breaks another, and the home
is whole afterwards.

Each round starts real envcheck processes together: each is a launcher that imports
envcheck, waits for a start file, then runs it as ``python -m envcheck`` does, and the file
is made once all are started (a barrier, no sleeps). The home does not exist before the round. What every command may
write there is written while the others do: the gate client's copy in ``lib/`` (every
command repairs it; ``env create`` writes it), ``envs/``, ``locks/``, ``logs/``, ``tmp/``, the
uv cache, baselines and manifests; a create with bad input takes back what it made. After
each round: no command ended in an internal error, each answered as it would alone (or said
plainly that another held its env), and the home is consistent: the envs listed ready, the
gate importable from each, ``lib/`` holding exactly the client and its interpreter, nothing
left in ``tmp/``, nothing of the refused env."""
from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Result, clean_env
from envcheck.envs.gate_link import CLIENT, PACKAGE, PYTHON_FILE
from wheelhouse import offline

pytestmark = pytest.mark.timeout(300)

# Waits for the start file with envcheck's modules imported, then runs it as `python -m
# envcheck` does: the commands reach the home together, not as each one's imports end.
LAUNCHER = ("import os, runpy, sys, time\n"
            "import envcheck.cli.main, envcheck.usecases.session, envcheck.envs.store\n"
            "start, sys.argv = sys.argv[1], ['envcheck', *sys.argv[2:]]\n"
            "while not os.path.exists(start):\n"
            "    time.sleep(0.0005)\n"
            "runpy.run_module('envcheck', run_name='__main__', alter_sys=True)\n")
PRESET = """title = "tiny"
description = "one small package"
kind = "cpu"
framework = "torch"
requires-python = ">=3.8"
packages = ["alpha==1.0"]
"""
_starts = itertools.count()


def together(home: Path, barrier: Path, *commands: list[str]) -> list[Result]:
    """Run ``commands`` (envcheck's arguments) at once against ``home``; their results."""
    start = barrier / f"start-{next(_starts)}"
    procs = [subprocess.Popen([sys.executable, "-c", LAUNCHER, str(start), *command],
                              env=clean_env(ENVCHECK_HOME=str(home)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for command in commands]
    start.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        results.append(Result(proc.returncode, out, err))
    for command, result in zip(commands, results):
        assert "internal error" not in result.err and "Traceback" not in result.err, (command, result.err)
    return results


def run(home: Path, *args: str) -> Result:
    proc = subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True,
                          env=clean_env(ENVCHECK_HOME=str(home)), timeout=120)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def busy_or(code: int, result: Result) -> bool:
    """The command's answer alone, or the plain answer that another process held its env."""
    return result.code == code or (result.code == 1 and "is being changed by another envcheck process" in result.err)


def assert_consistent(home: Path, envs: set[str]) -> None:
    if envs:
        listed = run(home, "env", "list", "--json")
        assert listed.code == 0, listed.err
        assert {env["name"]: env["state"] for env in listed.json()["envs"]} == dict.fromkeys(envs, "ready")
    else:
        assert not (home / "envs").exists() or not list((home / "envs").iterdir())
    lib = home / "lib"
    assert sorted(p.name for p in lib.iterdir()) == sorted([PACKAGE, PYTHON_FILE])  # no temporary left
    package = lib / PACKAGE
    assert package.is_dir() and not package.is_symlink()
    assert [p.name for p in package.iterdir()] == ["__init__.py"]
    assert (package / "__init__.py").read_text() == Path(CLIENT).read_text()
    assert (lib / PYTHON_FILE).read_text() == sys.executable
    if (home / "tmp").exists():
        assert not list((home / "tmp").iterdir())
    for env in envs:
        gate = subprocess.run([str(home / "envs" / env / "bin" / "python"), "-c",
                               "import envcheck; print(envcheck.__file__)"], capture_output=True, text=True,
                              cwd=home)  # not the checkout, whose envcheck -c would find first
        assert gate.returncode == 0 and gate.stdout.strip() == str(package / "__init__.py"), gate.stderr


def test_creates_a_refused_create_and_readers_at_once_in_fresh_homes(tmp_path: Path, wheelhouse: Path):
    """Two creates, a create whose requirement can't be resolved (bad input: exit 2, after
    the installer ran in the same fresh home) and a list; then, in the first home, a create
    that links from the first two, a remove, a verify and a list."""
    preset = tmp_path / "tiny.toml"
    preset.write_text(PRESET)
    create = ["env", "create", "--preset-file", str(preset), *offline(wheelhouse)]
    for round in range(3):
        home = tmp_path / f"home-{round}"
        a, b, refused, listed = together(home, tmp_path, [*create, "a"], [*create, "b"],
                                         [*create, "c", "--add", "alpha>=99"], ["env", "list"])
        assert (a.code, b.code, listed.code) == (0, 0, 0), (a.err, b.err, listed.err)
        assert refused.code == 2 and "could not resolve" in refused.err, refused.err
        assert not (home / "envs" / "c").exists() and not (home / "locks" / "c.lock").exists()
        assert not list(home.glob("logs/c-*"))  # its log went with its bad input
        assert_consistent(home, {"a", "b"})
        if round:
            continue
        d, removed, verified, listed = together(home, tmp_path, [*create, "d"], ["env", "remove", "a", "--yes"],
                                                ["env", "verify", "b"], ["env", "list", "--json"])
        assert d.code == 0 and listed.code == 0, (d.err, listed.err)
        assert busy_or(0, removed) and busy_or(0, verified), (removed.err, verified.err)
        assert_consistent(home, {"a", "b", "d"} - ({"a"} if removed.code == 0 else set()))


def test_commands_at_once_all_repairing_the_gate_link(tmp_path: Path):
    """A home whose ``lib/`` another envcheck made (its interpreter elsewhere, the client as a
    link to itself): every command repairs it, here six at once, many times."""
    for round in range(6):
        home = tmp_path / f"home-{round}"
        lib = home / "lib"
        lib.mkdir(parents=True)
        (lib / PYTHON_FILE).write_text("/an/older/python")
        if round % 2:
            (lib / PACKAGE).symlink_to(Path(CLIENT).parent)  # an older envcheck's link
        results = together(home, tmp_path, *[["env", "list"], ["env", "list", "--json"], ["presets", "list"]] * 2)
        assert [r.code for r in results] == [0] * 6, [r.err for r in results]
        assert_consistent(home, set())
