"""One way to write a file so that readers see the old content or the new, never a part.

The bytes go to a temporary file in the target's folder (same filesystem), are flushed to
disk, and the temporary file replaces the target in one ``os.replace``; any failure, a
Ctrl-C included, removes the temporary file and leaves the target as it was; each writer's
temporary name is its own, so processes writing one file at once leave one of their
contents, whole. Used by the manifest and the stored reports (``envs``, ``validation``), the
gate client's copy in the home (``envs.gate_link``, on the gate's fast path) and by the HTML
page (``cli``), so it imports nothing but ``os``.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the gate's fast path)
if TYPE_CHECKING:
    from pathlib import Path


def write_bytes(path: Path | str, data: bytes, mode: int = 0o600, exact: bool = False) -> None:
    """Replace ``path`` with ``data`` atomically, the new file made with ``mode`` (less the
    umask, unless ``exact``: a file another user must read, node_exporter's textfile, gets
    ``mode`` whatever the umask): envcheck's own records private, a page the user asked for
    ``0o666`` as any file they make. The temporary file's name ends in ``.tmp``. An ``OSError`` that names no file (a full disk fails the write, not the open)
    is given ``path`` as its file name."""
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            if exact:
                os.fchmod(fd, mode)
        except BaseException:
            os.close(fd)  # not yet owned by the file object below
            raise
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)
        raise
