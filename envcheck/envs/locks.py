"""Lock files: PEP 751 ``pylock.toml``, written by uv for a target and read back here.

uv resolves and writes the lock (``uv pip compile --format pylock.toml``: every package at one
version, each wheel with its URL and sha256); envcheck adds two things a node needs to make
the same env: ``environments`` (the markers of the target, so an installer refuses the lock
on another kind of machine) and a ``[tool.envcheck]`` table (the preset, its variant, the
target's Python and platform, and the driver and compute capability it was locked for).

Installing reads the lock here, never resolves: ``hashed_requirements`` turns it into
``name==version --hash=sha256:...`` lines, which pip and uv both install with
``--require-hashes --no-deps`` (exactly these files, each hash checked, nothing else pulled
in). A lock's identity is its digest, the sha256 of its bytes: the manifest records it, the
gate's fingerprint covers it, and the fleet groups nodes by it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

TOOL = "envcheck"
MAX_BYTES = 32 << 20  # a lock of thousands of wheels is a few MB; anything bigger is not one
NAME_RULE = re.compile(r"pylock(\.[^./\\]+)?\.toml")  # PEP 751: pylock.toml or pylock.<name>.toml
LOCK_FIX = "make one with: envcheck env lock NAME -o pylock.toml (or --preset P)"


@dataclass(frozen=True)
class LockedWheel:
    filename: str
    url: str | None  # where it was resolved from (http(s) or file:)
    path: str | None  # a path relative to the lock file, when the lock names one
    sha256: str
    size: int | None = None


@dataclass(frozen=True)
class LockedPackage:
    name: str  # normalised, as PEP 751 requires
    version: str
    wheels: tuple[LockedWheel, ...]
    marker: str | None = None


@dataclass(frozen=True)
class Lock:
    """A lock as read: its packages, its envcheck table (``tool``) and its digest."""

    source: Path | None
    digest: str  # "sha256:<hex>" of the file's bytes
    packages: tuple[LockedPackage, ...]
    requires_python: str | None = None
    tool: dict[str, Any] = field(default_factory=dict)

    @property
    def pins(self) -> dict[str, str]:
        return {p.name: p.version for p in self.packages}

    @property
    def variant(self) -> str | None:
        return self.tool.get("variant")

    @property
    def python(self) -> str | None:
        """The Python ``major.minor`` it was locked for."""
        return self.tool.get("python")

    @property
    def preset(self) -> dict[str, Any]:
        return self.tool.get("preset") or {}

    def wheel_files(self) -> list[LockedWheel]:
        return [w for p in self.packages for w in p.wheels]

    def summary(self) -> dict[str, Any]:
        """What the manifest and ``env show`` record of the lock an env was made from."""
        return {"digest": self.digest, "variant": self.variant, "python": self.python,
                "platform": self.tool.get("platform"), "packages": len(self.packages),
                "for_driver": self.tool.get("for-driver"), "for_cc": self.tool.get("for-cc")}


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check_output_name(path: str) -> None:
    """PEP 751 names a lock ``pylock.toml`` or ``pylock.<name>.toml`` (pip and uv hold to it)."""
    if path != "-" and not NAME_RULE.fullmatch(os.path.basename(path)):
        raise UsageError(f"lock file name {os.path.basename(path)!r} is not pylock.toml or pylock.<name>.toml",
                         "name it as PEP 751 says, e.g. -o pylock.toml or -o pylock.gpu.toml (or -o - for stdout)")


def read_lock(path: str | os.PathLike) -> Lock:
    """Read and check a lock file: PEP 751 version 1, every package with a version and wheels,
    every wheel with a sha256. Anything else is a UsageError naming the file and what is wrong."""
    path = Path(path).absolute()
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(f"lock file {path} not found", LOCK_FIX) from None
    except OSError as exc:
        raise UsageError(f"lock file {path}: cannot read: {exc.strerror}", "check the path and its permissions") from None
    if len(raw) > MAX_BYTES:
        raise UsageError(f"lock file {path} is larger than {MAX_BYTES >> 20} MB", "check that this is a pylock.toml")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise UsageError(f"lock file {path} is not TOML: {str(exc).splitlines()[0]}", LOCK_FIX) from None
    return parse_lock(data, digest_of(raw), path)


def parse_lock(data: dict[str, Any], digest: str, source: Path | None = None) -> Lock:
    where = f"lock file {source}" if source else "the lock"
    version = str(data.get("lock-version", ""))
    if not re.fullmatch(r"1(\.\d+)*", version):
        raise UsageError(f"{where}: lock-version {version or 'missing'!r}: not a PEP 751 version 1 lock",
                         "a lock written by uv, pip or envcheck says lock-version = \"1.0\"")
    packages = data.get("packages")
    if not isinstance(packages, list) or not packages:
        raise UsageError(f"{where}: no [[packages]]", LOCK_FIX)
    parsed = tuple(_package(where, i, p) for i, p in enumerate(packages))
    tool = (data.get("tool") or {}).get(TOOL) if isinstance(data.get("tool"), dict) else None
    return Lock(source, digest, parsed, data.get("requires-python") if isinstance(data.get("requires-python"), str) else None,
                tool if isinstance(tool, dict) else {})


def _package(where: str, index: int, entry: Any) -> LockedPackage:
    from .metadata import canonical_name

    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not isinstance(entry.get("version"), str):
        raise UsageError(f"{where}: packages[{index}] has no name and version",
                         "envcheck installs locks that pin every package to one version")
    name = canonical_name(entry["name"])
    wheels = entry.get("wheels")
    if not isinstance(wheels, list) or not wheels:
        raise UsageError(f"{where}: package {name} {entry['version']} has no wheels (only a source "
                         "distribution, a directory or a VCS checkout)",
                         "lock wheels only: envcheck env lock passes --only-binary :all: to uv")
    return LockedPackage(name, entry["version"], tuple(_wheel(where, name, w) for w in wheels),
                         entry.get("marker") if isinstance(entry.get("marker"), str) else None)


def _wheel(where: str, name: str, entry: Any) -> LockedWheel:
    hashes = entry.get("hashes") if isinstance(entry, dict) else None
    sha = hashes.get("sha256") if isinstance(hashes, dict) else None
    url = entry.get("url") if isinstance(entry.get("url"), str) else None
    path = entry.get("path") if isinstance(entry.get("path"), str) else None
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha) or not (url or path):
        raise UsageError(f"{where}: a wheel of {name} has no url or path, or no sha256 hash",
                         "every locked file needs its sha256: lock again with envcheck env lock")
    filename = entry.get("name") if isinstance(entry.get("name"), str) else \
        unquote(os.path.basename(urlsplit(url).path if url else path))
    if not filename.endswith(".whl") or "/" in filename or filename.startswith("."):
        raise UsageError(f"{where}: {name}: {filename[:80]!r} is not a wheel file name", LOCK_FIX)
    size = entry.get("size") if isinstance(entry.get("size"), int) else None
    return LockedWheel(filename, url, path, sha, size)


def hashed_requirements(lock: Lock) -> str:
    """The lock as a requirements file both installers take with ``--require-hashes
    --no-deps``: one pinned line per package, with the hash of every wheel the lock allows."""
    lines = []
    for package in lock.packages:
        marker = f" ; {package.marker}" if package.marker else ""
        hashes = "".join(f" --hash=sha256:{w.sha256}" for w in package.wheels)
        lines.append(f"{package.name}=={package.version}{marker}{hashes}")
    return "\n".join(lines) + "\n"


# -- writing ---------------------------------------------------------------------------------

def finish(uv_lock: str, tool: dict[str, Any], environments: list[str], header: str) -> str:
    """uv's lock with envcheck's additions: ``header`` (a comment) in place of uv's (which
    shows uv's own command line), ``environments`` among the top-level keys, and the
    ``[tool.envcheck]`` table at the end."""
    body = [line for line in uv_lock.splitlines() if not line.startswith("#")]
    while body and not body[0].strip():
        body.pop(0)
    first_table = next((i for i, line in enumerate(body) if line.startswith("[")), len(body))
    top = [line for line in body[:first_table] if line.strip() and not line.startswith("environments")]
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
