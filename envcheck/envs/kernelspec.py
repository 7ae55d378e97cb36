"""Jupyter kernelspecs of envs on disk: where they go, how they are written, found and removed.

A kernelspec is a folder ``KERNELS/NAME`` holding ``kernel.json`` (Jupyter's layout). KERNELS
is the user's (``jupyter_core.paths.jupyter_data_dir()/kernels``) or, as ``ipykernel install
--prefix``/``--sys-prefix`` put it, ``PREFIX/share/jupyter/kernels``. Jupyter finds kernels
in ``jupyter_path("kernels")`` (the user's folder, then the Python environment's, then the
system's, after any ``JUPYTER_PATH``).

envcheck marks each kernelspec it writes: ``metadata.envcheck`` in kernel.json names the env
and its home. Only a folder so marked is ever replaced or deleted; anything else is someone
else's. Each env also records, in ``envs/NAME/envcheck-kernels.json``, the KERNELS folders its
kernelspecs went to, so ``env remove`` finds one installed under a ``--prefix`` that Jupyter's
search path doesn't hold.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from . import manifest as mf
from ..atomic import write_bytes

NAME_PREFIX = "envcheck-"
MARK = "envcheck"  # the key of kernel.json's metadata that marks a kernelspec as envcheck's
SPEC_FILE = "kernel.json"
RECORD_NAME = "envcheck-kernels.json"  # in the env's folder
LOGOS = ("logo-32x32.png", "logo-64x64.png", "logo-svg.svg")  # ipykernel's, shown by JupyterLab


def kernel_name(env: str) -> str:
    """The kernel name of env ``env``; Jupyter lowercases kernel names."""
    return f"{NAME_PREFIX}{env}".lower()


def kernels_dir(prefix: str | os.PathLike | None = None) -> Path:
    """Where a kernelspec is installed: the user's Jupyter data folder, or ``PREFIX/share/jupyter/kernels``."""
    if prefix is not None:
        return Path(os.path.abspath(prefix)) / "share" / "jupyter" / "kernels"
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "kernels"


def sys_prefix() -> str:
    """``--sys-prefix``: the prefix of the Python that runs envcheck, as ipykernel takes its own."""
    return sys.prefix


def search_dirs(extra: Iterable[Path] = ()) -> list[Path]:
    """The KERNELS folders Jupyter searches, then ``extra``, each once."""
    from jupyter_core.paths import jupyter_path

    seen: dict[str, Path] = {}
    for folder in [*map(Path, jupyter_path("kernels")), *extra]:
        seen.setdefault(os.path.realpath(folder), folder)
    return list(seen.values())


def searched(kernels: Path) -> bool:
    """Does Jupyter look for kernels in ``kernels``?"""
    return os.path.realpath(kernels) in {os.path.realpath(d) for d in search_dirs()}


def prefix_of(kernels: Path) -> Path | None:
    """The ``--prefix`` that finds kernelspecs in ``kernels`` where Jupyter's search doesn't
    (``PREFIX/share/jupyter/kernels``); None where it does."""
    if searched(kernels) or kernels.parts[-3:] != ("share", "jupyter", "kernels"):
        return None
    return kernels.parent.parent.parent


@dataclass(frozen=True)
class Kernelspec:
    """One kernelspec envcheck wrote, as found on disk."""

    path: Path  # its folder
    spec: dict[str, Any]  # kernel.json

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def mark(self) -> dict[str, Any]:
        return self.spec["metadata"][MARK]

    @property
    def env(self) -> str:
        return str(self.mark.get("env"))

    @property
    def home(self) -> str:
        return str(self.mark.get("home"))

    @property
    def python(self) -> str:
        argv = self.spec.get("argv") or [""]
        return str(argv[0])

    def belongs_to(self, env: str, home: Path) -> bool:
        return self.env == env and os.path.realpath(self.home) == os.path.realpath(home)


def read(folder: Path) -> tuple[bool, Kernelspec | None]:
    """(whether ``folder`` exists, its kernelspec if envcheck wrote it). A folder without a
    readable kernel.json carrying envcheck's mark is not envcheck's."""
    try:
        with open(folder / SPEC_FILE, encoding="utf-8") as fh:
            spec = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return folder.exists() or folder.is_symlink(), None
    if folder.is_symlink() or not isinstance(spec, dict):
        return True, None
    metadata = spec.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get(MARK), dict):
        return True, None
    return True, Kernelspec(folder, spec)


def find(dirs: Iterable[Path]) -> list[Kernelspec]:
    """Every kernelspec envcheck wrote in ``dirs`` (KERNELS folders), in their order."""
    found = []
    for kernels in dirs:
        try:
            names = sorted(e.name for e in os.scandir(kernels) if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
        for name in names:
            spec = read(kernels / name)[1]
            if spec is not None:
                found.append(spec)
    return found


def write(kernels: Path, name: str, spec: dict[str, Any], logos: Path | None = None) -> Path:
    """Write kernelspec ``name`` into ``kernels`` (kernel.json replaced atomically, so Jupyter
    never reads half of one), with ipykernel's logos from ``logos`` when given. The caller
    has checked that an existing folder of that name is envcheck's."""
    folder = kernels / name
    folder.mkdir(parents=True, exist_ok=True)
    for logo in LOGOS:
        if logos is not None and (logos / logo).is_file():
            write_bytes(folder / logo, (logos / logo).read_bytes(), 0o666)  # whole, as another writer's
    mf.write_atomic(folder / SPEC_FILE, spec)
    return folder


def delete(spec: Kernelspec) -> None:
    """Delete a kernelspec envcheck wrote (read again first: a folder someone replaced since is left)."""
    current = read(spec.path)[1]
    if current is not None and current.env == spec.env and current.home == spec.home:
        try:
            shutil.rmtree(spec.path)
        except FileNotFoundError:  # another envcheck removed it meanwhile
            pass


def record(env_dir: Path, kernels: Path) -> None:
    """Note in the env's folder that a kernelspec of it went to ``kernels``."""
    dirs = recorded(env_dir)
    if str(kernels) not in map(str, dirs):
        mf.write_atomic(env_dir / RECORD_NAME, {"kernel_dirs": [*map(str, dirs), str(kernels)]})


def recorded(env_dir: Path) -> list[Path]:
    """The KERNELS folders the env's kernelspecs went to (none when unreadable)."""
    try:
        with open(env_dir / RECORD_NAME, encoding="utf-8") as fh:
            dirs = json.load(fh).get("kernel_dirs", [])
    except (OSError, ValueError, AttributeError, RecursionError):
        return []
    return [Path(d) for d in dirs if isinstance(d, str)]
