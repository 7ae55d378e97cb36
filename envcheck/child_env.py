"""The environment of every child process envcheck starts (``processes`` starts them).

``clean_environ`` drops ``STRIPPED`` (what would make an interpreter load foreign code or an
installer act on another env): what installers and interpreter probes get. Anything started
in an env, or for one, gets ``child_environ(env, gpus=…, framework=…, purpose=…)``, the one
place that decides what is added, by purpose:

========  =========================================================================
purpose   what is added to the clean base (``base``, default ``os.environ``)
========  =========================================================================
run       the env (``VIRTUAL_ENV``, its bin folder first on ``PATH``, its CUDA wheels'
          library folders first on ``LD_LIBRARY_PATH``); ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
          (GPUs numbered as NVML numbers them); ``CUDA_VISIBLE_DEVICES`` from ``gpus``
          (None: left as the caller has it); the env's framework's run variables
          (``framework``: the caller asks the registry, ``Framework.run_environ``)
          unless the caller set them
kernel    the same, as a Jupyter kernelspec's ``env``: only what differs from the
          server's environment (``${PATH}``, ``${LD_LIBRARY_PATH}`` refer to it), and the
          stripped ``PYTHON*`` variables set empty, which Python reads as unset
smoke     the env (when there is one), the GPU order, ``PYTHONNOUSERSITE=1``,
          ``PYTHONUNBUFFERED=1`` and ``framework``'s variables as defaults (the caller
          hands every framework's smoke variables, ``frameworks.smoke_environ()``: a
          framework's C++ logs kept off the runner's stderr)
probe     the env (when there is one): a library loads as it will for the framework
fleet     nothing: a node's envcheck gets the node's environment, cleaned
========  =========================================================================

``extra`` is laid over ``base`` first (a caller's own variables: a framework's scratch folder,
batch sizes, a fleet's forwarded secrets), so it counts as set by the caller. Nothing here
starts a process; ``processes`` re-exports these names, since whoever starts a child hands
it one of these environments.

Nearly a leaf: of envcheck it imports ``paths``' file names alone (an env envcheck made holds
its manifest), nothing else (what a framework adds comes from the caller, who may ask the
registry), and pathlib only where a path is made (the gate's level-1 answer imports
this module through ``host``, and pays for no pathlib there).
"""
from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the gate's fast path
if TYPE_CHECKING:      # imports this module (host.visibility reads PCI_ORDER)
    from pathlib import Path
    from typing import Mapping, Sequence

__all__ = ["PCI_ORDER", "PURPOSES", "STRIPPED", "child_environ", "clean_environ", "env_environ",
           "venv_of", "wheel_library_dirs"]

STRIPPED = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT",
            "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")
PCI_ORDER = "PCI_BUS_ID"  # the CUDA_DEVICE_ORDER envcheck sets: CUDA numbers GPUs as NVML does
PURPOSES = ("run", "kernel", "smoke", "probe", "fleet")  # see child_environ
_GPU_PURPOSES = ("run", "kernel", "smoke")  # those that get the GPU order (and may be given GPUs)
_FRAMEWORK_PURPOSES = _GPU_PURPOSES  # those a framework's variables are added to
_KERNEL_SERVER = {"PATH": "${PATH}", "LD_LIBRARY_PATH": "${LD_LIBRARY_PATH}"}  # Jupyter expands them


def clean_environ(extra: Mapping[str, str] | None = None,
                  base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) with ``extra`` laid over, without ``STRIPPED``."""
    env = dict(os.environ if base is None else base)
    env.update(extra or {})
    for name in STRIPPED:
        env.pop(name, None)
    return env


def env_environ(env_dir: Path | str, base: Mapping[str, str] | None = None,
                extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """For a command run in the env ``env_dir``: clean, ``VIRTUAL_ENV`` and its bin first on
    PATH, and, in an env envcheck made (its manifest inside), the library folders of its CUDA
    wheels first on ``LD_LIBRARY_PATH``; an env envcheck did not make (adopted) runs with the
    loader's path its user gives it, so what loads is what loads for them."""
    from .paths import MANIFEST_NAME

    env = clean_environ(extra, base)
    bin_dir = os.path.join(env_dir, "Scripts" if os.name == "nt" else "bin")
    if os.path.isdir(os.path.join(env_dir, "conda-meta")):  # a conda prefix (adopted), as `conda activate` says it
        env["CONDA_PREFIX"] = str(env_dir)
    elif os.path.isfile(os.path.join(env_dir, "pyvenv.cfg")):
        env["VIRTUAL_ENV"] = str(env_dir)
    env["PATH"] = os.pathsep.join(p for p in (bin_dir, env.get("PATH", "")) if p)
    if not os.path.isfile(os.path.join(env_dir, MANIFEST_NAME)):
        return env
    libraries = wheel_library_dirs(env_dir)
    if libraries:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libraries + [p for p in env.get(
            "LD_LIBRARY_PATH", "").split(os.pathsep) if p and p not in libraries])
    return env


def child_environ(env: Path | str | None = None, *, gpus: Sequence[int] | None = None,
                  framework: Mapping[str, str] | None = None, purpose: str = "run",
                  base: Mapping[str, str] | None = None,
                  extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child started in the env folder ``env`` (None: in no env) for
    ``purpose`` (see the module docstring): ``gpus``, NVML indices to show (None: leave
    ``CUDA_VISIBLE_DEVICES`` as it is); ``framework``, the variables a framework adds for this
    purpose, each unless the caller set it (``run``/``kernel``: the env's framework's
    ``Framework.run_environ(installed version)``; ``smoke``: ``frameworks.smoke_environ()``);
    ``base``, the caller's environment (default ``os.environ``; for a kernel, the Jupyter
    server's, referred to by ``${NAME}``); ``extra``, laid over ``base``."""
    if purpose not in PURPOSES:
        raise ValueError(f"unknown purpose {purpose!r}: one of {', '.join(PURPOSES)}")
    if gpus is not None and purpose not in _GPU_PURPOSES:
        raise ValueError(f"a {purpose} child is given no GPUs")
    if framework and purpose not in _FRAMEWORK_PURPOSES:
        raise ValueError(f"a {purpose} child is given no framework variables")
    if base is None:
        base = _KERNEL_SERVER if purpose == "kernel" else os.environ
    given = {**base, **(extra or {})}  # what the caller set: the framework's variables yield to it
    environ = env_environ(env, base, extra) if env is not None else clean_environ(extra, base)
    if purpose == "kernel":
        environ = {name: value for name, value in environ.items() if base.get(name) != value}
        environ.update({name: "" for name in STRIPPED if name.startswith("PYTHON")})
    if purpose in _GPU_PURPOSES:
        environ["CUDA_DEVICE_ORDER"] = PCI_ORDER
        if gpus is not None:
            environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))
    if purpose == "smoke":
        environ["PYTHONNOUSERSITE"] = "1"
        environ["PYTHONUNBUFFERED"] = "1"
    for name, value in (framework or {}).items():
        if name not in given:
            environ[name] = value
    return environ


def venv_of(python: Path | str) -> Path | None:
    """The virtualenv whose interpreter ``python`` (``ENV/bin/python``) is; None when it is
    none's (a system or a bare interpreter)."""
    from pathlib import Path

    prefix = Path(python).parent.parent
    return prefix if (prefix / "pyvenv.cfg").is_file() else None


def wheel_library_dirs(env_dir: Path | str) -> list[str]:
    """The ``lib`` folders of the NVIDIA wheels (``nvidia-*-cu11``/``-cu12``) installed in a
    virtualenv: ``site-packages/nvidia/<component>/lib``, sorted. Recent framework releases
    find them by themselves; older ones only through the loader's path."""
    if os.name == "nt":
        return []
    from pathlib import Path

    return sorted(str(p) for p in Path(env_dir).glob("lib/python3*/site-packages/nvidia/*/lib")
                  if p.is_dir())
