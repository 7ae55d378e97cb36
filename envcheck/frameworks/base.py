"""What a framework module declares, and the build facts it reads from installed metadata."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from packaging.version import InvalidVersion, Version

from ..errors import UsageError
from .facts import Facts

VERSION_EXAMPLES = {
    "driver version": "as nvidia-smi prints it, e.g. 550.54.15",
    "CUDA version": "e.g. 12.4 or 12.8.1",
    "compute capability": "e.g. 8.6 (nvidia-smi --query-gpu=compute_cap --format=csv)",
    "Python version": "e.g. 3.11",
}


def parse_version(text: str, what: str) -> Version:
    """``text`` as a PEP 440 version; a UsageError naming ``what`` and the input if it isn't."""
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        example = VERSION_EXAMPLES.get(what, "e.g. 2.15.1")
        raise UsageError(f"bad {what} {text!r}", f"give a version {example}") from None


def minor(version: Version) -> tuple[int, int]:
    return version.major, version.minor


def major_minor(text: str) -> str:
    """ "12.5.1" -> "12.5"."""
    version = Version(text)
    return f"{version.major}.{version.minor}"


@dataclass(frozen=True)
class Conflict:
    """A package installed next to a build that the build's own requirements refuse (JAX's
    CUDA plugin pins the cuDNN it loads): the build fails on a GPU whatever the host."""

    reason: str
    fix: str


@dataclass(frozen=True)
class Build:
    """What a framework wheel was built with. ``cuda`` None = no CUDA (``gpu_capable`` False);
    ``archs`` None = its compiled architectures are not known; ``min_cc``: the framework's
    own lowest compute capability for this build, where it is above its CUDA's (JAX on CUDA
    12: 5.2); ``notes``: the facts it was judged by, where they are not its release row's."""

    framework: str  # a registry name: "tensorflow" | "torch" | ...
    distribution: str
    version: str
    cuda: str | None
    cudnn: str | None
    python_min: str | None
    python_max: str | None
    archs: tuple[str, ...] | None
    gpu_capable: bool
    notes: tuple[str, ...] = ()
    min_cc: str | None = None
    conflicts: tuple[Conflict, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.distribution} {self.version}"


def row_build(framework: str, dist: str, shown: str, row: Mapping[str, Any],
              notes: Sequence[str] = (), min_cc: str | None = None) -> Build:
    """A GPU build from one release row of a framework's compat table."""
    python = row["python"] or {}
    archs = tuple(row["archs"]) if row["archs"] is not None else None
    return Build(framework, dist, shown, row["cuda"], row["cudnn"], python.get("min"),
                 python.get("max"), archs, True, tuple(notes), min_cc)


def bare_build(framework: str, dist: str, shown: str) -> Build:
    """A release the tables lack, before its family's rules say what it was built with."""
    return Build(framework, dist, shown, None, None, None, None, None, False)


def cpu_only(build: Build, why: str) -> Build:
    return replace(build, cuda=None, cudnn=None, archs=None, gpu_capable=False,
                   notes=build.notes + (why,))


@dataclass(frozen=True)
class GpuOption:
    """One GPU build of a release (``Framework.gpu_options``)."""

    dist: str  # the distribution its build is read as (``frameworks.framework_build``)
    version: str  # and the version, a local tag included ("2.5.1+cu118")
    requirement: str  # what installs it ("torch==2.5.1")
    index: str | None = None  # where from (None: PyPI)


@dataclass(frozen=True)
class GpuBlock:
    """A build that can't use a GPU on an OS whatever the driver and GPU, and what to do."""

    why: str
    fixes: tuple[str, ...]


def per_gpu_batch(global_batch: int, gpus: int) -> int:
    """The per-GPU batch of a data-parallel job; a batch that doesn't split evenly is an error.

    Replicas get equal shares; an uneven split changes the per-GPU batch the learning rate was
    tuned for, so two trainings on different GPU counts are only comparable at the same per-GPU
    batch. No GPU: the CPU is one replica.
    """
    if global_batch < 1:
        raise UsageError(f"bad global batch {global_batch}", "give a positive integer")
    replicas = max(gpus, 1)
    if global_batch % replicas == 0:
        return global_batch // replicas
    share = global_batch / replicas
    lower = global_batch // replicas * replicas
    options = [f"{size} ({size // replicas} per GPU)" for size in (lower, lower + replicas) if size > 0]
    raise UsageError(f"global batch {global_batch} is not a multiple of {replicas} GPUs "
                     f"({share:g} per GPU): use {' or '.join(options)}",
                     "compare trainings at the same per-GPU batch")


class SplitBatch:
    """One process splits a global batch over its devices (MirroredStrategy, Keras's
    DataParallel): ``--batch-size`` is the global batch, a multiple of the GPU count."""

    process_per_device = False
    words = "global batch (a multiple of the GPU count)"
    cpu_replicas = ("logical CPU devices", "the batch is split")  # (who, how), for a CPU check

    def default_processes(self, gpus: int, gpu_build: bool) -> int | None:
        """Processes to start without ``--nproc``: None, the command alone."""
        return None

    def replicas(self, processes: int | None, gpus: int) -> int:
        return gpus

    def sizes(self, batch: int, replicas: int, strategy: str) -> tuple[int, int, str | None]:
        """(global batch, per-GPU batch, a note) for ``--batch-size batch``."""
        return batch, per_gpu_batch(batch, replicas), None


class PerDeviceBatch(SplitBatch):
    """One process per device, each training on its own whole batch (DistributedDataParallel):
    ``--batch-size`` is each process's batch, the global batch that times the processes."""

    process_per_device = True
    words = "per-GPU batch"
    cpu_replicas = ("the CPU processes", "each process trains on its own batch, gradients are averaged")

    def default_processes(self, gpus: int, gpu_build: bool) -> int | None:
        """One per selected GPU of a GPU build, when there are several."""
        return gpus if gpus > 1 and gpu_build else None

    def replicas(self, processes: int | None, gpus: int) -> int:
        return processes or 1  # the command alone is one

    def sizes(self, batch: int, replicas: int, strategy: str) -> tuple[int, int, str | None]:
        replicas = max(replicas, 1)
        note = (f"--batch-size {batch} is each process's batch under {strategy} (one "
                f"process per GPU): global batch {batch * replicas} over {replicas}") if replicas > 1 else None
        return batch * replicas, batch, note


SPLIT = SplitBatch()
PER_DEVICE = PerDeviceBatch()


@dataclass(frozen=True)
class RunVariable:
    """A variable `run` and a Jupyter kernel of the env get, unless the caller set it.
    ``since``: the first release that reads it (None: every release; where the installed
    version is not known, only a variable without ``since`` is set); ``platforms``: the
    ``sys.platform`` prefixes where it applies (empty: everywhere)."""

    name: str
    value: str
    since: str | None = None
    platforms: tuple[str, ...] = ()

    def applies(self, version: Version | None, platform: str) -> bool:
        if self.platforms and not platform.startswith(self.platforms):
            return False
        if self.since is None:
            return True
        return version is not None and minor(version) >= minor(Version(self.since))


@dataclass(frozen=True)
class Framework:
    """Everything envcheck knows about one framework. Nothing outside ``frameworks/`` names a
    framework's distributions: it asks the registry for a Framework and reads these."""

    name: str  # registry key, the value of --framework
    title: str
    distributions: tuple[str, ...]  # canonical names; the first is the one to suggest installing
    table: str | None  # key of its release table in compat.json (None: no build facts there)
    # (dist, version, shown, local, the env's other packages {canonical name: version})
    read_build: Callable[[str, Version, str, str | None, Mapping[str, str]], Build | None]
    # The data-parallel strategy the multi-device smoke uses: its name, then how, after a comma.
    multi_device: str
    # How the framework spreads a batch over devices: SPLIT or PER_DEVICE (``--batch-size``,
    # the processes `run` starts, what a multi-device check on CPUs shows).
    batch_rule: SplitBatch
    order: int  # the registry's order: where several frameworks are installed, the lower wins
    # What `envcheck run` and a Jupyter kernel of the env get (``run_environ``, handed to
    # ``child_env.child_environ``): every variable the framework may be given, declared.
    run_variables: tuple[RunVariable, ...] = ()
    # Defaults for the smoke runner, whatever the env's framework (the runner may import this one).
    smoke_environ: Mapping[str, str] = field(default_factory=dict, hash=False)
    # Variables the smoke runner gets pointed at a fresh scratch folder, so the framework
    # writes there, not into the user's home (Keras's keras.json into $KERAS_HOME).
    smoke_scratch: tuple[str, ...] = ()
    example: str | None = None  # a release, as ``compat --framework`` takes it
    cpu_presets: tuple[str, ...] = ()  # presets to suggest, best first
    gpu_presets: tuple[str, ...] = ()
    gpu_block: Callable[[Build, str], GpuBlock | None] = lambda build, os: None
    # A JSON file of its own (``facts.json`` in its folder: ``folder_facts(__file__)``) holding
    # its release table, in place of compat.json's ``table``: a new framework's facts live in
    # its folder, not in envcheck/data.
    facts_file: str | None = None
    aliases: tuple[str, ...] = ()  # other names it goes by, which ``--framework`` accepts too
    # Which releases the table lacks its rules still judge (by their family), for the answer
    # to one they can't: "torch releases with a +cuXYZ or +cpu tag".
    beyond_table: str | None = None
    # The GPU builds of a release it can be installed as, best first: (the distribution and
    # version its build is read as, the requirement that installs it, the index it comes from,
    # None: PyPI). What to install when an env's build can't use this host's GPUs.
    gpu_options: Callable[[Version], list[GpuOption]] = lambda version: []

    @property
    def strategy(self) -> str:
        """The multi-device strategy's name alone ("DistributedDataParallel")."""
        return self.multi_device.split(",")[0]

    def run_environ(self, version: Version | None) -> dict[str, str]:
        """The run variables for the installed release ``version`` (None: not known) here."""
        return {v.name: v.value for v in self.run_variables if v.applies(version, sys.platform)}

    def facts(self) -> Facts | None:
        """Its build table (``releases`` and what its ``read_build`` reads): its own
        ``facts_file`` if it has one, else compat.json's ``table``; None: no build facts.
        Read through ``facts.Facts``, which records each fact read (a test names those
        no rule reads)."""
        from ..data import compat_facts

        if self.facts_file is not None:
            return Facts(_json_file(self.facts_file), (self.name,))
        return Facts(compat_facts()[self.table], (self.name,)) if self.table is not None else None

    def releases(self) -> list[str]:
        """Release keys ("2.15") of its compat table, newest first."""
        facts = self.facts()
        return [] if facts is None else sorted(facts["releases"], key=Version, reverse=True)


def folder_facts(module_file: str) -> str:
    """The ``facts.json`` beside a framework's ``__init__.py`` (``module_file``)."""
    return str(Path(module_file).with_name("facts.json"))


@lru_cache(maxsize=None)
def _json_file(path: str) -> dict[str, Any]:
    """A facts file, parsed once per process."""
    return json.loads(Path(path).read_text("utf-8"))

