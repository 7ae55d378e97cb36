"""Build real, tiny wheels into a local folder so pip and uv install offline in tests.

Also a pytest plugin: the session-scoped ``wheelhouse`` fixture holds the stand-in packages
the tests install (``alpha`` 1.0 and 2.0, ``beta`` needing alpha, stand-ins whose metadata
say ``tensorflow``, ``tensorflow-cpu`` or ``torch``; torch 2.0.1 and 2.10.0 with the
``nvidia-cuda-runtime-cu11/-cu12`` and ``nvidia-cudnn-cu11/-cu12`` wheels they require).
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
    # PyPI's torch 2.0 / 2.10 name their CUDA runtime and cuDNN wheels at exact versions: the
    # CUDA they were built with is read from these. (torch 2.13.0+cpu is in ``local_wheels``.)
    for name, version, requires in (
            ("torch", "2.0.1", ["nvidia-cuda-runtime-cu11==11.7.99", "nvidia-cudnn-cu11==8.5.0.96"]),
            ("torch", "2.10.0", ["nvidia-cuda-runtime-cu12==12.8.90", "nvidia-cudnn-cu12==9.10.2.21"])):
        build_wheel(folder, name, version, requires=requires,
                    files={"torch_standin/__init__.py": STANDIN.format(name=name)})
    for name, version in (("nvidia-cuda-runtime-cu11", "11.7.99"), ("nvidia-cudnn-cu11", "8.5.0.96"),
                          ("nvidia-cuda-runtime-cu12", "12.8.90"), ("nvidia-cudnn-cu12", "9.10.2.21")):
        build_wheel(folder, name, version)
    return folder


def offline(wheelhouse: Path) -> list[str]:
    """The index options that make envcheck install from the wheelhouse only."""
    return ["--no-index", "--find-links", str(wheelhouse)]


@pytest.fixture(scope="session")
def local_wheels(tmp_path_factory) -> Path:
    """A second find-links folder: ``torch`` 2.13.0+cpu, a local version. Not in ``wheelhouse``:
    ``torch==2.13.0`` matches 2.13.0+cpu too (PEP 440), and both installers would take it."""
    folder = tmp_path_factory.mktemp("local-wheels")
    build_wheel(folder, "torch", "2.13.0+cpu", files={"torch_standin/__init__.py": STANDIN.format(name="torch")})
    return folder
