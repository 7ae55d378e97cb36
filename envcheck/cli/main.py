"""The click command tree: a lazy group, so each command imports only what it uses."""
from __future__ import annotations

import importlib
import importlib.util

import click

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
    "report": "report:report",
    "kernel": "kernel:kernel",
    "cache": "cache:cache",
    "fleet": "fleet:fleet",
    "preflight": "preflight:preflight",
    "metrics": "metrics:metrics",
    "labels": "metrics:labels",
    "serve": "serve:serve",
    "slurm": "slurm:slurm",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(name for name in COMMANDS if self._module_exists(name))

    @staticmethod
    def _module_exists(name: str) -> bool:
        module = COMMANDS[name].split(":")[0]
        return importlib.util.find_spec(f"{__package__}.{module}") is not None

    def get_command(self, ctx, name):
        target = COMMANDS.get(name)
        if target is None or not self._module_exists(name):
            return None
        module, attr = target.split(":")
        return _whole_short_help(getattr(importlib.import_module(f"{__package__}.{module}"), attr))


def _whole_short_help(command: click.Command) -> click.Command:
    """The listing shows each command's first help line whole (click cuts it mid-phrase at 45
    characters); the help formatter wraps it to the terminal instead."""
    if command.short_help is None and command.help:
        command.short_help = command.help.strip().splitlines()[0]
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _whole_short_help(sub)
    return command


class Context:
    """What every command gets: the env home, verbosity, and the session its use case runs in
    (made on first use, so commands that need neither store nor host pay for neither)."""

    def __init__(self, home: str | None, verbose: bool, quiet: bool = False):
        self._home_given, self._home = home, None
        self.verbose = verbose
        self.quiet = quiet
        self._session = None

    @property
    def home(self):
        """The env home (``paths.Home``), made on first use: a command that keeps nothing (the
        fleet's driver) doesn't pay for finding the platform's data folder."""
        if self._home is None:
            from ..paths import Home

            self._home = Home(self._home_given)
        return self._home

    @property
    def session(self):
        if self._session is None:
            from ..usecases.session import Session
            from .progress_view import Notices

            self._session = Session(self.home, observer=Notices())
        return self._session

    def progress(self, as_json: bool):
        """A block whose long work shows on stderr as ``progress_view`` decides (``-q``: not at
        all); its live line is gone before ``finish`` prints."""
        from .progress_view import progress_view

        return progress_view(quiet=self.quiet, as_json=as_json)

    def finish(self, result, as_json: bool = False, form: str = "text", shown=None) -> None:
        """Render a use case's result (``--json``: its document, else ``form``), or ``shown``
        in its place (a result that is the form of this one: doctor's page is its reports'),
        and exit with the result's code."""
        from .render import emit

        emit(result if shown is None else shown, "json" if as_json else form)
        if result.exit_code:
            raise click.exceptions.Exit(result.exit_code)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", type=click.Path(file_okay=False), envvar="ENVCHECK_HOME",
              help="env home (default: $ENVCHECK_HOME, else the platform's user data dir)")
@click.option("-v", "--verbose", is_flag=True, help="show tracebacks and installer output")
@click.option("-q", "--quiet", is_flag=True,
              help="no progress on stderr (default: a live status line on a terminal, one line "
                   "per phase elsewhere, none with --json unless on a terminal)")
@click.version_option(package_name="envcheck")
@click.pass_context
def main(ctx: click.Context, home: str | None, verbose: bool, quiet: bool) -> None:
    """Manage deep-learning envs and prove this machine can train on its GPUs."""
    ctx.obj = Context(home, verbose, quiet)
