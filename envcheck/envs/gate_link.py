"""Make ``import envcheck; envcheck.ensure_ready()`` work inside every env envcheck creates.

The env gets one ``.pth`` line naming ``$ENVCHECK_HOME/lib``, a folder that holds only a link
to the envcheck package and the path of the interpreter envcheck runs with. So the env can
import envcheck and nothing else of envcheck's world (no click, packaging or pynvml that could
shadow the env's own), and ``ensure_ready`` there asks envcheck's own interpreter for the
answer (``usecases.gate``), importing only the standard library itself.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..paths import Home
from .metadata import site_packages

PTH_NAME = "envcheck-gate.pth"
PYTHON_FILE = "envcheck-python"  # in the lib folder: the interpreter that runs envcheck


def refresh_lib(home: Home) -> Path:
    """``$ENVCHECK_HOME/lib`` pointing at this envcheck and its interpreter (replaced whole)."""
    import envcheck

    lib = home.root / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    link, package = lib / "envcheck", Path(envcheck.__file__).resolve().parent
    if not (link.is_symlink() and Path(os.readlink(link)) == package):
        fresh = lib / f".envcheck.{os.getpid()}"
        fresh.unlink(missing_ok=True)
        fresh.symlink_to(package, target_is_directory=True)
        os.replace(fresh, link)
    python = lib / PYTHON_FILE
    if not python.is_file() or python.read_text(encoding="utf-8") != sys.executable:
        fresh = lib / f".{PYTHON_FILE}.{os.getpid()}"
        fresh.write_text(sys.executable, encoding="utf-8")
        os.replace(fresh, python)
    return lib


def link_env(home: Home, env_dir: Path) -> None:
    """Let the env at ``env_dir`` import envcheck's gate."""
    lib = refresh_lib(home)
    for folder in site_packages(env_dir):
        (folder / PTH_NAME).write_text(f"{lib}\n", encoding="utf-8")


def envcheck_python(home_root: Path) -> str | None:
    """The interpreter that runs envcheck for the home at ``home_root``, if it recorded one."""
    path = home_root / "lib" / PYTHON_FILE
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
