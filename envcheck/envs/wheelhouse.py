"""A wheelhouse: every wheel of a lock in one folder, so a node without any index (an
air-gapped one) can make the env from that folder alone.

``fill`` fetches each locked file from the URL the lock names (http(s) or ``file:``), several
at a time, checks its size and sha256 on the way, and places it under its own name only once
it is whole and right (a temporary ``.part`` file renamed into place; a file already there
with the right hash is kept). The lock itself is copied in as ``pylock.toml``. ``missing``
names the locked wheels a set of folders lacks, so an offline create refuses before it
changes anything.

Index credentials never travel in a lock's URLs; where a URL's host is one of the configured
indexes' hosts, the credentials that index carries are sent with the request (as pip does),
and never printed: every message about a URL passes through ``indexes.redact``.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from ..errors import OperationError, UsageError
from ..progress import SILENT, Progress
from .indexes import redact

if TYPE_CHECKING:
    from .indexes import IndexSettings
    from .locks import Lock, LockedWheel

WORKERS = 8
TIMEOUT = 60.0  # seconds without a byte before a download is given up
CHUNK = 1 << 20


def missing(lock: Lock, folders: list[Path]) -> list[str]:
    """The file names of the lock's packages none of whose wheels is in ``folders`` (one name
    per package: any of its locked wheels will do)."""
    present = set()
    for folder in folders:
        try:
            present.update(os.listdir(folder))
        except OSError:
            continue
    return [p.wheels[0].filename for p in lock.packages if not any(w.filename in present for w in p.wheels)]


def fill(lock: Lock, folder: Path, index: IndexSettings | None = None, progress: Progress = SILENT) -> list[Path]:
    """Download every wheel of ``lock`` into ``folder`` (made if absent) and copy the lock in
    as ``pylock.toml``; the paths of the wheels. An unreachable or wrong file is an
    OperationError naming it (what was already placed whole stays)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--wheelhouse {folder}: cannot create it: {exc.strerror}",
                         "give a folder you can write to") from None
    wheels = lock.wheel_files()
    progress.phase(f"downloading {len(wheels)} wheels to {folder}")
    auth = _credentials(index)
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        placed = list(pool.map(lambda w: _fetch(w, folder, lock, auth), wheels))
    if lock.source is not None:
        shutil.copyfile(lock.source, folder / "pylock.toml")
    return placed


def _fetch(wheel: LockedWheel, folder: Path, lock: Lock, auth: dict[str, str]) -> Path:
    target = folder / wheel.filename
    if target.is_file() and _sha256(target) == wheel.sha256:
        return target
    part = folder / f".{wheel.filename}.{os.getpid()}.part"
    digest, size = hashlib.sha256(), 0
    try:
        with _open(wheel, lock, auth) as source, open(part, "wb") as out:
            while chunk := source.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)
        if digest.hexdigest() != wheel.sha256 or (wheel.size is not None and size != wheel.size):
            raise OperationError(f"{wheel.filename} from {redact(wheel.url or wheel.path)} does not match the lock "
                                 f"(sha256 {digest.hexdigest()[:16]}..., {size} bytes)",
                                 "the index serves another file than the one locked: lock again, or check the mirror")
        os.replace(part, target)
    except OSError as exc:
        raise OperationError(f"could not download {wheel.filename} from {redact(wheel.url or wheel.path)}: {exc}",
                             "check the network and the index, then run it again") from None
    finally:
        part.unlink(missing_ok=True)
    return target


def _open(wheel: LockedWheel, lock: Lock, auth: dict[str, str]):
    """A readable stream of the wheel: its ``path`` next to the lock, or its URL."""
    if wheel.path is not None:
        base = lock.source.parent if lock.source is not None else Path.cwd()
        return open(base / wheel.path, "rb")
    parts = urlsplit(wheel.url)
    if parts.scheme == "file":
        return open(unquote(parts.path), "rb")
    import urllib.request

    request = urllib.request.Request(wheel.url, headers={"User-Agent": "envcheck"})
    if parts.hostname in auth and not parts.username:
        request.add_header("Authorization", auth[parts.hostname])
    return urllib.request.urlopen(request, timeout=TIMEOUT)


def _credentials(index: IndexSettings | None) -> dict[str, str]:
    """{host: "Basic ..."} for each configured index URL that carries credentials."""
    import base64

    out: dict[str, str] = {}
    for url in ([index.index_url] if index and index.index_url else []) + list(index.extra_index_urls if index else ()):
        parts = urlsplit(url)
        if parts.username and parts.hostname:
            token = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            out[parts.hostname] = "Basic " + base64.b64encode(token).decode()
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
