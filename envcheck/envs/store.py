"""The env store: names, one lock per env, transactional create and add, remove, export, list.

Reading (``list``, ``get``) touches only manifests and ``*.dist-info`` folder names, so it is
fast and never starts an env's interpreter. Changing (``create``, ``add``, ``remove``) happens
under the env's lock, after every input has been validated, so bad input changes nothing.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterator

from . import manifest as mf
from ..errors import BusyError, UsageError
from .metadata import installed_packages
from ..paths import MANIFEST_NAME, Home

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
NOT_EXPORTED = {"pip"}  # the installer's own tool, as `pip freeze` leaves it out


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name or ""):
        raise UsageError(f"invalid env name {name!r}",
                         "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return name


def env_python(env_dir: Path) -> Path:
    """The env's interpreter (POSIX layout, else Windows)."""
    posix = env_dir / "bin" / "python"
    return posix if posix.exists() or os.name != "nt" else env_dir / "Scripts" / "python.exe"


@dataclass
class EnvInfo:
    """One env as the store sees it: manifest facts plus the packages really installed."""

    name: str
    path: Path
    state: str  # ready | incomplete | broken
    manifest: dict[str, Any] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)
    problem: str | None = None

    @property
    def python(self) -> Path:
        return env_python(self.path)

    @property
    def preset(self) -> dict[str, Any]:
        return self.manifest.get("preset") or {}

    def to_json(self) -> dict[str, Any]:
        m = self.manifest
        return {
            "name": self.name,
            "path": str(self.path),
            "state": self.state,
            "preset": self.preset.get("name"),
            "preset_hash": self.preset.get("hash"),
            "kind": self.preset.get("kind"),
            "framework": self.preset.get("framework"),
            "python_version": m.get("python", {}).get("version"),
            "python": str(self.python),
            "installer": m.get("installer"),
            "created": m.get("created"),
            "updated": m.get("updated"),
            "requested": m.get("requested", []),
            "packages": self.packages,
            "problem": self.problem,
        }


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM takes the same clean-up path as Ctrl-C while an env is being changed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class EnvStore:
    def __init__(self, home: Home):
        self.home = home

    # -- reading -------------------------------------------------------------------------

    def list(self) -> list[EnvInfo]:
        try:
            entries = sorted(e.name for e in os.scandir(self.home.envs)
                             if e.is_dir(follow_symlinks=False) and NAME_RE.fullmatch(e.name))
        except FileNotFoundError:
            return []
        return [info for info in map(self._info, entries) if info is not None]

    def get(self, name: str) -> EnvInfo:
        check_name(name)
        info = self._info(name)
        if info is None:
            raise UsageError(f"no env named {name!r}", "see `envcheck env list`")
        return info

    def _info(self, name: str) -> EnvInfo | None:
        path = self.home.env_dir(name)
        if path.is_symlink():
            return None
        try:
            data = mf.read(path / MANIFEST_NAME)
        except FileNotFoundError:
            return None  # not an envcheck env
        except mf.ManifestError as exc:
            return EnvInfo(name, path, "broken", problem=f"unreadable manifest ({exc})")
        info = EnvInfo(name, path, "ready" if data.get("state") == mf.READY else "incomplete",
                       manifest=data, packages=installed_packages(path))
        if info.state == "incomplete":
            info.problem = "its creation did not finish; `envcheck env create` of the same name recovers it"
        elif not info.python.exists():
            info.state, info.problem = "broken", f"interpreter {info.python} is missing"
        return info

    def export(self, name: str) -> str:
        info = self._require_ready(name)
        header = f"# envcheck env export {name} (preset {info.preset.get('name')}, " \
                 f"python {info.manifest.get('python', {}).get('version')})"
        pins = [f"{n}=={v}" for n, v in info.packages.items() if n not in NOT_EXPORTED]
        return "\n".join([header, *pins]) + "\n"

    def _require_ready(self, name: str) -> EnvInfo:
        info = self.get(name)
        if info.state != "ready":
            raise UsageError(f"env {name} is {info.state}: {info.problem}",
                             f"recreate it: envcheck env remove {name} --yes, then envcheck env create {name}")
        return info

    # -- changing ------------------------------------------------------------------------

    @contextmanager
    def locked(self, name: str) -> Iterator[None]:
        """The env's lock, kept outside the env folder; held by another process = BusyError."""
        from filelock import FileLock, Timeout

        self.home.locks.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.home.lock(name)), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise BusyError(name) from None
        try:
            yield
        finally:
            lock.release()

    def _log(self, name: str, action: str) -> Path:
        self.home.logs.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now().strftime("%Y%m%dT%H%M%S")
        return self.home.logs / f"{name}-{action}-{stamp}-{os.getpid()}.log"

    def _scratch(self, name: str, what: str) -> Path:
        scratch = self.home.root / "tmp"
        scratch.mkdir(parents=True, exist_ok=True)
        return scratch / f"{name}.{what}-{os.getpid()}"

    def create(self, name: str, preset, *, python: str | None = None, add: tuple[str, ...] = (),
               installer: str | None = None, index: dict[str, Any] | None = None,
               progress: Callable[[str], None] | None = None) -> EnvInfo:
        """Create env NAME from a preset, as a transaction: it ends ``ready`` or not at all.

        ``progress`` hears one line once the inputs are valid and the work begins.
        """
        from .installers import choose_backend, settings_from_pip_config
        from .presets import parse_requirement
        from .pythons import find_python

        check_name(name)
        requirements = [str(parse_requirement(r)) for r in (*preset.packages, *add)]
        interpreter = find_python(preset.requires_python, python, needed_by=f"preset {preset.name}")
        backend = choose_backend(installer)
        backend.cache_dir = self.home.uv_cache
        settings = settings_from_pip_config().merged(**(index or {}))
        target = self.home.env_dir(name)
        self._refuse_foreign(name, target)
        with self.locked(name):
            self._clear_incomplete(name, target)
            if progress:
                progress(f"creating env {name} from preset {preset.name} with {backend.name}, "
                         f"python {interpreter.version} ...")
            log = self._log(name, "create")
            made = False
            try:
                with _sigterm_as_interrupt():
                    target.mkdir(parents=True)
                    made = True
                    record = {
                        "schema": mf.SCHEMA, "name": name, "state": mf.CREATING,
                        "preset": {**preset.to_json(), "hash": preset.content_hash},
                        "requested": requirements,
                        "python": {"version": str(interpreter.version), "base": str(interpreter.path)},
                        "installer": backend.name, "index": settings.to_json(),
                        "created": mf.now(), "updated": mf.now(), "packages": {},
                    }
                    mf.write_atomic(target / MANIFEST_NAME, record)
                    backend.create_venv(str(interpreter.path), target, log)
                    backend.install(env_python(target), requirements, settings, log)
                    record.update(state=mf.READY, packages=installed_packages(target), updated=mf.now())
                    mf.write_atomic(target / MANIFEST_NAME, record)
            except BaseException:
                if made:
                    shutil.rmtree(target, ignore_errors=True)
                raise
            log.unlink(missing_ok=True)
        return self.get(name)

    def _refuse_foreign(self, name: str, target: Path) -> None:
        if target.is_symlink() or (target.exists() and not (target / MANIFEST_NAME).is_file()):
            raise UsageError(f"{target} exists and was not created by envcheck",
                             "move it away or choose another env name")
        info = self._info(name)
        if info is not None and info.state == "ready":
            raise UsageError(f"env {name} already exists",
                             f"use `envcheck env add {name} REQ...` to add packages, or remove it first")
        if info is not None and info.state == "broken":
            raise UsageError(f"env {name} exists but is broken: {info.problem}",
                             f"envcheck env remove {name} --yes, then create it again")

    def _clear_incomplete(self, name: str, target: Path) -> None:
        """Recover an env left ``incomplete`` by a killed create (checked again under the lock)."""
        self._refuse_foreign(name, target)
        if target.exists():
            self._delete(name, target)

    def _delete(self, name: str, target: Path) -> None:
        """Move the env out of the listing in one step, then delete it."""
        doomed = self._scratch(name, "removing")
        os.replace(target, doomed)
        shutil.rmtree(doomed)

    def add(self, name: str, requirements: tuple[str, ...], *, installer: str | None = None,
            index: dict[str, Any] | None = None) -> EnvInfo:
        """Install more packages; on any failure the env is left exactly as it was."""
        from .installers import choose_backend, settings_from_pip_config
        from .presets import parse_requirement

        check_name(name)
        if not requirements:
            raise UsageError("no requirements given", f"envcheck env add {name} 'package>=1.0'")
        reqs = [str(parse_requirement(r)) for r in requirements]
        info = self._require_ready(name)
        backend = choose_backend(installer, info.manifest.get("installer"))
        backend.cache_dir = self.home.uv_cache
        settings = settings_from_pip_config().merged(**(index or {}))
        with self.locked(name):
            log = self._log(name, "add")
            backup = self._scratch(name, "backup")
            # Hard links: installers replace files (unlink + write), never edit them in place,
            # so the backup keeps the old contents at the cost of directory entries only.
            shutil.copytree(info.path, backup, symlinks=True, copy_function=os.link)
            try:
                with _sigterm_as_interrupt():
                    backend.install(info.python, reqs, settings, log)
                    record = dict(info.manifest)
                    record.update(requested=[*record.get("requested", []), *reqs],
                                  packages=installed_packages(info.path), updated=mf.now(),
                                  installer=backend.name)
                    mf.write_atomic(info.path / MANIFEST_NAME, record)
            except BaseException:
                shutil.rmtree(info.path, ignore_errors=True)
                os.replace(backup, info.path)
                raise
            shutil.rmtree(backup, ignore_errors=True)
            log.unlink(missing_ok=True)
        return self.get(name)

    def remove(self, name: str) -> Path:
        """Delete an env: only a folder directly inside the env home that carries a manifest."""
        target = self.removal_target(name)
        with self.locked(name):
            self._delete(name, target)
        return target

    def removal_target(self, name: str) -> Path:
        """The folder ``remove`` would delete, after every safety check (UsageError if unsafe)."""
        check_name(name)
        target = self.home.env_dir(name)
        if target.is_symlink():
            raise UsageError(f"{target} is a symbolic link; envcheck never removes anything outside its home",
                             "remove the link yourself")
        if not target.is_dir():
            raise UsageError(f"no env named {name!r}", "see `envcheck env list`")
        home = self.home.root.resolve()
        if target.resolve().parent != self.home.envs.resolve() or home not in target.resolve().parents:
            raise UsageError(f"{target} resolves outside the env home {home}",
                             "remove it yourself if you mean to")
        if not (target / MANIFEST_NAME).is_file():
            raise UsageError(f"{target} has no envcheck manifest; envcheck removes only envs it created",
                             "remove it yourself if you mean to")
        return target
