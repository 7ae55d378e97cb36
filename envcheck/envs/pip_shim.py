"""What `pip` is in an env envcheck made without one (uv makes envs without pip).

After ``source ENV/bin/activate``, ``pip`` would otherwise be the system's (Debian answers
``externally-managed-environment``), or install somewhere else. envcheck puts a ``pip`` (and
``pip3``, ``pip3.X``) there that installs nothing and says what does: ``envcheck env add ENV
PACKAGE``, which records the package (so ``env verify``, ``env lock`` and the gate know it), or
``envcheck env add ENV pip`` for a pip of the env's own, whose scripts then take these names.
The script finds its env from its own path, so a linked env's copy names that env.
"""
from __future__ import annotations

import os
from pathlib import Path

SCRIPT = """#!/bin/sh
# envcheck: this env has no pip of its own (see `envcheck env add`).
env=$(basename "$(cd "$(dirname "$0")/.." && pwd)")
echo "pip: env $env has no pip of its own: envcheck installs its packages." >&2
echo "  envcheck env add $env PACKAGE    installs and records it (env verify and env lock know it)" >&2
echo "  envcheck env add $env pip        gives the env a pip of its own" >&2
exit 1
"""


def place(env_dir: Path, python_version: str) -> None:
    """``pip``, ``pip3`` and ``pip3.X`` in the env's ``bin`` where none is there."""
    major_minor = ".".join(python_version.split(".")[:2])
    for name in ("pip", "pip3", f"pip{major_minor}"):
        path = env_dir / "bin" / name
        if path.exists() or path.is_symlink():
            continue
        fresh = path.with_name(f".{name}.{os.getpid()}.tmp")
        fresh.write_text(SCRIPT, encoding="utf-8")
        fresh.chmod(0o755)
        os.replace(fresh, path)
