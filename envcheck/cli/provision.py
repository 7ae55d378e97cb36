"""`envcheck provision`: the installer hook (idempotent; safe to run twice at once)."""
from __future__ import annotations

import click

from ._common import index_options, pass_ctx
from .output import emit_json


def render(result) -> None:
    rows = [(o.name, o.action, o.verdict or "-", o.reason) for o in result.envs]
    header = ("ENV", "ACTION", "VERDICT", "REASON")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths)) + "  " + row[3])
    for o in result.envs:
        if o.fix and not o.ok:
            click.echo(f"fix ({o.name}): {o.fix}")
        if o.log:
            click.echo(f"full installer output ({o.name}): {o.log}")
    bad = [o.name for o in result.envs if not o.ok]
    click.echo("provision: ok" if not bad else f"provision: NOT ok: {', '.join(bad)}")


@click.command()
@click.option("--preset", "names", multiple=True, metavar="NAME",
              help="a preset to provision as env NAME (repeatable)")
@click.option("--preset-file", "files", multiple=True, type=click.Path(dir_okay=False), metavar="F",
              help="a preset file to provision, as env named after the file (repeatable)")
@click.option("--auto", is_flag=True,
              help="the CPU preset, plus each GPU preset this host's driver, GPUs, Pythons and libraries can run")
@click.option("--no-smoke", is_flag=True, help="validate without the Keras fit (quick checks only)")
@click.option("--wait", default=3600.0, show_default=True, type=click.FloatRange(min=0), metavar="SECONDS",
              help="how long to wait for another envcheck process building the same env")
@index_options
@click.option("--json", "as_json", is_flag=True, help="print a report an installer can keep")
@pass_ctx
def provision(ctx, names, files, auto, no_smoke, wait, installer, index_url, extra_index_url, find_links,
              no_index, as_json):
    """Create the envs an installation needs, unless they exist, and validate each.

    An env is named after its preset. One that exists from the same preset content is left
    unchanged; one made from another version of the preset is reported `stale` and left as it
    is, with the command that rebuilds it. Exit 0 when every requested env is ready (or
    degraded), 1 otherwise (failed, stale, not ready), 2 on bad input (nothing is created).
    """
    from ..usecases.provision import provision as run_provision

    index = {"index_url": index_url, "extra_index_urls": extra_index_url,
             "find_links": find_links, "no_index": no_index}
    result = run_provision(ctx.home, names=names, files=files, auto=auto, smoke=not no_smoke,
                           installer=installer, index=index, wait=wait,
                           progress=None if as_json else lambda line: click.echo(line, err=True))
    if as_json:
        emit_json(result.to_json())
    else:
        render(result)
    if not result.ok:
        raise click.exceptions.Exit(1)
