"""`envcheck select`: which env to train with, and why."""
from __future__ import annotations

import click

from ._common import declare, pass_ctx
from .options import FRAMEWORK, JSON


@click.command()
@click.option("--requires", multiple=True, metavar="REQ", help="a requirement the env must satisfy (repeatable)")
@declare(FRAMEWORK)
@click.option("--require-gpu", is_flag=True, help="exit 1 unless a GPU env can run here")
@declare(JSON)
@pass_ctx
def select(ctx, requires, framework, require_gpu, as_json):
    """Rank envs: GPU envs this host can run, then CPU envs; exit 1 when none fits.

    Without an answer (exit 1) stdout stays empty and the JSON's "selected" is null: the
    ranking goes to stderr as context, so a script reading stdout can't take a CPU env for
    the GPU env --require-gpu asked for."""
    ctx.finish(ctx.session.select(framework=framework, requires=requires, require_gpu=require_gpu),
               as_json)
