"""The per-env manifest (``envcheck.json``): versioned, written atomically, read tolerantly.

The on-disk ``state`` is ``creating`` until the very last step of a create writes ``ready``,
and ``changing`` while an ``env add`` installs, so an env whose writer was killed (SIGKILL
can't be caught) is visibly incomplete.

Versions migrate forward, as pipx's metadata does: ``read`` upgrades an older document in
memory through one migration per version (``_MIGRATIONS``: v1 -> v2 -> ...), writers always
write ``SCHEMA``. A newer schema, a document that isn't JSON, or a field of the wrong type is
a ``ManifestError`` (with its fix), which makes that one env ``broken``, never a crash.

Schema history: /1 the first; /2 adds ``frameworks``, the deep-learning frameworks
installed; /3 adds ``lock`` (the lock an env was made from: its digest, variant and target;
null for an env made from a preset) and ``linked_from`` (the env whose files a second env
was linked from; null when installed) and ``digest`` (``verify.content_digest`` of what was
installed, the same on every node made from one lock; null for an env made before); /4 adds
``adopted`` (an env envcheck did not make and never changes: its folder, kind, interpreter and
site folders; ``envs.adopted``; null for the envs it made). Envs must not import
``envcheck.frameworks`` (a layer above them), so the
field is computed by a ``FrameworksOf`` function its caller passes (the use cases pass
``envcheck.frameworks.detect``); without one, a /1 document reads with ``frameworks`` empty.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

FrameworksOf = Callable[[Mapping[str, str]], list[str]]  # packages {name: version} -> framework names

_PREFIX = "envcheck.manifest/"
VERSION = 4
SCHEMA = f"{_PREFIX}{VERSION}"
READY = "ready"
CREATING = "creating"
CHANGING = "changing"

# key -> expected shape; a dotted key is checked when its parent is there. "?" allows null.
_REQUIRED = ("schema", "name", "state")
_FIELDS = {
    "schema": "str", "name": "line", "state": "str", "preset": "dict", "preset.name": "line?",
    "preset.hash": "str?", "preset.kind": "str?", "preset.framework": "str?", "requested": "list[str]",
    "python": "dict", "python.version": "str?", "python.base": "str?", "installer": "str?",
    "index": "dict", "created": "str?", "updated": "str?", "packages": "dict[str,str]",
    "frameworks": "list[str]", "lock": "dict?", "lock.digest": "str", "linked_from": "str?",
    "digest": "str?", "adopted": "dict?", "adopted.path": "str", "adopted.kind": "str",
    "adopted.interpreter": "str", "adopted.sites": "list[str]",
}


class ManifestError(Exception):
    """The manifest exists but can't be read as an envcheck manifest."""

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.fix = fix


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON, atomically (``envcheck.atomic``)."""
    from ..atomic import write_bytes

    write_bytes(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def read(path: Path, frameworks_of: FrameworksOf | None = None) -> dict[str, Any]:
    """Read a manifest, migrated to ``SCHEMA`` in memory; FileNotFoundError if absent,
    ManifestError if it is not one of ours, is newer than this envcheck, or is malformed.
    ``frameworks_of``: how an older document's ``frameworks`` field is filled in."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, RecursionError) as exc:
        raise ManifestError(f"{path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: not an {SCHEMA} document")
    data = migrate(data, path, frameworks_of)
    problem = shape_problem(data)
    if problem:
        raise ManifestError(f"{path}: {problem}")
    return data


def migrate(data: dict[str, Any], where: Path | str = "manifest",
            frameworks_of: FrameworksOf | None = None) -> dict[str, Any]:
    """``data`` brought forward to ``SCHEMA``, one migration per version (``frameworks_of``:
    see ``read``)."""
    schema = data.get("schema")
    version = schema[len(_PREFIX):] if isinstance(schema, str) and schema.startswith(_PREFIX) else ""
    if not version.isdigit() or int(version) < 1:
        raise ManifestError(f"{where}: not an {SCHEMA} document")
    if int(version) > VERSION:
        raise ManifestError(f"{where}: schema {schema} was made by a newer envcheck (this one reads up to {SCHEMA})",
                            "made by a newer envcheck: upgrade envcheck")
    for step in range(int(version), VERSION):
        data = _MIGRATIONS[step](data, frameworks_of)
    return data


def _v1_to_v2(data: dict[str, Any], frameworks_of: FrameworksOf | None) -> dict[str, Any]:
    packages = data.get("packages")
    found = list(frameworks_of(packages)) if frameworks_of is not None and isinstance(packages, dict) else []
    return {**data, "schema": f"{_PREFIX}2", "frameworks": found}


def _v2_to_v3(data: dict[str, Any], frameworks_of: FrameworksOf | None) -> dict[str, Any]:
    return {**data, "schema": f"{_PREFIX}3", "lock": None, "linked_from": None, "digest": None}


def _v3_to_v4(data: dict[str, Any], frameworks_of: FrameworksOf | None) -> dict[str, Any]:
    return {**data, "schema": f"{_PREFIX}4", "adopted": None}


_MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4}  # from version N to N+1; each takes (data, frameworks_of)


def shape_problem(data: dict[str, Any]) -> str | None:
    """The first field of the wrong type (or missing), said plainly; None when the shape is sound."""
    for key in _REQUIRED:
        if key not in data:
            return f"field '{key}' is missing"
    for key, kind in _FIELDS.items():
        parent, _, child = key.rpartition(".")
        holder = data.get(parent) if parent else data
        if not isinstance(holder, dict) or child not in holder:
            continue
        if not _fits(holder[child], kind):
            return f"field '{key}' should be {kind.rstrip('?')}{' or null' if kind.endswith('?') else ''}, " \
                   f"not {type(holder[child]).__name__}"
    return None


def _fits(value: Any, kind: str) -> bool:
    if kind.endswith("?"):
        return value is None or _fits(value, kind[:-1])
    if kind == "line":  # text that reaches output lines: printable, one line
        return isinstance(value, str) and value.isprintable()
    if kind == "list[str]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "dict[str,str]":
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    return isinstance(value, {"str": str, "dict": dict}[kind])
