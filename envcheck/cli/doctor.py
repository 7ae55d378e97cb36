"""`envcheck doctor`: is this machine ready to train, and with which env?"""
from __future__ import annotations

import click

from ._common import declare, pass_ctx
from .options import FRAMEWORK, JSON, NO_SMOKE, TIMEOUT
from .report import HTML


@click.command()
@declare(FRAMEWORK, NO_SMOKE, TIMEOUT, JSON)
@click.option("--markdown", is_flag=True,
              help="one Markdown report to paste into a bug thread: versions, GPU health, envs")
@declare(HTML)
@pass_ctx
def doctor(ctx, framework, no_smoke, timeout, as_json, markdown, html):
    """Host GPU state, envs ranked, the selected env validated, next steps.

    Exit 0 when the selected env is ready to train, 1 otherwise.
    """
    from ..usecases.doctor import doctor as run_doctor

    if markdown and html:
        from ..errors import UsageError

        raise UsageError("--markdown and --html are two forms of one report", "pass one of them")
    if markdown:
        from . import views_markdown  # noqa: F401  (registers the Markdown renderer)
        from ..errors import UsageError
        from ..usecases.bugreport import bug_report

        if as_json:
            raise UsageError("--markdown and --json are two forms of one report", "pass one of them")
        return ctx.finish(bug_report(ctx.session, smoke=not no_smoke, timeout=timeout, framework=framework), False)
    with ctx.progress(as_json) as progress:
        result = run_doctor(ctx.session, smoke=not no_smoke, timeout=timeout, progress=progress,
                            framework=framework)
    if html:
        from ..usecases.report import doctor_reports
        from .report import write

        write(ctx, html, doctor_reports(ctx.session, result))
    ctx.finish(result, as_json)
