"""`envcheck run`: start a command inside an env, on chosen GPUs, with the batch-size rule.

Everything is checked here, before anything starts, and returned as a :class:`Launch`: the
argv and the exact environment. The CLI then *replaces itself* with the command
(``os.execve``), so the command's exit status is envcheck's, a signal that kills it kills
"envcheck run" (a shell sees 128+signal), and Ctrl-C goes straight to it.

GPU indices are NVML's (what ``nvidia-smi`` and ``envcheck gpu`` show). NVML numbers GPUs by
PCI bus id, so the command gets ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and then CUDA's numbering
is the same as NVML's. A GPU hidden by the caller's own ``CUDA_VISIBLE_DEVICES`` (a batch
scheduler's allocation, say) is not offered: ``all`` means every GPU usable from here.

What the command gets (``child_env.child_environ``, purpose "run", which decides it for a
Jupyter kernel of the env too):

- the env's interpreter folder first on ``PATH``, ``VIRTUAL_ENV``; none of the variables
  ``child_env.STRIPPED`` names (``PYTHONHOME``, ``PYTHONPATH``, ...)
- ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and ``CUDA_VISIBLE_DEVICES`` (``--gpus none``: empty,
  which hides every GPU; ``all`` on a host where NVML shows no usable GPU: left as it was)
- the variables the env's framework asks for, unless the caller set them (``frameworks``'
  ``run_environ``: memory growth, allocator settings)
- ``LD_LIBRARY_PATH`` led by the library folders of the env's CUDA wheels (``nvidia-*``), so a
  framework release that doesn't look for them itself finds them
- with ``--batch-size N``: ``ENVCHECK_GLOBAL_BATCH=N`` and ``ENVCHECK_PER_GPU_BATCH`` (N divided
  by the GPU count; with no GPU the CPU is the one replica, so it equals N)
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import EnvcheckError, UsageError

if TYPE_CHECKING:
    from packaging.version import Version

    from ..envs.env_info import EnvInfo
    from ..frameworks import Framework
    from ..host.probe import HostState
    from ..validation.devices import Selection
    from .session import Session


class CommandNotFound(EnvcheckError):
    """The command to run does not exist: 127, as shells, ``env`` and ``timeout`` answer."""

    exit_code = 127


class CommandNotExecutable(EnvcheckError):
    """The command exists but can't be executed: 126, as shells answer."""

    exit_code = 126


@dataclass(frozen=True)
class Launch:
    env: str
    env_path: Path
    argv: list[str]
    executable: str  # argv[0] resolved on the command's PATH
    environ: dict[str, str]
    gpus: list[int] | None  # NVML indices; None: CUDA_VISIBLE_DEVICES left as the caller had it
    global_batch: int | None = None
    per_gpu_batch: int | None = None
    notes: list[str] = field(default_factory=list)  # e.g. why the env was chosen, no GPU here
    nproc: int | None = None  # ranks to start (``usecases.ranks``); None: the command alone, exec'd


def choose_gpus(selection: Selection, host: HostState | None) -> tuple[list[int] | None, list[str]]:
    """The NVML indices to expose for ``selection`` (``validation.devices.parse`` of ``--gpus``;
    None: leave CUDA_VISIBLE_DEVICES alone) and notes."""
    from ..validation.devices import resolve, usable_gpus

    if selection.word == "none":
        return [], []
    if selection.word == "all":
        usable = [d.nvml_index for d in usable_gpus(host)]
        if usable:
            return usable, []
        message, _ = host.no_gpu_reason()
        return None, [f"no usable GPU ({message}); the command runs on the CPU"]
    return [d.nvml_index for d in resolve(selection, host).devices], []


def framework_environ(info: EnvInfo) -> dict[str, str]:
    """The run variables of env ``info``'s framework for its installed version
    (``Framework.run_environ``), as ``child_env.child_environ`` takes them for a run or a
    kernel; none when the env has no known framework."""
    framework = _framework(info)
    return {} if framework is None else dict(framework.run_environ(_installed_version(info, framework)))


def command_environ(base: dict[str, str], info: EnvInfo, gpus: list[int] | None,
                    global_batch: int | None = None, per_gpu: int | None = None) -> dict[str, str]:
    """The command's environment: ``child_env.child_environ`` for a run in env ``info``, and
    the batch sizes."""
    from ..child_env import child_environ

    batch = {} if global_batch is None else {"ENVCHECK_GLOBAL_BATCH": str(global_batch),
                                             "ENVCHECK_PER_GPU_BATCH": str(per_gpu)}
    return child_environ(info.path, gpus=gpus, framework=framework_environ(info), purpose="run",
                         base=base, extra=batch)


def _resolve_command(argv: list[str], path: str, env: str, add: str) -> str:
    found = shutil.which(argv[0], path=path)
    if found:
        return found
    if os.sep in argv[0] and os.path.exists(argv[0]):
        raise CommandNotExecutable(f"{argv[0]}: not executable", f"chmod +x {argv[0]}")
    raise CommandNotFound(f"{argv[0]}: command not found (looked in env {env}'s bin folder, then PATH)",
                          f"check its spelling, or install the package that has it: {add}")


def processes_to_start(nproc: int | None, chosen: list[int] | None, framework: Framework | None,
                       gpu_build: bool = True) -> tuple[int | None, str | None]:
    """(ranks, a note): ``--nproc`` as given; without it, one rank per selected GPU for a
    GPU build of a framework whose data parallelism is a process per device when there are
    several, else the command alone (None; a strategy that splits one global batch runs in one
    process, and a CPU-only build has no GPU to give each rank): the framework's batch rule."""
    gpus = len(chosen or [])
    if nproc is not None:
        from .ranks import rank_limit

        if nproc < 1:
            raise UsageError(f"bad --nproc {nproc}", "give a positive number of processes")
        limit, counted = rank_limit(gpus)
        if nproc > limit:
            raise UsageError(f"--nproc {nproc} is more than the {limit} processes a job may start "
                             f"here ({counted})", f"give at most {limit}")
        return nproc, None
    ranks = framework.batch_rule.default_processes(gpus, gpu_build) if framework else None
    if ranks is None:
        return None, None
    return ranks, (f"{ranks} processes, one per GPU, as a distributed launcher starts them for "
                   f"{framework.strategy} (--nproc 1 for one)")


def prepare(session: Session, env_name: str, command: list[str], *, gpus: Selection | str = "all",
            batch_size: int | None = None, base_environ: dict[str, str] | None = None,
            nproc: int | None = None) -> Launch:
    """Check everything `envcheck run` needs and return what to execute, or raise.

    ``gpus``: ``validation.devices.parse`` of ``--gpus`` (its Selection, or its text; default
    all). ``base_environ`` defaults to os.environ. ``nproc``: ranks to start (see
    ``processes_to_start``).
    """
    from ..validation.devices import GPUS, Selection, parse

    if not command:
        raise UsageError("no command given", "envcheck run [OPTIONS] -- CMD [ARGS]...")
    selection = gpus if isinstance(gpus, Selection) else parse(gpus, GPUS)
    host = session.host if (selection.word != "none" or env_name == "auto") else None
    chosen, notes = choose_gpus(selection, host)
    asked_gpus = bool(selection.devices)
    resolved = session.resolve_env(env_name, ready=True, require_gpu=asked_gpus)
    info = resolved.info
    if asked_gpus:
        _check_gpu_env(info, host, selection.text)
    framework = _framework(info)
    gpu_build = True  # only read where it decides the default: a per-device framework, no --nproc
    if nproc is None and framework is not None and framework.batch_rule.process_per_device:
        from .. import frameworks

        build = frameworks.build_from_packages(info.packages, framework.name)
        gpu_build = bool(build and build.gpu_capable)
    ranks, note = processes_to_start(nproc, chosen, framework, gpu_build)
    notes += [note] if note else []
    global_batch, per_gpu = batch_size, None
    if batch_size is not None:
        from ..frameworks.base import SPLIT

        rule = framework.batch_rule if framework else SPLIT  # no known framework: split over GPUs
        replicas = rule.replicas(ranks, len(chosen or []))
        global_batch, per_gpu, note = rule.sizes(batch_size, replicas,
                                                 framework.strategy if framework else "")
        notes += [note] if note else []
    environ = command_environ(dict(os.environ if base_environ is None else base_environ), info,
                              chosen, global_batch, per_gpu)
    executable = _resolve_command(command, environ["PATH"], info.name, info.add_command("PACKAGE"))
    if ranks == 1:  # one rank: still the variables a distributed script reads, and exec
        from .ranks import free_port, rank_variables

        environ.update(rank_variables(0, 1, free_port()))
    return Launch(info.name, info.path, list(command), executable, environ, chosen, global_batch, per_gpu,
                  resolved.notes + notes, ranks if ranks and ranks > 1 else None)


def _check_gpu_env(info: EnvInfo, host: HostState | None, asked: str) -> None:
    """GPUs asked for by number with an env that can't use them: a UsageError, not a silent
    CPU run."""
    from .. import frameworks
    from ..host.compat import HostProfile, judge

    build = frameworks.build_from_packages(info.packages)
    if build is None or not build.gpu_capable:
        why = f"its framework is a CPU-only build ({build.label})" if build else "it has no known framework"
    else:
        python = info.manifest.get("python", {}).get("version")
        verdict = judge(build, HostProfile.from_host(host, python=python))
        if verdict.uses_gpu:
            return
        why = verdict.reasons[0] if verdict.reasons else "its build can't use this host's GPUs"
    raise UsageError(f"--gpus {asked}: env {info.name} can't use GPUs: {why}",
                     "run in a GPU env (see `envcheck select --require-gpu`) or pass --gpus none")


def _installed_version(info: EnvInfo, framework: Framework) -> Version | None:
    """The installed version of the framework's distribution in the env, parsed; None if unknown."""
    from packaging.version import InvalidVersion, Version

    from ..distributions import canonical_name

    versions = {canonical_name(name): version for name, version in info.packages.items()}
    for dist in framework.distributions:
        if dist in versions:
            try:
                return Version(versions[dist])
            except InvalidVersion:
                return None
    return None


def _framework(info: EnvInfo) -> Framework | None:
    """The env's framework (the registry's first among those installed), or None."""
    from .. import frameworks

    found = frameworks.detect(info.packages)
    return frameworks.get(found[0]) if found else None
