"""Interpreter discovery: find a Python that satisfies a preset's requires-python.

Candidates come from four places, in this order: the running interpreter, ``PATH``
(``python3.X``, ``python3``, ``python``), pyenv's versions folder (``$PYENV_ROOT`` or
``~/.pyenv``) and uv-managed Pythons (``$UV_PYTHON_INSTALL_DIR``, else uv's data dir).

Shims are skipped: a pyenv shim of a version that is not the global one fails when called,
so pyenv Pythons are used by their full path in ``versions/V/bin``. Versions are read from
names (``versions/3.10.13``, ``cpython-3.10.13-linux-x86_64-gnu``, ``python3.10``) rather
than by starting every interpreter; only the chosen one is run, once, to confirm it.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from .. import processes
from ..child_env import clean_environ
from ..errors import UsageError
from .presets import specifier_text

_PATH_NAME = re.compile(r"^python(\d+(?:\.\d+)?)?$")
_MINOR_NAME = re.compile(r"^python(\d+\.\d+)$")
_PYENV_NAME = re.compile(r"^\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?$")
_UV_NAME = re.compile(r"^cpython-(\d+\.\d+(?:\.\d+)?(?:(?:a|b|rc)\d+)?)-")
_REQUESTED_VERSION = re.compile(r"^(?:python)?(\d+(?:\.\d+){0,2})$")
# Runs on any Python from 2.7 on; -E -s -S keep it independent of the environment and fast.
# It also echoes a number it is given, doubled: a script that only prints a version is not
# taken for an interpreter (it would pass the version check and fail later, after files exist).
_PROBE = ("import sys; v = sys.version_info; "
          "sys.stdout.write('%d.%d.%d' % tuple(v[:3]) + "
          "({'alpha': 'a', 'beta': 'b', 'candidate': 'rc'}.get(v[3], '') + str(v[4]) "
          "if v[3] != 'final' else '') + ' %d' % (2 * int(sys.argv[1])))")
INSTALL_FIX = "install one (e.g. `uv python install {version}`) or pass --python PATH"
PROBE_TIMEOUT = 20.0  # seconds for an interpreter to answer its version


@dataclass(frozen=True)
class Interpreter:
    path: Path
    version: Version
    source: str  # "current" | "requested" | "PATH" | "pyenv" | "uv"

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "version": str(self.version), "source": self.source}

    def __str__(self) -> str:
        return f"{self.version} ({self.path})"


@dataclass(frozen=True)
class _Candidate:
    path: Path
    version: Version | None  # None: unknown until probed
    exact: bool  # False: only MAJOR.MINOR is known (from a file name)
    source: str


def find_python(requires_python: SpecifierSet | str | None = None, requested: str | None = None,
                *, needed_by: str | None = None) -> Interpreter:
    """The interpreter to build an env with.

    ``requested`` is a version ("3.10", "3.10.13") or a path (or a command on PATH). With
    nothing requested: the running interpreter if it satisfies ``requires_python``, else
    the newest discovered one that does. ``needed_by`` (e.g. "preset X") goes into errors.
    """
    spec = _specifiers(requires_python)
    if requested:
        return _requested(requested.strip(), spec, needed_by)
    current = _current()
    if spec.contains(current.version, prereleases=True):
        return current
    found = _choose(_discover(), spec, None)
    if found is None:
        raise UsageError(f"no Python satisfies {_needs(spec, needed_by)}; found: {_listing()}",
                         INSTALL_FIX.format(version=_suggest(spec)))
    return found


def list_pythons() -> list[Interpreter]:
    """Every interpreter found, newest first, each version confirmed where a name gave only X.Y."""
    found: list[Interpreter] = []
    for candidate in _discover():
        version = candidate.version if candidate.exact else probe_version(candidate.path)
        if version is not None:
            found.append(Interpreter(candidate.path, version, candidate.source))
    return sorted(found, key=lambda i: i.version, reverse=True)


def probe_version(path: Path, timeout: float | None = None) -> Version | None:
    """Run the interpreter once for its version; None if it does not run as a Python.
    ``timeout`` defaults to ``PROBE_TIMEOUT``, read at the call."""
    return _probe(path, timeout)[0]


def interpreter_problem(path: Path, timeout: float | None = None) -> str | None:
    """Why ``path`` does not run as a Python, in one line; None when it answers its version.

    It runs under ``timeout`` with its whole process group (a wrapper script that hangs in
    a child leaves nothing behind), and whatever bytes it prints are read safely.
    """
    return _probe(path, timeout)[1]


def _probe(path: Path, timeout: float | None) -> tuple[Version | None, str | None]:
    timeout = PROBE_TIMEOUT if timeout is None else timeout
    try:
        nonce = int.from_bytes(os.urandom(3), "big")
        done = processes.run([str(path), "-E", "-s", "-S", "-c", _PROBE, str(nonce)], timeout=timeout,
                             env=clean_environ())
    except OSError as exc:
        return None, f"it cannot be executed: {exc.strerror or exc}"
    if done.timed_out:
        return None, f"no answer within {timeout:g} s (hang)"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1][:200]
        how = (f"killed by signal {-done.returncode}" if done.returncode < 0
               else f"exit code {done.returncode}")
        return None, f"{how}: {last}" if last else how
    answer = done.stdout.strip()
    version, _, echo = answer.partition(" ")
    try:
        if echo != str(2 * nonce):
            raise InvalidVersion(answer)
        return Version(version), None
    except InvalidVersion:
        shown = answer[:60] + ("..." if len(answer) > 60 else "")
        return None, f"it answered {shown!r} when asked for its Python version"


def _requested(requested: str, spec: SpecifierSet, needed_by: str | None) -> Interpreter:
    match = _REQUESTED_VERSION.match(requested)
    if match:
        want = Version(match.group(1))
        found = _choose(_discover(), spec, want)
        if found is not None:
            return found
        if _choose(_discover(), SpecifierSet(), want) is not None:
            raise UsageError(f"Python {want} does not satisfy {_needs(spec, needed_by)}; found: {_listing()}",
                             f"pass a version that does, e.g. --python {_suggest(spec)}")
        raise UsageError(f"no Python {want} found; found: {_listing()}",
                         f"install it (`uv python install {want}`) or pass --python PATH")
    path = _as_path(requested)
    if path is None or not path.is_file():
        raise UsageError(f"--python {requested}: no such interpreter; found: {_listing()}",
                         "pass the path of a Python executable or a version like 3.10")
    version = probe_version(path)
    if version is None:
        raise UsageError(f"--python {requested}: {path} does not run as a Python interpreter",
                         "pass the path of a working Python executable or a version like 3.10")
    if not spec.contains(version, prereleases=True):
        raise UsageError(f"--python {requested}: Python {version} does not satisfy {_needs(spec, needed_by)}",
                         f"pass one that does, e.g. --python {_suggest(spec)}")
    return Interpreter(path, version, "requested")


def _as_path(requested: str) -> Path | None:
    if "/" in requested or os.sep in requested or requested.startswith(("~", ".")):
        return Path(requested).expanduser().absolute()
    command = shutil.which(requested)
    return Path(command) if command else None


def _choose(candidates: list[_Candidate], spec: SpecifierSet, want: Version | None) -> Interpreter | None:
    """The newest candidate that may fit, confirmed by running it; name-derived versions are checked."""
    fitting = [c for c in candidates if c.version is not None and _may_fit(c, spec, want)]
    for candidate in sorted(fitting, key=lambda c: c.version, reverse=True):
        if candidate.source == "current":
            return Interpreter(candidate.path, candidate.version, "current")
        version = probe_version(candidate.path)
        if version is not None and _fits(version, spec, want):
            return Interpreter(candidate.path, version, candidate.source)
    return None


def _may_fit(candidate: _Candidate, spec: SpecifierSet, want: Version | None) -> bool:
    if candidate.exact:
        return _fits(candidate.version, spec, want)
    major, minor = candidate.version.release[:2]
    return any(_fits(Version(f"{major}.{minor}.{micro}"), spec, want) for micro in range(64))


def _fits(version: Version, spec: SpecifierSet, want: Version | None) -> bool:
    if want is not None and version.release[:len(want.release)] != want.release:
        return False
    return spec.contains(version, prereleases=True)


def _discover() -> list[_Candidate]:
    """All candidates, one per real file, the first place a file was seen naming it."""
    seen: dict[str, _Candidate] = {}
    for candidate in [_current_candidate(), *_on_path(), *_pyenv(), *_uv_managed()]:
        key = os.path.realpath(candidate.path)
        known = seen.get(key)
        if known is None:
            seen[key] = candidate
        elif candidate.exact and not known.exact:
            seen[key] = _Candidate(known.path, candidate.version, True, known.source)
    unknown = [c for c in seen.values() if c.version is None]
    for candidate in unknown:  # rare: a bare `python3` that is not a link to python3.X
        key = os.path.realpath(candidate.path)
        version = probe_version(candidate.path)
        seen[key] = _Candidate(candidate.path, version, version is not None, candidate.source)
    return [c for c in seen.values() if c.version is not None]


def _current() -> Interpreter:
    return Interpreter(Path(sys.executable), _running_version(), "current")


def _current_candidate() -> _Candidate:
    return _Candidate(Path(sys.executable), _running_version(), True, "current")


def _running_version() -> Version:
    v = sys.version_info
    pre = {"alpha": "a", "beta": "b", "candidate": "rc"}.get(v.releaselevel, "")
    return Version(f"{v.major}.{v.minor}.{v.micro}" + (f"{pre}{v.serial}" if pre else ""))


def _on_path() -> list[_Candidate]:
    found: list[_Candidate] = []
    skip = os.path.realpath(_pyenv_root())
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not folder or os.path.basename(folder.rstrip("/")) == "shims":
            continue
        real = os.path.realpath(folder)
        if real == skip or real.startswith(skip + os.sep):
            continue
        try:
            names = sorted(os.listdir(folder), reverse=True)
        except OSError:
            continue
        for name in names:
            if _PATH_NAME.match(name):
                path = Path(folder) / name
                if path.is_file() and os.access(path, os.X_OK):
                    found.append(_named(path, "PATH"))
    return found


def _named(path: Path, source: str) -> _Candidate:
    """X.Y from the file's name, or the name of the file a `python3` link points to."""
    for name in (path.name, os.path.basename(os.path.realpath(path))):
        match = _MINOR_NAME.match(name)
        if match:
            return _Candidate(path, Version(match.group(1)), False, source)
    return _Candidate(path, None, False, source)


def _pyenv_root() -> Path:
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def _pyenv() -> list[_Candidate]:
    found: list[_Candidate] = []
    for entry in _entries(_pyenv_root() / "versions"):
        if _PYENV_NAME.match(entry.name):
            version = Version(entry.name)
            binary = _binary(entry / "bin", version)
            if binary:
                found.append(_Candidate(binary, version, True, "pyenv"))
        else:  # a "3.12-dev", pypy or venv folder: trust only a python3.X file's name
            binaries = sorted((entry / "bin").glob("python[0-9].[0-9]*"))
            minor = [b for b in binaries if _MINOR_NAME.match(b.name)]
            if minor:
                found.append(_named(minor[-1], "pyenv"))
    return found


def _uv_managed() -> list[_Candidate]:
    if os.environ.get("UV_PYTHON_INSTALL_DIR"):
        root = Path(os.environ["UV_PYTHON_INSTALL_DIR"])
    else:
        data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
        root = Path(data) / "uv" / "python"
    found: list[_Candidate] = []
    for entry in _entries(root):
        match = _UV_NAME.match(entry.name)
        if not match or "+" in entry.name:  # skip freethreaded/debug variants
            continue
        version = Version(match.group(1))
        binary = _binary(entry / "bin", version)
        if binary:
            found.append(_Candidate(binary, version, len(version.release) == 3, "uv"))
    return found


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted((Path(e.path) for e in os.scandir(folder) if e.is_dir()), key=lambda p: p.name)
    except OSError:
        return []


def _binary(bin_dir: Path, version: Version) -> Path | None:
    major, minor = version.release[:2]
    for name in (f"python{major}.{minor}", f"python{major}", "python"):
        path = bin_dir / name
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def _specifiers(requires_python: SpecifierSet | str | None) -> SpecifierSet:
    if isinstance(requires_python, SpecifierSet):
        return requires_python
    try:
        return SpecifierSet(requires_python or "")
    except InvalidSpecifier:
        raise UsageError(f"invalid requires-python specifier {requires_python!r}",
                         "use a PEP 440 specifier like '>=3.10,<3.13'") from None


def _needs(spec: SpecifierSet, needed_by: str | None) -> str:
    text = f"requires-python {specifier_text(spec) or '(any)'}"
    return f"{text} (needed by {needed_by})" if needed_by else text


def _listing() -> str:
    return ", ".join(str(i) for i in list_pythons()) or "none"


def _suggest(spec: SpecifierSet) -> str:
    """The newest X.Y from 3.7 to 3.14 that the specifier admits, else the specifier quoted
    (uv accepts both as a version request)."""
    for minor in range(14, 6, -1):
        if any(spec.contains(Version(f"3.{minor}.{micro}"), prereleases=True) for micro in range(64)):
            return f"3.{minor}"
    return f"'{specifier_text(spec)}'"
