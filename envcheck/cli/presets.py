"""`envcheck presets list|show`: the presets an env can be created from."""
from __future__ import annotations

import click

from ._common import declare, pass_ctx
from .options import JSON


@click.group()
def presets() -> None:
    """Presets: built-in, and your own in $ENVCHECK_HOME/presets/*.toml."""


@presets.command("list")
@declare(JSON)
@pass_ctx
def list_(ctx, as_json: bool) -> None:
    """List every preset: name, kind, framework, Python and title."""
    from ..usecases.catalogue import list_presets

    ctx.finish(list_presets(ctx.session), as_json)


@presets.command("show")
@click.argument("name", required=False)
@click.option("--preset-file", type=click.Path(dir_okay=False), default=None,
              help="show a preset file instead of a named preset")
@declare(JSON)
@pass_ctx
def show(ctx, name: str | None, preset_file: str | None, as_json: bool) -> None:
    """Show one preset: its packages, Python range and GPU requirements."""
    from ..usecases.catalogue import show_preset

    ctx.finish(show_preset(ctx.session, name, preset_file), as_json)
