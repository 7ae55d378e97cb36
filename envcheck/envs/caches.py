"""The installers' caches: where each one is, how big, and cleaning the one envcheck made.

- uv: envcheck's installs use ``$ENVCHECK_HOME/cache/uv`` (``Home.uv_cache``), on the envs'
  filesystem so uv hard-links files into envs instead of copying them, unless
  ``UV_CACHE_DIR`` is set in the environment: then they use that one, which envcheck did not
  make. uv itself says which (``uv cache dir`` with the installers' environment).
- pip: pip's own cache (``pip cache dir`` with the pip installer's environment), shared with
  every other use of pip here; envcheck reports it and never cleans it.

The caches envcheck did not make are measured up to ``FOREIGN_ENTRIES`` entries (such a
folder may be anything, a home folder included): past that, their size is a lower bound,
marked incomplete. envcheck's own is measured whole.

Cleaning touches only envcheck's uv cache, through ``uv cache clean --cache-dir`` (uv knows
its layout, and waits for any uv process using that cache), while envcheck holds every env's
lock: ``create``, ``add`` and ``remove`` hold their env's lock for the whole change, so no
envcheck install runs during a clean, and one that is running makes the clean wait, up to a
bound. A ``create`` of a new name that starts mid-clean finds uv's own cache lock held and
waits for the clean to end. Files uv has hard-linked into envs stay with the envs; only the
cache's links go, so every env keeps working.
"""
from __future__ import annotations

import os
import sys
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .. import processes
from ..errors import OperationError, UsageError
from ..paths import Home
from .env_info import NAME_RE
from .installers import PipInstaller, UvInstaller

CLEAN_BOUND_S = 3600.0  # uv deleting a large cache, once it holds its lock
# entries (files and folders) walked in a cache envcheck did not make (0.13 s warm here): such
# a cache may be any folder (UV_CACHE_DIR=/root: gigabytes, for seconds to tens of seconds)
FOREIGN_ENTRIES = 20_000


@dataclass(frozen=True)
class Size:
    bytes: int  # each file once, however many hard links it has
    files: int
    reclaimable_bytes: int  # of files with no link outside the cache: what a clean frees on disk
    complete: bool = True  # False: the walk stopped at its budget; the figures are lower bounds


@dataclass
class Cache:
    installer: str  # uv | pip
    owner: str  # envcheck | UV_CACHE_DIR | pip
    path: Path | None  # None: the installer has no cache here (pip's disabled)
    used: bool  # envcheck's installs with this installer use it now
    size: Size | None = None  # None: the folder does not exist
    note: str = ""

    @property
    def owned(self) -> bool:
        """Made by envcheck: ``cache clean`` empties it."""
        return self.owner == "envcheck"


def caches(home: Home) -> list[Cache]:
    """Every cache envcheck's installers use or made, measured."""
    own = home.uv_cache
    used = _uv_cache_dir(home)
    mine = used.resolve() == own.resolve()
    found = [Cache("uv", "envcheck", own, mine,
                   note="" if mine else f"not used now: UV_CACHE_DIR sends uv to {used}")]
    if not mine:
        found.append(Cache("uv", "UV_CACHE_DIR", used, True,
                           note="set in your environment, not made by envcheck; "
                                "`uv cache clean` empties it"))
    pip, why = _pip_cache_dir()
    found.append(Cache("pip", "pip", pip, True,
                       note=why or "pip's own, shared with your other pip use; "
                                   "`pip cache purge` empties it"))
    for cache in found:
        if cache.path is not None and cache.path.is_dir():
            cache.size = measure(cache.path, None if cache.owned else FOREIGN_ENTRIES)
            if not cache.size.complete:
                cache.note += (f"; measured up to its first {FOREIGN_ENTRIES:,} entries, so its size "
                               f"is at least the one shown (`du -sh {cache.path}` measures it all)")
    return found


def measure(root: Path, budget: int | None = None) -> Size:
    """Apparent size and file count of the tree at ``root`` (symbolic links not followed),
    walking at most ``budget`` entries when given (then ``complete`` says whether it was all)."""
    links: dict[tuple[int, int], list[int]] = {}  # (dev, inode) -> [size, links, links seen here]
    folders = [root]
    seen = 0
    while folders:
        try:
            entries = os.scandir(folders.pop())
        except OSError:
            continue  # vanished or unreadable: not counted
        with entries:
            for entry in entries:
                seen += 1
                if budget is not None and seen > budget:
                    return _size(links, complete=False)
                try:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(Path(entry.path))
                        continue
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                links.setdefault((st.st_dev, st.st_ino), [st.st_size, st.st_nlink, 0])[2] += 1
    return _size(links, complete=True)


def _size(links: dict[tuple[int, int], list[int]], complete: bool) -> Size:
    return Size(sum(size for size, _, _ in links.values()), len(links),
                sum(size for size, nlink, seen in links.values() if seen >= nlink), complete)


def clean_uv(home: Home, wait: float) -> tuple[Size, Size]:
    """Empty envcheck's uv cache (sizes before and after), with every env's lock held.
    An install still running after ``wait`` seconds is an OperationError saying so."""
    path = _own_cache(home)
    before = measure(path)
    if not path.is_dir():
        return before, before

    def clearing(line: str) -> float | None:
        """uv holds its cache lock and deletes: the wait is over, the deletion may take long."""
        return CLEAN_BOUND_S if line.startswith("Clearing cache") else None

    with every_env_locked(home, wait):
        cmd = [UvInstaller.binary() or "uv", "cache", "clean", "--cache-dir", str(path)]
        try:
            done = processes.run(cmd, timeout=wait, bound=CLEAN_BOUND_S, progress=clearing,
                                 env=UvInstaller().environ())
        except OSError as exc:
            raise OperationError(f"uv could not be started to clean its cache: {exc}",
                                 "pip install uv") from None
    if done.timed_out and "Clearing cache" in done.stderr:
        raise OperationError(f"uv did not finish emptying {path} within {done.limit:.0f} s",
                             f"run `uv cache clean --cache-dir {path}` yourself")
    if done.timed_out:
        raise OperationError(f"an install is running: a uv process kept the cache {path} in use "
                             f"for more than {done.limit:.0f} s",
                             "wait for it to finish, then run `envcheck cache clean` again")
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no output"]
        raise OperationError(f"uv cache clean failed: {lines[-1]}", f"run `uv cache clean "
                             f"--cache-dir {path}` to see why")
    return before, measure(path)


def _own_cache(home: Home) -> Path:
    """envcheck's uv cache, once it is sure to be a folder inside the home."""
    path = home.uv_cache
    if path.is_symlink() or path.parent.is_symlink():
        raise UsageError(f"{path} is a symbolic link; envcheck never removes anything outside "
                         f"its home", "remove the link yourself")
    if not path.resolve().is_relative_to(home.root.resolve()):
        raise UsageError(f"{path} resolves outside the env home {home.root}",
                         "remove it yourself if you mean to")
    return path


@contextmanager
def every_env_locked(home: Home, wait: float) -> Iterator[None]:
    """Hold the lock of every env that has one (no change of any env runs meanwhile); one
    held by another process for more than ``wait`` seconds in all is an OperationError."""
    from .envlock import EnvLock, Timeout

    deadline = time.monotonic() + wait
    try:
        paths = sorted(p for p in home.locks.iterdir()
                       if p.suffix == ".lock" and NAME_RE.fullmatch(p.stem))
    except FileNotFoundError:
        paths = []
    with ExitStack() as held:
        for path in paths:
            lock = EnvLock(path)
            try:
                lock.acquire(timeout=max(deadline - time.monotonic(), 0), poll_interval=0.1)
            except Timeout:
                raise OperationError(
                    f"an install is running: env {path.stem} is being changed by another envcheck "
                    f"process (waited {wait:g} s)",
                    "wait for it to finish, then run `envcheck cache clean` again") from None
            held.callback(lock.release)
        yield


def _uv_cache_dir(home: Home) -> Path:
    """The cache envcheck's uv installs use, as uv itself answers (``UV_CACHE_DIR`` wins)."""
    uv = UvInstaller(cache_dir=home.uv_cache)
    try:
        done = processes.run([uv.binary() or "uv", "cache", "dir"], timeout=30, env=uv.environ())
    except OSError:
        return home.uv_cache  # no uv: nothing uses a uv cache; envcheck's is still shown
    answer = done.stdout.strip()
    return Path(answer) if done.returncode == 0 and answer else home.uv_cache


def _pip_cache_dir() -> tuple[Path | None, str]:
    """pip's cache as envcheck's pip installs see it, or (None, why)."""
    try:
        done = processes.run([sys.executable, "-m", "pip", "cache", "dir"], timeout=60,
                             env=PipInstaller().environ())
    except OSError as exc:
        return None, f"pip could not be asked: {exc}"
    answer = done.stdout.strip()
    if done.returncode == 0 and answer:
        return Path(answer), ""
    lines = (done.stderr or done.stdout).strip().splitlines() or ["no answer"]
    return None, f"pip has no cache here: {lines[-1].removeprefix('ERROR: ')}"
