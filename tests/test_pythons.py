"""Interpreter discovery against the real Pythons of this machine (pyenv's versions folder).

Each test builds its own PATH / PYENV_ROOT / UV_PYTHON_INSTALL_DIR so the answer depends
only on what the test put there (links to real interpreters), and skips when the machine
lacks the pyenv Python it needs.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from envcheck.errors import UsageError
from envcheck.envs.pythons import find_python, list_pythons

PYENV_ROOT = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
CURRENT = Version("{}.{}.{}".format(*sys.version_info[:3]))


def pyenv_python(minor: str) -> tuple[Path, Version]:
    """The newest pyenv-installed Python MINOR (e.g. "3.10"), or skip the test."""
    found = []
    for folder in (PYENV_ROOT / "versions").glob(f"{minor}.*"):
        binary = folder / "bin" / f"python{minor}"
        if binary.is_file():
            try:
                found.append((Version(folder.name), binary))
            except ValueError:
                continue
    if not found:
        pytest.skip(f"no pyenv Python {minor} under {PYENV_ROOT}/versions")
    version, binary = max(found)
    return binary, version


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH holds only an empty folder; no uv-managed Pythons; the real pyenv root."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv-pythons"))
    monkeypatch.setenv("PYENV_ROOT", str(PYENV_ROOT))
    return tmp_path


def test_current_interpreter_when_it_fits(isolated):
    found = find_python(f">={CURRENT.major}.{CURRENT.minor}")
    assert (found.path, found.version, found.source) == (Path(sys.executable), CURRENT, "current")
    assert find_python(None).path == Path(sys.executable)


def test_finds_pyenv_python_by_full_path_for_requires_python(isolated):
    binary, version = pyenv_python("3.10")
    if CURRENT < Version("3.11"):
        pytest.skip("the running interpreter already satisfies <3.11")
    found = find_python("<3.11", needed_by="preset tensorflow-gpu-cuda11.2")
    assert (found.path, found.version, found.source) == (binary, version, "pyenv")
    assert "shims" not in found.path.parts


def test_pyenv_shims_on_path_are_skipped(isolated, monkeypatch):
    """A pyenv shim of a non-global version fails when run; discovery must not pick it."""
    binary, version = pyenv_python("3.10")
    shims = isolated / "pyenv" / "shims"
    shims.mkdir(parents=True)
    shim = shims / "python3.10"
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.10: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", str(shims))
    assert find_python("<3.11").path == binary


def test_python_on_path_by_link_name(isolated, monkeypatch):
    """`python3` linked to a python3.X file: its version comes from the link target's name."""
    binary, version = pyenv_python("3.9")
    link = isolated / "bin" / "python3"
    link.symlink_to(binary)
    monkeypatch.setenv("PYENV_ROOT", str(isolated / "no-pyenv"))
    found = find_python("<3.10")
    assert (found.path, found.version, found.source) == (link, version, "PATH")


def test_uv_managed_python(isolated, monkeypatch):
    """uv's layout: $UV_PYTHON_INSTALL_DIR/cpython-X.Y.Z-<platform>/bin/pythonX.Y."""
    binary, version = pyenv_python("3.9")
    bin_dir = isolated / "uv-pythons" / f"cpython-{version}-linux-x86_64-gnu" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3.9").symlink_to(binary)
    monkeypatch.setenv("PYENV_ROOT", str(isolated / "no-pyenv"))
    found = find_python("<3.10")
    assert (found.path, found.version, found.source) == (bin_dir / "python3.9", version, "uv")


def test_requested_version(isolated):
    binary, version = pyenv_python("3.10")
    found = find_python(">=3.7,<3.11", "3.10")
    assert (found.path, found.version) == (binary, version)
    assert find_python(None, f"{version}").version == version


def test_requested_version_outside_requires_python(isolated):
    pyenv_python("3.12")
    with pytest.raises(UsageError) as info:
        find_python("<3.11", "3.12", needed_by="preset tensorflow-gpu-cuda11.2")
    message = str(info.value)
    assert "Python 3.12 does not satisfy requires-python <3.11 (needed by preset tensorflow-gpu-cuda11.2)" in message
    assert info.value.exit_code == 2


def test_requested_version_not_installed(isolated):
    with pytest.raises(UsageError) as info:
        find_python(None, "3.2")
    assert "no Python 3.2 found; found: " in str(info.value)
    assert f"{CURRENT} ({sys.executable})" in str(info.value)


def test_requested_path(isolated):
    binary, version = pyenv_python("3.10")
    found = find_python("<3.11", str(binary))
    assert (found.path, found.version, found.source) == (binary, version, "requested")


def test_requested_path_missing(isolated):
    with pytest.raises(UsageError) as info:
        find_python(None, "/nonexistent/python3")
    message = str(info.value)
    assert "--python /nonexistent/python3: no such interpreter" in message
    assert "found: " in message and info.value.exit_code == 2


def test_requested_path_not_a_python(isolated):
    script = isolated / "bin" / "python"
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(UsageError, match="does not run as a Python interpreter"):
        find_python(None, str(script))


def test_nothing_fits_lists_what_was_found(isolated):
    binary, version = pyenv_python("3.10")
    with pytest.raises(UsageError) as info:
        find_python(">=3.99", needed_by="preset future")
    message = str(info.value)
    assert message.startswith("no Python satisfies requires-python >=3.99 (needed by preset future); found: ")
    assert f"{version} ({binary})" in message and f"{CURRENT} ({sys.executable})" in message
    assert "uv python install" in message and "--python PATH" in message


def test_list_pythons_newest_first_without_duplicates(isolated):
    binary, version = pyenv_python("3.10")
    (isolated / "bin" / "python3.10").symlink_to(binary)  # the same file twice
    found = list_pythons()
    assert [i.version for i in found] == sorted((i.version for i in found), reverse=True)
    assert sum(1 for i in found if os.path.realpath(i.path) == os.path.realpath(binary)) == 1
    assert any(i.source == "current" for i in found)


def test_a_script_that_only_prints_a_version_is_no_interpreter(tmp_path, cli, home):
    """It would pass a version check and fail after files were made: refused up front, exit 2."""
    fake = tmp_path / "python-lookalike"
    fake.write_text("#!/bin/sh\necho 3.11.7\n")
    fake.chmod(0o755)
    r = cli("env", "create", "x", "--preset", "tensorflow-cpu", "--python", str(fake))
    assert r.code == 2 and "does not run as a Python interpreter" in r.err
    assert list(home.iterdir()) == []
