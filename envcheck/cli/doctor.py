"""`envcheck doctor`: is this machine ready to train, and with which env?"""
from __future__ import annotations

import click

from ._common import pass_ctx
from .output import emit_json


def _host_line(host) -> str:
    if host.usable_gpus:
        names = ", ".join(f"{g.index}: {g.name} (cc {g.compute_capability})" for g in host.usable_gpus)
        return f"driver {host.driver_version}, CUDA {host.cuda_driver_version}; GPUs {names}"
    message, fix = host.no_gpu_reason()
    return f"no usable NVIDIA GPU: {message} (fix: {fix})"


@click.command()
@click.option("--no-smoke", is_flag=True, help="skip the smoke fit")
@click.option("--timeout", default=120.0, show_default=True, type=click.FloatRange(min=1),
              help="seconds allowed per device")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def doctor(ctx, no_smoke, timeout, as_json):
    """Host GPU state, envs ranked, the selected env validated, next steps.

    Exit 0 when the selected env is ready to train, 1 otherwise.
    """
    from ..usecases.doctor import doctor as run_doctor
    from .validate import render

    result = run_doctor(ctx.home, smoke=not no_smoke, timeout=timeout)
    if as_json:
        emit_json(result.to_json())
    else:
        click.echo(f"host: {_host_line(result.host)}")
        for warning in result.host.warnings:
            click.echo(f"  warning: {warning}")
        click.echo("envs:")
        for i, r in enumerate(result.selection.ranking, 1):
            click.echo(f"  {'*' if i == 1 else ' '} {r.name:<20} {r.tier:<4} {r.reason}")
        for ex in result.selection.excluded:
            click.echo(f"    {ex['name']:<20} not ranked: {ex['reason']}")
        if result.report:
            click.echo("")
            render(result.report)
        click.echo("\nnext steps:")
        for step in result.next_steps:
            click.echo(f"  - {step}")
    if not result.ok:
        raise click.exceptions.Exit(1)
