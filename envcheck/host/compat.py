"""Can this framework build train on this host? Driver, CUDA, framework build and GPU arch.

The facts are ``envcheck/data/compat.json`` (the tables of reference/compat.md, each with its
sources), read once. Everything here is a pure function of those facts and its arguments:
no NVML, no disk. The host comes in as a :class:`HostProfile`, so the same judgement serves
the live host (built from ``probe.probe()``) and a "what-if" driver/GPU profile. Builds come
from the framework registry (``envcheck.frameworks``).

Stable API (validate and select build on it):

``min_driver(cuda, os) -> DriverRequirement``
``cuda_cc_range(cuda) -> (min_cc, max_cc | None)``
``judge(build, host, require_gpu=False) -> Verdict``
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Sequence

from packaging.version import InvalidVersion, Version

from .. import frameworks
from ..data import compat_facts as facts
from ..errors import UsageError
from ..frameworks import Build
from ..frameworks.base import VERSION_EXAMPLES, major_minor as _mm, minor as _minor, parse_version

if TYPE_CHECKING:
    from .probe import HostState

OPERATING_SYSTEMS = ("linux", "windows")
VERDICTS = ("ok", "warn", "fail")
OK, WARN, FAIL = 0, 1, 2

_CC = re.compile(r"(\d+)\.(\d+)")
_ARCH = re.compile(r"(sm|compute)_(\d+)(\d)([a-z]?)")


# --- parsing -------------------------------------------------------------------------------

def parse_cc(text: str) -> tuple[int, int]:
    """A compute capability "8.6" as (8, 6)."""
    match = _CC.fullmatch(str(text).strip())
    if not match:
        raise UsageError(f"bad compute capability {text!r}",
                         f"give it as major.minor, {VERSION_EXAMPLES['compute capability']}")
    return int(match[1]), int(match[2])


def _check_os(os: str) -> str:
    if os not in OPERATING_SYSTEMS:
        raise UsageError(f"unknown operating system {os!r}", "use linux or windows")
    return os


# --- CUDA toolkit facts ----------------------------------------------------------------------

@dataclass(frozen=True)
class DriverRequirement:
    """The driver a CUDA build needs on one OS.

    ``min_driver`` runs the build's native code (SASS); ``jit_driver`` is the toolkit's own
    Table 3 driver, needed when the GPU must JIT-compile the build's PTX (None: not published).
    """

    cuda: str
    os: str
    min_driver: str
    jit_driver: str | None
    basis: str  # "table3" | "minor-version-compatibility"
    source: str


@lru_cache(maxsize=1)
def _table3() -> dict[tuple[int, int], list[tuple[Version, dict[str, Any]]]]:
    """Table 3's rows by CUDA minor, oldest release first (parsed once: every verdict reads it)."""
    rows: dict[tuple[int, int], list[tuple[Version, dict[str, Any]]]] = {}
    for key, row in facts()["cuda_drivers"]["releases"].items():
        rows.setdefault(_minor(Version(key)), []).append((Version(key), row))
    return {cuda: sorted(found, key=lambda item: item[0]) for cuda, found in rows.items()}


def _table3_row(cuda: Version) -> dict[str, Any] | None:
    """The Table 3 row of a toolkit: exact release, else the newest release of that minor
    below it (an update not in the table), else the minor's first release ("12.8" -> 12.8 GA)."""
    if len(cuda.release) < 2:
        return None
    same_minor = _table3().get(_minor(cuda))
    if not same_minor:
        return None
    if len(cuda.release) == 2:
        return same_minor[0][1]
    below = [row for key, row in same_minor if key <= cuda]
    return below[-1] if below else same_minor[0][1]


def min_driver(cuda: str, os: str = "linux") -> DriverRequirement:
    """Minimum NVIDIA driver for a build made with CUDA ``cuda``.

    CUDA <= 10.x has no minor version compatibility: the toolkit's Table 3 driver is the floor.
    11.x and later run on the family's MVC floor, or on the toolkit's own driver where that is
    lower (11.0 shipped with 450.36.06/450.51.05, below the 11.x floor 450.80.02).
    """
    _check_os(os)
    version = parse_version(cuda, "CUDA version")
    row = _table3_row(version)
    toolkit = row[os] if row else None
    sources = facts()["cuda_drivers"]["sources"][0]
    if version.major <= 10:
        if toolkit is None:
            raise UsageError(f"no driver facts for CUDA {cuda}", "known: CUDA 8.0 to 13.2")
        return DriverRequirement(cuda, os, toolkit, toolkit, "table3", sources)
    mvc = facts()["minor_version_compatibility"]
    floors = mvc["floors"].get(str(version.major))
    if floors is None:
        raise UsageError(f"no driver facts for CUDA {cuda}", "known: CUDA 8.0 to 13.2")
    floor = floors[os]
    if toolkit is not None and Version(toolkit) < Version(floor):
        return DriverRequirement(cuda, os, toolkit, toolkit, "table3", sources)
    return DriverRequirement(cuda, os, floor, toolkit, "minor-version-compatibility",
                             mvc["sources"][0])


def cuda_cc_range(cuda: str) -> tuple[str, str | None]:
    """(lowest, highest) compute capability CUDA ``cuda`` can compile for; highest None = not
    established."""
    wanted = _minor(parse_version(cuda, "CUDA version"))
    for row in facts()["cuda_compute_capability"]["ranges"]:
        low = _minor(Version(row["cuda_from"]))
        high = _minor(Version(row["cuda_to"])) if row["cuda_to"] else (10**6, 0)
        if low <= wanted <= high:
            return row["min"], row["max"]
    raise UsageError(f"no compute-capability facts for CUDA {cuda}", "known: CUDA 9.0 and newer")


# --- judgement -----------------------------------------------------------------------------

@dataclass(frozen=True)
class HostProfile:
    """The host a build is judged against: live (from probe) or a what-if profile.
    ``driver_version`` None and no ``gpu_ccs`` = no NVIDIA GPU, unless ``driver_unreadable``
    says why the driver there has no version we can read."""

    driver_version: str | None
    gpu_ccs: Sequence[str] = ()
    os: str = "linux"
    python: str | None = None
    driver_unreadable: str | None = None

    @classmethod
    def from_host(cls, host: HostState, python: str | None = None) -> HostProfile:
        """The profile of a probed host (``envcheck.probe.HostState``): its usable GPUs only."""
        gpus = host.usable_gpus
        driver, unreadable = probed_driver(host.driver_version) if gpus else (None, None)
        return cls(driver, tuple(g.compute_capability for g in gpus if g.compute_capability),
                   python=python, driver_unreadable=unreadable)


def probed_driver(text: str | None) -> tuple[str | None, str | None]:
    """(the driver version NVML reported, None) when it reads as a version, else (None, why
    not). A driver string that doesn't parse is a fact about the host, not bad input: the
    judgement goes on without it."""
    if text is None:
        return None, None
    try:
        Version(text.strip())
    except InvalidVersion:
        return None, f"NVML reported {text!r}, which is not a version"
    return text, None


@dataclass(frozen=True)
class Verdict:
    """``verdict`` ok | warn | fail; ``reasons`` worst first; ``uses_gpu``: the build is
    expected to train on this host's GPU(s)."""

    verdict: str
    reasons: list[str]
    fixes: list[str]
    uses_gpu: bool


@dataclass
class _Findings:
    items: list[tuple[int, str]] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    gpu: bool = False  # expected to train on the host's GPU(s)
    blocked: bool = False  # the build can't use a GPU on this OS, whatever the driver and GPU

    def add(self, level: int, reason: str, *fixes: str) -> None:
        self.items.append((level, reason))
        self.fixes.extend(fix for fix in fixes if fix not in self.fixes)

    @property
    def level(self) -> int:
        return max((level for level, _ in self.items), default=OK)


def _check_python(build: Build, python: str | None, found: _Findings) -> None:
    if python is None or build.python_min is None or build.python_max is None:
        return
    have = _minor(parse_version(python, "Python version"))
    low, high = _minor(Version(build.python_min)), _minor(Version(build.python_max))
    span = f"{build.python_min}-{build.python_max}"
    if low <= have <= high:
        found.add(OK, f"Python {python} is within {build.label}'s range {span}")
    else:
        found.add(FAIL, f"Python {python} is outside {build.label}'s supported range {span}",
                  f"create the env with a Python in {span}, or pick a {build.framework} "
                  f"release that supports Python {python}")


def _check_driver(build: Build, host: HostProfile, found: _Findings) -> bool:
    need = min_driver(build.cuda, host.os)
    have = parse_version(host.driver_version, "driver version")
    if have < Version(need.min_driver):
        found.add(FAIL, f"driver {host.driver_version} is too old for {build.label} "
                        f"(CUDA {_mm(build.cuda)}): needs driver >= {need.min_driver}",
                  f"upgrade the NVIDIA driver to >= {need.min_driver}")
        return False
    found.add(OK, f"driver {host.driver_version} >= {need.min_driver}, the minimum for "
                  f"CUDA {_mm(build.cuda)} ({need.basis})")
    return True


def _split_archs(archs: Sequence[str]) -> tuple[list[tuple[int, int, bool]], list[tuple[int, int]]]:
    """(SASS targets as (major, minor, arch-specific), PTX targets as (major, minor))."""
    sass, ptx = [], []
    for arch in archs:
        match = _ARCH.fullmatch(arch)
        if match is None:
            continue
        cc = (int(match[2]), int(match[3]))
        if match[1] == "sm":
            sass.append((*cc, bool(match[4])))
        else:
            ptx.append(cc)
    return sass, ptx


def _sass_runs(target: tuple[int, int, bool], cc: tuple[int, int]) -> bool:
    """Native code for X.y runs on X.z with z >= y; an arch-specific target (sm_90a) only on
    its own X.y."""
    major, minor, specific = target
    return cc == (major, minor) if specific else cc[0] == major and cc[1] >= minor


def _check_jit(build: Build, cc: str, ptx: tuple[int, int], host: HostProfile,
               found: _Findings) -> bool:
    jit = min_driver(build.cuda, host.os).jit_driver
    sass = " ".join(a for a in build.archs if a.startswith("sm_"))
    what = (f"GPU of compute capability {cc} has no native code in {build.label} ({sass}): "
            f"it runs by JIT-compiling the compute_{ptx[0]}{ptx[1]} PTX")
    driver = host.driver_version
    if jit and driver and parse_version(driver, "driver version") < Version(jit):
        found.add(FAIL, f"{what}, which needs driver >= {jit} (the CUDA {build.cuda} "
                        f"toolkit's driver); this host has {driver}",
                  f"upgrade the NVIDIA driver to >= {jit}")
        return False
    needs = f"; the JIT needs driver >= {jit}" if jit and not driver else ""
    found.add(WARN, f"{what} (the first run compiles for minutes, then it is cached){needs}",
              f"for native speed from the first run, use a {build.framework} build compiled "
              f"for sm_{cc.replace('.', '')}")
    return True


def _check_cc(build: Build, cc: str, host: HostProfile, found: _Findings) -> bool:
    have = parse_cc(cc)
    low, high = cuda_cc_range(build.cuda)
    if have < parse_cc(low):
        found.add(FAIL, f"GPU of compute capability {cc} is below CUDA {_mm(build.cuda)}'s "
                        f"minimum {low}: {build.label} cannot use it",
                  "use a newer GPU, or hide this one with CUDA_VISIBLE_DEVICES")
        return False
    if build.min_cc is not None and have < parse_cc(build.min_cc):
        found.add(FAIL, f"GPU of compute capability {cc} is below {build.framework}'s minimum "
                        f"compute capability {build.min_cc} for {build.label}: it cannot use it",
                  f"use a GPU of compute capability {build.min_cc} or newer, or hide this one "
                  "with CUDA_VISIBLE_DEVICES")
        return False
    if build.archs is None:
        if high is not None and have > parse_cc(high):
            found.add(WARN, f"CUDA {_mm(build.cuda)} compiles for compute capability up to "
                            f"{high}: a {cc} GPU runs {build.label} only by JIT-compiling PTX, "
                            "if the build ships any (its architectures are not known)")
        else:
            found.add(OK, f"compute capability {cc} is within CUDA {_mm(build.cuda)}'s range "
                          f"{low}-{high or 'newest'} (the build's own list is not known)")
        return True
    sass, ptx = _split_archs(build.archs)
    if any(_sass_runs(target, have) for target in sass):
        found.add(OK, f"GPU of compute capability {cc} runs {build.label}'s native code")
        return True
    usable_ptx = [target for target in ptx if target <= have]
    if usable_ptx:
        return _check_jit(build, cc, max(usable_ptx), host, found)
    compiled = " ".join(build.archs)
    lowest = min([(m, n) for m, n, _ in sass] + ptx)
    if have < lowest:
        found.add(FAIL, f"GPU of compute capability {cc} is older than every architecture "
                        f"{build.label} was compiled for ({compiled})",
                  "use a newer GPU, or an older framework release built for it")
    else:
        found.add(FAIL, f"{build.label} has no kernel image for compute capability {cc} and "
                        f"no PTX it could JIT (compiled for {compiled})",
                  f"install a {build.framework} build compiled for sm_{cc.replace('.', '')}")
    return False


def _no_gpu(build: Build, why: str, require_gpu: bool, found: _Findings, *fixes: str) -> None:
    found.add(FAIL if require_gpu else WARN, f"{why}: {build.label} will run on the CPU", *fixes)


def _assess(build: Build, host: HostProfile, require_gpu: bool) -> _Findings:
    found = _Findings()
    _check_python(build, host.python, found)
    if not build.gpu_capable:
        why = "; ".join(build.notes) or "no CUDA in this build"
        if require_gpu:
            found.add(FAIL, f"CPU-only build: {build.label} ({why}) cannot use a GPU",
                      f"install a CUDA build of {build.framework}")
        else:
            found.add(OK, f"CPU-only build: {build.label} ({why})")
        return found
    block = frameworks.get(build.framework).gpu_block(build, host.os)
    if block is not None:
        found.blocked = True
        _no_gpu(build, block.why, require_gpu, found, *block.fixes)
        return found
    if host.driver_version is None and not host.gpu_ccs and not host.driver_unreadable:
        need = min_driver(build.cuda, host.os).min_driver if host.os in OPERATING_SYSTEMS else None
        _no_gpu(build, "no NVIDIA driver or GPU on this host", require_gpu, found,
                *([f"to train on a GPU, install an NVIDIA driver >= {need}"] if need else []))
        return found
    for conflict in build.conflicts:  # what the env holds next to the build, refused by it
        found.add(FAIL, conflict.reason, conflict.fix)
    if host.driver_unreadable:
        need = min_driver(build.cuda, host.os).min_driver
        found.add(WARN, f"the NVIDIA driver's version is unknown ({host.driver_unreadable}): not "
                        f"checked against CUDA {_mm(build.cuda)}'s minimum driver {need}",
                  "check the driver: `nvidia-smi` prints its version; reinstall it if it can't")
    ready = _check_driver(build, host, found) if host.driver_version is not None else True
    if not host.gpu_ccs:
        _no_gpu(build, "no visible GPU (compute capability unknown)", require_gpu, found)
        return found
    for cc in dict.fromkeys(host.gpu_ccs):
        ready = _check_cc(build, cc, host, found) and ready
    found.gpu = ready and found.level < FAIL
    return found


def _suggestion(build: Build, host: HostProfile) -> str | None:
    """The newest release of the same framework that would use this host's GPU."""
    framework = frameworks.get(build.framework)
    dist = framework.distributions[0]
    for key in framework.releases():
        if build.gpu_capable and _minor(Version(key)) == _minor(Version(build.version)):
            continue
        candidate = frameworks.framework_build(dist, key)
        if candidate is None or not candidate.gpu_capable:
            continue
        result = _assess(candidate, host, False)
        if result.level < FAIL and not result.blocked:
            return (f"or install {dist}=={key}.* (CUDA {_mm(candidate.cuda)}), the newest "
                    f"{dist} release the compatibility tables allow on this host")
    return None


def judge(build: Build, host: HostProfile, *, require_gpu: bool = False) -> Verdict:
    """Can ``build`` train on ``host``? fail: it cannot (wrong driver, GPU or Python; with
    ``require_gpu`` also whenever it would run on the CPU); warn: it runs with a caveat (PTX
    JIT, a GPU build falling back to the CPU); ok: it runs as built, a CPU-only build on the
    CPU. Reasons come worst first; fixes name the next step."""
    found = _assess(build, host, require_gpu)
    fixes = list(found.fixes)
    if found.level == FAIL and (host.driver_version or host.gpu_ccs):
        suggestion = _suggestion(build, host)
        if suggestion:
            fixes.append(suggestion)
    reasons = [reason for _, reason in sorted(found.items, key=lambda item: -item[0])]
    return Verdict(VERDICTS[found.level], reasons, fixes, found.gpu)
