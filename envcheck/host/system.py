"""The machine around the GPUs, as a bug thread asks for it (what PyTorch's
``python -m torch.utils.collect_env`` prints): CPU, OS and C library, compilers, the host's
own CUDA toolkit, runtime and cuDNN, and the conda env envcheck runs in, if any.

Every command runs with a short deadline and its first line of output is kept; a tool that
is absent is "not found". Paths are shown with the user's name taken out (``redact_path``):
a report is pasted in public.
"""
from __future__ import annotations

import glob
import json
import os
import platform
import re
import shutil

from .. import processes
from ..child_env import clean_environ

TIMEOUT = 5.0  # seconds a compiler's --version may take
NOT_FOUND = "not found"
# where a host's CUDA libraries are, when the loader's cache doesn't say (the toolkit's default)
CUDA_DIRS = ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/lib/x86_64-linux-gnu",
             "/usr/lib64", "/usr/lib/aarch64-linux-gnu")
_CONDA_NAMES = re.compile(r"^(cuda|cudnn|nccl|libcu|libnccl|nvidia|cudatoolkit|magma|mkl|numpy)")


def redact_path(text: str) -> str:
    """``text`` with the home folder shown as ``~`` and any other user's folder as ``/home/…``."""
    home = os.path.expanduser("~")
    if home and home != "/":
        text = text.replace(home, "~")
    return re.sub(r"/(home|Users)/[^/\s]+", r"/\1/…", text)


def system_facts() -> dict[str, str]:
    """Each fact as one line of text (see the module docstring)."""
    facts = {"cpu": _cpu(), "os": _os(), "glibc": _glibc()}
    for name, cmd in (("gcc", ["gcc", "--version"]), ("clang", ["clang", "--version"]),
                      ("cmake", ["cmake", "--version"])):
        facts[name] = _first_line(cmd)
    facts["cuda_toolkit"] = _nvcc()
    facts["cuda_home"] = redact_path(os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "unset")
    facts["cuda_runtime"] = _library_versions("libcudart.so.")
    facts["cudnn"] = _library_versions("libcudnn.so.")
    facts["conda"] = _conda()
    return facts


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            names = [line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")]
    except OSError:
        names = []
    model = names[0] if names else (platform.processor() or platform.machine() or "unknown")
    return f"{model} ({os.cpu_count() or '?'} logical CPUs)"


def _os() -> str:
    try:
        distro = platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except OSError:
        distro = ""
    kernel = f"{platform.system()} {platform.release()} {platform.machine()}"
    return f"{distro} ({kernel})" if distro else kernel


def _glibc() -> str:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or NOT_FOUND
    except (ValueError, OSError, AttributeError):
        libc, version = platform.libc_ver()
        return f"{libc} {version}".strip() or NOT_FOUND


def _first_line(cmd: list[str]) -> str:
    if shutil.which(cmd[0]) is None:
        return NOT_FOUND
    try:
        done = processes.run(cmd, timeout=TIMEOUT, env=clean_environ())
    except OSError:
        return NOT_FOUND
    lines = [ln.strip() for ln in (done.stdout or done.stderr).splitlines() if ln.strip()]
    return redact_path(lines[0]) if lines and not done.timed_out else NOT_FOUND


def _nvcc() -> str:
    found = shutil.which("nvcc") or next((p for p in ("/usr/local/cuda/bin/nvcc",) if os.path.isfile(p)), None)
    if found is None:
        return NOT_FOUND
    try:
        done = processes.run([found, "--version"], timeout=TIMEOUT, env=clean_environ())
    except OSError:
        return NOT_FOUND
    release = re.search(r"release ([\d.]+), V([\d.]+)", done.stdout)
    where = redact_path(found)
    return f"{release[2]} ({where})" if release else f"{NOT_FOUND} ({where} answered no version)"


def _library_versions(stem: str) -> str:
    """The versions of ``stem`` (``libcudart.so.``) the host has, from their file names: in
    the loader's cache, else the toolkit's usual folders."""
    names = set()
    try:
        done = processes.run(["ldconfig", "-p"], timeout=TIMEOUT, env=clean_environ())
        names |= {m for m in re.findall(r"(" + re.escape(stem) + r"[\d.]+)", done.stdout)}
    except OSError:
        pass
    for folder in CUDA_DIRS:
        names |= {os.path.basename(p) for p in glob.glob(os.path.join(folder, stem + "*"))}
    versions = sorted({n[len(stem):] for n in names if n[len(stem):]}, key=_numbers)
    return ", ".join(versions) if versions else NOT_FOUND


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def _conda() -> str:
    """The conda env envcheck runs in (``CONDA_PREFIX``): its CUDA-related packages and the
    frameworks', from its ``conda-meta`` records; "none" outside one."""
    from .. import frameworks

    prefix = os.environ.get("CONDA_PREFIX")
    if not prefix or not os.path.isdir(os.path.join(prefix, "conda-meta")):
        return "none"
    wanted = set(frameworks.distributions())
    found = []
    for path in sorted(glob.glob(os.path.join(prefix, "conda-meta", "*.json"))):
        try:
            with open(path, encoding="utf-8") as fh:
                record = json.load(fh)
            name, version = str(record["name"]), str(record["version"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if name in wanted or _CONDA_NAMES.match(name):
            found.append(f"{name} {version}")
    return f"{redact_path(prefix)}: " + (", ".join(found) or "no CUDA or framework package")
