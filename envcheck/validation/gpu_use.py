"""Why an env's framework can't use this host's GPUs, for any env (one envcheck made or one
it adopted), each state with its evidence and a fix that runs as written, in the env's own
installer's terms (``EnvInfo``: ``envcheck env add`` for envcheck's envs; pip, ``uv add``,
conda for an adopted one).

- ``cpu_build``: a CPU-only build on a host with usable GPUs ignores them (degraded, with the
  command that installs a GPU build of the same release that trains here: the first of
  ``Framework.gpu_options`` the compat rules let use these GPUs, with the index it comes from);
- ``arch_problem``: the GPUs' compute capability against the architectures the build
  itself says it carries (read in the env's interpreter by the smoke runner: PyTorch's
  ``_cuda_getArchFlags``, TensorFlow's build info), not the table's;
- ``library_problems``: what the loader would take instead of the env's own CUDA libraries
  (an older one of the same name in ``LD_LIBRARY_PATH`` shadowing an ``nvidia-*`` wheel's), a
  conda env's ``cudatoolkit``/``cuda-version``/``cudnn`` older than the build needs, and the
  host's ``nvcc`` against the build's CUDA where the env builds CUDA extensions.
"""
from __future__ import annotations

import os
import re
import shutil
from typing import TYPE_CHECKING

from .. import frameworks

if TYPE_CHECKING:
    from ..envs.env_info import EnvInfo
    from ..frameworks import Build
    from ..host.probe import HostState

# Packages that compile CUDA code against the host's toolkit when they are built or run.
EXTENSION_BUILDERS = ("ninja", "deepspeed", "flash-attn", "apex", "xformers", "mamba-ssm", "causal-conv1d")
_SONAME = re.compile(r"(lib[\w+-]+\.so\.\d+)(\.[\d.]+)?$")


def gpu_build_fix(info: EnvInfo, build: Build, host: HostState) -> str | None:
    """The command that gives env ``info`` a GPU build of its framework's release that
    trains on ``host``'s GPUs; None when no build of the release the tables know does."""
    from packaging.version import InvalidVersion, Version

    from ..host.compat import HostProfile, judge

    try:
        version = Version(build.version)
    except InvalidVersion:
        return None
    profile = HostProfile.from_host(host, python=(info.manifest.get("python") or {}).get("version"))
    for option in frameworks.get(build.framework).gpu_options(version):
        candidate = frameworks.framework_build(option.dist, option.version)
        if candidate is None or not candidate.gpu_capable:
            continue
        verdict = judge(candidate, profile)
        if verdict.verdict != "fail" and verdict.uses_gpu:
            return _replace(info, build.distribution, option.requirement, option.index)
    return None


def _replace(info: EnvInfo, installed: str, requirement: str, index: str | None) -> str:
    """The env's installer's commands that take ``installed`` out and put ``requirement`` in."""
    import shlex

    adopted = info.adopted
    wanted = shlex.quote(requirement)
    if adopted is None:  # an env of envcheck's is made from a preset: the GPU preset this host runs
        return (f"envcheck select --framework {frameworks.of_distribution(installed).name} --require-gpu "
                f"(names the GPU preset this host can run, and how to create it)")
    python = shlex.quote(str(info.python))
    if adopted.get("kind") == "uv-project":
        where = shlex.quote(adopted.get("project") or str(info.path))
        return (f"cd {where} && uv remove {installed} && uv add {wanted}"
                + (f" --index {index}" if index else ""))
    if "pip" in info.packages:
        return (f"{python} -m pip uninstall -y {installed} && {python} -m pip install {wanted}"
                + (f" --index-url {index}" if index else ""))
    return (f"uv pip uninstall --python {python} {installed} && uv pip install --python {python} {wanted}"
            + (f" --index-url {index}" if index else ""))


def cpu_build(info: EnvInfo, build: Build, host: HostState) -> tuple[str, str] | None:
    """(why, fix) when a CPU-only build sits on a host with usable GPUs: it trains, ignoring them."""
    gpus = host.usable_gpus
    if build.gpu_capable or not gpus:
        return None
    why = next((n for n in build.notes if "CPU" in n or "cpu" in n), "a CPU-only build")
    fix = gpu_build_fix(info, build, host) or (
        f"install a GPU build of {build.framework}: envcheck compat --framework {build.distribution}=={build.version} "
        "says which driver and GPUs one needs")
    return (f"{build.label} is CPU-only ({why}): it will ignore this host's {len(gpus)} GPU(s)", fix)


def measured_archs(facts: dict) -> tuple[str, ...] | None:
    """The architectures a build says it carries, as the smoke runner read them."""
    for key in ("cuda_arch_flags", "cuda_compute_capabilities"):
        value = facts.get(key)
        if isinstance(value, (list, tuple)) and value and all(isinstance(a, str) for a in value):
            return tuple(value)
    return None


def arch_problem(build: Build, facts: dict, host: HostState) -> str | None:
    """Why the GPUs can't run the build's kernels, from the architectures the build itself
    carries (``measured_archs``); None when they can or nothing was read."""
    from dataclasses import replace

    from ..host.compat import HostProfile, judge

    archs = measured_archs(facts)
    if archs is None or not host.usable_gpus:
        return None
    verdict = judge(replace(build, archs=archs), HostProfile.from_host(host))
    about_cc = [r for r in verdict.reasons if "compute capability" in r]
    if verdict.verdict == "fail" and about_cc:
        return f"{about_cc[0]} (read from the build itself: {' '.join(archs)})"
    return None


def library_problems(info: EnvInfo, build: Build | None) -> list[tuple[str, str, str]]:
    """[(status, what, fix)] of what the loader would take in place of the env's CUDA (see the
    module docstring); empty when nothing stands in the way."""
    if build is None or not build.gpu_capable:
        return []
    found = _shadowed(info)
    conda = _conda_too_old(info, build)
    if conda:
        found.append(conda)
    nvcc = _nvcc_mismatch(info, build)
    if nvcc:
        found.append(nvcc)
    return found


def _shadowed(info: EnvInfo) -> list[tuple[str, str, str]]:
    from ..envs.metadata import site_package_dirs

    own: dict[str, str] = {}  # soname -> the wheel's file
    for site in site_package_dirs(info.path):
        nvidia = os.path.join(site, "nvidia")
        for lib in sorted(_glob_libs(nvidia)):
            match = _SONAME.search(os.path.basename(lib))
            if match:
                own.setdefault(match[1], lib)
    problems = []
    for folder in (p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p):
        for soname, mine in own.items():
            theirs = os.path.join(folder, soname)
            if os.path.exists(theirs) and os.path.realpath(theirs) != os.path.realpath(mine):
                problems.append(("warn", f"LD_LIBRARY_PATH's {theirs} ({os.path.basename(os.path.realpath(theirs))}) "
                                 f"is loaded before the env's own {soname} ({mine})",
                                 f"take {folder} out of LD_LIBRARY_PATH when running in this env"))
    return problems


def _glob_libs(folder: str) -> list[str]:
    import glob

    return glob.glob(os.path.join(folder, "*", "lib", "lib*.so.*"))


def _conda_too_old(info: EnvInfo, build: Build) -> tuple[str, str, str] | None:
    from packaging.version import InvalidVersion, Version

    records = (info.adopted or {}).get("conda") or {}
    toolkit = records.get("cuda-version") or records.get("cudatoolkit") or records.get("cuda-runtime") \
        or records.get("cuda-cudart")
    try:
        if toolkit and build.cuda and Version(toolkit).release[:2] < Version(build.cuda).release[:2]:
            return ("fail", f"the conda env's CUDA {toolkit} is older than the CUDA {build.cuda} {build.label} was "
                    "built with", info.add_command(f"cuda-version={'.'.join(build.cuda.split('.')[:2])}"))
        cudnn = records.get("cudnn")
        if cudnn and build.cudnn and Version(cudnn).release[:1] == Version(build.cudnn).release[:1] \
                and Version(cudnn).release[:2] < Version(build.cudnn).release[:2]:
            return ("fail", f"the conda env's cuDNN {cudnn} is older than the cuDNN {build.cudnn} {build.label} was "
                    "built with", info.add_command(f"cudnn>={'.'.join(build.cudnn.split('.')[:2])}"))
    except InvalidVersion:
        return None
    return None


def _nvcc_mismatch(info: EnvInfo, build: Build) -> tuple[str, str, str] | None:
    """The host's nvcc (PATH, else CUDA_HOME) against the build's CUDA, where the env builds
    CUDA extensions (torch's rule: the same CUDA major)."""
    if build.cuda is None or not any(n in info.packages for n in EXTENSION_BUILDERS):
        return None
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    nvcc = shutil.which("nvcc") or (os.path.join(home, "bin", "nvcc") if home else None)
    if not nvcc or not os.path.exists(nvcc):
        return None
    from .. import processes
    from ..child_env import clean_environ

    try:
        done = processes.run([nvcc, "--version"], timeout=10.0, env=clean_environ())
    except OSError:
        return None
    release = re.search(r"release (\d+)\.(\d+)", done.stdout)
    if release is None or release[1] == build.cuda.split(".")[0]:
        return None
    return ("warn", f"the host's nvcc {release[1]}.{release[2]} ({nvcc}) is not CUDA {build.cuda.split('.')[0]}.x, "
            f"which {build.label} was built with: CUDA extensions built here won't load",
            f"point CUDA_HOME at a CUDA {'.'.join(build.cuda.split('.')[:2])} toolkit before building extensions")
