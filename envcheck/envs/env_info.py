"""One env as the store reports it (``EnvInfo``: its manifest's facts, the packages really
installed, its state and the command that repairs it), and what an env may be called.

Both halves of the store use these: ``store`` (reading, listing, the lock) and
``transactions`` (create, add).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import metadata
from ..errors import UsageError

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name or ""):
        raise UsageError(f"invalid env name {name!r}",
                         "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return name


def env_python(env_dir: Path) -> Path:
    """The env's interpreter (POSIX layout, else Windows)."""
    return Path(metadata.env_python(env_dir))


@dataclass
class EnvInfo:
    """One env as the store sees it: manifest facts plus the packages really installed."""

    name: str
    path: Path
    state: str  # ready | incomplete | broken
    manifest: dict[str, Any] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)
    problem: str | None = None
    fix: str | None = None  # the command that repairs an incomplete or broken env

    @property
    def python(self) -> Path:
        return env_python(self.path)

    @property
    def preset(self) -> dict[str, Any]:
        return self.manifest.get("preset") or {}

    def identity(self) -> dict[str, Any]:
        """What the fleet compares between nodes: the env's lock digest and content digest (as
        made; ``envs.verify``) and the packages installed now."""
        return metadata.identity(self.name, self.manifest, self.packages)

    def to_json(self) -> dict[str, Any]:
        m = self.manifest
        return {
            "name": self.name,
            "path": str(self.path),
            "state": self.state,
            "preset": self.preset.get("name"),
            "preset_hash": self.preset.get("hash"),
            "kind": self.preset.get("kind"),
            "framework": self.preset.get("framework"),
            "python_version": m.get("python", {}).get("version"),
            "python": str(self.python),
            "installer": m.get("installer"),
            "index": m.get("index"),  # where its packages came from (credentials removed)
            "created": m.get("created"),
            "updated": m.get("updated"),
            "requested": m.get("requested", []),
            "frameworks": m.get("frameworks", []),
            "packages": self.packages,
            "lock": m.get("lock"),  # the lock it was made from: digest, variant, target (null: a preset)
            "digest": m.get("digest"),  # what it holds, as envs.verify.content_digest says
            "linked_from": m.get("linked_from"),
            "problem": self.problem,
            "fix": self.fix,
        }
