"""Envs envcheck did not make: a venv, a uv project, a conda (mamba, pixi) prefix, or an
interpreter (a system Python, a container's, a pyenv version), adopted to be judged, never
changed.

``inspect(PATH)`` says what PATH is (``Found``: its kind, interpreter, folder and facts) by
reading it and running its interpreter once, isolated (``-I -S -B``: no user site, no
``site`` import, no bytecode written), under a deadline (``adopt_probe``). The store records
an adopted env in ``$ENVCHECK_HOME/envs/NAME/`` (its manifest's ``adopted`` block, its
reports, its baseline): nothing is ever written inside PATH. Its site folders (a system
Python's ``dist-packages`` lie outside its prefix) are registered with ``metadata`` so every
reader of an env's files finds them.

Kinds, and how each adds a package (``install_command``): ``venv`` (``pip install`` in it, or
``uv pip install --python`` where it has no pip), ``uv-project`` (``uv add`` in the project),
``conda`` (``conda install -p PREFIX``; a pixi workspace's env: ``pixi add``), ``system``
(``python -m pip install``, the interpreter's own).
"""
from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .adopt_probe import CUDA_LIBRARIES, locate, probe, refuse_managed

KINDS = ("venv", "uv-project", "conda", "system")
PROBE_TIMEOUT = 20.0  # seconds an interpreter has to answer (one that hangs at start is named)


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
    interpreter, project = locate(given, home_root)
    facts = probe(interpreter, given, PROBE_TIMEOUT)
    prefix = Path(facts["prefix"]).resolve()
    refuse_managed(prefix, home_root, given)
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
