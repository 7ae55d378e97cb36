"""`envcheck doctor`: is this machine ready to train, and with which env?"""
from __future__ import annotations

import click

from ._common import declare, output_forms, pass_ctx
from .options import FRAMEWORK, LEVEL, NO_SMOKE, TIMEOUT
from .report import HTML


@click.command()
@declare(FRAMEWORK, NO_SMOKE, TIMEOUT, LEVEL)
@output_forms("text", "json", "markdown", "html")
@declare(HTML)
@pass_ctx
def doctor(ctx, framework, no_smoke, timeout, level, form, html):
    """Host GPU state, envs ranked, the selected env validated, next steps.

    --format html prints them as `envcheck report`'s page (every env's stored report, and
    these next steps); --html FILE writes that page.
    Exit 0 when the selected env is ready to train, 1 otherwise.
    """
    from ..usecases.doctor import doctor as run_doctor

    if form == "markdown":
        from ..usecases.bugreport import bug_report

        if html:
            from ..errors import UsageError

            raise UsageError("--markdown and --html are two forms of one report", "pass one of them")
        return ctx.finish(bug_report(ctx.session, smoke=not no_smoke, timeout=timeout, framework=framework,
                                     level=level),
                          form=form)
    with ctx.progress(form in ("json", "html")) as progress:
        result = run_doctor(ctx.session, smoke=not no_smoke, timeout=timeout, progress=progress,
                            framework=framework, level=level)
    page = None
    if html or form == "html":
        from ..usecases.report import doctor_reports

        page = doctor_reports(ctx.session, result)
    if html:
        from .report import write

        write(ctx, html, page)
    ctx.finish(result, form=form, shown=page if form == "html" else None)
