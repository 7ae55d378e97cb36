"""The NVIDIA device nodes a CUDA process opens: ``/dev/nvidiactl``, ``/dev/nvidia-uvm`` (CUDA's
unified memory: without it every CUDA call fails although NVML and ``nvidia-smi`` answer) and
``/dev/nvidia<minor>`` for each GPU (``gpu_minors``: the GPUs the driver made nodes for, which
level 1 judges where NVML can't list them).

``nvidiactl`` and ``nvidia-uvm`` are opened and closed (cheap: no GPU is initialised), which
also catches a container's device cgroup refusing them. A GPU's own node is checked for read
and write permission only: opening it initialises the GPU when persistence mode is off, which
takes seconds, and NVML has just opened it to answer about that GPU anyway.

Test seam: ``ENVCHECK_TEST_DEV_DIR`` names a folder read instead of ``/dev``, with the same
node names (``nvidia<minor>``, ``nvidiactl``, ``nvidia-uvm``); it is not a user option.
"""
from __future__ import annotations

import os
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (records.py says why)
if TYPE_CHECKING:
    from typing import Mapping

DEV_DIR_SEAM = "ENVCHECK_TEST_DEV_DIR"
CONTROL, UVM = "nvidiactl", "nvidia-uvm"


def dev_dir(environ: Mapping[str, str]) -> str:
    return environ.get(DEV_DIR_SEAM) or "/dev"


def node_problem(folder: str, name: str, *, open_it: bool) -> str | None:
    """None when ``folder/name`` exists and this user may open it for reading and writing;
    else what is wrong, in words."""
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return "missing"
    if not open_it:
        if os.access(path, os.R_OK | os.W_OK):
            return None
        return "not readable and writable by this user"
    try:
        os.close(os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC))
    except OSError as exc:
        return f"cannot be opened by this user: {exc.strerror or exc}"
    return None


def gpu_minors(folder: str) -> list[int]:
    """The minor numbers of the GPUs' own nodes (``nvidia<minor>``) in ``folder``, in order."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(int(n[6:]) for n in names
                  if n.startswith("nvidia") and n[6:].isascii() and n[6:].isdigit())
