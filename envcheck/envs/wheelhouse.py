"""A lock's files on this machine, each checked against its hash before an installer sees it.

Two uses:

- ``fill`` (`env lock --wheelhouse DIR`): every file of a lock, for any target, in one folder,
  with the lock copied in as ``pylock.toml``, so a node without any index (an air-gapped one)
  can make the env from that folder alone;
- ``plan`` then ``stage`` (`env create --lock`): the file each selected package installs from,
  found where the lock and the user say, in this order: the file's ``path`` (beside the lock),
  its ``file:`` URL, a ``--find-links`` folder (offline, default: the lock's own folder), its
  http(s) URL (not offline). ``plan`` looks without changing anything, so an offline create
  missing a file refuses before anything is made; ``stage`` places each file whole and right
  in the folder the installer reads (a hard link, else a copy; a download through a temporary
  ``.part`` file), and a file whose bytes are not the locked ones is an OperationError naming
  the file, the expected and the found hash, whatever the installer. A file no place had, or
  whose download failed, is left to the index by name, with its hashes (``Staged.from_index``):
  the package's own ``index`` from the lock, then the configured ones.

Index credentials never travel in a lock's URLs (``locks`` refuses them); where a URL's host
is one of the configured indexes' hosts, the credentials that index carries are sent with the
request (as pip does), and never printed: every message about a URL passes through
``indexes.redact``.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from ..errors import OperationError, UsageError
from ..progress import SILENT, Progress
from .indexes import redact

if TYPE_CHECKING:
    from .indexes import IndexSettings
    from .locks import Lock, LockedFile, Selected

WORKERS = 8
TIMEOUT = 60.0  # seconds without a byte before a download is given up
CHUNK = 1 << 20


class _Unreachable(OSError):
    """A download that could not be made (network, not found): the index may have the file."""


@dataclass
class Staged:
    """Where a create's selected files are: placed in ``folder`` (``placed``: the position in
    the selection -> the file), or left to an index (``from_index``, positions)."""

    folder: Path
    placed: dict[int, Path] = field(default_factory=dict)
    from_index: list[int] = field(default_factory=list)
    remote: dict[int, str] = field(default_factory=dict)  # to download: position -> URL

    def requirements(self, selected: tuple[Selected, ...]) -> str:
        """The requirements file both installers take with ``--require-hashes --no-deps``,
        built from parsed values only: ``name==version`` (an archive: ``name @`` its staged
        file) and the hashes of the file chosen for it."""
        lines = []
        for i, item in enumerate(selected):
            pin = f"{item.package.name} @ {self.placed[i].resolve().as_uri()}" \
                if item.file.kind == "archive" and i in self.placed else item.pin
            lines.append(" ".join([pin, *item.file.hash_options()]))
        return "\n".join(lines) + "\n"


def plan(lock: Lock, selected: tuple[Selected, ...], folders: list[Path], offline: bool, folder: Path) -> Staged:
    """Where each selected file will come from (nothing is read or changed); offline, a file
    no folder holds is a UsageError naming what is missing."""
    listing = _listing(folders)
    out = Staged(folder)
    for i, item in enumerate(selected):
        local = _local(item.file, lock, folders, listing)
        if local is not None:
            out.placed[i] = local
        elif item.file.url and urlsplit(item.file.url).scheme in ("http", "https") and not offline:
            out.remote[i] = item.file.url
        else:
            out.from_index.append(i)
    if offline and out.from_index:
        absent = [selected[i].file.filename for i in out.from_index]
        raise UsageError(f"--offline: {len(absent)} locked file(s) are not in "
                         f"{', '.join(str(f) for f in folders) or 'any folder'}: "
                         f"{', '.join(absent[:3])}{' ...' if len(absent) > 3 else ''}",
                         "give the wheelhouse made with `envcheck env lock --wheelhouse DIR` as --find-links DIR")
    return out


def stage(staged: Staged, selected: tuple[Selected, ...], index: IndexSettings | None = None,
          progress: Progress = SILENT, notice=None) -> Staged:
    """Place the planned files in ``staged.folder``, each checked against its hash (see the
    module docstring); a download that fails moves its package to ``from_index``."""
    staged.folder.mkdir(parents=True, exist_ok=True)
    for i, source in list(staged.placed.items()):
        staged.placed[i] = _placed_local(source, selected[i].file, staged.folder)
    if staged.remote:
        progress.phase(f"downloading {len(staged.remote)} locked file(s)")
        auth = _credentials(index)

        def get(i: int) -> tuple[int, Path | None]:
            try:
                return i, _fetch(selected[i].file, staged.folder, None, auth)
            except _Unreachable as exc:
                if notice is not None:
                    notice(f"{selected[i].file.filename}: {exc}; asking the index for it by name and hash")
                return i, None

        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            for i, path in pool.map(get, sorted(staged.remote)):
                if path is None:
                    staged.from_index.append(i)
                else:
                    staged.placed[i] = path
        staged.remote.clear()
    staged.from_index.sort()
    return staged


def fill(lock: Lock, folder: Path, index: IndexSettings | None = None, progress: Progress = SILENT) -> list[Path]:
    """Download every file of ``lock`` into ``folder`` (made if absent) and copy the lock in
    as ``pylock.toml``; the paths of the files. An unreachable or wrong file is an
    OperationError naming it (what was already placed whole stays)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--wheelhouse {folder}: cannot create it: {exc.strerror}",
                         "give a folder you can write to") from None
    files = lock.files()
    progress.phase(f"downloading {len(files)} files to {folder}")
    auth = _credentials(index)

    def get(file: LockedFile) -> Path:
        try:
            return _fetch(file, folder, lock, auth)
        except _Unreachable as exc:
            raise OperationError(f"could not download {file.filename}: {exc}",
                                 "check the network and the index, then run it again") from None

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        placed = list(pool.map(get, files))
    if lock.source is not None:
        shutil.copyfile(lock.source, folder / "pylock.toml")
    return placed


def _listing(folders: list[Path]) -> dict[str, Path]:
    names: dict[str, Path] = {}
    for folder in folders:
        try:
            for name in os.listdir(folder):
                names.setdefault(name, Path(folder) / name)
        except OSError:
            continue
    return names


def _local(file: LockedFile, lock: Lock, folders: list[Path], listing: dict[str, Path]) -> Path | None:
    """The file on this machine: its ``path``, its ``file:`` URL, or a folder's file of its name."""
    candidates = []
    if file.path is not None:
        base = lock.source.parent if lock.source is not None else Path.cwd()
        candidates.append(base / file.path)
    if file.url and urlsplit(file.url).scheme == "file":
        candidates.append(Path(unquote(urlsplit(file.url).path)))
    if file.filename in listing:
        candidates.append(listing[file.filename])
    return next((c for c in candidates if c.is_file()), None)


def _placed_local(source: Path, file: LockedFile, folder: Path) -> Path:
    found = _hashes(source, file)
    _check(file, found, str(source))
    target = folder / file.filename
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
    return target


def _fetch(file: LockedFile, folder: Path, lock: Lock | None, auth: dict[str, str]) -> Path:
    """``file`` downloaded (or read from its path) into ``folder`` under its own name, checked."""
    target = folder / file.filename
    if target.is_file() and _hashes(target, file) == dict(file.hashes):
        return target
    part = folder / f".{file.filename}.{os.getpid()}.part"
    where = redact(file.url or file.path)
    try:
        with _open(file, lock, auth) as source, open(part, "wb") as out:
            digests = {a: hashlib.new(a) for a, _ in file.hashes}
            while chunk := source.read(CHUNK):
                for d in digests.values():
                    d.update(chunk)
                out.write(chunk)
        _check(file, {a: d.hexdigest() for a, d in digests.items()}, where, part.stat().st_size)
        os.replace(part, target)
    except OperationError:
        raise
    except OSError as exc:
        raise _Unreachable(f"could not be read from {where}: {getattr(exc, 'reason', None) or exc}") from None
    finally:
        part.unlink(missing_ok=True)
    return target


def _check(file: LockedFile, found: dict[str, str], where: str, size: int | None = None) -> None:
    for algorithm, expected in file.hashes:
        if found.get(algorithm) != expected:
            raise OperationError(f"hash mismatch: {file.filename} from {where}: the lock expects {algorithm} "
                                 f"{expected}, the file has {found.get(algorithm)}",
                                 "this is not the file that was locked: get it again from where it was locked, "
                                 "or lock again")
    if size is not None and file.size is not None and size != file.size:
        raise OperationError(f"size mismatch: {file.filename} from {where}: the lock expects {file.size} "
                             f"bytes, the file has {size}", "get it again, or lock again")


def _hashes(path: Path, file: LockedFile) -> dict[str, str]:
    digests = {a: hashlib.new(a) for a, _ in file.hashes}
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            for d in digests.values():
                d.update(chunk)
    return {a: d.hexdigest() for a, d in digests.items()}


def _open(file: LockedFile, lock: Lock | None, auth: dict[str, str]):
    """A readable stream of the file: its ``path`` next to the lock, or its URL."""
    if file.path is not None and lock is not None:
        base = lock.source.parent if lock.source is not None else Path.cwd()
        if (base / file.path).is_file() or not file.url:
            return open(base / file.path, "rb")
    parts = urlsplit(file.url or "")
    if parts.scheme == "file":
        return open(unquote(parts.path), "rb")
    import urllib.request

    request = urllib.request.Request(file.url, headers={"User-Agent": "envcheck"})
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
