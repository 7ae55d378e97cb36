"""`envcheck env ...`: create, list, show, add, export, remove."""
from __future__ import annotations

import sys

import click

from ..errors import UsageError
from ._common import index_options, pass_ctx
from .output import emit_json

ENVS_SCHEMA = "envcheck.envs/1"
ENV_SCHEMA = "envcheck.env/1"


def _store(ctx):
    from ..envs.store import EnvStore

    return EnvStore(ctx.home)


def _index(index_url, extra_index_url, find_links, no_index) -> dict:
    return {"index_url": index_url, "extra_index_urls": extra_index_url,
            "find_links": find_links, "no_index": no_index}


def _show(info, as_json: bool) -> None:
    if as_json:
        emit_json({"schema": ENV_SCHEMA, "env": info.to_json()})
        return
    data = info.to_json()
    for key in ("name", "state", "path", "preset", "kind", "framework", "python_version", "installer",
                "created", "updated", "problem"):
        if data.get(key) is not None:
            click.echo(f"{key + ':':16}{data[key]}")
    click.echo(f"{'packages:':16}{len(info.packages)}")
    for name, version in info.packages.items():
        click.echo(f"  {name}=={version}")


@click.group()
def env() -> None:
    """Create, list, extend, export and remove managed envs."""


@env.command()
@click.argument("name")
@click.option("--preset", "preset_name", metavar="P", help="a preset name (see `envcheck presets list`)")
@click.option("--preset-file", type=click.Path(dir_okay=False), metavar="F", help="a preset TOML file")
@click.option("--python", metavar="X", help="a Python version ('3.10') or interpreter path")
@click.option("--add", "add", multiple=True, metavar="REQ", help="an extra requirement (repeatable)")
@index_options
@click.option("--json", "as_json", is_flag=True, help="print the new env as JSON")
@pass_ctx
def create(ctx, name, preset_name, preset_file, python, add, installer, index_url, extra_index_url,
           find_links, no_index, as_json):
    """Create env NAME from a preset."""
    from ..envs.presets import resolve_preset

    if bool(preset_name) == bool(preset_file):
        raise UsageError("give exactly one of --preset and --preset-file",
                         "e.g. envcheck env create dl --preset tensorflow-cpu")
    preset = resolve_preset(ctx.home, name=preset_name, file=preset_file)
    info = _store(ctx).create(name, preset, python=python, add=add, installer=installer,
                              index=_index(index_url, extra_index_url, find_links, no_index),
                              progress=None if as_json else lambda line: click.echo(line, err=True))
    if as_json:
        _show(info, True)
    else:
        click.echo(f"created env {name} ({len(info.packages)} packages, python "
                   f"{info.manifest['python']['version']}, {info.manifest['installer']}) at {info.path}")


@env.command("list")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def list_(ctx, as_json):
    """List envs (read from metadata; no interpreter is started)."""
    envs = _store(ctx).list()
    if as_json:
        emit_json({"schema": ENVS_SCHEMA, "envs": [e.to_json() for e in envs]})
        return
    if not envs:
        click.echo("no envs yet; create one: envcheck env create dl --preset tensorflow-cpu")
        return
    rows = [(e.name, e.state, e.preset.get("name") or "-", e.manifest.get("python", {}).get("version") or "-",
             str(len(e.packages)), (e.manifest.get("created") or "-")[:19]) for e in envs]
    header = ("NAME", "STATE", "PRESET", "PYTHON", "PKGS", "CREATED")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


@env.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def show(ctx, name, as_json):
    """Show one env."""
    _show(_store(ctx).get(name), as_json)


@env.command()
@click.argument("name")
@click.argument("requirements", nargs=-1, metavar="REQ...")
@index_options
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def add(ctx, name, requirements, installer, index_url, extra_index_url, find_links, no_index, as_json):
    """Add packages to env NAME (a failure leaves it exactly as it was)."""
    store = _store(ctx)
    before = store.get(name).packages if not as_json else {}
    info = store.add(name, requirements, installer=installer,
                     index=_index(index_url, extra_index_url, find_links, no_index))
    if as_json:
        _show(info, True)
        return
    changed = {n: v for n, v in info.packages.items() if before.get(n) != v}
    click.echo(f"env {name}: " + (", ".join(f"{n}=={v}" for n, v in changed.items()) or "nothing changed"))


@env.command()
@click.argument("name")
@pass_ctx
def export(ctx, name):
    """Print env NAME's exact pins, usable as a requirements file."""
    sys.stdout.write(_store(ctx).export(name))


@env.command()
@click.argument("name")
@click.option("--yes", is_flag=True, help="don't ask for confirmation")
@pass_ctx
def remove(ctx, name, yes):
    """Remove env NAME (only envs envcheck created)."""
    store = _store(ctx)
    target = store.removal_target(name)
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(f"refusing to remove env {name} without confirmation", "pass --yes")
        click.confirm(f"remove env {name} at {target}?", abort=True)
    path = store.remove(name)
    click.echo(f"removed env {name} ({path})")
