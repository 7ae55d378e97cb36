"""The probe of an interpreter to adopt (``envs.adopted``): which interpreter a PATH names
(``locate``, refusing what is no env and no interpreter before anything runs), and its facts,
read by running it once, isolated (``-I -S -B``), under a deadline (``probe``).

Apart from ``adopted`` so that `env adopt` can start the probe before the rest of envcheck is
imported (``probe_ahead``): this module imports os, shlex, pathlib and ``processes``, nothing
else at its top.
"""
from __future__ import annotations

import os
import shlex
from pathlib import Path

from .. import processes
from ..child_env import clean_environ
from ..errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see above)
if TYPE_CHECKING:
    from typing import Any

# The CUDA libraries whose place decides what a framework loads (their sonames' stems).
CUDA_LIBRARIES = ("libcudart", "libcublas", "libcublasLt", "libcudnn", "libnccl", "libcufft", "libcusparse",
                  "libcusolver", "libcurand", "libnvJitLink", "libcupti", "libnvinfer")


# The interpreter's facts, in the standard library of any Python 3; -S: ``site`` imported here,
# after the flags, so the .pth files of the env run nothing of theirs. With them, the lines of
# the loader's cache (``ldconfig -p``, for ``adopted.cuda_libraries``) naming the libraries given as
# arguments, read while the sites are found: a child of the probe's, not one more of envcheck's
# (each costs a guard). Cheap on purpose, as ``probe_ahead`` says: ``posix_spawnp`` where there
# is one (3.8+), not subprocess, and the answer a Python literal in ASCII (``ascii``, read by
# ``ast.literal_eval``), not JSON: either import (re, enum, threading) costs more than the rest.
_PROBE = """
import os, sys
import site
try:
    out, into = os.pipe()
    if hasattr(os, "posix_spawnp"):
        null = os.open(os.devnull, os.O_RDWR)
        ldconfig = os.posix_spawnp("ldconfig", ["ldconfig", "-p"], os.environ, file_actions=[
            (os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, into, 1), (os.POSIX_SPAWN_DUP2, null, 2)])
    else:
        import subprocess
        ldconfig = subprocess.Popen(["ldconfig", "-p"], stdin=subprocess.DEVNULL, stdout=into,
                                    stderr=subprocess.DEVNULL).pid
    os.close(into)
except Exception:  # no ldconfig (musl): no cache
    ldconfig = None
exe_dir = os.path.dirname(os.path.abspath(sys.executable))
venv, system_sites = None, True
for folder in (exe_dir, os.path.dirname(exe_dir)):  # site.venv's rule, without running the env's .pth files
    cfg = os.path.join(folder, "pyvenv.cfg")
    if os.path.isfile(cfg):
        venv = folder
        with open(cfg) as fh:
            keys = dict(line.split("=", 1) for line in fh if "=" in line)
        system_sites = {k.strip(): v.strip() for k, v in keys.items()}.get("include-system-site-packages") == "true"
        break
prefix = venv or sys.prefix
try:
    sites = site.getsitepackages([prefix]) + (site.getsitepackages() if venv and system_sites else [])
except AttributeError:
    sites = []
sites += [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages")) and p not in sites
          and not venv]
cache = []
if ldconfig is not None:
    with os.fdopen(out, "rb") as fh:
        lines = fh.read().decode("utf-8", "replace").splitlines()
    os.waitpid(ldconfig, 0)
    cache = [line.strip() for line in lines if line.strip().startswith(tuple(n + ".so." for n in sys.argv[1:]))]
print(ascii({"version": "%d.%d.%d" % sys.version_info[:3], "major": sys.version_info[0],
            "executable": sys.executable, "prefix": prefix, "base_prefix": sys.base_prefix,
            "sites": [p for p in dict.fromkeys(sites) if os.path.isdir(p)],
            "implementation": sys.implementation.name, "loader_cache": cache}))
"""


def locate(given: str, home_root: Path) -> tuple[Path, Path | None]:
    """(the interpreter to probe, the uv project given by its folder or its .venv, if so); a
    UsageError for what is no env and no interpreter, before anything is run."""
    raw = Path(given).expanduser()
    if raw.is_symlink() and not raw.exists():
        raise UsageError(f"{given}: a broken symbolic link (to {os.readlink(raw)})", "give the env's real path")
    if not raw.exists():
        raise UsageError(f"{given}: no such file or folder", "give a venv, a uv project, a conda prefix or a Python")
    path = raw.resolve()
    refuse_managed(path, home_root, given)
    project = None
    if path.is_dir():
        if (path / "pyproject.toml").is_file() and (path / ".venv").is_dir():
            project, path = path, (path / ".venv").resolve()
        elif (path / "pyproject.toml").is_file() and (path / "uv.lock").is_file():
            raise UsageError(f"{given}: a uv project without its .venv", f"make it first: cd {shlex.quote(str(path))} "
                             "&& uv sync, then adopt it again")
        elif path.name == ".venv" and (path.parent / "pyproject.toml").is_file():
            project = path.parent
        interpreter = _interpreter_in(path, given)
    elif os.access(path, os.X_OK):
        interpreter = Path(os.path.abspath(raw))  # a venv's python is a link: keep the name it was given
    else:
        raise UsageError(f"{given}: neither a folder nor an executable", "give a venv, a uv project, a conda prefix "
                         "or a Python interpreter")
    return interpreter, project


def refuse_managed(path: Path, home_root: Path, given: str) -> None:
    home = Path(home_root).expanduser().resolve()
    if path == home or home in path.parents:
        raise UsageError(f"{given} is inside envcheck's home ({home}): envcheck manages it already",
                         "use its env name (envcheck env list)")


def _interpreter_in(folder: Path, given: str) -> Path:
    for candidate in ("bin/python", "bin/python3", "python.exe", "Scripts/python.exe"):
        if (folder / candidate).exists():
            return folder / candidate
    raise UsageError(f"{given}: no env (no bin/python, no pyvenv.cfg, no conda-meta) and no interpreter",
                     "give a venv or virtualenv folder, a uv project, a conda prefix, or a Python's path")


def probe_ahead(given: str, home_root: Path) -> None:
    """Start the probe of ``given`` now (`env adopt NAME PATH`), for ``probe`` to read when
    adoption gets there.

    Why: the probe is two interpreter starts (its guard's, then the env's), about as long as
    the imports of `env adopt`'s command line (click, the store), which calls this before them
    so the two overlap (issue 28's target: adopting an env at most 1.5x the time of listing its
    distributions). The one speed trick of adoption, kept here with the probe's own thrift (see
    ``_PROBE``) and this module's short list of imports. What ``locate`` refuses starts
    nothing, and is said later as ever; a probe never read (bad input found after it, a bad
    name) dies with envcheck, as every guarded child does."""
    try:
        interpreter = str(locate(given, home_root)[0])
        _AHEAD[interpreter] = processes.begin(_probe_command(interpreter), env=_probe_environ())
    except Exception:  # bad input, said by ``locate`` again as ever: this is only a head start
        return


_AHEAD: dict[str, processes.Begun] = {}  # started by ``probe_ahead``, by interpreter


def _probe_command(interpreter: str) -> list[str]:
    return [interpreter, "-I", "-S", "-B", "-c", _PROBE, *CUDA_LIBRARIES]


def _probe_environ() -> dict[str, str]:
    return clean_environ({"PYTHONDONTWRITEBYTECODE": "1"})


def probe(interpreter: Path, given: str, timeout: float) -> dict[str, Any]:
    """The facts ``_PROBE`` prints, of ``interpreter`` (started by ``probe_ahead``, else now),
    within ``timeout`` seconds; a UsageError naming ``given`` for one that can't be run, hangs,
    or does not answer as a Python 3."""
    import ast  # here: not before a probe is started

    env = _probe_environ()
    ahead = _AHEAD.pop(str(interpreter), None)
    try:
        done = ahead.finish(timeout=timeout) if ahead is not None else \
            processes.run(_probe_command(str(interpreter)), timeout=timeout, env=env)
    except OSError as exc:
        raise UsageError(f"{given}: {interpreter} cannot be run: {exc.strerror or exc}",
                         "give a working Python 3 interpreter") from None
    if done.timed_out:
        raise UsageError(f"{given}: {interpreter} did not answer within {timeout:.0f} s",
                         "check that it starts (something in it hangs at start-up)")
    try:
        facts = ast.literal_eval(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
        if not isinstance(facts, dict) or facts.get("major") != 3:
            raise ValueError
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, IndexError):
        raise UsageError(f"{given}: {interpreter} is {_which_python(interpreter, env, timeout)} (it did not "
                         "answer as Python 3)", "envcheck judges Python 3 envs: give a Python 3 interpreter") from None
    return facts


def _which_python(interpreter: Path, env: dict[str, str], timeout: float) -> str:
    """"Python 2" when it answers as one (any Python's syntax, no flag Python 2 lacks)."""
    try:
        done = processes.run([str(interpreter), "-c", "import sys; sys.stdout.write(str(sys.version_info[0]))"],
                             timeout=timeout, env=env)
    except OSError:
        return "no Python 3"
    return "Python 2" if done.stdout.strip() == "2" else "no Python 3"
