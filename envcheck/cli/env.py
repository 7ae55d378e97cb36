"""`envcheck env ...`: create, list, show, add, export, remove."""
from __future__ import annotations

import sys

import click

from ..errors import UsageError
from ._common import confirm, declare, index_options, index_settings, pass_ctx
from .options import FOR_ANOTHER_HOST, JSON


@click.group()
def env() -> None:
    """Create, list, extend, export and remove managed envs."""


@env.command()
@click.argument("name")
@click.option("--preset", "preset_name", metavar="P", help="a preset name (see `envcheck presets list`)")
@click.option("--preset-file", type=click.Path(dir_okay=False), metavar="F", help="a preset TOML file")
@click.option("--lock", "lock_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="a pylock.toml (envcheck env lock): exactly its files, hashes checked, nothing resolved")
@click.option("--offline", is_flag=True, help="with --lock: no index and no network, the wheels from --find-links "
                                              "(default: the lock's own folder, a wheelhouse)")
@click.option("--variant", metavar="V", help="the preset's variant (default: the first that fits this host)")
@click.option("--python", metavar="X", help="a Python version ('3.10') or interpreter path")
@click.option("--add", "add", multiple=True, metavar="REQ", help="an extra requirement (repeatable)")
@click.option("--kernel", is_flag=True, help="also a Jupyter kernel for it (see `envcheck kernel install`)")
@declare(FOR_ANOTHER_HOST)
@click.option("--no-link", is_flag=True, help="install even where an intact env of the same packages could be linked")
@index_options
@declare(JSON)
@pass_ctx
def create(ctx, name, preset_name, preset_file, lock_file, offline, variant, python, add, kernel, for_another_host,
           no_link, installer, index_url, extra_index_url, find_links, no_index, as_json):
    """Create env NAME from a preset, or from a lock.

    A GPU preset this host can't train with (no usable GPU, a driver too old, no Python the
    preset allows, missing CUDA libraries) is refused before anything is downloaded, exit 2;
    --for-another-host makes it anyway, for use on another machine. Where an env of the same
    lock (or preset content and interpreter) exists and is intact, its files are linked, not
    installed.
    """
    index = index_settings(index_url, extra_index_url, find_links, no_index)
    if lock_file is not None:
        _lock_only(preset_name=preset_name, preset_file=preset_file, variant=variant, add=add, kernel=kernel)
    elif offline:
        raise UsageError("--offline makes an env from a lock's wheels", "pass --lock FILE (see envcheck env lock)")
    with ctx.progress(as_json) as progress:
        if lock_file is not None:
            from ..usecases.locking import create_from_lock

            result = create_from_lock(ctx.session, name, lock_file, python=python, installer=installer, index=index,
                                      offline=offline, for_another_host=for_another_host, link=not no_link,
                                      progress=progress)
        else:
            from ..usecases.catalogue import create_env

            result = create_env(ctx.session, name, preset_name=preset_name, preset_file=preset_file,
                                python=python, add=add, installer=installer, index=index, kernel=kernel,
                                progress=progress, for_another_host=for_another_host, variant=variant,
                                link=not no_link)
    ctx.finish(result, as_json)


def _lock_only(**given) -> None:
    """--lock decides the packages: an option that would change them is bad input."""
    for option, value in given.items():
        if value:
            flag = "--" + option.replace("_", "-")
            raise UsageError(f"{flag} and --lock: the lock decides every package",
                             f"leave {flag} out, or lock what you want: envcheck env lock")


@env.command()
@click.argument("name", required=False)
@click.option("--preset", "preset_name", metavar="P", help="lock a preset (its variant for the target) instead of an env")
@click.option("--preset-file", type=click.Path(dir_okay=False), metavar="F", help="lock a preset file")
@click.option("-o", "--output", default="pylock.toml", show_default=True, metavar="FILE",
              help="where the lock goes: pylock.toml or pylock.<name>.toml, or - for stdout")
@click.option("--python", metavar="X.Y", help="the target's Python (default: the env's, or the one this host would use)")
@click.option("--platform", "target_platform", metavar="P",
              help="the target's platform as uv names it (default: this host's, e.g. x86_64-manylinux_2_36)")
@click.option("--for-driver", metavar="V", help="the target's NVIDIA driver as nvidia-smi prints it (470.82.01)")
@click.option("--for-cc", multiple=True, metavar="X.Y", help="the target's GPU compute capability (repeatable)")
@click.option("--variant", metavar="V", help="the preset's variant (default: the first that fits the target)")
@click.option("--wheelhouse", metavar="DIR", help="also download every locked wheel, and the lock, into DIR")
@index_options(installer=False)
@declare(JSON)
@pass_ctx
def lock(ctx, name, preset_name, preset_file, output, python, target_platform, for_driver, for_cc, variant,
         wheelhouse, index_url, extra_index_url, find_links, no_index, as_json):
    """Lock env NAME (or a preset) into a PEP 751 pylock.toml, with every wheel's hash.

    The target is this host unless told otherwise: its Python, platform, driver and GPUs. A
    GPU build is locked only for a target it can train on (the rules of `envcheck compat`):
    a target no variant fits is refused, exit 2, never given a CPU build. Every node made
    from the lock (envcheck env create NAME --lock FILE) gets the same files.
    """
    from ..usecases.locking import lock_env

    index = index_settings(index_url, extra_index_url, find_links, no_index)
    with ctx.progress(as_json) as progress:
        result = lock_env(ctx.session, name=name, preset_name=preset_name, preset_file=preset_file, output=output,
                          python=python, target_platform=target_platform, for_driver=for_driver, for_cc=for_cc,
                          variant=variant, wheelhouse=wheelhouse, index=index, progress=progress)
    if output == "-" and not as_json:
        sys.stdout.write(result.text)
        sys.stdout.flush()
        return
    ctx.finish(result, as_json)


@env.command()
@click.argument("name")
@click.option("--hashes", is_flag=True, help="hash every file (default: hash only files whose size or times moved)")
@declare(JSON)
@pass_ctx
def verify(ctx, name, hashes, as_json):
    """Compare env NAME's files with its lock, or with what was installed at create/add.

    Packages added, removed or changed, and files added, removed, changed or edited (an edit
    that keeps the size and puts the modification time back included). Exit 0 clean, 1 on
    drift, 2 on bad input.
    """
    from ..usecases.drift import verify_env

    ctx.finish(verify_env(ctx.session, name, hashes), as_json)


@env.command()
@click.argument("name")
@click.argument("path")
@declare(JSON)
@pass_ctx
def adopt(ctx, name, path, as_json):
    """Adopt an env envcheck did not make, as env NAME: a venv or virtualenv folder, a uv
    project (its folder or its .venv), a conda / mamba / pixi prefix, or a Python interpreter
    (/usr/bin/python3, a container's, a pyenv version).

    envcheck reads it and never changes it: nothing is written inside PATH, `env add` names
    the env's own installer's command, and `env remove` forgets it, leaving every file as it
    was. Every command that takes an env takes it (validate, check, select, run, kernel,
    env lock, env verify, report, doctor, metrics, labels, fleet).
    """
    from ..usecases.catalogue import adopt_env

    ctx.finish(adopt_env(ctx.session, name, path), as_json)


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
    """Remove env NAME (only envs envcheck created); an adopted env is forgotten, its files left as they are."""
    from ..usecases.catalogue import remove_env, removal_target

    target = removal_target(ctx.session, name)
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(f"refusing to remove env {name} without confirmation", "pass --yes")
        confirm(f"remove env {name} at {target}?", "nothing removed")
    adopted = ctx.session.store.get(name).adopted
    folder, kernels = remove_env(ctx.session, name)
    if adopted:
        click.echo(f"forgot adopted env {name} ({adopted['kind']} {adopted['path']}, left as it was; "
                   f"envcheck's records removed: {folder})")
    else:
        click.echo(f"removed env {name} ({folder})")
    for kernel in kernels:
        click.echo(f"removed its Jupyter kernel {kernel.name} ({kernel})")
