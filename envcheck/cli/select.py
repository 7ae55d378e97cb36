"""`envcheck select`: which env to train with, and why."""
from __future__ import annotations

import click

from ._common import pass_ctx
from .output import emit_json


@click.command()
@click.option("--requires", multiple=True, metavar="REQ", help="a requirement the env must satisfy (repeatable)")
@click.option("--framework", type=click.Choice(["tensorflow", "torch", "jax"]), default="tensorflow",
              show_default=True)
@click.option("--require-gpu", is_flag=True, help="exit 1 unless a GPU env can run here")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def select(ctx, requires, framework, require_gpu, as_json):
    """Rank envs: GPU envs this host can run, then CPU envs; exit 1 when none fits."""
    from ..usecases.selection import select as rank
    from ..envs.store import EnvStore

    selection = rank(EnvStore(ctx.home).list(), framework=framework, requires=requires,
                     home=ctx.home, require_gpu=require_gpu)
    if as_json:
        emit_json(selection.to_json())
    else:
        for i, r in enumerate(selection.ranking, 1):
            mark = "*" if i == 1 else " "
            click.echo(f"{mark} {i}. {r.name:<20} {r.tier:<4} {r.reason}")
        for ex in selection.excluded:
            click.echo(f"  -  {ex['name']:<20} not ranked: {ex['reason']}")
        if selection.warning:
            click.echo(f"warning: {selection.warning}", err=True)
    failed = not selection.ranking or (require_gpu and not selection.gpu_tier)
    if failed:
        raise click.exceptions.Exit(1)
