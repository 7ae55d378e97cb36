"""`envcheck kernel install|remove|list`: Jupyter kernels that start in an env as `run` would."""
from __future__ import annotations

import click

from ._common import declare, index_options, index_settings, pass_ctx
from .options import JSON

PREFIX = click.option("--prefix", type=click.Path(file_okay=False), metavar="P",
                      help="kernels under P/share/jupyter/kernels (a Jupyter installation's prefix)")


@click.group()
def kernel() -> None:
    """Jupyter kernels of envs: the env's interpreter with what `envcheck run` sets."""


@kernel.command()
@click.argument("name")
@PREFIX
@click.option("--sys-prefix", is_flag=True,
              help="kernel under the prefix of the Python that runs envcheck (as `ipykernel install --sys-prefix`)")
@index_options
@declare(JSON)
@pass_ctx
def install(ctx, name, prefix, sys_prefix, installer, index_url, extra_index_url, find_links, no_index,
            as_json):
    """Install env NAME's kernel (adds ipykernel to the env when it lacks it).

    Default place: your Jupyter data folder (`jupyter --data-dir`)/kernels.
    """
    from ..envs.kernelspec import sys_prefix as own_prefix
    from ..errors import UsageError
    from ..usecases.kernels import install_kernel

    if prefix and sys_prefix:
        raise UsageError("give one of --prefix and --sys-prefix", f"envcheck kernel install {name} --sys-prefix")
    index = index_settings(index_url, extra_index_url, find_links, no_index)
    with ctx.progress(as_json) as progress:  # adding ipykernel is an install: it shows as one
        result = install_kernel(ctx.session, name, prefix=own_prefix() if sys_prefix else prefix,
                                installer=installer, index=index, progress=progress)
    ctx.finish(result, as_json)


@kernel.command()
@click.argument("name")
@PREFIX
@declare(JSON)
@pass_ctx
def remove(ctx, name, prefix, as_json):
    """Remove the kernels envcheck installed for env NAME (the env may be gone)."""
    from ..usecases.kernels import remove_kernel

    ctx.finish(remove_kernel(ctx.session, name, prefix=prefix), as_json)


@kernel.command("list")
@click.argument("name", required=False)
@PREFIX
@declare(JSON)
@pass_ctx
def list_(ctx, name, prefix, as_json):
    """List the kernels envcheck installed, and which point at envs gone or broken."""
    from ..usecases.kernels import list_kernels

    ctx.finish(list_kernels(ctx.session, name, prefix=prefix), as_json)
