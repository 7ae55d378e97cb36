"""envcheck's command line: parse, call the core, render, map to exit codes.

Subcommands are imported lazily so that fast paths (``envcheck gpu``, ``envcheck check``)
pay only for the modules they use.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from ..errors import EnvcheckError

# name -> "module:attribute" (module relative to envcheck.cli)
COMMANDS = {
    "presets": "presets:presets",
    "env": "env:env",
    "gpu": "gpu:gpu",
    "compat": "compat:compat",
    "diagnose": "diagnose:diagnose",
    "validate": "validate:validate",
    "select": "select:select",
    "check": "gate:check",
    "run": "launch:run",
    "provision": "provision:provision",
    "doctor": "doctor:doctor",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(name for name in COMMANDS if self._module_exists(name))

    @staticmethod
    def _module_exists(name: str) -> bool:
        module = COMMANDS[name].split(":")[0]
        return importlib.util.find_spec(f"{__name__}.{module}") is not None

    def get_command(self, ctx, name):
        target = COMMANDS.get(name)
        if target is None or not self._module_exists(name):
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)


class Context:
    """What every command gets: the env home and verbosity."""

    def __init__(self, home: str | None, verbose: bool):
        from ..paths import Home

        self.home = Home(home)
        self.verbose = verbose


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", type=click.Path(file_okay=False), envvar="ENVCHECK_HOME",
              help="env home (default: $ENVCHECK_HOME, else the platform's user data dir)")
@click.option("-v", "--verbose", is_flag=True, help="show tracebacks and installer output")
@click.version_option(package_name="envcheck")
@click.pass_context
def main(ctx: click.Context, home: str | None, verbose: bool) -> None:
    """Manage deep-learning envs and prove this machine can train on its GPUs."""
    ctx.obj = Context(home, verbose)


def run(argv: list[str] | None = None) -> None:
    """Console-script entry: every error becomes one line and an exit code."""
    verbose = "-v" in (argv or sys.argv[1:]) or "--verbose" in (argv or sys.argv[1:])
    try:
        code = main.main(args=argv, prog_name="envcheck", standalone_mode=False)
    except EnvcheckError as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        click.echo(f"envcheck: error: {exc}", err=True)
        code = exc.exit_code
    except click.exceptions.Abort:
        click.echo("envcheck: interrupted", err=True)
        code = 130
    except KeyboardInterrupt:
        click.echo("envcheck: interrupted", err=True)
        code = 130
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "envcheck"
        click.echo(f"envcheck: error: {exc.format_message()}; fix: see `{where} --help`", err=True)
        code = 2
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except BrokenPipeError:
        code = 0
    except Exception as exc:  # a bug of ours: one line, the traceback only with -v
        if verbose:
            raise
        click.echo(f"envcheck: internal error: {type(exc).__name__}: {exc} (run with -v for details)", err=True)
        code = 1
    sys.stdout.flush()
    sys.exit(code or 0)
