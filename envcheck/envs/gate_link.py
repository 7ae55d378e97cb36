"""Make ``import envcheck; envcheck.ensure_ready()`` work inside every env envcheck creates.

The env gets one ``.pth`` line naming ``$ENVCHECK_HOME/lib``, a folder that holds a copy of
``data/gate_client.py`` as ``envcheck/__init__.py`` and the path of the interpreter envcheck
runs with (``envcheck-python``). So the env imports envcheck's gate and nothing else of
envcheck's world (no click, packaging or pynvml that could shadow the env's own), and
``ensure_ready`` there asks envcheck's own interpreter for the answer (``python -m envcheck``),
importing only the standard library itself.

Nothing in ``lib`` points into envcheck's installation, so reinstalling, upgrading or
installing envcheck editable leaves every env's gate working; every envcheck command calls
``repair``, which rewrites ``lib`` when another interpreter or another envcheck runs it (a
moved venv, an upgrade that changed the copy, an older envcheck's link).
"""
from __future__ import annotations

import os
import sys

from ..atomic import write_bytes
from .metadata import site_package_dirs

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the gate's answer imports this
if TYPE_CHECKING:
    from ..paths import Home

PTH_NAME = "envcheck-gate.pth"
PYTHON_FILE = "envcheck-python"  # in the lib folder: the interpreter that runs envcheck (= gate_client's)
PACKAGE = "envcheck"  # in the lib folder: the copy of the gate client, as the package the env imports
CLIENT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "gate_client.py")


def refresh_lib(home_root: str | os.PathLike) -> str:
    """``$ENVCHECK_HOME/lib`` made for this envcheck and its interpreter; each file replaced
    atomically, and only when it differs. Every command may do it, several at once: the
    package folder appears whole, in one rename, or another process's (which won the race)
    is used; each file is written under a name of its own, then renamed over the old one."""
    lib = os.path.join(home_root, "lib")
    os.makedirs(lib, exist_ok=True)
    package = os.path.join(lib, PACKAGE)
    if os.path.islink(package) or (os.path.lexists(package) and not os.path.isdir(package)):
        try:  # an older envcheck's link to itself
            os.unlink(package)
        except (FileNotFoundError, IsADirectoryError):
            pass  # another process took it away, or put the folder in its place, meanwhile
    if not os.path.isdir(package):
        _place_package(lib, package)
    _write(os.path.join(package, "__init__.py"), _client())
    _write(os.path.join(lib, PYTHON_FILE), sys.executable)
    return lib


def _place_package(lib: str, package: str) -> None:
    """The package folder, holding the client, renamed into place in one step; where another
    process's got there first, that one stays (the caller writes the client into it)."""
    fresh = os.path.join(lib, f".{PACKAGE}.{os.getpid()}.{os.urandom(6).hex()}")
    os.mkdir(fresh)
    try:
        _write(os.path.join(fresh, "__init__.py"), _client())
        try:
            os.rename(fresh, package)
        except OSError:
            if not os.path.isdir(package):
                raise
    finally:
        if os.path.isdir(fresh):  # not renamed: another's won
            import shutil  # here: the gate's fast path imports this module

            shutil.rmtree(fresh, ignore_errors=True)


def repair(home_root: str | os.PathLike) -> None:
    """``refresh_lib`` where ``lib`` exists (an env was linked) and was made by another
    interpreter or another envcheck. Two small reads when nothing changed; never fails (a
    read-only home keeps its ``lib`` as it is)."""
    lib = os.path.join(home_root, "lib")
    try:
        if _read(os.path.join(lib, PYTHON_FILE)) == sys.executable and \
                _read(os.path.join(lib, PACKAGE, "__init__.py")) == _client():
            return
    except OSError:
        pass
    try:
        if os.path.isdir(lib):
            refresh_lib(home_root)
    except OSError:
        pass


def link_env(home: Home, env_dir: str | os.PathLike) -> None:
    """Let the env at ``env_dir`` import envcheck's gate (``home``: a ``paths.Home``)."""
    lib = refresh_lib(home.root)
    for folder in site_package_dirs(env_dir):
        _write(os.path.join(folder, PTH_NAME), f"{lib}\n")


def _client() -> str:
    return _read(CLIENT)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _write(path: str, text: str) -> None:
    """``text`` at ``path`` unless it is there already (a rewritten .pth or module would look
    like a change of the env's files to the gate's fingerprint); replaced atomically."""
    try:
        if _read(path) == text:
            return
    except OSError:
        pass
    write_bytes(path, text.encode("utf-8"), 0o666)
