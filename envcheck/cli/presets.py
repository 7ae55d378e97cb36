"""`envcheck presets list|show`: the presets an env can be created from."""
from __future__ import annotations

import click

from ..envs.presets import Preset, available_presets, resolve_preset, specifier_text
from ._common import pass_ctx
from .output import emit_json

LIST_SCHEMA = "envcheck.presets/1"
SHOW_SCHEMA = "envcheck.preset/1"


@click.group()
def presets() -> None:
    """Presets: built-in, and your own in $ENVCHECK_HOME/presets/*.toml."""


@presets.command("list")
@click.option("--json", "as_json", is_flag=True, help="print JSON (schema envcheck.presets/1)")
@pass_ctx
def list_(ctx, as_json: bool) -> None:
    """List every preset: name, kind, framework, Python and title."""
    found = list(available_presets(ctx.home).values())
    if as_json:
        emit_json({"schema": LIST_SCHEMA, "presets": [p.to_json() for p in found]})
        return
    rows = [("NAME", "KIND", "FRAMEWORK", "PYTHON", "TITLE")]
    rows += [(p.name + ("*" if p.origin == "user" else ""), p.kind, p.framework,
              specifier_text(p.requires_python) or "any", p.title) for p in found]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[4])
    if any(p.origin == "user" for p in found):
        click.echo(f"\n* from {ctx.home.presets}")


@presets.command("show")
@click.argument("name", required=False)
@click.option("--preset-file", type=click.Path(dir_okay=False), default=None,
              help="show a preset file instead of a named preset")
@click.option("--json", "as_json", is_flag=True, help="print JSON (schema envcheck.preset/1)")
@pass_ctx
def show(ctx, name: str | None, preset_file: str | None, as_json: bool) -> None:
    """Show one preset: its packages, Python range and GPU requirements."""
    preset = resolve_preset(ctx.home, name=name, file=preset_file)
    if as_json:
        emit_json({"schema": SHOW_SCHEMA, "preset": preset.to_json()})
        return
    for label, value in _fields(preset):
        click.echo(f"{label + ':':<17}{value}")


def _fields(preset: Preset) -> list[tuple[str, str]]:
    fields = [
        ("name", preset.name),
        ("title", preset.title),
        ("kind", preset.kind),
        ("framework", preset.framework),
        ("requires-python", specifier_text(preset.requires_python) or "any"),
        ("packages", ", ".join(preset.packages)),
    ]
    if preset.kind == "gpu":
        fields += [("cuda", preset.cuda or "-"), ("cudnn", preset.cudnn or "-"),
                   ("libraries", ", ".join(preset.libraries) or "none (from pip wheels or bundled)")]
    fields += [("source", f"{preset.source} ({preset.origin})"), ("content hash", preset.content_hash[:16])]
    if preset.description:
        fields.append(("description", preset.description))
    return fields
