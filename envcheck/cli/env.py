"""`envcheck env ...`: create, list, show, add, export, remove."""
from __future__ import annotations

import sys

import click

from ..errors import UsageError
from ._common import confirm, declare, index_options, index_settings, pass_ctx
from .options import JSON


@click.group()
def env() -> None:
    """Create, list, extend, export and remove managed envs."""


@env.command()
@click.argument("name")
@click.option("--preset", "preset_name", metavar="P", help="a preset name (see `envcheck presets list`)")
@click.option("--preset-file", type=click.Path(dir_okay=False), metavar="F", help="a preset TOML file")
@click.option("--python", metavar="X", help="a Python version ('3.10') or interpreter path")
@click.option("--add", "add", multiple=True, metavar="REQ", help="an extra requirement (repeatable)")
@click.option("--kernel", is_flag=True, help="also a Jupyter kernel for it (see `envcheck kernel install`)")
@click.option("--for-another-host", is_flag=True,
              help="make a GPU preset's env even though this host can't train with it")
@index_options
@declare(JSON)
@pass_ctx
def create(ctx, name, preset_name, preset_file, python, add, kernel, for_another_host, installer, index_url,
           extra_index_url, find_links, no_index, as_json):
    """Create env NAME from a preset.

    A GPU preset this host can't train with (no usable GPU, a driver too old, no Python the
    preset allows, missing CUDA libraries) is refused before anything is downloaded, exit 2;
    --for-another-host makes it anyway, for use on another machine.
    """
    from ..usecases.catalogue import create_env

    index = index_settings(index_url, extra_index_url, find_links, no_index)
    with ctx.progress(as_json) as progress:
        result = create_env(ctx.session, name, preset_name=preset_name, preset_file=preset_file,
                            python=python, add=add, installer=installer, index=index, kernel=kernel,
                            progress=progress, for_another_host=for_another_host)
    ctx.finish(result, as_json)


@env.command("list")
@declare(JSON)
@pass_ctx
def list_(ctx, as_json):
    """List envs (read from metadata; no interpreter is started)."""
    from ..usecases.catalogue import list_envs

    ctx.finish(list_envs(ctx.session), as_json)


@env.command()
@click.argument("name")
@declare(JSON)
@pass_ctx
def show(ctx, name, as_json):
    """Show one env."""
    from ..usecases.catalogue import show_env

    ctx.finish(show_env(ctx.session, name), as_json)


@env.command()
@click.argument("name")
@click.argument("requirements", nargs=-1, metavar="REQ...")
@index_options
@declare(JSON)
@pass_ctx
def add(ctx, name, requirements, installer, index_url, extra_index_url, find_links, no_index, as_json):
    """Add packages to env NAME (a failure leaves it exactly as it was)."""
    from ..usecases.catalogue import add_packages

    index = index_settings(index_url, extra_index_url, find_links, no_index)
    with ctx.progress(as_json) as progress:
        result = add_packages(ctx.session, name, requirements, installer=installer, index=index,
                              progress=progress)
    ctx.finish(result, as_json)


@env.command()
@click.argument("name")
@pass_ctx
def export(ctx, name):
    """Print env NAME's exact pins, usable as a requirements file."""
    from ..usecases.catalogue import export_env
    from .render import safe

    text, left_out = export_env(ctx.session, name)
    sys.stdout.write(safe(text))
    sys.stdout.flush()
    for why in left_out:
        click.echo(safe(f"envcheck: warning: left out {why}"), err=True)


@env.command()
@click.argument("name")
@click.option("--yes", is_flag=True, help="don't ask for confirmation")
@pass_ctx
def remove(ctx, name, yes):
    """Remove env NAME (only envs envcheck created)."""
    from ..usecases.catalogue import remove_env, removal_target

    target = removal_target(ctx.session, name)
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(f"refusing to remove env {name} without confirmation", "pass --yes")
        confirm(f"remove env {name} at {target}?", "nothing removed")
    folder, kernels = remove_env(ctx.session, name)
    click.echo(f"removed env {name} ({folder})")
    for kernel in kernels:
        click.echo(f"removed its Jupyter kernel {kernel.name} ({kernel})")
