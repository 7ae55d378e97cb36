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
