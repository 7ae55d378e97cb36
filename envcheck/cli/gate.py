"""`envcheck check`: the pre-training gate (cached; exit 0 ready, 1 not ready)."""
from __future__ import annotations

import click

from ._common import declare, pass_ctx
from .options import CHECK


@click.command()
@declare(*CHECK)
@pass_ctx
def check(ctx, env_name, framework, require_gpu, min_gpus, max_age, smoke, level, python, adopt, as_json):
    """Is the env ready to train here? Answers from a stored validation when nothing changed.

    With no --env, the active env (VIRTUAL_ENV, CONDA_PREFIX) when it holds a framework, else
    the one `envcheck select` picks; --python PATH judges any env or interpreter once."""
    from ..usecases.gate import check as gate

    ctx.finish(gate(ctx.session, env_name, framework=framework, require_gpu=require_gpu, min_gpus=min_gpus,
                    max_age=max_age, smoke=smoke, level=level, python=python, adopt=adopt), as_json)
