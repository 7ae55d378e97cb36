"""The per-env manifest (``envcheck.json``): versioned, written atomically, read tolerantly.

The on-disk ``state`` is ``creating`` until the very last step of a create writes ``ready``,
so an env whose creator was killed (SIGKILL can't be caught) is visibly incomplete.
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SCHEMA = "envcheck.manifest/1"
READY = "ready"
CREATING = "creating"


class ManifestError(Exception):
    """The manifest exists but can't be read as an envcheck manifest."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_atomic(path: Path, data: Any) -> None:
    """Write JSON to a temp file in the same folder, fsync it, then ``os.replace``."""
    import tempfile  # only writers pay for it; the gate's cache hit only reads

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read(path: Path) -> dict[str, Any]:
    """Read a manifest; FileNotFoundError if absent, ManifestError if it is not one of ours."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("name"), str):
        raise ManifestError(f"{path}: not an {SCHEMA} document")
    return data
