"""The checks made before the framework runs a fit: the host's GPUs, the build's compat with
this host, the env's integrity (its manifest, requirements and interpreter) and the system
libraries its preset needs. Each is a function of the validation's ``Context`` returning one
``Check``; ``compat_check`` also records the build and verdict the later steps read.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .. import frameworks
from .gpu_use import cpu_build, library_problems
from .reports import Check

if TYPE_CHECKING:
    from .validate import Context


def host_check(ctx: Context) -> Check:
    host = ctx.host
    gpus = host.usable_gpus
    if gpus:
        names = ", ".join(sorted({g.name or "?" for g in gpus}))
        return Check("host", "pass", f"driver {host.driver_version} (CUDA {host.cuda_driver_version}), "
                     f"{len(gpus)} usable GPU(s): {names}", "; ".join(host.warnings))
    message, fix = host.no_gpu_reason()
    if not ctx.gpu_env:
        if host.nvml_status in ("no-library", "driver-not-loaded", "no-gpu") and not host.gpus:
            return Check("host", "skip", "no NVIDIA GPU (health: no-gpu); not needed by this CPU env")
        return Check("host", "skip", f"no usable NVIDIA GPU ({message}); not needed by this CPU env")
    serious = host.nvml_status not in ("ok", "no-library", "no-gpu")
    return Check("host", "fail" if serious else "warn",
                 f"no usable NVIDIA GPU: {message}", "this GPU env will train on the CPU only", fix)


def compat_check(ctx: Context) -> Check:
    from ..host.compat import HostProfile, judge

    ctx.build = build = frameworks.build_from_packages(ctx.info.packages)
    if build is None:
        return Check("compat", "fail", "no known deep-learning framework installed",
                     f"packages: {', '.join(ctx.info.packages) or 'none'}",
                     f"install one of {', '.join(frameworks.names())} with `{ctx.info.add_command('PACKAGE')}`"
                     + ("" if ctx.info.adopted else ", or create an env from a preset (envcheck presets list)"))
    profile = HostProfile.from_host(ctx.host, python=ctx.info.manifest.get("python", {}).get("version"))
    ctx.verdict = verdict = judge(build, profile)
    if build.gpu_capable and verdict.verdict != "fail" and verdict.uses_gpu:
        ctx.gpus_usable = len(ctx.host.usable_gpus)
    idle = cpu_build(ctx.info, build, ctx.host) if verdict.verdict != "fail" else None
    if idle is not None:  # a CPU-only build beside usable GPUs: it trains, and ignores them
        return Check("compat", "warn", idle[0], "; ".join(build.notes), idle[1])
    status = {"ok": "pass", "warn": "warn", "fail": "fail"}[verdict.verdict]
    summary = f"{build.label}" + (f" (CUDA {build.cuda}, cuDNN {build.cudnn})" if build.gpu_capable else " (CPU-only)")
    summary += f": {verdict.reasons[0]}" if verdict.reasons else ": fits this host"
    return Check("compat", status, summary, "; ".join(verdict.reasons[1:]),
                 "; ".join(verdict.fixes) or None)


def integrity_check(ctx: Context) -> Check:
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
    if not result.ok:
        problems = result.unsatisfied + result.broken
        return Check("integrity", "fail", f"{len(problems)} requirement problem(s): {problems[0]}",
                     "; ".join(problems), f"{info.add_command(repr('<the missing requirement>'))}"
                     + ("" if info.adopted else " or recreate the env"))
    drift = _drift(info)
    writable = drift.writable_summary() if drift is not None else None
    since = ""
    if drift is not None and not drift.clean and info.adopted:
        # the user's own installs are theirs to make: said, not held against it; files that
        # changed under their packages' RECORDs are another matter (degraded)
        if not any(drift.counts.values()):
            since = f"; since adoption: {drift.summary()} (envcheck env verify {info.name})"
        else:
            return Check("integrity", "warn", f"changed since adoption: {drift.summary()}",
                         f"envcheck env verify {info.name} names each file",
                         f"reinstall what changed with the env's own installer "
                         f"({info.add_command('--force-reinstall PACKAGE')})")
    elif drift is not None and not drift.clean:
        lock = (info.manifest.get("lock") or {}).get("source")
        return Check("integrity", "fail", f"drifted since it was made: {drift.summary()}",
                     "; ".join(filter(None, [f"envcheck env verify {info.name} names each file", writable])),
                     f"recreate it: envcheck env remove {info.name} --yes && envcheck env create {info.name} "
                     + (f"--lock {lock}" if lock else "..."))
    if writable:  # anyone who may write them can change what a training job runs
        return Check("integrity", "warn", writable, "; ".join(drift.writable),
                     f"chmod -R go-w {info.path} (envcheck env verify {info.name} names each file)")
    return Check("integrity", "pass", f"manifest sound, {len(info.packages)} packages, requirements satisfied{since}")


def _drift(info):
    """The env's drift since its baseline (``envs.verify``, quick), or None: it has no baseline."""
    from ..envs import verify

    baseline = verify.read(str(info.record_dir))
    if baseline is None and info.adopted:  # no file baseline until its first `env verify`: its packages then
        return verify.packages_since(info.manifest.get("packages") or {}, info.packages)
    return None if baseline is None else verify.verify(str(info.path), baseline)


def libraries_check(ctx: Context) -> Check:
    from .libraries import load_errors

    libraries = ctx.info.preset.get("libraries") or []
    if not libraries:
        problems = library_problems(ctx.info, ctx.build)
        if problems:  # what the loader would take in place of the env's own CUDA
            status = "fail" if any(p[0] == "fail" for p in problems) else "warn"
            worst = next(p for p in problems if p[0] == status)
            return Check("libraries", status, worst[1], "; ".join(p[1] for p in problems), worst[2])
        return Check("libraries", "skip", "no system libraries needed by this preset")
    missing = [name for name, error in load_errors(ctx.info.python, libraries, timeout=ctx.timeout).items() if error]
    from ..child_env import wheel_library_dirs

    wheels = wheel_library_dirs(ctx.info.path)
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
