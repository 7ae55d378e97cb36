"""`envcheck doctor`: is this machine ready to train, and with which env?"""
from __future__ import annotations

import click

from ._common import declare, pass_ctx
from .options import JSON, NO_SMOKE, TIMEOUT


@click.command()
@declare(NO_SMOKE, TIMEOUT, JSON)
@pass_ctx
def doctor(ctx, no_smoke, timeout, as_json):
    """Host GPU state, envs ranked, the selected env validated, next steps.

    Exit 0 when the selected env is ready to train, 1 otherwise.
    """
    from ..usecases.doctor import doctor as run_doctor

    ctx.finish(run_doctor(ctx.session, smoke=not no_smoke, timeout=timeout), as_json)
