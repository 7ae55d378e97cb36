"""The scratch folder ``tmp/``: each step of a change to an env, and finishing what a killed one left.

Every change goes through ``$ENVCHECK_HOME/tmp`` (on the same file system as ``envs/``, so
each step is one ``rename``), with names ``NAME.WHAT-PID``:

- create builds the first manifest in ``tmp/NAME.create-PID/`` and renames that folder into
  ``envs/NAME``: the env appears with its manifest (``state: creating``) or not at all;
- add hard-links a backup to ``tmp/NAME.backup-PID``, then writes the intent
  ``tmp/NAME.add-PID.json``, then marks the manifest ``state: changing``, installs, and commits
  by writing ``state: ready`` with the new packages; only then the intent and the backup go;
- remove renames ``envs/NAME`` to ``tmp/NAME.removing-PID`` in one step, then deletes that.

``Scratch.recover`` (called with the env's lock held, which proves the writer is gone) reads
what is left: an add intent whose env is not committed (``changing``, or no manifest) is
rolled back from its backup; any other leftover is deleted; each action is one line for
``notice``. Renames run with SIGINT/SIGTERM/SIGHUP held (``signals_held``), so a Ctrl-C can't
cut a rollback in half (in the command line a second one does nothing at all: see
``processes.end_at_first_interrupt``); a SIGKILL can, and the intent makes the next ``recover``
finish it.

Also here: a write that fails for a reason of the disk (read-only, full, no inodes, quota,
permissions) said plainly with where (``disk_errors``).
"""
from __future__ import annotations

import errno
import os
import re
import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, ContextManager, Iterator

from . import manifest as mf
from ..errors import BusyError, OperationError
from ..paths import MANIFEST_NAME

NAME = re.compile(r"(?P<name>.+)\.(?P<what>create|backup|add|removing)-(?P<pid>\d+)(?P<json>\.json)?")
LEFT_BY = {"create": "env create", "backup": "env add", "add": "env add", "removing": "env remove"}


class Scratch:
    def __init__(self, folder: Path, notice: Callable[[str], None], valid_name: Callable[[str], bool]):
        self.folder = folder
        self.notice = notice
        self.valid_name = valid_name

    def path(self, name: str, what: str, suffix: str = "") -> Path:
        """``tmp/NAME.WHAT-PID``; one of ours from a dead process with the same PID goes first."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{name}.{what}-{os.getpid()}{suffix}"
        discard(path)
        return path

    def leftovers(self) -> dict[str, list[tuple[Path, re.Match]]]:
        """What unfinished commands left, by env name (one directory scan)."""
        found: dict[str, list[tuple[Path, re.Match]]] = {}
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return found
        for entry in entries:
            match = NAME.fullmatch(entry.name)
            if match and self.valid_name(match["name"]):
                found.setdefault(match["name"], []).append((Path(entry.path), match))
        return found

    def settle(self, name: str | None, locked: Callable[[str], ContextManager],
               env_dir: Callable[[str], Path]) -> None:
        """``recover`` env ``name`` (None: every env) where something was left, under its lock.
        Readers call it, so it never fails: a read-only home, a lock another process holds or a
        failed recovery leave the env as it is (listed ``incomplete``, with its fix)."""
        leftovers = self.leftovers()
        for env in sorted(leftovers if name is None else set(leftovers) & {name}):
            try:
                with locked(env):
                    self.recover(env, env_dir(env))
            except (BusyError, OSError):
                continue

    def add_pending(self, name: str) -> bool:
        """Is an add intent left for env ``name`` (so ``recover`` can restore it)?"""
        return any(match["what"] == "add" for _, match in self.leftovers().get(name, []))

    def recover(self, name: str, target: Path) -> None:
        """Finish or undo what interrupted commands left for env ``name`` (its lock held)."""
        items = sorted(self.leftovers().get(name, []), key=lambda item: item[1]["what"] != "add")
        for path, match in items:  # add intents first: they may need their backup
            pid, what = match["pid"], match["what"]
            if what == "add":
                backup = path.with_name(f"{name}.backup-{pid}")
                if backup.is_dir() and uncommitted(target):
                    with signals_held():
                        aside = self.restore(name, target, backup)
                    discard(aside)
                    self.notice(f"env {name}: rolled back an interrupted `env add` (process {pid}): "
                                f"restored from its backup {backup}")
                path.unlink()
            elif path.exists() or path.is_symlink():
                discard(path)
                self.notice(f"env {name}: removed {path}, left by an interrupted `{LEFT_BY[what]}` "
                            f"(process {pid})")

    def restore(self, name: str, target: Path, backup: Path) -> Path:
        """Put the backup in the env's place in two renames; returns where the changed copy went."""
        aside = self.path(name, "removing")
        if target.exists() or target.is_symlink():
            os.replace(target, aside)
        os.replace(backup, target)
        return aside

    def delete(self, name: str, target: Path) -> None:
        """Move the env out of the listing in one step, then delete it (a leftover of a kill
        here is deleted by the next ``recover``)."""
        doomed = self.path(name, "removing")
        with signals_held():
            os.replace(target, doomed)
        import shutil  # here: reading or adopting an env needs none (compressors and all)

        shutil.rmtree(doomed)


def uncommitted(target: Path) -> bool:
    """Was the env's add interrupted before its commit (manifest ``changing``, absent or unreadable)?"""
    try:
        return mf.read(target / MANIFEST_NAME)["state"] != mf.READY
    except (OSError, mf.ManifestError):
        return True


def is_stub(path: Path) -> bool:
    """A folder holding only manifest temp files: an older envcheck's create killed mid-write."""
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return bool(names) and all(n.startswith(f".{MANIFEST_NAME}.") and n.endswith(".tmp") for n in names)


def discard(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        import shutil

        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP while a rename runs: one that arrives is raised after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


_WRITABLE = "make the env home writable for this user, or use another with --home"
_DISK = {errno.EROFS: ("the file system is read-only", "make the env home writable, or use another with --home"),
         errno.ENOSPC: ("no space left on the device", "free some space there (envcheck env remove frees an env)"),
         errno.EDQUOT: ("the disk quota is exceeded", "free some space there, or raise the quota"),
         errno.EACCES: ("permission denied", _WRITABLE), errno.EPERM: ("operation not permitted", _WRITABLE)}


def disk_error(exc: OSError, home: Path) -> OperationError | None:
    """A write that failed for a reason of the disk, said plainly with where (None otherwise)."""
    if exc.errno not in _DISK:
        return None
    what, fix = _DISK[exc.errno]
    where = exc.filename or f"in the env home {home}"
    if exc.errno == errno.ENOSPC:
        try:
            stats = os.statvfs(Path(exc.filename).parent if exc.filename else home)
            if stats.f_files and not stats.f_favail:
                what = "no free inodes left on the device"
        except OSError:
            pass
    return OperationError(f"cannot write {where}: {what}; nothing was changed", fix)


@contextmanager
def disk_errors(home: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        error = disk_error(exc, home)
        if error is None:
            raise
        raise error from exc
