"""Helpers shared by the click command modules: the context decorator and the index options."""
from __future__ import annotations

import click

pass_ctx = click.make_pass_decorator(object)


def index_options(func):
    """--index-url/--extra-index-url/--find-links/--no-index/--installer, declared once."""
    options = [
        click.option("--installer", type=click.Choice(["uv", "pip"]), default=None,
                     help="installer backend (default: recorded in the env, else uv)"),
        click.option("--index-url", default=None, help="base URL of the package index"),
        click.option("--extra-index-url", multiple=True, help="extra index URL (repeatable)"),
        click.option("--find-links", multiple=True, help="local folder or URL of wheels (repeatable)"),
        click.option("--no-index", is_flag=True, default=False, help="ignore package indexes"),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def index_settings(index_url, extra_index_url, find_links, no_index):
    """The index options as the installers' settings object, checked here at the edge (a bad
    value is exit 2 before anything is written); the store lays it over the pip configuration."""
    from ..envs.installers import IndexSettings

    return IndexSettings.from_options(index_url, extra_index_url, find_links, no_index)


def declare(*options):
    """Click options from ``cli.options`` declarations (the fast path parses the same ones)."""
    class Parsed(click.ParamType):
        """Runs the declaration's parser; its UsageError reaches the user as it is."""

        def __init__(self, option):
            self.option, self.name = option, option.metavar or option.dest

        def convert(self, value, param, ctx):
            if not isinstance(value, str):
                return value
            return self.option.convert(value)

    def decorate(func):
        for option in reversed(options):
            if option.is_flag:
                func = click.option(option.flag, option.dest, is_flag=True, help=option.help)(func)
            else:
                func = click.option(option.flag, option.dest, default=option.default,
                                    type=Parsed(option), metavar=option.metavar,
                                    show_default=option.show_default, help=option.help)(func)
        return func

    return decorate


def confirm(question: str, declined: str) -> None:
    """Ask on the terminal (the prompt on stderr, so stdout keeps only the result); a "no"
    ends the command with exit 1 and ``declined`` ("nothing removed"), nothing changed."""
    if not click.confirm(question, err=True):
        click.echo(f"envcheck: {declined}", err=True)
        raise click.exceptions.Exit(1)
