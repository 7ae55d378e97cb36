"""Envs envcheck did not make: a venv, a uv project, a conda (mamba, pixi) prefix, or an
interpreter (a system Python, a container's, a pyenv version), adopted to be judged, never
changed.

``inspect(PATH)`` says what PATH is (``Found``: its kind, interpreter, folder and facts) by
reading it and running its interpreter once, isolated (``-I -S -B``: no user site, no
``site`` import, no bytecode written), under a deadline. The store records an adopted env in
``$ENVCHECK_HOME/envs/NAME/`` (its manifest's ``adopted`` block, its reports, its baseline):
nothing is ever written inside PATH. Its site folders (a system Python's ``dist-packages``
lie outside its prefix) are registered with ``metadata`` so every reader of an env's files
finds them.

Kinds, and how each adds a package (``install_command``): ``venv`` (``pip install`` in it, or
``uv pip install --python`` where it has no pip), ``uv-project`` (``uv add`` in the project),
``conda`` (``conda install -p PREFIX``; a pixi workspace's env: ``pixi add``), ``system``
(``python -m pip install``, the interpreter's own).
"""
from __future__ import annotations

import ast
import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import processes
from ..child_env import clean_environ
from ..errors import UsageError

KINDS = ("venv", "uv-project", "conda", "system")
PROBE_TIMEOUT = 20.0  # seconds an interpreter has to answer (one that hangs at start is named)
# The interpreter's facts, in the standard library of any Python 3; -S: ``site`` imported here,
# after the flags, so the .pth files of the env run nothing of theirs. With them, the lines of
# the loader's cache (``ldconfig -p``, for ``cuda_libraries``) naming the libraries given as
# arguments, read while the sites are found: a child of the probe's, not one more of envcheck's
# (each costs a guard). Cheap on purpose, as ``probe_ahead`` says: ``posix_spawnp`` where there
# is one (3.8+), not subprocess, and the answer a Python literal in ASCII (``ascii``, read by
# ``ast.literal_eval``), not JSON: either import (re, enum, threading) costs more than the rest.
_PROBE = """
import os, sys
import site
try:
    out, into = os.pipe()
    if hasattr(os, "posix_spawnp"):
        null = os.open(os.devnull, os.O_RDWR)
        ldconfig = os.posix_spawnp("ldconfig", ["ldconfig", "-p"], os.environ, file_actions=[
            (os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, into, 1), (os.POSIX_SPAWN_DUP2, null, 2)])
    else:
        import subprocess
        ldconfig = subprocess.Popen(["ldconfig", "-p"], stdin=subprocess.DEVNULL, stdout=into,
                                    stderr=subprocess.DEVNULL).pid
    os.close(into)
except Exception:  # no ldconfig (musl): no cache
    ldconfig = None
exe_dir = os.path.dirname(os.path.abspath(sys.executable))
venv, system_sites = None, True
for folder in (exe_dir, os.path.dirname(exe_dir)):  # site.venv's rule, without running the env's .pth files
    cfg = os.path.join(folder, "pyvenv.cfg")
    if os.path.isfile(cfg):
        venv = folder
        with open(cfg) as fh:
            keys = dict(line.split("=", 1) for line in fh if "=" in line)
        system_sites = {k.strip(): v.strip() for k, v in keys.items()}.get("include-system-site-packages") == "true"
        break
prefix = venv or sys.prefix
try:
    sites = site.getsitepackages([prefix]) + (site.getsitepackages() if venv and system_sites else [])
except AttributeError:
    sites = []
sites += [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages")) and p not in sites
          and not venv]
cache = []
if ldconfig is not None:
    with os.fdopen(out, "rb") as fh:
        lines = fh.read().decode("utf-8", "replace").splitlines()
    os.waitpid(ldconfig, 0)
    cache = [line.strip() for line in lines if line.strip().startswith(tuple(n + ".so." for n in sys.argv[1:]))]
print(ascii({"version": "%d.%d.%d" % sys.version_info[:3], "major": sys.version_info[0],
            "executable": sys.executable, "prefix": prefix, "base_prefix": sys.base_prefix,
            "sites": [p for p in dict.fromkeys(sites) if os.path.isdir(p)],
            "implementation": sys.implementation.name, "loader_cache": cache}))
"""


@dataclass
class Found:
    """What a PATH is, as adoption records it (the manifest's ``adopted`` block)."""

    kind: str  # one of KINDS
    path: Path  # the env's folder: the interpreter's prefix
    interpreter: Path
    version: str
    sites: list[str]
    project: Path | None = None  # a uv project's folder (kind uv-project)
    conda: dict[str, str] = field(default_factory=dict)  # conda-meta records: {name: version}
    conda_builds: dict[str, str] = field(default_factory=dict)  # {name: build string}
    pixi: Path | None = None  # the pixi workspace an env of it belongs to
    libraries: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # ``cuda_libraries``

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "kind": self.kind, "interpreter": str(self.interpreter),
                "sites": list(self.sites), "project": str(self.project) if self.project else None,
                "conda": dict(self.conda), "conda_builds": dict(self.conda_builds),
                "pixi": str(self.pixi) if self.pixi else None, "libraries": self.libraries}


def inspect(given: str, home_root: Path) -> Found:
    """What ``given`` is (see the module docstring); a UsageError naming PATH and the fix for
    anything that is no env and no interpreter."""
    interpreter, project = _locate(given, home_root)
    facts = _probe(interpreter, given)
    prefix = Path(facts["prefix"]).resolve()
    _refuse_managed(prefix, home_root, given)
    if project is None and (prefix / "conda-meta").is_dir():
        kind = "conda"
    elif project is not None:
        kind = "uv-project"
    elif (prefix / "pyvenv.cfg").is_file():
        kind = "venv"
        if prefix.name == ".venv" and (prefix.parent / "pyproject.toml").is_file() and (prefix.parent / "uv.lock").is_file():
            kind, project = "uv-project", prefix.parent
    else:
        kind = "system"
    found = Found(kind, prefix, interpreter, facts["version"], list(facts["sites"]), project)
    found.libraries = cuda_libraries(prefix, found.sites, kind == "conda", facts["loader_cache"])
    if kind == "conda":
        found.conda, found.conda_builds = conda_records(prefix)
        found.pixi = next((p for p in prefix.parents if (p / "pixi.toml").is_file() or (p / "pixi.lock").is_file()),
                          None)
    return found


def _locate(given: str, home_root: Path) -> tuple[Path, Path | None]:
    """(the interpreter to probe, the uv project given by its folder or its .venv, if so); a
    UsageError for what is no env and no interpreter, before anything is run."""
    raw = Path(given).expanduser()
    if raw.is_symlink() and not raw.exists():
        raise UsageError(f"{given}: a broken symbolic link (to {os.readlink(raw)})", "give the env's real path")
    if not raw.exists():
        raise UsageError(f"{given}: no such file or folder", "give a venv, a uv project, a conda prefix or a Python")
    path = raw.resolve()
    _refuse_managed(path, home_root, given)
    project = None
    if path.is_dir():
        if (path / "pyproject.toml").is_file() and (path / ".venv").is_dir():
            project, path = path, (path / ".venv").resolve()
        elif (path / "pyproject.toml").is_file() and (path / "uv.lock").is_file():
            raise UsageError(f"{given}: a uv project without its .venv", f"make it first: cd {shlex.quote(str(path))} "
                             "&& uv sync, then adopt it again")
        elif path.name == ".venv" and (path.parent / "pyproject.toml").is_file():
            project = path.parent
        interpreter = _interpreter_in(path, given)
    elif os.access(path, os.X_OK):
        interpreter = Path(os.path.abspath(raw))  # a venv's python is a link: keep the name it was given
    else:
        raise UsageError(f"{given}: neither a folder nor an executable", "give a venv, a uv project, a conda prefix "
                         "or a Python interpreter")
    return interpreter, project


# The CUDA libraries whose place decides what a framework loads (their sonames' stems).
CUDA_LIBRARIES = ("libcudart", "libcublas", "libcublasLt", "libcudnn", "libnccl", "libcufft", "libcusparse",
                  "libcusolver", "libcurand", "libnvJitLink", "libcupti", "libnvinfer")


def cuda_libraries(prefix: Path, sites: list[str], conda: bool,
                   loader_cache: list[str]) -> dict[str, list[dict[str, str]]]:
    """{soname: [{"from", "path"}, ...]}: where each CUDA library would be loaded from, in the
    loader's order for the env's interpreter: ``LD_LIBRARY_PATH`` first, then the env's own
    ``nvidia-*`` wheels (the frameworks' run paths), a conda prefix's ``lib``, then the
    system's (``loader_cache``: lines of ``ldconfig -p``, the probe reads them); the first is
    the one loaded."""
    import glob
    import re

    wanted = re.compile(r"^(" + "|".join(CUDA_LIBRARIES) + r")\.so\.\d+$")
    places = [("LD_LIBRARY_PATH", d) for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    places += [("wheel", d) for site in sites for d in sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))]
    if conda:
        places.append(("conda", str(prefix / "lib")))
    found: dict[str, list[dict[str, str]]] = {}
    for source, folder in places:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in sorted(n for n in names if wanted.match(n)):
            found.setdefault(name, []).append({"from": source, "path": os.path.join(folder, name)})
    for line in loader_cache:
        name, _, path = line.strip().partition(" => ")
        name = name.split(" ")[0]
        if wanted.match(name) and not any(p["path"] == path for p in found.get(name, [])):
            found.setdefault(name, []).append({"from": "system", "path": path})
    return found


def _refuse_managed(path: Path, home_root: Path, given: str) -> None:
    home = Path(home_root).expanduser().resolve()
    if path == home or home in path.parents:
        raise UsageError(f"{given} is inside envcheck's home ({home}): envcheck manages it already",
                         "use its env name (envcheck env list)")


def _interpreter_in(folder: Path, given: str) -> Path:
    for candidate in ("bin/python", "bin/python3", "python.exe", "Scripts/python.exe"):
        if (folder / candidate).exists():
            return folder / candidate
    raise UsageError(f"{given}: no env (no bin/python, no pyvenv.cfg, no conda-meta) and no interpreter",
                     "give a venv or virtualenv folder, a uv project, a conda prefix, or a Python's path")


def probe_ahead(name: str, given: str, home_root: Path) -> None:
    """Start the probe of ``given`` now (`env adopt NAME PATH`), for ``inspect`` to read when it
    gets there.

    Why: the probe is two interpreter starts (its guard's, then the env's), about as long as
    the imports of `env adopt`'s command line (click, the store), which calls this before them
    so the two overlap (issue 28's target: adopting an env at most 1.5x the time of listing its
    distributions). The one speed trick of adoption, kept here with the probe's own thrift (see
    ``_PROBE``). What adoption refuses before its probe (a bad name, what ``_locate`` refuses)
    starts nothing, and is said later as ever; a probe never read (bad input found after it)
    dies with envcheck, as every guarded child does."""
    from .env_info import check_name

    try:
        check_name(name)
        interpreter = str(_locate(given, home_root)[0])
        _AHEAD[interpreter] = processes.begin(_probe_command(interpreter), env=_probe_environ())
    except Exception:  # bad input, said by ``inspect`` as ever: this is only a head start
        return


_AHEAD: dict[str, processes.Begun] = {}  # started by ``probe_ahead``, by interpreter


def _probe_command(interpreter: str) -> list[str]:
    return [interpreter, "-I", "-S", "-B", "-c", _PROBE, *CUDA_LIBRARIES]


def _probe_environ() -> dict[str, str]:
    return clean_environ({"PYTHONDONTWRITEBYTECODE": "1"})


def _probe(interpreter: Path, given: str) -> dict[str, Any]:
    env = _probe_environ()
    ahead = _AHEAD.pop(str(interpreter), None)
    try:
        done = ahead.finish(timeout=PROBE_TIMEOUT) if ahead is not None else \
            processes.run(_probe_command(str(interpreter)), timeout=PROBE_TIMEOUT, env=env)
    except OSError as exc:
        raise UsageError(f"{given}: {interpreter} cannot be run: {exc.strerror or exc}",
                         "give a working Python 3 interpreter") from None
    if done.timed_out:
        raise UsageError(f"{given}: {interpreter} did not answer within {PROBE_TIMEOUT:.0f} s",
                         "check that it starts (something in it hangs at start-up)")
    try:
        facts = ast.literal_eval(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
        if not isinstance(facts, dict) or facts.get("major") != 3:
            raise ValueError
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, IndexError):
        raise UsageError(f"{given}: {interpreter} is {_which_python(interpreter, env)} (it did not answer as "
                         "Python 3)", "envcheck judges Python 3 envs: give a Python 3 interpreter") from None
    return facts


def _which_python(interpreter: Path, env: dict[str, str]) -> str:
    """"Python 2" when it answers as one (any Python's syntax, no flag Python 2 lacks)."""
    try:
        done = processes.run([str(interpreter), "-c", "import sys; sys.stdout.write(str(sys.version_info[0]))"],
                             timeout=PROBE_TIMEOUT, env=env)
    except OSError:
        return "no Python 3"
    return "Python 2" if done.stdout.strip() == "2" else "no Python 3"


def conda_records(prefix: Path) -> tuple[dict[str, str], dict[str, str]]:
    """({name: version}, {name: build string}) of a conda prefix's ``conda-meta/*.json``."""
    versions, builds = {}, {}
    try:
        entries = sorted(os.scandir(prefix / "conda-meta"), key=lambda e: e.name)
    except OSError:
        return versions, builds
    for entry in entries:
        if not entry.name.endswith(".json"):
            continue
        try:
            with open(entry.path, encoding="utf-8") as fh:
                record = json.load(fh)
            name, version = record["name"], record["version"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(name, str) and isinstance(version, str):
            versions[name] = version
            if isinstance(record.get("build"), str):
                builds[name] = record["build"]
    return versions, builds


def install_command(adopted: dict[str, Any], packages: dict[str, str], requirements: str) -> str:
    """The env's own installer's command for ``requirements`` (``env add`` refuses an adopted
    env and names this)."""
    kind, path = adopted.get("kind"), adopted.get("path") or ""
    interpreter = shlex.quote(adopted.get("interpreter") or "python3")
    if kind == "uv-project":
        return f"cd {shlex.quote(adopted.get('project') or path)} && uv add {requirements}"
    if kind == "conda":
        if adopted.get("pixi"):
            return f"cd {shlex.quote(adopted['pixi'])} && pixi add {requirements}"
        return f"conda install -p {shlex.quote(path)} {requirements}"
    if "pip" not in packages:
        return f"uv pip install --python {interpreter} {requirements}"
    return f"{interpreter} -m pip install {requirements}"


def manifest(name: str, found: Found, packages: dict[str, str], frameworks: list[str],
             digest: str | None = None) -> dict[str, Any]:
    """The manifest of an adopted env: what adoption read, no preset, no installer of envcheck's."""
    from . import manifest as mf

    return {"schema": mf.SCHEMA, "name": name, "state": mf.READY, "preset": {"name": None},
            "requested": [], "python": {"version": found.version, "base": str(found.interpreter)},
            "installer": None, "index": {}, "created": mf.now(), "updated": mf.now(),
            "packages": packages, "frameworks": frameworks, "lock": None, "linked_from": None,
            "digest": digest, "adopted": found.to_json()}


def judged_once(given: str, home_root: Path, frameworks_of=None):
    """An ``EnvInfo`` of the env or interpreter at ``given``, judged without registering it
    (``validate --python``, ``check --python``): nothing kept in the home."""
    from .env_info import EnvInfo
    from .metadata import installed_packages, register_sites

    found = inspect(given, home_root)
    register_sites(found.path, found.sites, str(found.interpreter))
    packages = installed_packages(found.path)
    name = found.path.name if found.kind != "system" else found.interpreter.name
    frameworks = list(frameworks_of(packages)) if frameworks_of is not None else []
    return EnvInfo(name, found.path, "ready", manifest(name, found, packages, frameworks), packages)


def running() -> Found:
    """The interpreter this code runs in, as ``inspect`` would find it (no process started):
    ``envcheck.ensure_ready()`` in an env of the user's own where envcheck is installed."""
    import site
    import sys

    prefix = Path(sys.prefix)
    venv = prefix != Path(getattr(sys, "base_prefix", sys.prefix))
    sites = [p for p in dict.fromkeys(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
             if os.path.isdir(p)]
    kind = "conda" if (prefix / "conda-meta").is_dir() else "venv" if venv else "system"
    project = prefix.parent if venv and prefix.name == ".venv" and (prefix.parent / "uv.lock").is_file() else None
    found = Found("uv-project" if project else kind, prefix, Path(sys.executable),
                  "%d.%d.%d" % sys.version_info[:3], sites, project)
    if kind == "conda":
        found.conda, found.conda_builds = conda_records(prefix)
    return found
