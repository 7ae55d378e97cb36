"""The env store: names, one lock per env, create and add, remove, export, list.

Reading (``list``, ``get``) touches only manifests and ``*.dist-info`` folder names, so it is
fast and never starts an env's interpreter. Changing (``create``, ``add``, ``remove``) happens
under the env's lock, after every input has been validated, so bad input changes nothing
(not even a log, a lock or an empty folder: ``_changing`` takes back what it made, unless
another command changes an env of the home meanwhile: ``shared``). The
store holds the lock and that frame; the steps of ``create`` and ``add``, each a
transaction, are ``transactions``'; what one env is, ``env_info``.

Interruptions, SIGKILL included, leave each env as it was or visibly incomplete, and the next
command finishes the job: see ``scratch`` for the steps each change takes and how what an
interrupted one left is recovered (``list``, ``get``, ``create``, ``add`` and ``remove`` do it,
under the env's lock, each action one line for ``notice``: the ``Progress.notice`` of the
observer the session hands it, nothing by default; the core never prints).
"""
from __future__ import annotations

import os
import re
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from . import manifest as mf, shared
from ..errors import BusyError, UsageError
from .env_info import NAME_RE, EnvInfo, check_name
from .metadata import installed_packages, pins, register_sites
from .scratch import Scratch, disk_errors, is_stub
from ..paths import MANIFEST_NAME, Home
from ..progress import SILENT, Progress

if TYPE_CHECKING:
    from .indexes import IndexSettings
    from .presets import Preset

LOGS_KEPT = 10  # each env's newest installer logs kept in $ENVCHECK_HOME/logs
LOG_NAME = re.compile(r"(?P<name>.+)-(?P<action>create|add)-\d{8}T\d{6}-\d+\.log")
NOT_EXPORTED = {"pip"}  # the installer's own tool, as `pip freeze` leaves it out


@contextmanager
def owner_writes() -> Iterator[None]:
    """The process's umask with the group's and others' write bits added, for the frame: an
    env's files someone else may write let them change what a training job runs (``env
    verify`` names them)."""
    previous = os.umask(0o022)
    os.umask(previous | 0o022)
    try:
        yield
    finally:
        os.umask(previous)


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
        if data.get("adopted"):
            return self._adopted_info(name, path, data)
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

    def _adopted_info(self, name: str, records: Path, data: dict) -> EnvInfo:
        """An adopted env (``envs.adopted``): its folder is where adoption found it, envcheck's
        records of it stay in the home; gone from there, it is ``missing``."""
        adopted = data["adopted"]
        prefix = Path(adopted["path"])
        register_sites(prefix, adopted["sites"], adopted["interpreter"])
        info = EnvInfo(name, prefix, "ready", manifest=data, records=records)
        if not prefix.is_dir() or not os.path.exists(adopted["interpreter"]):
            info.state = "missing"
            info.problem = f"{adopted['kind']} env {prefix} is no longer there (its interpreter {adopted['interpreter']})"
            info.fix = f"envcheck env remove {name} (forgets it; nothing of the env is touched)"
            return info
        info.packages = installed_packages(prefix)
        return info

    def adopt(self, name: str, given: str) -> EnvInfo:
        """Register the env or interpreter at ``given`` as env ``name`` without owning it
        (``envs.adopted``): its manifest, baseline and reports live in the home; nothing is
        written inside it."""
        from . import adopted as ad

        check_name(name)
        found = ad.inspect(given, self.home.root)
        for info in self.list():
            if info.adopted and Path(info.adopted["path"]) == found.path:
                raise UsageError(f"{found.path} is adopted already, as env {info.name}",
                                 f"use env {info.name}, or forget it first: envcheck env remove {info.name}")
        record = self.home.env_dir(name)
        with self._changing(name):
            if self._info(name) is not None or record.exists():
                raise UsageError(f"env {name} already exists", "choose another name, or envcheck env remove it first")
            register_sites(found.path, found.sites, str(found.interpreter))
            packages = installed_packages(found.path)
            # No file baseline yet (reading every file would cost more than reading the env):
            # the manifest's packages are the reference, and the first `env verify` checks every
            # file against its RECORD and keeps the baseline (``verify.adopt``).
            data = ad.manifest(name, found, packages, self._frameworks(packages))
            staging = self.scratch.path(name, "create")
            staging.mkdir()
            mf.write_atomic(staging / MANIFEST_NAME, data)
            self.home.envs.mkdir(parents=True, exist_ok=True)
            os.replace(staging, record)
        return self.get(name)

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
        from .envlock import EnvLock, Timeout

        self.home.locks.mkdir(parents=True, exist_ok=True)
        path = self.home.lock(name)
        fresh = not path.exists()
        lock = EnvLock(path)
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
        (exit 2) leaves none of the folders this command made, unless another command is
        changing an env of the home meanwhile (``shared``: they are its folders too); what it
        makes (the installers too) writable by its owner only (``owner_writes``)."""
        bookkeeping = [self.home.root, self.home.envs, self.home.locks, self.home.logs,
                       self.home.root / "tmp", self.home.uv_cache.parent, self.home.uv_cache]
        fresh = [path for path in bookkeeping if not path.exists()]
        with disk_errors(self.home.root), shared.held(self.home.root) as hold:
            try:
                with self.locked(name), owner_writes():
                    self.scratch.recover(name, self.home.env_dir(name))
                    yield
            except UsageError:
                hold.take_back(fresh, self.home.envs, self.home.uv_cache)
                raise

    def _log(self, name: str, action: str) -> Path:
        """A new log, readable by its owner only (an installer's output may name private indexes).
        Logs stay after success too (a progress line points at them); each env keeps its
        newest ``LOGS_KEPT``, older ones go as a new one starts."""
        self.home.logs.mkdir(mode=0o700, parents=True, exist_ok=True)
        stamp = datetime.now().strftime("%Y%m%dT%H%M%S")
        path = self.home.logs / f"{name}-{action}-{stamp}-{os.getpid()}.log"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(fd, 0o600)
        os.close(fd)
        self._prune_logs(name)
        return path

    def _prune_logs(self, name: str) -> None:
        """Env ``name``'s logs but the newest ``LOGS_KEPT`` removed (another process may be
        pruning too: a log already gone is fine)."""
        logs = []
        for entry in os.scandir(self.home.logs):
            match = LOG_NAME.fullmatch(entry.name)
            if match and match["name"] == name:
                with suppress(OSError):
                    logs.append((entry.stat().st_mtime_ns, entry.name, entry.path))
        for _, _, path in sorted(logs, reverse=True)[LOGS_KEPT:]:
            with suppress(OSError):
                os.unlink(path)

    def create(self, name: str, preset: Preset, *, python: str | None = None, add: tuple[str, ...] = (),
               installer: str | None = None, index: IndexSettings | None = None, keep_log: bool = False,
               progress: Progress = SILENT, link: bool = True) -> EnvInfo:
        """Create env NAME from a preset, as a transaction: it ends ``ready`` or not at all
        (``transactions.create_env`` says what each option does)."""
        from .transactions import create_env

        return create_env(self, name, preset, python=python, add=add, installer=installer, index=index,
                          keep_log=keep_log, progress=progress, link=link)

    def create_from_lock(self, name: str, lock, selected, interpreter, preset, **options) -> EnvInfo:
        """Create env NAME with exactly the files of a lock ``selected`` for ``interpreter``
        (``transactions.create_from_lock``)."""
        from .transactions import create_from_lock

        return create_from_lock(self, name, lock, selected, interpreter, preset, **options)

    def verify(self, name: str, hashes: bool = False):
        """(the env, its ``verify.Drift`` since its baseline, whether the baseline was taken now).

        An env made before envcheck kept baselines is checked file by file against its
        RECORDs and its packages against its manifest, and, found clean, gets its baseline
        now. Times found moved on files whose bytes are unchanged, and bytecode found compiled
        from its source, are recorded when no other process holds the env (the next check is
        quick again)."""
        from . import verify as vf

        info = self._require_ready(name)
        lock = (info.manifest.get("lock") or {}).get("digest")
        baseline = vf.read(str(info.record_dir))
        adopted = baseline is None
        if adopted:
            baseline, hashes = vf.adopt(str(info.path), info.manifest.get("packages") or {}, lock), True
        drift = vf.verify(str(info.path), baseline, hashes)
        if (drift.clean if adopted else drift.refreshes):
            with suppress(BusyError, OSError):
                with self.locked(name):
                    vf.write(info.record_dir, vf.refreshed(baseline, drift))
        return info, drift, adopted and drift.clean

    def add(self, name: str, requirements: tuple[str, ...], *, installer: str | None = None,
            index=None, progress: Progress = SILENT) -> EnvInfo:
        """Install more packages; on any failure or interruption the env is left exactly as it
        was (``transactions.add_packages``)."""
        from .transactions import add_packages

        return add_packages(self, name, requirements, installer=installer, index=index, progress=progress)

    def remove(self, name: str) -> Path:
        """Delete an env: only a folder directly inside the env home that carries a manifest."""
        target = self.removal_target(name)
        from .linking import times_kept

        with self._changing(name):
            target = self.removal_target(name)  # again, under the lock
            with times_kept(self, name):
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
