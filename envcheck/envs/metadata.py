"""Read an env's installed distributions from ``*.dist-info`` without starting its interpreter.

The folder name of a wheel install, ``{name}-{version}.dist-info``, carries both facts
(the name escaped per the wheel spec, the version free of '-'), so listing an env is a
directory scan: no file is opened unless a folder name does not parse.
"""
from __future__ import annotations

import os

from ..distributions import canonical_name

# Patterns are compiled on first use (re's cache), not on import: the gate's stored-pass
# answer imports this module and compiles none of them.
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"  # PEP 508 names: ASCII only


def site_packages(env: str | os.PathLike) -> list:
    """The site-packages folders of a virtualenv (POSIX and Windows layouts), as ``Path``s."""
    from pathlib import Path

    return [Path(folder) for folder in site_package_dirs(env)]


# The site folders of envs envcheck did not make (adopted: a system Python's dist-packages,
# /usr/local's, a conda prefix's), as their interpreter named them at adoption, by the env's
# folder: registered when the store reads an adopted env's manifest (``register_sites``), so
# every reader of an env's files (this scan, the baseline, the gate's fingerprint) finds them.
_SITES: dict[str, list[str]] = {}
_PYTHONS: dict[str, str] = {}  # and their interpreter (a system Python's may be python3 alone)


def register_sites(env: str | os.PathLike, sites: list[str], python: str | None = None) -> None:
    _SITES[os.path.abspath(env)] = [str(s) for s in sites]
    if python:
        _PYTHONS[os.path.abspath(env)] = str(python)


def site_package_dirs(env: str | os.PathLike) -> list[str]:
    """``site_packages`` as strings: pathlib stays out of the gate's stored-pass answer."""
    registered = _SITES.get(os.path.abspath(env))
    if registered is not None:
        return [folder for folder in registered if os.path.isdir(folder)]
    found: list[str] = []
    lib = os.path.join(env, "lib")
    try:
        for entry in os.scandir(lib):
            if entry.name.startswith(("python", "pypy")):
                candidate = os.path.join(entry.path, "site-packages")
                if os.path.isdir(candidate):
                    found.append(candidate)
    except OSError:
        pass
    win = os.path.join(env, "Lib", "site-packages")
    if os.path.isdir(win):
        found.append(win)
    return found


def env_python(env: str | os.PathLike) -> str:
    """The env's interpreter (an adopted env's: as registered; POSIX layout, else Windows)."""
    registered = _PYTHONS.get(os.path.abspath(env))
    if registered is not None:
        return registered
    posix = os.path.join(env, "bin", "python")
    return posix if os.path.exists(posix) or os.name != "nt" else os.path.join(env, "Scripts", "python.exe")


def _from_metadata_file(dist_info: str) -> tuple[str, str] | None:
    name = version = None
    try:
        with open(os.path.join(dist_info, "METADATA"), encoding="utf-8", errors="replace") as fh:
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


def _site_entries(env: str | os.PathLike) -> list:
    """Every entry of the env's site folders (``os.DirEntry``), one scan each."""
    found = []
    for sp in site_package_dirs(env):
        try:
            found += list(os.scandir(sp))
        except OSError:
            continue
    return found


def installed_packages(env: str | os.PathLike) -> dict[str, str]:
    """{canonical name: version} of every distribution installed in the env."""
    packages: dict[str, str] = {}
    for entry in _site_entries(env):
        if entry.name.endswith(".egg-info"):  # a distribution installed the older way (Debian's, setup.py's)
            parsed = _egg_info(entry.name)
            if parsed is not None:
                packages.setdefault(canonical_name(parsed[0]), parsed[1])
            continue
        if not entry.name.endswith(".dist-info"):
            continue
        stem = entry.name[: -len(".dist-info")]
        name, sep, version = stem.rpartition("-")
        if not sep or not name or not version:
            parsed = _from_metadata_file(entry.path)
            if parsed is None:
                continue
            name, version = parsed
        packages[canonical_name(name)] = version
    return dict(sorted(packages.items()))


def _egg_info(folder: str) -> tuple[str, str] | None:
    """(name, version) of ``NAME-VERSION[-pyX.Y].egg-info``, or None."""
    parts = folder[: -len(".egg-info")].split("-")
    if len(parts) >= 3 and parts[-1].startswith("py"):
        parts = parts[:-1]
    if len(parts) < 2 or not parts[0]:
        return None
    return "-".join(parts[:-1]), parts[-1]


def installers(env: str | os.PathLike) -> dict[str, str]:
    """{canonical name: the tool that installed it} from each ``*.dist-info/INSTALLER`` ("pip",
    "uv", "conda", ...; "" where the file is absent)."""
    found: dict[str, str] = {}
    for entry in _site_entries(env):
        if not entry.name.endswith(".dist-info"):
            continue
        try:
            with open(os.path.join(entry.path, "INSTALLER"), encoding="utf-8", errors="replace") as fh:
                tool = fh.read(64).strip()
        except OSError:
            tool = ""
        found[canonical_name(entry.name[: -len(".dist-info")].rpartition("-")[0])] = tool
    return found


def identity(name: str, manifest: dict, packages: dict[str, str]) -> dict:
    """What the fleet compares of one env between nodes (``EnvInfo.identity``): its lock's
    digest and its content digest, as the manifest records them (``envs.verify``), and the
    packages installed now. Here, beside the scan, for the gate's stored-pass answer."""
    lock = manifest.get("lock")
    return {"name": name, "lock": lock.get("digest") if isinstance(lock, dict) else None,
            "digest": manifest.get("digest"), "packages": packages}


def requirements(env: str | os.PathLike) -> dict[str, list[str]]:
    """{canonical name: its ``Requires-Dist`` lines} of every distribution, in one pass."""
    found: dict[str, list[str]] = {}
    for sp in site_package_dirs(env):
        for entry in os.scandir(sp):
            if not entry.name.endswith(".dist-info"):
                continue
            name, reqs = entry.name[: -len(".dist-info")].rpartition("-")[0], []
            try:
                with open(os.path.join(entry.path, "METADATA"), encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        if not line.strip():
                            break
                        if line.startswith("Requires-Dist:"):
                            reqs.append(line[len("Requires-Dist:"):].strip())
            except OSError:
                continue
            found[canonical_name(name)] = reqs
    return found


def pins(packages: dict[str, str]) -> tuple[list[str], list[str]]:
    """(``name==version`` lines a requirements file can hold, why each other was left out).

    A dist-info folder's name can hold anything the filesystem allows (control characters,
    bytes that aren't UTF-8); only a PEP 508 name with a PEP 440 version makes a line pip reads.
    """
    import re

    lines, left_out = [], []
    for name, version in packages.items():
        if re.fullmatch(_NAME, name) and _is_version(version):
            lines.append(f"{name}=={version}")
        else:
            left_out.append(f"{name!r} {version!r}: not a PEP 508 name with a PEP 440 version "
                            "(as read from its *.dist-info folder)")
    return lines, left_out


def _is_version(text: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        Version(text)
    except InvalidVersion:
        return False
    return text == text.strip()  # Version() forgives surrounding whitespace; a line can't hold it
