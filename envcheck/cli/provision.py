"""`envcheck provision`: the installer hook (idempotent; safe to run twice at once)."""
from __future__ import annotations

from functools import partial

import click

from ..durations import seconds
from ..usecases.provision import DEFAULT_WAIT
from ._common import declare, index_options, index_settings, pass_ctx
from .options import AUTO_FRAMEWORK, FOR_ANOTHER_HOST, JSON, LEVEL, NO_SMOKE, TIMEOUT, Option

WAIT = Option("--wait", "wait", "how long to wait for another envcheck process building the same env "
              "(at most 86400)", DEFAULT_WAIT, partial(seconds, zero=True), "SECONDS", show_default=True)


@click.command()
@click.option("--preset", "names", multiple=True, metavar="NAME",
              help="a preset to provision as env NAME (repeatable)")
@click.option("--preset-file", "files", multiple=True, type=click.Path(dir_okay=False), metavar="F",
              help="a preset file to provision, as env named after the file (repeatable)")
@click.option("--auto", is_flag=True,
              help="per framework: its CPU preset, plus its first GPU preset this host's driver, GPUs, "
                   "Pythons and libraries can run")
@click.option("--lock", "lock_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="the env of a pylock.toml (envcheck env lock): exactly its files")
@click.option("--name", metavar="NAME", help="with --lock: the env's name (default: the env or preset it was locked from)")
@click.option("--offline", is_flag=True, help="with --lock: no index, no network; the wheels from --find-links "
                                              "(default: the lock's own folder)")
@declare(AUTO_FRAMEWORK)
@declare(FOR_ANOTHER_HOST)
@declare(NO_SMOKE, TIMEOUT, LEVEL)
@declare(WAIT)
@index_options
@declare(JSON)
@pass_ctx
def provision(ctx, names, files, auto, lock_file, name, offline, framework, for_another_host, no_smoke, timeout, level,
              wait, installer, index_url, extra_index_url, find_links, no_index, as_json):
    """Create the envs an installation needs, unless they exist, and validate each.

    An env is named after its preset. One that exists from the same preset content is left
    unchanged; one made from another version of the preset is reported `stale` and left as it
    is, with the command that rebuilds it. A GPU preset (or lock) this host can't train with
    is refused as `env create` refuses it, before anything is downloaded (--for-another-host
    makes it anyway). Exit 0 when every requested env is ready (or degraded), 1 otherwise
    (failed, stale, not ready), 2 on bad input (nothing is created).
    """
    from ..usecases.provision import provision as run_provision

    index = index_settings(index_url, extra_index_url, find_links, no_index)
    with ctx.progress(as_json) as progress:
        result = run_provision(ctx.session, names=names, files=files, auto=auto, smoke=not no_smoke,
                               installer=installer, index=index, wait=wait, timeout=timeout,
                               progress=progress, framework=framework, level=level, lock_file=lock_file,
                               name=name, offline=offline, for_another_host=for_another_host)
    ctx.finish(result, as_json)
