"""The env store: names, one lock per env, transactional create and add, remove, export, list.

Reading (``list``, ``get``) touches only manifests and ``*.dist-info`` folder names, so it is
fast and never starts an env's interpreter. Changing (``create``, ``add``, ``remove``) happens
under the env's lock, after every input has been validated, so bad input changes nothing
(not even a log, a lock or an empty folder: ``_changing`` takes back what it made).

Interruptions, SIGKILL included, leave each env as it was or visibly incomplete, and the next
command finishes the job: see ``scratch`` for the steps each change takes and how what an
interrupted one left is recovered (``list``, ``get``, ``create``, ``add`` and ``remove`` do it,
under the env's lock, each action one line for ``notice``: the ``Progress.notice`` of the
observer the session hands it, nothing by default; the core never prints).
"""
from __future__ import annotations

import os
import re
import shutil
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterator

from . import manifest as mf
from . import metadata
from ..errors import BusyError, UsageError
from .gate_link import link_env
from .metadata import installed_packages, pins
from .scratch import Scratch, discard, disk_errors, is_stub, signals_held
from ..paths import MANIFEST_NAME, Home
from ..progress import SILENT, Progress

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
NOT_EXPORTED = {"pip"}  # the installer's own tool, as `pip freeze` leaves it out


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name or ""):
        raise UsageError(f"invalid env name {name!r}",
                         "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return name


def env_python(env_dir: Path) -> Path:
    """The env's interpreter (POSIX layout, else Windows)."""
    return Path(metadata.env_python(env_dir))


@dataclass
class EnvInfo:
    """One env as the store sees it: manifest facts plus the packages really installed."""

    name: str
    path: Path
    state: str  # ready | incomplete | broken
    manifest: dict[str, Any] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)
    problem: str | None = None
    fix: str | None = None  # the command that repairs an incomplete or broken env

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
            "index": m.get("index"),  # where its packages came from (credentials removed)
            "created": m.get("created"),
            "updated": m.get("updated"),
            "requested": m.get("requested", []),
            "frameworks": m.get("frameworks", []),
            "packages": self.packages,
            "problem": self.problem,
            "fix": self.fix,
        }


class EnvStore:
    """``frameworks_of`` names the frameworks in a {name: version} map, for the manifest's
    ``frameworks`` field: envs can't import ``envcheck.frameworks`` (a layer above them), so
    the use cases, which may, pass it; a store without one records none."""

    def __init__(self, home: Home, notice: Callable[[str], None] | None = None,
                 frameworks_of: mf.FrameworksOf | None = None):
        self.home = home
        self.frameworks_of = frameworks_of
        self.notice = notice or SILENT.notice  # hears what recovery did, one line each
        self.scratch = Scratch(home.root / "tmp", self.notice, lambda name: bool(NAME_RE.fullmatch(name)))

    def _frameworks(self, packages: dict[str, str]) -> list[str]:
        return list(self.frameworks_of(packages)) if self.frameworks_of is not None else []

    # -- reading -------------------------------------------------------------------------

    def list(self) -> list[EnvInfo]:
        self._settle(None)
        try:
            entries = sorted(e.name for e in os.scandir(self.home.envs)
                             if e.is_dir(follow_symlinks=False) and NAME_RE.fullmatch(e.name))
        except FileNotFoundError:
            return []
        return [info for info in map(self._info, entries) if info is not None]

    def get(self, name: str) -> EnvInfo:
        check_name(name)
        self._settle(name)
        return self._current(name)

    def _current(self, name: str) -> EnvInfo:
        info = self._info(name)
        if info is None:
            raise UsageError(f"no env named {name!r}", "see `envcheck env list`")
        return info

    def _info(self, name: str) -> EnvInfo | None:
        path = self.home.env_dir(name)
        if path.is_symlink():
            return None
        try:
            data = mf.read(path / MANIFEST_NAME, self.frameworks_of)
        except FileNotFoundError:
            if is_stub(path):  # an older envcheck's create killed mid-write
                return EnvInfo(name, path, "incomplete", problem="its creation stopped before its manifest was written",
                               fix=f"envcheck env remove {name} --yes, or create it again")
            return None  # not an envcheck env
        except mf.ManifestError as exc:
            return EnvInfo(name, path, "broken", problem=f"unreadable manifest ({exc})",
                           fix=exc.fix or f"envcheck env remove {name} --yes, then create it again")
        info = EnvInfo(name, path, "ready" if data["state"] == mf.READY else "incomplete",
                       manifest=data, packages=installed_packages(path))
        if data["state"] == mf.CHANGING and self.scratch.add_pending(name):
            info.problem = "an `env add` is changing it, or was interrupted"
            info.fix = f"wait for it; if none runs, any envcheck command on it (envcheck env show {name}) restores it"
        elif data["state"] == mf.CHANGING:
            info.problem = "an `env add` was interrupted and its backup is gone"
            info.fix = f"envcheck env remove {name} --yes, then create it again"
        elif info.state == "incomplete":
            info.problem = "its creation did not finish; `envcheck env create` of the same name recovers it"
            info.fix = f"envcheck env create {name} --preset {info.preset.get('name') or 'P'}"
        elif not info.python.exists():
            info.state, info.problem = "broken", f"interpreter {info.python} is missing"
            info.fix = f"envcheck env remove {name} --yes, then create it again"
        return info

    def export(self, name: str) -> tuple[str, list[str]]:
        """The env's exact pins as a requirements file, and why each package left out of it was."""
        info = self._require_ready(name)
        header = f"# envcheck env export {name} (preset {info.preset.get('name')}, " \
                 f"python {info.manifest.get('python', {}).get('version')})"
        lines, left_out = pins({n: v for n, v in info.packages.items() if n not in NOT_EXPORTED})
        return "\n".join([header, *lines]) + "\n", left_out

    def _require_ready(self, name: str, info: EnvInfo | None = None) -> EnvInfo:
        info = info or self.get(name)
        if info.state != "ready":
            raise UsageError(f"env {name} is {info.state}: {info.problem}",
                             info.fix or f"recreate it: envcheck env remove {name} --yes, then envcheck env create {name}")
        return info

    # -- changing ------------------------------------------------------------------------

    @contextmanager
    def locked(self, name: str) -> Iterator[None]:
        """The env's lock, kept outside the env folder; held by another process = BusyError.

        A lock file this command made goes again when the command fails on bad input."""
        from filelock import FileLock, Timeout

        self.home.locks.mkdir(parents=True, exist_ok=True)
        path = self.home.lock(name)
        fresh = not path.exists()
        lock = FileLock(str(path), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise BusyError(name) from None
        try:
            yield
        except UsageError:
            if fresh:
                path.unlink(missing_ok=True)  # while still held: a waiter re-checks after it
            raise
        finally:
            lock.release()

    @contextmanager
    def _changing(self, name: str) -> Iterator[None]:
        """The frame of every change to env NAME: under its lock, after what an interrupted
        command left is settled; a full or read-only disk said plainly (exit 1); bad input
        (exit 2) leaves none of the folders this command made."""
        bookkeeping = [self.home.root, self.home.envs, self.home.locks, self.home.logs,
                       self.home.root / "tmp", self.home.uv_cache.parent, self.home.uv_cache]
        fresh = [path for path in bookkeeping if not path.exists()]
        try:
            with disk_errors(self.home.root), self.locked(name):
                self.scratch.recover(name, self.home.env_dir(name))
                yield
        except UsageError:
            for path in reversed(fresh):
                if path == self.home.uv_cache:
                    shutil.rmtree(path, ignore_errors=True)  # made by this command's installer only
                else:
                    with suppress(OSError):
                        path.rmdir()
            raise

    def _log(self, name: str, action: str) -> Path:
        """A new log, readable by its owner only (an installer's output may name private indexes)."""
        self.home.logs.mkdir(mode=0o700, parents=True, exist_ok=True)
        stamp = datetime.now().strftime("%Y%m%dT%H%M%S")
        path = self.home.logs / f"{name}-{action}-{stamp}-{os.getpid()}.log"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(fd, 0o600)
        os.close(fd)
        return path

    def create(self, name: str, preset, *, python: str | None = None, add: tuple[str, ...] = (),
               installer: str | None = None, index=None, keep_log: bool = False,
               progress: Progress = SILENT) -> EnvInfo:
        """Create env NAME from a preset, as a transaction: it ends ``ready`` or not at all.

        ``index``: the command line's ``IndexSettings``, laid over the pip configuration.
        ``keep_log``: keep the installer's log of a failure on bad input too (for a caller that
        reports it as a failure, exit 1, rather than as bad input, exit 2, that changed nothing).
        ``progress`` hears the task begin once the inputs are valid, then its phases.
        """
        from ..processes import signals_interrupt
        from .installers import choose_backend, settings_from_pip_config
        from .presets import parse_requirement
        from .pythons import find_python

        check_name(name)
        self._settle(name)
        requirements = [str(r) for r in (*preset.requirements, *map(parse_requirement, add))]
        interpreter = find_python(preset.requires_python, python, needed_by=f"preset {preset.name}")
        backend = choose_backend(installer)
        backend.cache_dir = self.home.uv_cache
        settings = settings_from_pip_config().merged(index)
        target = self.home.env_dir(name)
        self._refuse_foreign(name, target)
        settings = settings.with_preset_indexes(preset.indexes)  # after the cheap checks: it may wait
        with self._changing(name):
            self._clear_incomplete(name, target)
            log = self._log(name, "create")
            progress.start(f"env {name}", f"creating env {name} from preset {preset.name} with "
                           f"{backend.name}, python {interpreter.version}", log)
            try:
                with signals_interrupt():  # SIGTERM and SIGHUP take Ctrl-C's clean-up path
                    record = {
                        "schema": mf.SCHEMA, "name": name, "state": mf.CREATING,
                        "preset": {**preset.to_json(), "hash": preset.content_hash},
                        "requested": requirements,
                        "python": {"version": str(interpreter.version), "base": str(interpreter.path)},
                        "installer": backend.name, "index": settings.to_json(),
                        "warnings": settings.warnings(), "created": mf.now(), "updated": mf.now(), "packages": {}, "frameworks": [],
                    }
                    self._place(name, target, record)
                    progress.phase("making the venv")
                    backend.create_venv(str(interpreter.path), target, log)
                    backend.install(env_python(target), requirements, settings, log, progress)
                    link_env(self.home, target)
                    packages = installed_packages(target)
                    record.update(state=mf.READY, packages=packages, frameworks=self._frameworks(packages),
                                  updated=mf.now())
                    mf.write_atomic(target / MANIFEST_NAME, record)
            except BaseException as exc:
                if not keep_log:
                    _forget_log(exc, log)
                if target.exists():  # placed: ours (cleared above, under the lock), even if an
                    self.scratch.delete(name, target)  # interrupt landed right after the rename
                raise
            log.unlink(missing_ok=True)
        progress.done("created")
        return self.get(name)

    def _place(self, name: str, target: Path, record: dict[str, Any]) -> None:
        """Make ``envs/NAME`` appear holding its first manifest, in one rename."""
        staging = self.scratch.path(name, "create")
        staging.mkdir()
        mf.write_atomic(staging / MANIFEST_NAME, record)
        self.home.envs.mkdir(parents=True, exist_ok=True)
        os.replace(staging, target)

    def _refuse_foreign(self, name: str, target: Path) -> None:
        if target.is_symlink() or (target.exists() and not (target / MANIFEST_NAME).is_file()
                                   and not is_stub(target)):
            raise UsageError(f"{target} exists and was not created by envcheck",
                             "move it away or choose another env name")
        info = self._info(name)
        if info is not None and info.state == "ready":
            raise UsageError(f"env {name} already exists",
                             f"use `envcheck env add {name} REQ...` to add packages, or remove it first")
        if info is not None and info.state == "broken":
            raise UsageError(f"env {name} exists but is broken: {info.problem}",
                             info.fix or f"envcheck env remove {name} --yes, then create it again")
        if info is not None and info.manifest.get("state") == mf.CHANGING:
            raise UsageError(f"env {name} exists: {info.problem}", info.fix)

    def _clear_incomplete(self, name: str, target: Path) -> None:
        """Recover an env left ``incomplete`` by a killed create (checked again under the lock)."""
        self._refuse_foreign(name, target)
        if target.exists():
            self.scratch.delete(name, target)

    def add(self, name: str, requirements: tuple[str, ...], *, installer: str | None = None,
            index=None, progress: Progress = SILENT) -> EnvInfo:
        """Install more packages; on any failure or interruption the env is left exactly as it
        was (a SIGKILL: as it was once ``Scratch.recover`` has run, and visibly incomplete until then).
        ``progress`` hears the task and its phases."""
        from .installers import choose_backend, settings_from_pip_config
        from .presets import parse_requirement

        check_name(name)
        if not requirements:
            raise UsageError("no requirements given", f"envcheck env add {name} 'package>=1.0'")
        reqs = [str(parse_requirement(r)) for r in requirements]
        current = self._require_ready(name)
        choose_backend(installer, current.manifest.get("installer"))  # bad input: before any write
        # the preset's own indexes too (a package added to an env of a preset with its own index comes from there)
        preset_indexes = tuple(current.manifest.get("preset", {}).get("indexes") or ())
        settings = settings_from_pip_config().merged(index).with_preset_indexes(preset_indexes)
        with self._changing(name):
            info = self._require_ready(name, self._current(name))  # as it is now, under the lock
            backend = choose_backend(installer, info.manifest.get("installer"))
            backend.cache_dir = self.home.uv_cache
            log = self._log(name, "add")
            progress.start(f"env {name}", f"adding {' '.join(reqs)} to env {name} with {backend.name}", log)
            self._install_more(info, reqs, backend, settings, log, progress)
            log.unlink(missing_ok=True)
        progress.done("packages added")
        return self.get(name)

    def _install_more(self, info: EnvInfo, reqs: list[str], backend, settings, log: Path,
                      progress: Progress) -> None:
        """Backup, intent, ``changing``, install, commit (``ready``); rolled back on any failure."""
        from ..processes import signals_interrupt

        name, manifest = info.name, info.path / MANIFEST_NAME
        backup = self.scratch.path(name, "backup")
        intent = self.scratch.path(name, "add", ".json")
        try:
            with signals_interrupt():  # SIGTERM and SIGHUP take Ctrl-C's clean-up path
                # Hard links: installers replace files (unlink + write), never edit them in place,
                # so the backup keeps the old contents at the cost of directory entries only.
                progress.phase("backing up the env")
                shutil.copytree(info.path, backup, symlinks=True, copy_function=os.link)
                mf.write_atomic(intent, {"env": name, "pid": os.getpid(), "backup": backup.name,
                                         "requested": reqs, "started": mf.now()})
                mf.write_atomic(manifest, {**info.manifest, "state": mf.CHANGING, "updated": mf.now()})
                backend.install(info.python, reqs, settings, log, progress)
                packages = installed_packages(info.path)
                mf.write_atomic(manifest, {**info.manifest, "schema": mf.SCHEMA, "state": mf.READY,
                                           "requested": [*info.manifest.get("requested", []), *reqs],
                                           "packages": packages, "frameworks": self._frameworks(packages),
                                           "updated": mf.now(), "installer": backend.name})
        except BaseException as exc:
            aside = None
            with signals_held():
                if intent.exists():
                    aside = self.scratch.restore(name, info.path, backup)
                    intent.unlink()
            _forget_log(exc, log)
            for path in (aside, backup):  # interruptible: a leftover goes at the next recover
                if path is not None:
                    discard(path)
            raise
        intent.unlink()
        discard(backup)

    def remove(self, name: str) -> Path:
        """Delete an env: only a folder directly inside the env home that carries a manifest."""
        target = self.removal_target(name)
        with self._changing(name):
            target = self.removal_target(name)  # again, under the lock
            self.scratch.delete(name, target)
        return target

    def _settle(self, name: str | None) -> None:
        """Recover env ``name`` (None: every env) where something was left and no one holds the lock."""
        self.scratch.settle(name, self.locked, self.home.env_dir)

    def removal_target(self, name: str) -> Path:
        """The folder ``remove`` would delete, after every safety check (UsageError if unsafe)."""
        check_name(name)
        self._settle(name)
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
        if not (target / MANIFEST_NAME).is_file() and not is_stub(target):
            raise UsageError(f"{target} has no envcheck manifest; envcheck removes only envs it created",
                             "remove it yourself if you mean to")
        return target


def _forget_log(exc: BaseException, log: Path) -> None:
    """Bad input changes nothing: its log goes too (its reason is in the error line)."""
    if isinstance(exc, UsageError):
        log.unlink(missing_ok=True)
        exc.log = None
