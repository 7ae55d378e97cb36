"""Helpers shared by the click command modules: the context decorator, the index options and
the output form of a command that has several."""
from __future__ import annotations

import functools

import click

pass_ctx = click.make_pass_decorator(object)


def index_options(func=None, *, installer: bool = True):
    """--index-url/--extra-index-url/--find-links/--no-index and, unless ``installer`` is
    False (a command that only resolves, with uv), --installer: declared once."""
    if func is None:
        return functools.partial(index_options, installer=installer)
    options = [
        *([click.option("--installer", type=click.Choice(["uv", "pip"]), default=None,
                        help="installer backend (default: recorded in the env, else uv)")] if installer else []),
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
    from ..envs.indexes import IndexSettings

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


FORM_HELP = {"json": "a versioned JSON document",
             "markdown": "one Markdown report to paste into a bug thread: versions, GPU health, envs",
             "html": "one self-contained HTML page on stdout (--html FILE writes it to a file)"}


def output_forms(*forms: str):
    """``--format FORM`` for a command with several outputs (``forms``, the first the default),
    declared once, with its older spellings ``--json`` and ``--markdown``: the command gets
    one ``form``. Two spellings of different forms are a usage error (exit 2)."""
    from .options import JSON

    def decorate(func):
        @functools.wraps(func)
        def chosen(*args, form, as_json, markdown=False, **kwargs):
            spelt = {"--markdown": "markdown" if markdown else None, "--json": "json" if as_json else None,
                     f"--format {form}": form}
            given = {flag: value for flag, value in spelt.items() if value is not None}
            if len(set(given.values())) > 1:
                from ..errors import UsageError

                first, second = list(given)[:2]
                raise UsageError(f"{first} and {second} are two forms of one report", "pass one of them")
            return func(*args, form=next(iter(given.values()), forms[0]), **kwargs)

        wrapped = chosen
        if "markdown" in forms:
            wrapped = click.option("--markdown", "markdown", is_flag=True, help="--format markdown")(wrapped)
        wrapped = click.option(JSON.flag, JSON.dest, is_flag=True, help="--format json")(wrapped)
        return click.option("--format", "form", type=click.Choice(forms), default=None,
                            help=f"the output (default: {forms[0]}); "
                            + "; ".join(f"{f}: {FORM_HELP[f]}" for f in forms[1:]))(wrapped)

    return decorate


def confirm(question: str, declined: str) -> None:
    """Ask on the terminal (the prompt on stderr, so stdout keeps only the result); a "no"
    ends the command with exit 1 and ``declined`` ("nothing removed"), nothing changed."""
    if not click.confirm(question, err=True):
        click.echo(f"envcheck: {declined}", err=True)
        raise click.exceptions.Exit(1)
