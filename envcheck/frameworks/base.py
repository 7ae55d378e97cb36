"""What a framework module declares, and the build facts it reads from installed metadata."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from packaging.version import InvalidVersion, Version

from ..errors import UsageError

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
class Build:
    """What a framework wheel was built with. ``cuda`` None = no CUDA (``gpu_capable`` False);
    ``archs`` None = its compiled architectures are not known."""

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

    @property
    def label(self) -> str:
        return f"{self.distribution} {self.version}"


def row_build(framework: str, dist: str, shown: str, row: dict[str, Any],
              notes: Sequence[str] = ()) -> Build:
    """A GPU build from one release row of a framework's compat table."""
    python = row["python"] or {}
    archs = tuple(row["archs"]) if row["archs"] is not None else None
    return Build(framework, dist, shown, row["cuda"], row["cudnn"], python.get("min"),
                 python.get("max"), archs, True, tuple(notes))


def cpu_only(build: Build, why: str) -> Build:
    return replace(build, cuda=None, cudnn=None, archs=None, gpu_capable=False,
                   notes=build.notes + (why,))


@dataclass(frozen=True)
class GpuBlock:
    """A build that can't use a GPU on an OS whatever the driver and GPU, and what to do."""

    why: str
    fixes: tuple[str, ...]


@dataclass(frozen=True)
class Framework:
    """Everything envcheck knows about one framework. Nothing outside ``frameworks/`` names a
    framework's distributions: it asks the registry for a Framework and reads these."""

    name: str  # registry key, the value of --framework
    title: str
    distributions: tuple[str, ...]  # canonical names; the first is the one to suggest installing
    table: str | None  # key of its release table in compat.json (None: no build facts)
    # (dist, version, shown, local, the env's other packages {canonical name: version})
    read_build: Callable[[str, Version, str, str | None, Mapping[str, str]], Build | None]
    smoke_backend: str  # the smoke runner's backend for this framework
    multi_device: str  # the data-parallel strategy the multi-device smoke uses
    batch_rule: str  # "split": the global batch is split over the devices; "per-device": each gets it whole
    # What `envcheck run` and a Jupyter kernel of the env get (``processes.child_environ``),
    # given the installed version of the framework's distribution (None: not known).
    run_environ: Callable[[Version | None], Mapping[str, str]] = lambda version: {}
    # Defaults for the smoke runner, whatever the env's framework (the runner may import this one).
    smoke_environ: Mapping[str, str] = field(default_factory=dict, hash=False)
    cpu_presets: tuple[str, ...] = ()  # presets to suggest, best first
    gpu_presets: tuple[str, ...] = ()
    gpu_block: Callable[[Build, str], GpuBlock | None] = lambda build, os: None

    def releases(self) -> list[str]:
        """Release keys ("2.15") of its compat table, newest first."""
        from ..data import compat_facts

        if self.table is None:
            return []
        return sorted(compat_facts()[self.table]["releases"], key=Version, reverse=True)


def no_build(dist: str, version: Version, shown: str, local: str | None,
             packages: Mapping[str, str]) -> Build | None:
    """For a framework without build tables."""
    return None
