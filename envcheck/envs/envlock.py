"""One lock per env, ``$ENVCHECK_HOME/locks/NAME.lock``: kept outside the env's folder, so
clearing the env can't delete its own lock (STYLE.md, point 7).

Held with ``flock`` on the lock file, as filelock's Unix lock holds it, without its imports
(about 50 ms on this kind of machine, on every command that changes an env): the kernel
releases it when the process dies, however it dies, so a lock is never left held. A lock
file removed or replaced while a process waited for it is opened again (the holder of the
old file no longer excludes anyone), so two processes can't both believe they hold it.
"""
from __future__ import annotations

import errno
import fcntl
import os
import time

_BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


class Timeout(Exception):
    """The lock stayed held by another process for the time allowed."""


class EnvLock:
    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._fd: int | None = None

    @property
    def is_locked(self) -> bool:
        return self._fd is not None

    def acquire(self, timeout: float = 0.0, poll_interval: float = 0.1) -> None:
        """Hold it, trying until ``timeout`` seconds have passed (0: once); ``Timeout`` else."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in _BUSY:
                    raise
                if time.monotonic() >= deadline:
                    raise Timeout(self.path) from None
                time.sleep(poll_interval)
                continue
            if self._same_file(fd):
                self._fd = fd
                return
            os.close(fd)  # removed or replaced meanwhile: take the file that is there now

    def _same_file(self, fd: int) -> bool:
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> "EnvLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
