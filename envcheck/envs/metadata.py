"""Read an env's installed distributions from ``*.dist-info`` without starting its interpreter.

The folder name of a wheel install, ``{name}-{version}.dist-info``, carries both facts
(the name escaped per the wheel spec, the version free of '-'), so listing an env is a
directory scan: no file is opened unless a folder name does not parse.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

_CANON = re.compile(r"[-_.]+")


def canonical_name(name: str) -> str:
    """PEP 503 normalised project name (the same as packaging.utils.canonicalize_name)."""
    return _CANON.sub("-", name).lower()


def site_packages(env: Path) -> list[Path]:
    """The site-packages folders of a virtualenv (POSIX and Windows layouts)."""
    found: list[Path] = []
    lib = env / "lib"
    try:
        for entry in os.scandir(lib):
            if entry.name.startswith(("python", "pypy")):
                candidate = Path(entry.path) / "site-packages"
                if candidate.is_dir():
                    found.append(candidate)
    except OSError:
        pass
    win = env / "Lib" / "site-packages"
    if win.is_dir():
        found.append(win)
    return found


def _from_metadata_file(dist_info: Path) -> tuple[str, str] | None:
    name = version = None
    try:
        with open(dist_info / "METADATA", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    break
                if line.startswith("Name:"):
                    name = line[5:].strip()
                elif line.startswith("Version:"):
                    version = line[8:].strip()
    except OSError:
        return None
    return (name, version) if name and version else None


def installed_packages(env: Path) -> dict[str, str]:
    """{canonical name: version} of every distribution installed in the env."""
    packages: dict[str, str] = {}
    for sp in site_packages(env):
        try:
            entries = list(os.scandir(sp))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.endswith(".dist-info"):
                continue
            stem = entry.name[: -len(".dist-info")]
            name, sep, version = stem.rpartition("-")
            if not sep or not name or not version:
                parsed = _from_metadata_file(Path(entry.path))
                if parsed is None:
                    continue
                name, version = parsed
            packages[canonical_name(name)] = version
    return dict(sorted(packages.items()))


def requirements(env: Path) -> dict[str, list[str]]:
    """{canonical name: its ``Requires-Dist`` lines} of every distribution, in one pass."""
    found: dict[str, list[str]] = {}
    for sp in site_packages(env):
        for entry in os.scandir(sp):
            if not entry.name.endswith(".dist-info"):
                continue
            name, reqs = entry.name[: -len(".dist-info")].rpartition("-")[0], []
            try:
                with open(Path(entry.path) / "METADATA", encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        if not line.strip():
                            break
                        if line.startswith("Requires-Dist:"):
                            reqs.append(line[len("Requires-Dist:"):].strip())
            except OSError:
                continue
            found[canonical_name(name)] = reqs
    return found
