"""`envcheck check`: the pre-training gate (cached; exit 0 ready, 1 not ready)."""
from __future__ import annotations

import click

from ._common import pass_ctx
from .output import render_gate


@click.command()
@click.option("--env", "env_name", default="auto", show_default=True, metavar="NAME|auto",
              help="the env to check; auto = the one `envcheck select` picks")
@click.option("--require-gpu", is_flag=True, help="not ready unless the env can train on a GPU here")
@click.option("--min-gpus", default=0, type=click.IntRange(min=0), help="GPUs the env must be able to use")
@click.option("--max-age", default="24h", show_default=True, help="how old a stored validation may be")
@click.option("--smoke", is_flag=True, help="also run the smoke fit when the cache can't answer")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def check(ctx, env_name, require_gpu, min_gpus, max_age, smoke, as_json):
    """Is the env ready to train here? Answers from a stored validation when nothing changed."""
    from ..usecases.gate import check as gate, parse_age

    seconds = parse_age(max_age)
    result = gate(ctx.home, None if env_name == "auto" else env_name, require_gpu=require_gpu,
                  min_gpus=min_gpus, max_age=seconds, smoke=smoke)
    render_gate(result, as_json)
    if not result.ready:
        raise click.exceptions.Exit(1)
