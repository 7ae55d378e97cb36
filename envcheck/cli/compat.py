"""``envcheck compat``: can a framework build (named, or an env's) train on this host's GPUs?

What the options don't give comes from the live host (NVML through ``envcheck.probe``), so
``--driver``/``--gpu-cc``/``--os``/``--no-gpu`` make a "what-if" profile. Exit 0 for ok and
warn, 1 for fail, 2 for bad input.
"""
from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Any

import click

from ..host.compat import (DISTRIBUTIONS, OPERATING_SYSTEMS, Build, HostProfile, Verdict,
                      build_from_packages, framework_build, judge, min_driver)
from ..errors import UsageError
from ._common import pass_ctx
from .output import emit_json

SCHEMA = "envcheck.compat/1"


@click.command()
@click.option("--framework", metavar="DIST==VERSION",
              help="a framework release, e.g. tensorflow==2.11.1 or torch==2.5.1+cu118")
@click.option("--env", "env_name", metavar="NAME", help="judge the framework installed in env NAME")
@click.option("--driver", metavar="VERSION", help="what-if NVIDIA driver version (default: this host's)")
@click.option("--gpu-cc", "gpu_ccs", multiple=True, metavar="X.Y",
              help="what-if GPU compute capability, repeatable (default: this host's GPUs)")
@click.option("--no-gpu", is_flag=True, help="what-if a host without NVIDIA driver or GPU")
@click.option("--os", "os_name", type=click.Choice(OPERATING_SYSTEMS),
              help="what-if operating system (default: this host's)")
@click.option("--python", metavar="X.Y",
              help="Python the framework runs on (default: the env's; unchecked with --framework)")
@click.option("--require-gpu", is_flag=True, help="a build that would run on the CPU fails")
@click.option("--json", "as_json", is_flag=True, help=f"print the {SCHEMA} JSON document")
@pass_ctx
def compat(ctx, framework: str | None, env_name: str | None, driver: str | None,
           gpu_ccs: tuple[str, ...], no_gpu: bool, os_name: str | None, python: str | None,
           require_gpu: bool, as_json: bool) -> None:
    """Judge a framework build against a driver, GPUs, OS and Python."""
    if (framework is None) == (env_name is None):
        raise UsageError("give exactly one of --framework DIST==VERSION or --env NAME",
                         "e.g. envcheck compat --framework tensorflow==2.15.0")
    if no_gpu and (driver or gpu_ccs):
        raise UsageError("--no-gpu contradicts --driver/--gpu-cc", "give one or the other")
    if framework is not None:
        build = _named_build(framework)
    else:
        build, env_python = _env_build(ctx, env_name)
        python = python or env_python
    host, source = _host(driver, gpu_ccs, no_gpu, os_name, python)
    verdict = judge(build, host, require_gpu=require_gpu)
    if as_json:
        emit_json(document(build, host, source, verdict))
    else:
        click.echo(render(build, host, source, verdict))
    if verdict.verdict == "fail":
        raise click.exceptions.Exit(1)


def _named_build(spec: str) -> Build:
    dist, sep, version = spec.partition("==")
    if not sep or not dist.strip() or not version.strip():
        raise UsageError(f"bad --framework {spec!r}",
                         "write it as DIST==VERSION, e.g. tensorflow==2.15.0")
    build = framework_build(dist.strip(), version.strip())
    if build is None:
        raise UsageError(f"no compatibility facts for {spec}",
                         f"known distributions: {', '.join(DISTRIBUTIONS)} (TensorFlow 1.13-2.21, "
                         "PyTorch 1.10-2.15)")
    return build


def _env_build(ctx, name: str) -> tuple[Build, str | None]:
    from ..envs.store import EnvStore

    info = EnvStore(ctx.home).get(name)
    build = build_from_packages(info.packages)
    if build is None:
        raise UsageError(f"env {name} has no framework the compatibility tables know",
                         f"install one of {', '.join(DISTRIBUTIONS)} (`envcheck env add {name} ...`)")
    return build, (info.manifest.get("python") or {}).get("version")


def _host(driver: str | None, gpu_ccs: tuple[str, ...], no_gpu: bool, os_name: str | None,
          python: str | None) -> tuple[HostProfile, dict[str, str]]:
    """The host profile: what was given, the rest from the live host; and where each came from."""
    os_name = os_name or ("windows" if sys.platform == "win32" else "linux")
    source = {"driver": "given", "gpus": "given"}
    if no_gpu:
        return HostProfile(None, (), os_name, python), source
    state = _probe() if driver is None or not gpu_ccs else None
    if driver is None:
        driver, source["driver"] = (state.driver_version if state else None), "probe"
    if not gpu_ccs:
        gpus = state.usable_gpus if state else []
        gpu_ccs = tuple(g.compute_capability for g in gpus if g.compute_capability)
        source["gpus"] = "probe"
    if state is not None:
        source["nvml"] = state.nvml_status
    return HostProfile(driver, gpu_ccs, os_name, python), source


def _probe():
    from ..host.probe import probe

    return probe()


def document(build: Build, host: HostProfile, source: dict[str, str],
             verdict: Verdict) -> dict[str, Any]:
    """The envcheck.compat/1 JSON document."""
    build_json = asdict(build)
    build_json["driver"] = (asdict(min_driver(build.cuda, host.os))
                            if build.cuda and host.os in OPERATING_SYSTEMS else None)
    return {
        "schema": SCHEMA,
        "framework": build.framework,
        "version": build.version,
        "build": build_json,
        "host": {**asdict(host), "gpu_ccs": list(host.gpu_ccs), "source": source},
        "verdict": verdict.verdict,
        "uses_gpu": verdict.uses_gpu,
        "reasons": verdict.reasons,
        "fixes": verdict.fixes,
    }


def render(build: Build, host: HostProfile, source: dict[str, str], verdict: Verdict) -> str:
    if build.gpu_capable:
        archs = " ".join(build.archs) if build.archs else "not known"
        what = f"CUDA {build.cuda}, cuDNN {build.cudnn or 'not known'}, architectures {archs}"
    else:
        what = "CPU-only"
    driver = host.driver_version or "none"
    gpus = ", ".join(host.gpu_ccs) or "none"
    lines = [
        f"build: {build.label} ({what})",
        f"host:  driver {driver} ({source['driver']}), GPU compute capability {gpus} "
        f"({source['gpus']}), {host.os}, Python {host.python or 'not checked'}",
        f"verdict: {verdict.verdict}",
    ]
    lines += [f"  - {reason}" for reason in verdict.reasons]
    lines += [f"fix: {fix}" for fix in verdict.fixes]
    return "\n".join(lines)
