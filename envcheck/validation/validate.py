"""Validate an env on this machine: checks with evidence, a smoke fit per device, a verdict.

The flow is a list of small steps, each a function of the context built so far returning
one ``Check`` (pass | warn | fail | skip, a one-line summary, detail and a fix). Nothing here
prints; the CLI renders the ``Report``.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import frameworks
from ..frameworks.base import SPLIT
from ..envs import manifest as mf
from ..progress import SILENT, Progress
from . import DEFAULT_TIMEOUT
from .devices import Device, DeviceSpec, Selection, parse, resolve, usable_gpus
from .reports import Check, Report, fingerprint, verdict_of

@dataclass
class _Ctx:
    info: Any
    host: Any
    selection: Selection  # resolved against ``host``
    smoke: bool
    timeout: float
    build: Any = None
    verdict: Any = None
    smoke_result: Any = None
    devices: list[Device] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    gpus_usable: int = 0
    listing: bool = False  # the framework listed its devices, no fit (--no-smoke on a GPU host)
    log_dir: Path | None = None  # where a failing runner's output is kept
    log: str | None = None
    progress: Progress = SILENT

    @property
    def gpu_env(self) -> bool:
        return bool(self.build and self.build.gpu_capable)


def _host(ctx: _Ctx) -> Check:
    host = ctx.host
    gpus = host.usable_gpus
    if gpus:
        names = ", ".join(sorted({g.name or "?" for g in gpus}))
        return Check("host", "pass", f"driver {host.driver_version} (CUDA {host.cuda_driver_version}), "
                     f"{len(gpus)} usable GPU(s): {names}", "; ".join(host.warnings))
    message, fix = host.no_gpu_reason()
    if not ctx.gpu_env:
        return Check("host", "skip", f"no usable NVIDIA GPU ({message}); not needed by this CPU env")
    serious = host.nvml_status not in ("ok", "no-library", "no-gpu")
    return Check("host", "fail" if serious else "warn",
                 f"no usable NVIDIA GPU: {message}", "this GPU env will train on the CPU only", fix)


def _compat(ctx: _Ctx) -> Check:
    from ..host.compat import HostProfile, judge

    ctx.build = build = frameworks.build_from_packages(ctx.info.packages)
    if build is None:
        return Check("compat", "fail", "no known deep-learning framework installed",
                     f"packages: {', '.join(ctx.info.packages) or 'none'}",
                     f"install one of {', '.join(frameworks.names())} with `envcheck env add "
                     f"{ctx.info.name} PACKAGE`, or create an env from a preset (envcheck presets list)")
    profile = HostProfile.from_host(ctx.host, python=ctx.info.manifest.get("python", {}).get("version"))
    ctx.verdict = verdict = judge(build, profile)
    if build.gpu_capable and verdict.verdict != "fail" and verdict.uses_gpu:
        ctx.gpus_usable = len(ctx.host.usable_gpus)
    status = {"ok": "pass", "warn": "warn", "fail": "fail"}[verdict.verdict]
    summary = f"{build.label}" + (f" (CUDA {build.cuda}, cuDNN {build.cudnn})" if build.gpu_capable else " (CPU-only)")
    summary += f": {verdict.reasons[0]}" if verdict.reasons else ": fits this host"
    return Check("compat", status, summary, "; ".join(verdict.reasons[1:]),
                 "; ".join(verdict.fixes) or None)


def _integrity(ctx: _Ctx) -> Check:
    from .integrity import check_integrity

    info = ctx.info
    if info.state != "ready":
        return Check("integrity", "fail", f"env is {info.state}: {info.problem}",
                     fix=f"envcheck env remove {info.name} --yes, then create it again")
    result = check_integrity(info.path, info.manifest.get("requested", []), info.packages,
                             info.manifest.get("python", {}).get("version"))
    if not ctx.smoke:
        from ..envs.pythons import interpreter_problem

        started = interpreter_problem(info.python, timeout=ctx.timeout)
        if started is not None:
            return Check("integrity", "fail", f"the env's interpreter does not start: {started}",
                         fix=f"recreate the env: envcheck env remove {info.name} --yes && envcheck env create ...")
    if result.ok:
        return Check("integrity", "pass", f"manifest sound, {len(info.packages)} packages, requirements satisfied")
    problems = result.unsatisfied + result.broken
    return Check("integrity", "fail", f"{len(problems)} requirement problem(s): {problems[0]}",
                 "; ".join(problems), f"envcheck env add {info.name} '<the missing requirement>' or recreate the env")


def _libraries(ctx: _Ctx) -> Check:
    from .libraries import load_errors

    libraries = ctx.info.preset.get("libraries") or []
    if not libraries:
        return Check("libraries", "skip", "no system libraries needed by this preset")
    missing = [name for name, error in load_errors(ctx.info.python, libraries, timeout=ctx.timeout).items() if error]
    from .. import processes

    wheels = processes.wheel_library_dirs(ctx.info.path)
    where = f"LD_LIBRARY_PATH={os.environ.get('LD_LIBRARY_PATH', '')!r} and the ldconfig cache"
    if wheels:
        where = f"the env's CUDA wheels ({len(wheels)} lib folders), {where}"
    if not missing:
        return Check("libraries", "pass", f"all {len(libraries)} CUDA/cuDNN libraries load", where)
    return Check("libraries", "fail", f"{len(missing)} of {len(libraries)} libraries missing: {', '.join(missing)}",
                 f"looked in {where}",
                 libraries_fix(ctx.info.preset.get("cuda"), ctx.info.preset.get("cudnn"),
                               ctx.build.framework if ctx.build else None, ctx.info.preset.get("name")))


def libraries_fix(cuda: str | None, cudnn: str | None, framework: str | None, own: str | None = None) -> str:
    """Install the system CUDA libraries, or use a built-in preset of the framework whose CUDA
    comes from pip wheels (the first two, the env's own preset left out)."""
    from ..envs.presets import builtin_dir, load_preset_file

    fix = f"install CUDA {cuda} and cuDNN {cudnn} and add their lib folders to LD_LIBRARY_PATH"
    wheel_presets = []
    for name in frameworks.get(framework).gpu_presets if framework else ():
        path = builtin_dir() / f"{name}.toml"
        preset = load_preset_file(path, "builtin") if path.is_file() and name != own else None
        if preset is not None and (preset.wheel_libraries or not preset.libraries):
            wheel_presets.append(name)
    return fix + "".join(f" (or use the {p} preset, whose CUDA comes from pip)" for p in wheel_presets[:2])


def _plan_devices(ctx: _Ctx) -> None:
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
    for device in asked:
        if device.kind == "gpu" and ctx.verdict is not None and ctx.verdict.verdict == "fail":
            ctx.skipped[str(device)] = "not attempted: the compat check failed"
        elif device.kind == "gpu" and not ctx.gpu_env:
            ctx.skipped[str(device)] = "not attempted: the env's framework is a CPU-only build"
        else:
            ctx.devices.append(device)


def _run_smoke(ctx: _Ctx) -> None:
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
                           watch=_watch(ctx, names))
    ctx.smoke_result = replace(result, devices=[replace(d, device=names.get(d.device, d.device))
                                                for d in result.devices])


def _watch(ctx: _Ctx, names: dict[str, str]):
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
                ctx.progress.phase(f"{device}: fail, {_first_line(value.get('error') or '')[:120]}")
    return watch


def _diagnosis(stderr: str) -> tuple[str | None, str]:
    from .diagnose import diagnose

    findings = [f for f in diagnose(stderr) if f.severity == "error"]
    if not findings:
        return None, ""
    return "; ".join(f"{f.fix}" for f in findings[:2]), "; ".join(f"{f.title}: {f.cause}" for f in findings[:2])


def _gpus_to_list(ctx: _Ctx) -> bool:
    """Without the fit, GPU readiness still needs the framework to have seen the GPUs."""
    return (ctx.info.state == "ready" and ctx.gpu_env and bool(ctx.host.usable_gpus)
            and ctx.verdict is not None and ctx.verdict.verdict != "fail")


def _list_devices(ctx: _Ctx) -> None:
    from .smoke import list_devices

    backend = ctx.build.framework
    ctx.progress.phase(f"starting {ctx.build.framework} to list its devices")
    ctx.smoke_result = list_devices(ctx.info.python, backend=backend, timeout=ctx.timeout)
    ctx.listing = True


def _sees_gpus(ctx: _Ctx) -> Check:
    result = ctx.smoke_result
    if result is None:
        return Check("framework-gpus", "skip", "not measured (no smoke run)")
    if result.error:
        if ctx.listing:
            fix, cause = _diagnosis(result.stderr_tail)
            return Check("framework-gpus", "fail", f"the framework did not start: {_first_line(result.error)}",
                         cause or result.stderr_tail[-800:], fix or _log_fix(ctx, "reinstall the framework in this env"))
        return Check("framework-gpus", "skip", "not measured: the framework did not start")
    build = result.build
    facts = ", ".join(f"{k}={v}" for k, v in build.items() if v not in (None, "", [], {}))
    visible = len(ctx.host.usable_gpus)
    seen = result.gpus_seen
    if not ctx.gpu_env:
        return Check("framework-gpus", "skip", "CPU-only build: no GPU expected", facts)
    if seen == visible:
        return Check("framework-gpus", "pass", f"the framework sees {seen} of {visible} GPU(s)", facts)
    fix, cause = _diagnosis(result.stderr_tail)
    return Check("framework-gpus", "fail", f"the framework sees {seen} GPU(s), NVML shows {visible}",
                 "; ".join(x for x in (cause, facts) if x),
                 fix or _log_fix(ctx, "check that CUDA and cuDNN load in the env"))


def _smoke_check(ctx: _Ctx) -> Check:
    result = ctx.smoke_result
    if result is None or ctx.listing:
        return Check("smoke", "skip", "skipped (--no-smoke)" if not ctx.smoke else "no device to test")
    failed = [d for d in result.devices if d.status != "pass"]
    fix, cause = _diagnosis(result.stderr_tail)
    if result.error and not result.devices:
        return Check("smoke", "fail", f"the framework did not start: {_first_line(result.error)}",
                     cause or result.stderr_tail[-800:], fix or _log_fix(ctx, "reinstall the framework"))
    if failed:
        first = failed[0]
        return Check("smoke", "fail", f"{len(failed)} of {len(result.devices)} device(s) failed; "
                     f"{first.device}: {_first_line(first.error or 'failed')}",
                     cause or result.stderr_tail[-800:], fix or _log_fix(ctx, f"run it alone: envcheck validate {ctx.info.name} --devices {first.device}"))
    fastest = min(result.devices, key=lambda d: d.ms_per_step or float("inf"))
    return Check("smoke", "pass", f"{len(result.devices)} device(s) trained, loss falling; "
                 f"best {fastest.ms_per_step:.2f} ms/step on {fastest.device}")


def _log_fix(ctx: _Ctx, step: str) -> str:
    """A concrete step, and where the runner's whole output is, for `envcheck diagnose`."""
    log = _keep_log(ctx)
    return f"{step}; the framework's output: {log} (envcheck diagnose {log})" if log else step


def _keep_log(ctx: _Ctx) -> str | None:
    """The runner's stderr, kept once in the home's logs/ (owner-only) for a failing check."""
    if ctx.log is None and ctx.smoke_result is not None and ctx.log_dir is not None:
        text = ctx.smoke_result.stderr_tail.strip()
        if text:
            from datetime import datetime

            stamp = datetime.now().strftime("%Y%m%dT%H%M%S")
            path = ctx.log_dir / f"{ctx.info.name}-smoke-{stamp}-{os.getpid()}.log"
            try:
                ctx.log_dir.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(text + "\n")
                ctx.log = str(path)
            except OSError:
                return None
    return ctx.log


def _multi_fix(ctx: _Ctx, multi) -> str:
    if "divisible" in multi.detail or "batch" in multi.detail.lower():
        return "make the global batch a multiple of the replica count"
    return _log_fix(ctx, "run each device alone: envcheck validate " + ctx.info.name
                    + " --devices " + ",".join(str(d) for d in ctx.devices[:1]))


def _first_line(text: str) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _multi(ctx: _Ctx) -> Check:
    result = ctx.smoke_result
    multi = result.multi_replica if result else None
    if multi is None:
        return Check("multi-replica", "skip", "one device: no data-parallel check")
    if multi.status == "pass":
        return _multi_passed(ctx, multi)
    fix, cause = _diagnosis(result.stderr_tail)
    return Check("multi-replica", "fail" if multi.status == "fail" else "skip",
                 f"data-parallel check {multi.status}: {_first_line(multi.detail)}", cause or multi.detail,
                 fix or _multi_fix(ctx, multi))


def _multi_passed(ctx: _Ctx, multi) -> Check:
    """Scaling efficiency = throughput of the replicas / (replicas x one device's throughput).
    Logical CPU devices share the host's cores, so there it only shows data parallelism works;
    on GPUs, below 1/replicas the replicas together train slower than one GPU alone: on a
    model this small a low value is normal, but that is the all-reduce costing more than all
    the replicas gain, so it is worth a warning."""
    what = (f"{multi.replicas} replicas, global batch {multi.global_batch} = "
            f"{multi.per_replica_batch} x {multi.replicas}")
    eff = multi.scaling_efficiency
    if eff is None:
        return Check("multi-replica", "pass", what, multi.detail)
    what += f", scaling efficiency {eff:.2f} (1.00 = each replica as fast as one device alone)"
    on_gpus = any(d.kind == "gpu" for d in ctx.devices)
    if not on_gpus:
        cores = os.cpu_count() or 1
        framework = frameworks.get(ctx.build.framework) if ctx.build else None
        who, how = (framework.batch_rule if framework else SPLIT).cpu_replicas
        return Check("multi-replica", "pass", what, f"{who} share this host's {cores} core(s), so they "
                     "can't run faster than one: this checks that data parallelism works "
                     f"({how}, the replicas agree), not its speed. " + multi.detail)
    if eff * multi.replicas < 1:
        return Check("multi-replica", "warn", what + f": {multi.replicas} GPUs train slower than one",
                     multi.detail, "check how the GPUs are connected (`nvidia-smi topo -m`) and rerun "
                     "with NCCL_DEBUG=WARN; a P2P path that doesn't work can be disabled with "
                     "NCCL_P2P_DISABLE=1")
    return Check("multi-replica", "pass", what, multi.detail)


def _speedup(ctx: _Ctx) -> tuple[Check, dict | None]:
    result = ctx.smoke_result
    passed = {d.device: d for d in (result.devices if result else []) if d.status == "pass" and d.ms_per_step}
    cpu = passed.get("cpu:0")
    gpus = [d for name, d in passed.items() if name.startswith("gpu:")]
    if not cpu or not gpus:
        return Check("speedup", "skip", "needs a CPU and a GPU result"), None
    per_gpu = {g.device: round(cpu.ms_per_step / g.ms_per_step, 2) for g in gpus}
    best = max(per_gpu, key=per_gpu.get)
    return (Check("speedup", "pass", f"{best} is {per_gpu[best]:.1f}x faster than cpu:0 on the smoke model"),
            {"cpu_ms_per_step": cpu.ms_per_step, "gpu_over_cpu": per_gpu})


def _devices_json(ctx: _Ctx) -> list[dict[str, Any]]:
    from .smoke import DeviceResult

    rows = [asdict(d) for d in (ctx.smoke_result.devices if ctx.smoke_result else [])]
    rows += [asdict(DeviceResult(d, "skip", error=why)) for d, why in ctx.skipped.items()]
    return rows


def validate(info, host, *, devices: DeviceSpec = "all", smoke: bool = True,
             timeout: float = DEFAULT_TIMEOUT, log_dir: Path | None = None,
             progress: Progress = SILENT) -> Report:
    """Run every check for one env (``info`` from the store) against ``host`` (a probe).
    ``devices``: a Selection (``devices.parse``; resolved here unless it is already) or its
    text. A GPU in it that this host can't use is a UsageError before any work.
    ``progress`` hears the checks, then each device's smoke fit as it starts and ends."""
    started = time.perf_counter()
    selection = resolve(devices if isinstance(devices, Selection) else parse(devices), host)
    ctx = _Ctx(info, host, selection, smoke, timeout, log_dir=log_dir, progress=progress)
    progress.start(f"env {info.name}", f"validating env {info.name}")
    progress.phase("checking host, compat, integrity, libraries")
    compat = _compat(ctx)
    checks = [_host(ctx), compat, _integrity(ctx), _libraries(ctx)]
    depth = "quick"
    if smoke and info.state == "ready":
        _plan_devices(ctx)
        if ctx.devices:
            _run_smoke(ctx)
            depth = "smoke"
    elif _gpus_to_list(ctx):
        _list_devices(ctx)
        depth = "listing"
    speedup_check, speedup = _speedup(ctx)
    sees = _sees_gpus(ctx)
    if sees.status != "pass":
        ctx.gpus_usable = 0  # GPUs count only once the framework itself has seen them
    checks += [sees, _smoke_check(ctx), _multi(ctx), speedup_check]
    result = ctx.smoke_result
    progress.done(verdict_of(checks))
    return Report(env=info.name, verdict=verdict_of(checks), checks=checks, devices=_devices_json(ctx),
                  multi_replica=asdict(result.multi_replica) if result and result.multi_replica else None,
                  speedup=speedup, build=result.build if result else {},
                  host=host.to_json(), fingerprint=fingerprint(info, host), created=mf.now(),
                  wall_s=round(time.perf_counter() - started, 3), smoke=smoke, gpus_usable=ctx.gpus_usable,
                  depth=depth)
