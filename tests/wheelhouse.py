"""Build real, tiny wheels into a local folder so pip and uv install offline in tests.

Also a pytest plugin: the session-scoped ``wheelhouse`` fixture holds the stand-in packages
the tests install (``alpha`` 1.0 and 2.0, ``beta`` needing alpha, stand-ins whose metadata
say ``tensorflow``, ``tensorflow-cpu`` or ``torch``).
"""
from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(folder: Path, name: str, version: str, *, requires: list[str] = (),
                files: dict[str, str] | None = None) -> Path:
    """A pure-Python wheel; ``files`` maps paths inside the wheel to their text."""
    dist = name.replace("-", "_")
    files = dict(files if files is not None else {f"{dist}/__init__.py": f"__version__ = {version!r}\n"})
    info = f"{dist}-{version}.dist-info"
    metadata = "Metadata-Version: 2.1\n" f"Name: {name}\n" f"Version: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files[f"{info}/METADATA"] = metadata
    files[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: envcheck-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    records = [_record_line(p, t.encode()) for p, t in files.items()]
    records.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = "\n".join(records) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return target


STANDIN = "raise ImportError('stand-in {name}: metadata only, not importable')\n"


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheelhouse")
    build_wheel(folder, "alpha", "1.0")
    build_wheel(folder, "alpha", "2.0")
    build_wheel(folder, "beta", "1.0", requires=["alpha>=1.0"])
    build_wheel(folder, "gamma", "1.0", requires=["alpha<1.0"])  # unsatisfiable next to alpha>=1
    for name, version in (("tensorflow", "2.11.1"), ("tensorflow", "2.15.0"), ("tensorflow", "2.21.0"), ("tensorflow-cpu", "2.21.0"),
                          ("torch", "2.13.0")):
        build_wheel(folder, name, version,
                    files={f"{name.replace('-', '_')}_standin/__init__.py": STANDIN.format(name=name)})
    return folder


def offline(wheelhouse: Path) -> list[str]:
    """The index options that make envcheck install from the wheelhouse only."""
    return ["--no-index", "--find-links", str(wheelhouse)]
