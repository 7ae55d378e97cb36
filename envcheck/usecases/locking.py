"""`env lock`, `env create --lock`, `env verify`: the same env on every node, and drift seen.

``lock`` resolves an env's packages (its installed pins) or a preset's (the variant the target
gets: ``usecases.variants``) for a target (Python ``major.minor``, a platform in uv's
spelling, and for a GPU build the driver and compute capability it must run on: this host's,
or ``--for-driver``/``--for-cc`` on a builder without a GPU) through uv, which writes the
PEP 751 lock with every wheel's URL and sha256; envcheck adds the target
(``envs.locks.finish``). ``--wheelhouse DIR`` also downloads every locked wheel into DIR
with the lock, enough to make the env on a node with no index at all.
"""
from __future__ import annotations

import os
import platform
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import OperationError, UsageError
from ..progress import SILENT, Progress
from ..results import Result

if TYPE_CHECKING:
    from ..envs.indexes import IndexSettings
    from ..envs.locks import Lock
    from ..host.compat import HostProfile
    from .session import Session

# What a lock keeps of its preset: enough for the env's manifest, `select`, `compat` and `check`.
PRESET_KEYS = ("name", "title", "kind", "framework", "variant", "hash", "requires_python", "cuda", "cudnn",
               "libraries", "indexes")
COMPILE_TIMEOUT = 600.0  # seconds uv may take to resolve (a slow mirror, a large env)
_PYTHON = re.compile(r"\d+\.\d+")
_PLATFORM = re.compile(r"[a-z0-9_]+-[a-z0-9_.-]+")


@dataclass
class LockResult(Result):
    schema: ClassVar[str] = "envcheck.lock/1"
    output: str  # a path, or "-" (stdout)
    lock: Any  # envs.locks.Lock
    text: str
    target: dict[str, Any] = field(default_factory=dict)
    wheelhouse: str | None = None
    wheels: int = 0

    def body(self) -> dict[str, Any]:
        return {"output": self.output, "digest": self.lock.digest, "target": self.target,
                "packages": {p.name: p.version for p in self.lock.packages}, "wheelhouse": self.wheelhouse,
                "wheels": self.wheels}


def host_platform() -> str:
    """This host as uv names a platform: ``x86_64-manylinux_2_36`` (glibc's version, capped at
    the newest uv knows), else uv's name for the OS."""
    machine = platform.machine().lower() or "x86_64"
    if sys.platform.startswith("linux"):
        libc, version = platform.libc_ver()
        if libc == "glibc" and _PYTHON.fullmatch(version or ""):
            major, minor = (int(x) for x in version.split("."))
            return f"{machine}-manylinux_{major}_{min(minor, 40)}"
        return f"{machine}-unknown-linux-gnu"
    return {"darwin": f"{machine}-apple-darwin", "win32": f"{machine}-pc-windows-msvc"}.get(sys.platform, machine)


def environments(python: str, target_platform: str) -> list[str]:
    """The PEP 508 markers of the target, for the lock's ``environments``."""
    machine, _, rest = target_platform.partition("-")
    markers = [f"python_version == '{python}'"]
    if "linux" in rest:
        markers += ["sys_platform == 'linux'", f"platform_machine == '{machine}'"]
    elif "darwin" in rest or "macos" in rest:
        markers.append("sys_platform == 'darwin'")
    elif "windows" in rest:
        markers.append("sys_platform == 'win32'")
    return [" and ".join(markers)]


def _target_python(given: str | None, preset=None, info=None) -> str:
    """The target's ``major.minor``: the env's, the one given, or the interpreter this host
    would make the preset's env with."""
    if info is not None:
        version = (info.manifest.get("python") or {}).get("version") or ""
        return ".".join(version.split(".")[:2])
    if given and _PYTHON.fullmatch(given.strip()):
        return given.strip()
    from ..envs.pythons import find_python

    found = find_python(preset.requires_python if preset else None, given, needed_by=f"preset {preset.name}")
    return f"{found.version.major}.{found.version.minor}"


def _profile(session: Session, for_driver: str | None, for_cc: tuple[str, ...], python: str) -> HostProfile:
    from .compat import host_profile

    if bool(for_driver) != bool(for_cc):
        raise UsageError("--for-driver and --for-cc go together",
                         "give both for a GPU target, e.g. --for-driver 535.104.05 --for-cc 8.0; "
                         "neither for this host's")
    profile, _ = host_profile(session, for_driver, for_cc, False, "linux", python)
    return profile


def lock_env(session: Session, *, name: str | None = None, preset_name: str | None = None,
             preset_file: str | None = None, output: str = "pylock.toml", python: str | None = None,
             target_platform: str | None = None, for_driver: str | None = None, for_cc: tuple[str, ...] = (),
             variant: str | None = None, wheelhouse: str | None = None, index: IndexSettings | None = None,
             progress: Progress = SILENT) -> LockResult:
    from ..atomic import write_bytes
    from ..envs.indexes import configured
    from ..envs.locks import check_output_name, digest_of, finish, parse_lock
    from ..envs.presets import resolve_preset
    from .variants import for_target

    if sum(map(bool, (name, preset_name, preset_file))) != 1:
        raise UsageError("give exactly one of NAME, --preset and --preset-file",
                         "e.g. envcheck env lock NAME -o pylock.toml, or envcheck env lock --preset P")
    check_output_name(output)
    if target_platform is not None and not _PLATFORM.fullmatch(target_platform):
        raise UsageError(f"bad --platform {target_platform!r}", "give it as uv names it, e.g. x86_64-manylinux_2_28")
    foreign = bool(target_platform and target_platform != host_platform() or python or for_driver)
    target_platform = target_platform or host_platform()
    info = session.store._require_ready(name) if name else None
    preset = None if info else resolve_preset(session.home, name=preset_name, file=preset_file)
    py = _target_python(python, preset, info)
    profile = _profile(session, for_driver, tuple(for_cc), py)
    if info is not None:
        recorded = info.manifest.get("preset") or {}
        requirements = [f"{n}=={v}" for n, v in _lockable(session, info).items() if n != "pip"]
        preset_json, chosen = dict(recorded), recorded.get("variant") or _build_variant(info.packages)
        if recorded.get("kind") == "gpu":
            _judge_env(info, profile)
        indexes = tuple(recorded.get("indexes") or ())
    else:
        preset = for_target(preset, profile, variant)
        requirements, chosen = [str(r) for r in preset.requirements], preset.variant
        preset_json, indexes = {**preset.to_json(), "hash": preset.content_hash}, preset.indexes
    settings = configured(index).with_preset_indexes(indexes)
    raw = _compile(session, requirements, py, target_platform, settings, progress)
    tool = {"variant": chosen, "python": py, "platform": target_platform,
            "for-driver": profile.driver_version if preset_json.get("kind") == "gpu" else None,
            "for-cc": list(profile.gpu_ccs) if preset_json.get("kind") == "gpu" else None,
            "env": name, "preset": {k: preset_json.get(k) for k in PRESET_KEYS}}
    text = finish(raw, tool, environments(py, target_platform), f"envcheck env lock {name or preset_json.get('name')} "
                  f"(variant {chosen}, python {py}, {target_platform})")
    lock = parse_lock(_toml(text), digest_of(text.encode()), None if output == "-" else Path(output).resolve())
    local = [p.files[0].filename for p in lock.packages
             if p.files and all(f.path is None and (f.url or "").startswith("file:") for f in p.files)]
    if foreign and local:
        session.observer.notice(f"{len(local)} locked file(s) come only from file: URLs of this host "
                        f"({', '.join(local[:3])}{' ...' if len(local) > 3 else ''}): the target needs the same "
                        "folders, or a wheelhouse (--wheelhouse DIR) copied to it")
    if output != "-":
        try:
            write_bytes(Path(output), text.encode(), 0o666)
        except OSError as exc:
            raise UsageError(f"-o {output}: cannot write it: {exc.strerror}", "give a path you can write to") from None
    result = LockResult(output, lock, text, {"python": py, "platform": target_platform, "variant": chosen,
                                             "for_driver": tool["for-driver"], "for_cc": tool["for-cc"]})
    if wheelhouse:
        from ..envs.wheelhouse import fill

        if lock.source is None:  # the wheelhouse keeps its own copy of the lock
            lock = parse_lock(_toml(text), lock.digest, None)
        placed = fill(lock, Path(wheelhouse), settings, progress)
        if lock.source is None:
            write_bytes(Path(wheelhouse) / "pylock.toml", text.encode(), 0o666)
        result.wheelhouse, result.wheels = str(Path(wheelhouse).resolve()), len(placed)
    return result


def _lockable(session: Session, info) -> dict[str, str]:
    """What a lock of env ``info`` holds: its packages; of an adopted conda env, the Python
    packages pip or uv installed (conda's own, and its non-Python packages, have no PyPI
    wheels to lock: said in a notice)."""
    if not info.adopted or info.adopted.get("kind") != "conda":
        return dict(info.packages)
    from ..envs.metadata import installers

    tools = installers(info.path)
    conda_python = sorted(n for n in info.packages if tools.get(n) == "conda")
    python_names = set(info.packages)
    others = sorted(n for n in (info.adopted.get("conda") or {}) if n.replace("_", "-") not in python_names)
    if conda_python or others:
        session.observer.notice(f"env {info.name}: not lockable as PyPI wheels, left out of the lock: "
                                f"{len(conda_python)} Python package(s) conda installed "
                                f"({', '.join(conda_python[:5])}{' ...' if len(conda_python) > 5 else ''}) and "
                                f"{len(others)} conda package(s) of other kinds "
                                f"({', '.join(others[:5])}{' ...' if len(others) > 5 else ''}): `conda list "
                                f"--explicit` records them")
    return {n: v for n, v in info.packages.items() if tools.get(n) != "conda"}


def _toml(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads(text)


def _build_variant(packages: dict[str, str]) -> str:
    """An env made before variants were recorded: its variant read from its build."""
    from .. import frameworks
    from ..envs.variants import implicit_name

    build = frameworks.build_from_packages(packages)
    cuda = build.cuda if build is not None else None
    return implicit_name("gpu" if cuda else "cpu", cuda)


def _judge_env(info, profile: HostProfile) -> None:
    from .. import frameworks
    from ..host.compat import judge

    build = frameworks.build_from_packages(info.packages)
    if build is None:
        return
    if not profile.gpu_ccs:
        raise UsageError(f"env {info.name} is a GPU env and the target has no NVIDIA GPU",
                         "give the target's --for-driver and --for-cc (a builder without a GPU locks for another host)")
    verdict = judge(build, profile)
    if verdict.verdict == "fail" or not verdict.uses_gpu:
        raise UsageError(f"env {info.name}'s {build.label} can't train on the target: "
                         f"{verdict.reasons[0] if verdict.reasons else 'it would not use its GPUs'}",
                         verdict.fixes[0] if verdict.fixes else "lock a preset variant that fits the target")


def _compile(session: Session, requirements: list[str], python: str, target_platform: str,
             settings: IndexSettings, progress: Progress) -> str:
    """uv's PEP 751 lock of ``requirements`` for the target: wheels only, every hash."""
    from .. import processes
    from ..envs.installers import UvInstaller, install_failure, uv_index_strategy

    uv = UvInstaller()
    uv.cache_dir = session.home.uv_cache
    progress.phase(f"resolving {len(requirements)} requirement(s) for python {python} on {target_platform}")
    with processes.temporary_directory("envcheck-lock-") as tmp:
        source = Path(tmp) / "requirements.in"
        source.write_text("\n".join(requirements) + "\n", encoding="utf-8")
        cmd = [uv.binary() or "uv", "pip", "compile", str(source), "--format", "pylock.toml", "--no-header",
               "--quiet", "--python-version", python, "--python-platform", target_platform, "--only-binary", ":all:"]
        done = processes.run(cmd + uv_index_strategy(settings) + settings.args(), timeout=COMPILE_TIMEOUT, env=uv.environ(settings))
    if done.timed_out:
        raise OperationError(f"uv took more than {COMPILE_TIMEOUT:.0f} s to resolve", "check the index, then run it again")
    if done.returncode != 0:
        if "--python-platform" in done.stderr and "invalid value" in done.stderr:
            raise UsageError(f"uv does not know the platform {target_platform!r}",
                             "give it as uv names it, e.g. x86_64-manylinux_2_28 (uv pip compile --help)")
        from datetime import datetime

        from ..atomic import write_bytes

        # a name of its own: another `env lock` failing at once keeps its log too
        log = session.home.logs / f"lock-failed-{datetime.now():%Y%m%dT%H%M%S}-{os.getpid()}.log"
        session.home.logs.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_bytes(log, done.stderr.encode("utf-8"))
        raise install_failure("uv", requirements, settings, done.stderr, log)
    return done.stdout


def create_from_lock(session: Session, name: str, lock_file: str, *, python: str | None = None,
                     installer: str | None = None, index: IndexSettings | None = None, offline: bool = False,
                     for_another_host: bool = False, link: bool = True, progress: Progress = SILENT):
    """`env create NAME --lock FILE`: exactly the locked files the chosen interpreter selects
    (``envs.transactions.create_from_lock``), as ``prepare`` says."""
    from ..envs.locks import read_lock
    from .catalogue import EnvDetail

    lock = read_lock(lock_file)
    interpreter, selected, preset = prepare(session, lock, python, for_another_host)
    info = session.store.create_from_lock(name, lock, selected, interpreter, preset, installer=installer,
                                          index=index, offline=offline, progress=progress, link=link)
    return EnvDetail(info, created=True)


def prepare(session: Session, lock: Lock, python: str | None = None, for_another_host: bool = False):
    """(the interpreter, what it selects of ``lock``, the preset the manifest records) for an
    env made from ``lock`` here. The interpreter is the one ``--python`` names, else the first
    here the lock is for (its ``requires-python`` and ``environments``: ``envs.targets``); a
    lock for none is bad input in its own words. A GPU lock (its ``[tool.envcheck]`` preset
    says so) this host can't train with is refused, and a GPU build that can't use this
    host's GPUs where it has some, unless ``for_another_host``."""
    from ..envs.locks import pins
    from ..envs.targets import choose

    interpreter, _, selected = choose(lock, python)
    installed = pins(selected)
    preset = dict(lock.preset) or _preset_of(installed)
    if not for_another_host:
        _refuse_misfit(session, lock, installed, interpreter, preset)
    return interpreter, selected, preset


def _preset_of(installed: dict[str, str]) -> dict[str, Any]:
    """What the manifest says of a lock without ``[tool.envcheck]``: read from its build."""
    from .. import frameworks

    build = frameworks.build_from_packages(installed)
    if build is None:
        return {"name": None, "kind": "cpu", "framework": None}
    return {"name": None, "kind": "gpu" if build.gpu_capable else "cpu", "framework": build.framework,
            "cuda": build.cuda, "cudnn": build.cudnn, "libraries": []}


def _refuse_misfit(session: Session, lock: Lock, installed: dict[str, str], interpreter, preset) -> None:
    """A GPU lock this host can't train with is bad input here (``--for-another-host`` makes it anyway)."""
    from .variants import misfit_for
    from ..envs.presets import parse_requirement
    from ..host.compat import HostProfile

    declared = (lock.preset or {}).get("kind") == "gpu"
    if not declared and preset.get("kind") != "gpu":
        return
    profile = HostProfile.from_host(session.host, python=f"{interpreter.version.major}.{interpreter.version.minor}")
    if not declared and not profile.gpu_ccs:
        return  # a GPU-capable build without a GPU here trains on the CPU, as pip would install it
    why = misfit_for(tuple(parse_requirement(f"{n}=={v}") for n, v in installed.items()), profile)
    if why is not None:
        raise UsageError(f"this host can't train with {lock.where}"
                         f"{f' (variant {lock.variant})' if lock.variant else ''}: {why}",
                         "make it on a host its build fits, or pass --for-another-host")
