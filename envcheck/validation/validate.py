"""Validate an env on this machine: checks with evidence, a smoke fit per device, a verdict.

The flow is a list of small steps, each a function of the context built so far returning
one ``Check`` (pass | warn | fail | skip, a one-line summary, detail and a fix). Nothing here
prints; the CLI renders the ``Report``. Here: the context, the flow (``validate``) and the
framework's run it decides on (the devices to fit on, the smoke fit, or only the listing of
its devices); the checks before that run are ``env_checks``, those read from its answer
``smoke_checks``.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import frameworks
from ..envs import manifest as mf
from ..progress import SILENT, Progress
from . import DEFAULT_TIMEOUT, env_checks, smoke_checks
from .devices import Device, DeviceSpec, Selection, parse, resolve, usable_gpus
from .reports import Check, Report, fingerprint, verdict_of
from .smoke_checks import first_line

if TYPE_CHECKING:
    from ..envs.env_info import EnvInfo
    from ..frameworks import Build
    from ..host.compat import Verdict
    from ..host.level1 import HealthReport
    from ..host.probe import HostState
    from .smoke import SmokeResult


@dataclass
class Context:
    """What the steps of one validation share: its inputs, and what each step found for the next."""

    info: EnvInfo
    host: HostState
    selection: Selection  # resolved against ``host``
    smoke: bool
    timeout: float
    build: Build | None = None
    verdict: Verdict | None = None  # compat's
    smoke_result: SmokeResult | None = None
    devices: list[Device] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    gpus_usable: int = 0
    listing: bool = False  # the framework listed its devices, no fit (--no-smoke on a GPU host)
    log_dir: Path | None = None  # where a failing runner's output is kept
    log: str | None = None
    progress: Progress = SILENT
    level: int = 2  # health level: 1 reads only, 2 + the env's checks and smoke, 3 + figures
    health: HealthReport | None = None  # read in the command's NVML session
    figures: list | None = None  # level 3: the judged figures (validation.figures), as JSON
    used_gpus: list[int] = field(default_factory=list)  # NVML indices the env would train on

    @property
    def gpu_env(self) -> bool:
        return bool(self.build and self.build.gpu_capable)


def _plan_devices(ctx: Context) -> None:
    """The devices to smoke-test; GPUs are left out (with the reason) when compat failed."""
    cpu = Device("cpu", 0, 0)
    gpus = usable_gpus(ctx.host)
    word = ctx.selection.word
    if word is None:
        asked = list(ctx.selection.devices)
    elif word == "cpu":
        asked = [cpu]
    elif word == "gpu":
        asked = gpus
    else:
        asked = [cpu, *gpus] if ctx.gpu_env else [cpu]
    sick = _sick_gpus(ctx)
    for device in asked:
        if device.kind == "gpu" and device.index in sick:
            ctx.skipped[str(device)] = f"not attempted: level-1 health is not-ready: {sick[device.index]}"
        elif device.kind == "gpu" and ctx.verdict is not None and ctx.verdict.verdict == "fail":
            ctx.skipped[str(device)] = "not attempted: the compat check failed"
        elif device.kind == "gpu" and not ctx.gpu_env:
            ctx.skipped[str(device)] = "not attempted: the env's framework is a CPU-only build"
        else:
            ctx.devices.append(device)


def _sick_gpus(ctx: Context) -> dict[int, str]:
    """The used GPUs whose level-1 verdict is not-ready (their fit could hang or crash), with
    their first finding."""
    if ctx.health is None:
        return {}
    from .health import problem

    return {g.index: problem(next(f for f in g.findings if f.effect == "not-ready"))
            for g in ctx.health.gpus if g.index in ctx.used_gpus and g.verdict == "not-ready"
            and any(f.effect == "not-ready" for f in g.findings)}


def _used_gpus(ctx: Context) -> list[int]:
    """The GPUs (NVML indices) this env would train on: those named in ``--devices``, else every
    visible GPU (a job sees them all, a lost one too); none for a CPU build, ``--devices cpu``
    or (level 2) a build this host can't run on its GPUs."""
    if not ctx.gpu_env or (ctx.level >= 2 and ctx.gpus_usable == 0):
        return []
    word = ctx.selection.word
    if word is None:
        return [d.index for d in ctx.selection.devices if d.kind == "gpu" and d.index is not None]
    return [] if word == "cpu" else [g.index for g in ctx.host.visible_gpus]


def _health(ctx: Context) -> list[Check]:
    """The ``health`` check, when level 1 was read and the env uses a GPU (level 1: always)."""
    from .health import health_check

    if ctx.health is None:
        return []
    ctx.used_gpus = _used_gpus(ctx)
    found = health_check(ctx.health, ctx.used_gpus)
    if found is None and ctx.level == 1:
        found = Check("health", "skip", "this env uses no GPU here: level 1 has nothing to judge for it")
    return [found] if found is not None else []


def _figure_checks(ctx: Context) -> list[Check]:
    """LEVEL 3: THE ONE PLACE WHERE MEASURED FIGURES BECOME CHECKS. At level 3 the runner
    measured figures per device (``ctx.smoke_result.figures``: device -> the runner's
    "figures"; ``ctx.smoke_result.multi_figures``: the multi-replica result's), which
    ``validation.figures`` judges (``judge``, then ``figure_checks``) against the GPUs as NVML
    read them (``ctx.host``, ``ctx.health``); the judged figures go to the report too
    (``ctx.figures``)."""
    if ctx.level < 3 or ctx.smoke_result is None:
        return []
    from . import figures

    result = ctx.smoke_result
    judged = figures.judge(result.figures, figures.gpu_facts(ctx.devices, ctx.host, ctx.health),
                           result.multi_figures)
    ctx.figures = [figure.to_json() for figure in judged]
    return figures.figure_checks(judged)


def _level1(ctx: Context, started: float) -> Report:
    """Level 1: reads only, no framework: the host and the health of the GPUs the env uses."""
    info, host = ctx.info, ctx.host
    ctx.build = frameworks.build_from_packages(info.packages)
    checks = [env_checks.host_check(ctx), *_health(ctx)]
    usable = [g.index for g in ctx.health.gpus if g.index in ctx.used_gpus and g.verdict != "not-ready"] \
        if ctx.health is not None else []
    verdict = verdict_of(checks)
    ctx.progress.done(verdict)
    return Report(env=info.name, verdict=verdict, checks=checks, devices=[], multi_replica=None,
                  speedup=None, build={}, host=host.facts(), fingerprint=fingerprint(info, host),
                  created=mf.now(), wall_s=round(time.perf_counter() - started, 3), smoke=False,
                  gpus_usable=len(usable), depth="quick", health=_section(ctx), level=1)


def _section(ctx: Context) -> dict | None:
    from .health import section

    return None if ctx.health is None else section(ctx.health, ctx.used_gpus, ctx.level)


def _run_smoke(ctx: Context) -> None:
    """The runner knows devices by the framework's numbering (``Device.runner_name``); its
    results are named back as the user names them."""
    from dataclasses import replace

    from .. import processes
    from .smoke import run_smoke

    names = {d.runner_name: str(d) for d in ctx.devices}
    cpus = [d.runner_name for d in ctx.devices if d.kind == "cpu"]
    gpus = [d.runner_name for d in ctx.devices if d.kind == "gpu"]
    replicas = gpus if len(gpus) > 1 else cpus if len(cpus) > 1 else []
    backend = ctx.build.framework if ctx.build else "auto"
    ctx.progress.phase(f"starting {ctx.build.framework if ctx.build else 'the framework'} for the "
                       f"smoke fit on {', '.join(names.values())}")
    # The frameworks' scratch variables point into a folder of our own: the user's home untouched.
    with processes.temporary_directory("envcheck-smoke-") as scratch:
        result = run_smoke(ctx.info.python, list(names), backend=backend, timeout=ctx.timeout,
                           import_timeout=ctx.timeout, logical_cpus=len(cpus) if len(cpus) > 1 else 0,
                           multi_replica=bool(replicas), replica_devices=replicas or None,
                           env=dict.fromkeys(frameworks.smoke_scratch(), str(scratch)),
                           watch=_watch(ctx, names), level=ctx.level)
    ctx.smoke_result = replace(result, devices=[replace(d, device=names.get(d.device, d.device))
                                                for d in result.devices])


def _watch(ctx: Context, names: dict[str, str]):
    """The runner's marks as phases: each device as it starts and as it ends, named as the
    user names it (GPUs by NVML index, not CUDA's)."""
    def watch(word: str, value: Any) -> None:
        if word in ("start", "alone"):
            alone = ", alone" if word == "alone" else ""
            ctx.progress.phase(f"{names.get(value, value)}: smoke fit{alone}")
        elif word == "result" and isinstance(value, dict):
            device = names.get(value.get("device"), value.get("device"))
            if value.get("status") == "pass" and value.get("ms_per_step") is not None:
                ctx.progress.phase(f"{device}: pass, {value['ms_per_step']:.2f} ms/step")
            else:
                ctx.progress.phase(f"{device}: fail, {first_line(value.get('error') or '')[:120]}")
    return watch


def _gpus_to_list(ctx: Context) -> bool:
    """Without the fit, GPU readiness still needs the framework to have seen the GPUs."""
    return (ctx.info.state == "ready" and ctx.gpu_env and bool(ctx.host.usable_gpus)
            and ctx.verdict is not None and ctx.verdict.verdict != "fail")


def _list_devices(ctx: Context) -> None:
    from .smoke import list_devices

    backend = ctx.build.framework
    ctx.progress.phase(f"starting {ctx.build.framework} to list its devices")
    ctx.smoke_result = list_devices(ctx.info.python, backend=backend, timeout=ctx.timeout)
    ctx.listing = True


def validate(info: EnvInfo, host: HostState, *, devices: DeviceSpec = "all", smoke: bool = True,
             timeout: float = DEFAULT_TIMEOUT, log_dir: Path | None = None,
             progress: Progress = SILENT, level: int = 2, health: HealthReport | None = None) -> Report:
    """Run every check for one env (``info`` from the store) against ``host`` (a probe).
    ``devices``: a Selection (``devices.parse``; resolved here unless it is already) or its
    text. A GPU in it that this host can't use is a UsageError before any work.
    ``progress`` hears the checks, then each device's smoke fit as it starts and ends.
    ``level`` (1, 2, 3) and ``health`` (``host.level1.HealthReport`` of ``host``'s NVML
    session, or None: not read) as the module ``validation.health`` says."""
    started = time.perf_counter()
    selection = resolve(devices if isinstance(devices, Selection) else parse(devices), host)
    ctx = Context(info, host, selection, smoke, timeout, log_dir=log_dir, progress=progress,
                  level=level, health=health)
    progress.start(f"env {info.name}", f"validating env {info.name}")
    if level == 1:
        progress.phase("reading each GPU's health (level 1)")
        return _level1(ctx, started)
    progress.phase("checking host, compat, integrity, libraries")
    compat = env_checks.compat_check(ctx)
    health = _health(ctx)
    checks = [env_checks.host_check(ctx), *health, compat, env_checks.integrity_check(ctx),
              env_checks.libraries_check(ctx)]
    depth = "quick"
    if smoke and info.state == "ready":
        _plan_devices(ctx)
        if ctx.devices:
            _run_smoke(ctx)
            depth = "smoke"
    elif _gpus_to_list(ctx):
        _list_devices(ctx)
        depth = "listing"
    if ctx.health is not None and ctx.health.catch_up():  # NVML's Xids and replays during the run
        checks[1:1 + len(health)] = _health(ctx)
    speedup_check, speedup = smoke_checks.speedup_check(ctx)
    sees = smoke_checks.framework_gpus_check(ctx)
    if sees.status != "pass":
        ctx.gpus_usable = 0  # GPUs count only once the framework itself has seen them
    checks += [sees, smoke_checks.smoke_check(ctx), smoke_checks.multi_replica_check(ctx), speedup_check]
    checks += _figure_checks(ctx)
    result = ctx.smoke_result
    progress.done(verdict_of(checks))
    return Report(env=info.name, verdict=verdict_of(checks), checks=checks, devices=smoke_checks.devices_json(ctx),
                  multi_replica=asdict(result.multi_replica) if result and result.multi_replica else None,
                  speedup=speedup, build=result.build if result else {},
                  host=host.facts(), fingerprint=fingerprint(info, host), created=mf.now(),
                  wall_s=round(time.perf_counter() - started, 3), smoke=smoke, gpus_usable=ctx.gpus_usable,
                  depth=depth, health=_section(ctx), level=level, figures=ctx.figures)
