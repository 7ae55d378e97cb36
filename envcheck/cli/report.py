"""`envcheck report`: the stored validation reports, as text, JSON or one HTML page."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import click

from ..errors import OperationError, UsageError
from ._common import declare, output_forms, pass_ctx
from .options import Option

PATH_ERRORS = {errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM, errno.EROFS,
               errno.ENAMETOOLONG}  # the user's path is the problem: exit 2


def html_file(text: str) -> Path:
    """The file ``--html`` writes: refused before any work unless its folder exists and is
    writable and it is not itself a folder."""
    path = Path(text).expanduser()
    folder = path.parent
    if path.is_dir():
        raise UsageError("that is a folder", "name the file to write, e.g. report.html")
    if not folder.is_dir():
        raise UsageError(f"folder {folder} does not exist", "create it, or name a file in an existing folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"folder {folder} is not writable", "name a file in a folder you can write to")
    return path


HTML = Option("--html", "html", "write the reports as one self-contained HTML page to FILE "
              "(tables, charts and the JSON data; it fetches nothing), atomically; --format html "
              "prints it", None, html_file, "FILE")


def write(ctx, path: Path, result) -> None:
    """Write ``result`` as its HTML page, atomically (a failure leaves ``path`` as it was), and
    say where on stderr. Control characters and lone surrogates (a package name that wasn't
    UTF-8) are written as visible escapes, as on a terminal."""
    from ..atomic import write_bytes
    from .render import render, safe

    try:
        write_bytes(path, safe(render(result, "html")).encode("utf-8"), mode=0o666)
    except OSError as exc:
        error = UsageError if exc.errno in PATH_ERRORS else OperationError
        raise error(f"can't write {path}: {exc.strerror or exc}",
                    "name a file in a folder you can write to") from None
    if not ctx.quiet:
        click.echo(f"envcheck: wrote {path}", err=True)


@click.command()
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--all", "all_", is_flag=True, help="every env")
@declare(HTML)
@output_forms("text", "json", "html")
@pass_ctx
def report(ctx, names, all_, html, form):
    """The stored validation reports: host, verdicts, checks with fixes, ms/step per device.

    With no NAME, the env `envcheck select` would choose. Nothing is run: each env's last
    `envcheck validate` is shown, marked out of date when its packages, interpreter, driver
    or GPUs changed since. --html FILE writes them as one HTML page (the per-device table of
    ms/step with the speedup over the CPU, its chart, multi-replica scaling) instead of text;
    --format html prints that page.
    Exit 1 when an env has no stored report or a not-ready one.
    """
    from ..usecases.report import stored_reports

    result = stored_reports(ctx.session, names, all_envs=all_)
    if html:
        write(ctx, html, result)
        if form == "text":
            raise click.exceptions.Exit(result.exit_code)
    ctx.finish(result, form=form)
