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
    """One env as the store sees it: manifest facts plus the packages really installed.

    ``path`` is the env's own folder (its interpreter's prefix: where its packages are);
    ``records`` the folder envcheck keeps its files about it in (manifest, report, baseline):
    the same folder for an env envcheck made, ``$ENVCHECK_HOME/envs/NAME`` for one it adopted
    (``adopted``: envcheck never writes inside that one)."""

    name: str
    path: Path
    state: str  # ready | incomplete | broken | missing (an adopted env no longer there)
    manifest: dict[str, Any] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)
    problem: str | None = None
    fix: str | None = None  # the command that repairs an incomplete or broken env
    records: Path | None = None

    @property
    def record_dir(self) -> Path:
        return self.records if self.records is not None else self.path

    @property
    def adopted(self) -> dict[str, Any] | None:
        """What adoption recorded (``envs.adopted``: kind, interpreter, site folders, ...), or
        None for an env envcheck made."""
        found = self.manifest.get("adopted")
        return found if isinstance(found, dict) else None

    @property
    def python(self) -> Path:
        adopted = self.adopted
        return Path(adopted["interpreter"]) if adopted else env_python(self.path)

    def add_command(self, requirements: str) -> str:
        """How a package goes into this env: ``envcheck env add`` (recorded), or for an
        adopted env its own installer's command (``envs.adopted.install_command``)."""
        if self.adopted:
            from .adopted import install_command

            return install_command(self.adopted, self.packages, requirements)
        return f"envcheck env add {self.name} {requirements}"

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
            # envcheck did not make it, and never changes it: its kind, folder and interpreter (null: made by envcheck)
            "adopted": {k: self.adopted.get(k) for k in ("kind", "path", "interpreter", "project")}
            if self.adopted else None,
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
