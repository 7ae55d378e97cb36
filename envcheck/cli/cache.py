"""`envcheck cache info|clean`: the installers' caches, and emptying the one envcheck made."""
from __future__ import annotations

import sys

import click

from ._common import confirm, declare, pass_ctx
from ..usecases.cache import DEFAULT_WAIT_S
from ..durations import seconds
from .options import JSON, Option

WAIT = Option("--wait", "wait", "seconds to wait for a running install to finish",
              DEFAULT_WAIT_S, seconds, "SECONDS", show_default=True)


@click.group()
def cache() -> None:
    """See and clean the installers' caches (envcheck's uv cache; pip's is only shown)."""


@cache.command()
@declare(JSON)
@pass_ctx
def info(ctx, as_json):
    """Where each cache is, how big, and what `cache clean` would free."""
    from ..usecases.cache import cache_info

    ctx.finish(cache_info(ctx.session), as_json)


@cache.command()
@click.option("--yes", is_flag=True, help="don't ask for confirmation")
@declare(WAIT, JSON)
@pass_ctx
def clean(ctx, yes, wait, as_json):
    """Empty envcheck's uv cache, once no install runs; envs keep working.

    Caches envcheck did not make (pip's, a UV_CACHE_DIR of yours) are left alone.
    """
    from ..errors import UsageError
    from ..usecases.cache import cache_info, clean_cache
    from .views.cache import human_size

    if not yes and not sys.stdin.isatty():
        raise UsageError("refusing to clean the cache without confirmation", "pass --yes")
    info = cache_info(ctx.session)
    if not yes:
        size = human_size(info.own.size.bytes) if info.own.size else "not made yet"
        confirm(f"empty envcheck's uv cache {info.own.path} ({size})?", "nothing cleaned")
    ctx.finish(clean_cache(ctx.session, info, wait=wait), as_json)
