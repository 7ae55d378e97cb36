"""The env home's shared folders (``envs/``, ``locks/``, ``logs/``, ``tmp/``, the uv cache)
when several envcheck commands change envs at once.

Every change of an env holds the home shared for as long as it runs: a ``flock`` on the
home's folder itself, so no file is made for it. Bad input takes back the folders that were
absent when the command began (``EnvStore._changing``), but a folder another command may be
filling is not the first one's to take: they go only while the command holds the home alone
(its hold made exclusive, not waited for) and no env was made meanwhile, and the uv cache
only while no uv process uses it (every uv run holds uv's own ``.lock`` in the cache shared;
``uv cache clean`` takes it exclusively, and so does this). Where the file system has no
``flock`` for a folder, nothing shared is taken back.
"""
from __future__ import annotations

import errno
import fcntl
import os
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Iterator, Sequence

_BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


class Hold:
    """The home held shared by one change; ``fd`` None: the file system can't lock it."""

    def __init__(self, fd: int | None):
        self.fd = fd

    def take_back(self, made: Sequence[Path], envs: Path, uv_cache: Path) -> None:
        """After bad input: the folders of ``made`` (absent when this command began, outermost
        first) go, innermost first, when this command is alone in the home and no env is in
        ``envs``; else they stay as they are (another command made them too, or uses them)."""
        if self.fd is None or not _lock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB):
            return
        with suppress(OSError):
            if any(os.scandir(envs)):
                return  # an env made meanwhile: the cache and the folders are its too
        for path in reversed(made):
            if path == uv_cache:
                _discard_unused_cache(path)
            else:
                with suppress(OSError):
                    path.rmdir()  # only while empty


@contextmanager
def held(root: Path) -> Iterator[Hold]:
    """The home ``root`` (made if absent) held shared while the block runs."""
    fd = _hold_shared(root)
    try:
        yield Hold(fd)
    finally:
        if fd is not None:
            os.close(fd)


def _hold_shared(root: Path) -> int | None:
    while True:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if not _lock(fd, fcntl.LOCK_SH):
                os.close(fd)
                return None
            with suppress(FileNotFoundError):
                if os.path.samestat(os.fstat(fd), os.stat(root)):
                    return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # taken back while this waited: hold the folder there now


def _lock(fd: int, operation: int) -> bool:
    """``flock``: True when taken; False when another holds it (``LOCK_NB``) or the file
    system can't lock (``ENOLCK``, ``EBADF`` from NFS on a folder, ...)."""
    try:
        fcntl.flock(fd, operation)
    except OSError as exc:
        if exc.errno in _BUSY or exc.errno in (errno.ENOLCK, errno.EBADF, errno.EINVAL, errno.EOPNOTSUPP):
            return False
        raise
    return True


def _discard_unused_cache(cache: Path) -> None:
    """Delete the uv cache ``cache`` unless a uv process holds its lock now."""
    try:
        fd = os.open(cache / ".lock", os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return
    try:
        if _lock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB):
            import shutil  # here: every change holds the home, few take a cache back

            shutil.rmtree(cache, ignore_errors=True)
    finally:
        os.close(fd)
