"""Lock files: PEP 751 ``pylock.toml``, read with the standard's own library.

Any valid lock is read: written by pip (``pip lock``), by uv (``uv pip compile --format
pylock.toml``, ``uv export --format pylock.toml``) or by envcheck (``env lock``, which is uv's
lock plus ``environments``, ``created-by = "envcheck"`` and a ``[tool.envcheck]`` table).
``packaging.pylock`` parses and validates it (names normalised, versions, markers, specifiers,
wheel names against their package) and selects what a target gets (``requires-python``,
``environments``, each package's ``marker``, the wheel whose tags fit): ``Lock.select``.

On top of the standard, what reaches an installer from a lock is checked here first, since a
lock comes from anywhere (a colleague, a repository, a download):

- no string anywhere in it (keys included) holds a line break or another control character,
  even where the standard's parser would let it through: a line break in a ``marker`` or a
  ``version`` once carried ``--find-links`` and ``-r FILE`` lines into the requirements file an
  installer reads;
- no URL anywhere in it carries credentials (a package's ``index``, a file's ``url``, the tool
  table): they belong in pip's configuration, never in a file that travels;
- every file has a hash an installer checks (sha256, sha384 or sha512, hex of the right
  length), a ``url`` that is http(s) or ``file:``, and a plain file name;
- ``[tool.envcheck]`` has the types it declares (a wrong one is bad input, not an internal error).

What an installer is then given is built from parsed values only (``Selected.requirement``):
a canonical name, ``str(Version)``, checked hashes. Directory and VCS entries carry no hash to
check what is installed against, and are refused when a target selects them.

``[tool.envcheck]`` is for humans and ``env show`` (the preset and variant, the target it was
made for): it never changes which files are installed. A lock's identity is its digest, the
sha256 of its bytes: the manifest records it, the gate's fingerprint covers it, and the fleet
groups nodes by it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import UsageError
from .targets import Target

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

TOOL = "envcheck"
CREATED_BY = "envcheck"
MAX_BYTES = 32 << 20  # a lock of thousands of wheels is a few MB; anything bigger is not one
NAME_RULE = re.compile(r"pylock(\.[^./\\]+)?\.toml")  # PEP 751: pylock.toml or pylock.<name>.toml
LOCK_FIX = "make one with: envcheck env lock NAME -o pylock.toml (or --preset P), or pip lock / uv export"
HASHES = {"sha256": 64, "sha384": 96, "sha512": 128}  # what pip and uv both check, and its hex length
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+!~-]*")
_ARCHIVES = (".whl", ".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar")
# [tool.envcheck]: each key's type (a tuple: a list of that type); anything else there is ignored.
TOOL_TYPES: dict[str, Any] = {"variant": str, "python": str, "platform": str, "for-driver": str, "for-cc": (str,),
                              "env": str, "preset": dict}
PRESET_TYPES: dict[str, Any] = {"name": str, "title": str, "kind": str, "framework": str, "variant": str,
                                "hash": str, "requires_python": str, "cuda": str, "cudnn": str,
                                "libraries": (str,), "indexes": (str,)}


class NotForTarget(UsageError):
    """The lock is not for this interpreter (its requires-python, environments, tags)."""


@dataclass(frozen=True)
class LockedFile:
    """One file a package may be installed from: a wheel, its sdist, or an archive."""

    kind: str  # "wheel" | "sdist" | "archive"
    filename: str
    url: str | None  # http(s) or file:
    path: str | None  # relative to the lock's folder, or absolute
    hashes: tuple[tuple[str, str], ...]  # (algorithm, hex), checked
    size: int | None = None

    @property
    def sha256(self) -> str | None:
        return dict(self.hashes).get("sha256")

    def hash_options(self) -> list[str]:
        return [f"--hash={algorithm}:{value}" for algorithm, value in self.hashes]


@dataclass(frozen=True)
class LockedPackage:
    entry: int  # its place in [[packages]]
    name: str  # normalised, as PEP 751 requires
    version: str | None  # None: an archive, directory or VCS entry that doesn't say
    files: tuple[LockedFile, ...]  # wheels, then the sdist; or the archive
    marker: str | None = None
    index: str | None = None  # the index its files came from (PEP 751 ``index``)
    source: str | None = None  # "directory" | "vcs" for an entry that is neither files nor an archive

    @property
    def label(self) -> str:
        return f"packages[{self.entry}] ({self.name}{' ' + self.version if self.version else ''})"


@dataclass(frozen=True)
class Selected:
    """What a target gets of one package: the package and the one file chosen for it."""

    package: LockedPackage
    file: LockedFile

    @property
    def pin(self) -> str:
        """``name==version`` (or the name alone for an archive without a version)."""
        return f"{self.package.name}=={self.package.version}" if self.package.version else self.package.name


@dataclass(frozen=True)
class Lock:
    """A lock as read: its packages (every entry, whatever the target), its checked
    ``[tool.envcheck]`` table (``tool``) and its digest."""

    source: Path | None
    digest: str  # "sha256:<hex>" of the file's bytes
    packages: tuple[LockedPackage, ...]
    requires_python: str | None = None
    environments: tuple[str, ...] = ()
    created_by: str = ""
    tool: dict[str, Any] = field(default_factory=dict)
    pylock: Any = field(default=None, repr=False, compare=False)  # packaging.pylock.Pylock

    @property
    def where(self) -> str:
        return f"lock {self.source}" if self.source else "the lock"

    @property
    def variant(self) -> str | None:
        return self.tool.get("variant")

    @property
    def python(self) -> str | None:
        """The Python ``major.minor`` [tool.envcheck] says it was made for (for humans: the
        target is ``requires-python`` and ``environments``)."""
        return self.tool.get("python")

    @property
    def preset(self) -> dict[str, Any]:
        return self.tool.get("preset") or {}

    def files(self) -> list[LockedFile]:
        """Every file of every entry (a wheelhouse holds them all, for any target)."""
        return [f for p in self.packages for f in p.files]

    def select(self, target: Target) -> tuple[Selected, ...]:
        """What ``target`` installs, as PEP 751 says (``packaging.pylock.Pylock.select``); a
        UsageError in the lock's own words when the target is not one it is for, and for a
        selected entry envcheck can't check (a directory, a VCS checkout)."""
        from packaging.pylock import PylockSelectError

        by_id = {id(p): mine for p, mine in zip(self.pylock.packages, self.packages)}
        try:
            chosen = list(self.pylock.select(environment=target.environment, tags=list(target.tags)))
        except PylockSelectError as exc:
            raise NotForTarget(f"{self.where} does not fit {target.describe()}: {self._words(exc)}",
                             "use an interpreter the lock is for (--python), or lock for this one") from None
        out = []
        for package, dist in chosen:
            mine = by_id[id(package)]
            if mine.source is not None:
                raise UsageError(f"{self.where}: {mine.label} is a {'local directory' if mine.source == 'directory' else 'VCS checkout'}: "
                                 "it has no hash to check what would be installed against",
                                 "lock it without that entry (uv export --no-emit-project), or build it "
                                 "as a wheel and lock the wheel")
            kinds = [*(package.wheels or ()), *([package.sdist] if package.sdist else []),
                     *([package.archive] if package.archive else [])]
            out.append(Selected(mine, mine.files[next(i for i, d in enumerate(kinds) if d is dist)]))
        return tuple(out)

    def _words(self, exc: Exception) -> str:
        text = str(exc)
        if "environments specified" in text:
            return "it is for " + " or ".join(f"[{e}]" for e in self.environments) + " (its environments)"
        if self.requires_python and "does not satisfy the Python version requirement" in text \
                and "for package" not in text:
            return f"it requires-python {self.requires_python}"
        return text

    def summary(self, selected: tuple[Selected, ...] | None = None) -> dict[str, Any]:
        """What the manifest and ``env show`` record of the lock an env was made from."""
        return {"digest": self.digest, "created_by": self.created_by, "variant": self.variant,
                "python": self.python, "platform": self.tool.get("platform"),
                "packages": len(selected) if selected is not None else len(self.packages),
                "for_driver": self.tool.get("for-driver"), "for_cc": self.tool.get("for-cc")}


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def pins(selected: tuple[Selected, ...]) -> dict[str, str]:
    """{name: version} of what a target installs (archives without a version left out)."""
    return {s.package.name: s.package.version for s in selected if s.package.version}


def check_output_name(path: str) -> None:
    """PEP 751 names a lock ``pylock.toml`` or ``pylock.<name>.toml`` (pip and uv hold to it)."""
    if path != "-" and not NAME_RULE.fullmatch(os.path.basename(path)):
        raise UsageError(f"lock file name {os.path.basename(path)!r} is not pylock.toml or pylock.<name>.toml",
                         "name it as PEP 751 says, e.g. -o pylock.toml or -o pylock.gpu.toml (or -o - for stdout)")


def read_lock(path: str | os.PathLike) -> Lock:
    """Read and check a lock file (see the module docstring). Anything wrong is a UsageError
    naming the file and what is wrong; a FIFO or a device is refused without waiting on it."""
    path = Path(path).absolute()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise UsageError(f"lock file {path} not found", LOCK_FIX) from None
    except OSError as exc:
        raise UsageError(f"lock file {path}: cannot read: {exc.strerror}", "check the path and its permissions") from None
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"lock file {path} is not a regular file (a FIFO, a device or a folder)",
                             "give the path of a pylock.toml")
        try:
            raw = fh.read(MAX_BYTES + 1)
        except OSError as exc:
            raise UsageError(f"lock file {path}: cannot read: {exc.strerror}", "check the path") from None
    if len(raw) > MAX_BYTES:
        raise UsageError(f"lock file {path} is larger than {MAX_BYTES >> 20} MB", "check that this is a pylock.toml")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise UsageError(f"lock file {path} is not TOML: {str(exc).splitlines()[0]}", LOCK_FIX) from None
    return parse_lock(data, digest_of(raw), path)


def parse_lock(data: dict[str, Any], digest: str, source: Path | None = None) -> Lock:
    """A lock from its TOML table: the safety checks, then ``packaging.pylock``, then ours."""
    from packaging.pylock import Pylock

    where = f"lock file {source}" if source else "the lock"
    _check_strings(where, data, "")
    try:
        pylock = Pylock.from_dict(data)
    except Exception as exc:  # noqa: BLE001 - any failure to read untrusted input is bad input
        raise UsageError(f"{where} is not a valid PEP 751 lock: {_first_line(exc)}", LOCK_FIX) from None
    packages = tuple(_package(where, i, p) for i, p in enumerate(pylock.packages))
    return Lock(source, digest, packages, str(pylock.requires_python) if pylock.requires_python else None,
                tuple(str(m) for m in pylock.environments or ()), pylock.created_by,
                _tool(where, (pylock.tool or {}).get(TOOL)), pylock)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _check_strings(where: str, value: Any, at: str) -> None:
    """No control character in any key or string, and no credentials in any URL."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_strings(where, key, at)
            _check_strings(where, item, f"{at}.{key}" if at else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_strings(where, item, f"{at}[{i}]")
    elif isinstance(value, str):
        if _CONTROL.search(value):
            raise UsageError(f"{where}: {at or 'a key'} holds a line break or a control character "
                             f"({json.dumps(value[:60])})",
                             "a lock's names, versions, markers and URLs are one line each: lock again")
        if _URL.match(value):
            parts = urlsplit(value)
            if parts.username or parts.password:
                from .indexes import redact

                raise UsageError(f"{where}: {at} is a URL with credentials ({redact(value)})",
                                 "credentials belong in pip's configuration (or the index variables), "
                                 "never in a lock: lock again without them")


def _package(where: str, entry: int, package: Any) -> LockedPackage:
    name = str(package.name)
    label = f"packages[{entry}] ({name})"
    index = package.index
    if index is not None and not (index.startswith(("http://", "https://", "file:")) and " " not in index):
        raise UsageError(f"{where}: {label}: index {index[:80]!r} is not an http(s) or file: URL",
                         "an index is a URL, e.g. https://pypi.org/simple")
    files = [_file(where, label, "wheel", w, w.filename) for w in package.wheels or ()]
    if package.sdist is not None:
        files.append(_file(where, label, "sdist", package.sdist, package.sdist.filename))
    if package.archive is not None:
        files.append(_file(where, label, "archive", package.archive, _archive_name(package.archive)))
    source = "directory" if package.directory is not None else "vcs" if package.vcs is not None else None
    return LockedPackage(entry, name, str(package.version) if package.version is not None else None, tuple(files),
                         str(package.marker) if package.marker is not None else None, index, source)


def _archive_name(archive: Any) -> str:
    return unquote((archive.path or urlsplit(archive.url or "").path).replace("\\", "/").rpartition("/")[2])


def _file(where: str, label: str, kind: str, dist: Any, filename: str) -> LockedFile:
    if not _FILE_NAME.fullmatch(filename) or not filename.lower().endswith(_ARCHIVES if kind == "archive" else
                                                                           (".whl",) if kind == "wheel" else _ARCHIVES):
        raise UsageError(f"{where}: {label}: {filename[:80]!r} is not a plain {kind} file name", LOCK_FIX)
    hashes = []
    for algorithm, value in sorted(dist.hashes.items()):
        if algorithm in HASHES:
            if not isinstance(value, str) or not re.fullmatch(f"[0-9a-f]{{{HASHES[algorithm]}}}", value):
                raise UsageError(f"{where}: {label}: {filename}: its {algorithm} is not {HASHES[algorithm]} "
                                 "lower-case hex digits", "lock again")
            hashes.append((algorithm, value))
    if not hashes:
        raise UsageError(f"{where}: {label}: {filename} has no sha256, sha384 or sha512 hash",
                         "every locked file needs a hash installers check: lock again (pip lock, uv, envcheck)")
    url = dist.url
    if url is not None and urlsplit(url).scheme not in ("http", "https", "file"):
        raise UsageError(f"{where}: {label}: {filename}: url {url[:80]!r} is not http(s) or file:",
                         "lock files from an index or a folder")
    size = dist.size if isinstance(dist.size, int) and dist.size >= 0 else None
    return LockedFile(kind, filename, url, dist.path, tuple(hashes), size)


def _tool(where: str, table: Any) -> dict[str, Any]:
    """``[tool.envcheck]``, each known key of its declared type (``TOOL_TYPES``)."""
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise UsageError(f"{where}: [tool.{TOOL}] is not a table", "lock again with envcheck env lock, or remove it")
    out = _typed(where, f"tool.{TOOL}", table, TOOL_TYPES)
    if "preset" in out:
        out["preset"] = _typed(where, f"tool.{TOOL}.preset", out["preset"], PRESET_TYPES)
        if out["preset"].get("kind") not in (None, "cpu", "gpu"):
            raise UsageError(f"{where}: tool.{TOOL}.preset.kind is {out['preset']['kind']!r}, not cpu or gpu",
                             "lock again with envcheck env lock")
    if "python" in out and not re.fullmatch(r"\d+\.\d+", out["python"]):
        raise UsageError(f"{where}: tool.{TOOL}.python {out['python']!r} is not MAJOR.MINOR", "lock again")
    return out


def _typed(where: str, at: str, table: dict[str, Any], types: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, want in types.items():
        if key not in table:
            continue
        value = table[key]
        ok = isinstance(value, list) and all(isinstance(v, want[0]) for v in value) if isinstance(want, tuple) \
            else isinstance(value, want) and not isinstance(value, bool)
        if not ok:
            shown = f"a list of {want[0].__name__}" if isinstance(want, tuple) else {str: "a string", dict: "a table"}[want]
            raise UsageError(f"{where}: {at}.{key} is {type(value).__name__} {json.dumps(value, default=str)[:60]}, "
                             f"not {shown}", "lock again with envcheck env lock, or remove the key")
        out[key] = value
    return out


# -- writing ---------------------------------------------------------------------------------

def finish(uv_lock: str, tool: dict[str, Any], environments: list[str], header: str) -> str:
    """uv's lock with envcheck's additions: ``header`` (a comment) in place of uv's (which
    shows uv's own command line), ``created-by = "envcheck"``, ``environments`` among the
    top-level keys, and the ``[tool.envcheck]`` table at the end."""
    body = [line for line in uv_lock.splitlines() if not line.startswith("#")]
    while body and not body[0].strip():
        body.pop(0)
    first_table = next((i for i, line in enumerate(body) if line.startswith("[")), len(body))
    top = [f"created-by = {_toml_string(CREATED_BY)}" if line.startswith("created-by") else line
           for line in body[:first_table] if line.strip() and not line.startswith("environments")]
    top.append(f"environments = [{', '.join(_toml_string(e) for e in environments)}]")
    table = [f"[tool.{TOOL}]"] + [f"{key} = {_toml_value(value)}" for key, value in tool.items()
                                   if value is not None and not isinstance(value, dict)]
    for key, value in tool.items():
        if isinstance(value, dict):
            table += ["", f"[tool.{TOOL}.{key}]"] + [f"{k} = {_toml_value(v)}" for k, v in value.items() if v is not None]
    rest = body[first_table:]
    while rest and not rest[-1].strip():
        rest.pop()
    return "\n".join([f"# {line}" for line in header.splitlines()] + top + [""] + rest + [""] + table) + "\n"


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=True)  # a JSON string with \uXXXX escapes is a TOML basic string


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return _toml_string(str(value))
