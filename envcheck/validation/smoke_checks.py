"""The checks read from what the framework answered (its smoke fit, or the list of devices it
sees): the GPUs it sees, the fit on each device, the multi-replica run and the speedup over
the CPU; a failing one's fix comes from the diagnosis of the runner's output, which is kept
in the home's logs for ``envcheck diagnose``.
"""
from __future__ import annotations

import os
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from .. import frameworks
from ..frameworks.base import SPLIT
from .reports import Check

if TYPE_CHECKING:
    from .smoke import MultiReplica
    from .validate import Context


def framework_gpus_check(ctx: Context) -> Check:
    result = ctx.smoke_result
    if result is None:
        return Check("framework-gpus", "skip", "not measured (no smoke run)")
    if result.error:
        if ctx.listing:
            fix, cause = _diagnosis(result.stderr_tail)
            return Check("framework-gpus", "fail", f"the framework did not start: {first_line(result.error)}",
                         cause or result.stderr_tail[-800:], fix or _log_fix(ctx, "reinstall the framework in this env"))
        return Check("framework-gpus", "skip", "not measured: the framework did not start")
    build = result.build
    facts = ", ".join(f"{k}={v}" for k, v in build.items() if v not in (None, "", [], {}))
    visible = len(ctx.host.usable_gpus)
    seen = result.gpus_seen
    if not ctx.gpu_env:
        return Check("framework-gpus", "skip", "CPU-only build: no GPU expected", facts)
    from .gpu_use import arch_problem

    archs = arch_problem(ctx.build, build, ctx.host) if ctx.build is not None else None
    if archs is not None:  # the build's own architectures, not the table's, say the GPUs can't run it
        return Check("framework-gpus", "fail", archs, facts,
                     "install a build compiled for this GPU's architecture: envcheck compat --framework "
                     f"{ctx.build.distribution}=={ctx.build.version} names one")
    if seen == visible:
        return Check("framework-gpus", "pass", f"the framework sees {seen} of {visible} GPU(s)", facts)
    fix, cause = _diagnosis(result.stderr_tail)
    return Check("framework-gpus", "fail", f"the framework sees {seen} GPU(s), NVML shows {visible}",
                 "; ".join(x for x in (cause, facts) if x),
                 fix or _log_fix(ctx, "check that CUDA and cuDNN load in the env"))


def smoke_check(ctx: Context) -> Check:
    result = ctx.smoke_result
    if result is None or ctx.listing:
        return Check("smoke", "skip", "skipped (--no-smoke)" if not ctx.smoke else "no device to test")
    failed = [d for d in result.devices if d.status != "pass"]
    fix, cause = _diagnosis(result.stderr_tail)
    if result.error and not result.devices:
        return Check("smoke", "fail", f"the framework did not start: {first_line(result.error)}",
                     cause or result.stderr_tail[-800:], fix or _log_fix(ctx, "reinstall the framework"))
    if failed:
        first = failed[0]
        return Check("smoke", "fail", f"{len(failed)} of {len(result.devices)} device(s) failed; "
                     f"{first.device}: {first_line(first.error or 'failed')}",
                     cause or result.stderr_tail[-800:], fix or _log_fix(ctx, f"run it alone: envcheck validate {ctx.info.name} --devices {first.device}"))
    fastest = min(result.devices, key=lambda d: d.ms_per_step or float("inf"))
    return Check("smoke", "pass", f"{len(result.devices)} device(s) trained, loss falling; "
                 f"best {fastest.ms_per_step:.2f} ms/step on {fastest.device}")


def multi_replica_check(ctx: Context) -> Check:
    result = ctx.smoke_result
    multi = result.multi_replica if result else None
    if multi is None:
        return Check("multi-replica", "skip", "one device: no data-parallel check")
    if multi.status == "pass":
        return _multi_passed(ctx, multi)
    fix, cause = _diagnosis(result.stderr_tail)
    return Check("multi-replica", "fail" if multi.status == "fail" else "skip",
                 f"data-parallel check {multi.status}: {first_line(multi.detail)}", cause or multi.detail,
                 fix or _multi_fix(ctx, multi))


def _multi_passed(ctx: Context, multi: MultiReplica) -> Check:
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


def _multi_fix(ctx: Context, multi: MultiReplica) -> str:
    if "divisible" in multi.detail or "batch" in multi.detail.lower():
        return "make the global batch a multiple of the replica count"
    return _log_fix(ctx, "run each device alone: envcheck validate " + ctx.info.name
                    + " --devices " + ",".join(str(d) for d in ctx.devices[:1]))


def speedup_check(ctx: Context) -> tuple[Check, dict | None]:
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


def devices_json(ctx: Context) -> list[dict[str, Any]]:
    from .smoke import DeviceResult

    rows = [asdict(d) for d in (ctx.smoke_result.devices if ctx.smoke_result else [])]
    rows += [asdict(DeviceResult(d, "skip", error=why)) for d, why in ctx.skipped.items()]
    return rows


def _diagnosis(stderr: str) -> tuple[str | None, str]:
    from .diagnose import diagnose

    findings = [f for f in diagnose(stderr) if f.severity == "error"]
    if not findings:
        return None, ""
    return "; ".join(f"{f.fix}" for f in findings[:2]), "; ".join(f"{f.title}: {f.cause}" for f in findings[:2])


def _log_fix(ctx: Context, step: str) -> str:
    """A concrete step, and where the runner's whole output is, for `envcheck diagnose`."""
    log = _keep_log(ctx)
    return f"{step}; the framework's output: {log} (envcheck diagnose {log})" if log else step


def _keep_log(ctx: Context) -> str | None:
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


def first_line(text: str) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""
