"""`envcheck validate`: prove envs train on this machine's devices."""
from __future__ import annotations

import click

from ._common import declare, pass_ctx
from .options import ADOPT, JSON, LEVEL, NO_SMOKE, PYTHON, TIMEOUT


@click.command()
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--all", "all_", is_flag=True, help="validate every env")
@click.option("--devices", default="all", show_default=True, metavar="all|cpu|gpu|LIST",
              help="devices to smoke-test, e.g. cpu:0,cpu:1 or gpu:0,gpu:2 (GPUs by NVML index, "
                   "as `envcheck gpu` and nvidia-smi number them, or by UUID GPU-...)")
@declare(NO_SMOKE, TIMEOUT, LEVEL)
@click.option("--strict", is_flag=True, help="exit 1 on warnings too")
@declare(PYTHON, ADOPT)
@declare(JSON)
@pass_ctx
def validate(ctx, names, all_, devices, no_smoke, timeout, level, strict, python, adopt, as_json):
    """Validate envs: host, GPU health, compat, integrity, libraries, a smoke fit per device.

    --level 1 reads each GPU's health only (NVML, device nodes, Xids; no framework, nothing
    stored); 2 (the default) adds the env's checks and smoke fit; 3 measured figures.

    Exit 0 when ready (or degraded without --strict), 1 when not ready, 2 on bad usage.
    With no NAME, the active env (VIRTUAL_ENV, CONDA_PREFIX) when it holds a framework, else
    the env `envcheck select` would choose; --python PATH judges any env or interpreter
    (a venv, a uv project, a conda prefix, a Python) once. --json prints one
    envcheck.validation/1 document: the reports, and a summary.
    """
    from ..usecases.validate_envs import validate_envs
    from ..validation.devices import DEVICES, parse

    selection = parse(devices, DEVICES)  # bad input fails before any work
    with ctx.progress(as_json) as progress:
        result = validate_envs(ctx.session, names, all_envs=all_, devices=selection, smoke=not no_smoke,
                               timeout=timeout, strict=strict, progress=progress, level=level, python=python,
                               adopt=adopt)
    ctx.finish(result, as_json)
