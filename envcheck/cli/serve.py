"""`envcheck serve`: the Prometheus exporter (``exporter.py``)."""
from __future__ import annotations

import click

from ._common import declare, pass_ctx
from .options import REVALIDATE_EVERY


@click.command()
@click.option("--bind", default="127.0.0.1", show_default=True, metavar="ADDRESS",
              help="the address to listen on (every interface only when said: 0.0.0.0 or ::)")
@click.option("--port", default=9464, show_default=True, type=click.IntRange(0, 65535), metavar="PORT",
              help="the port (0: any free one, shown on stderr)")
@declare(REVALIDATE_EVERY)
@click.option("--no-revalidate", "no_revalidate", is_flag=True,
              help="never validate, not even when the host changes (driver, GPUs)")
@pass_ctx
def serve(ctx, bind: str, port: int, revalidate_every: float | None, no_revalidate: bool) -> None:
    """Serve /metrics (Prometheus) and /healthz until SIGTERM.

    Each scrape answers from the stored validations and the GPUs' level-1 reads, now; it
    never validates. Between scrapes, one env at a time is validated again (`envcheck
    validate` as a child, only on GPUs no process is using) when the host's driver or GPUs
    changed since its validation, and with --revalidate-every when its validation is older.
    """
    from ..usecases.revalidation import Revalidation
    from .exporter import serve as run_server

    revalidation = None if no_revalidate else Revalidation(every=revalidate_every)
    code = run_server(str(ctx.home.root), bind, port, revalidation)
    if code:
        raise click.exceptions.Exit(code)
