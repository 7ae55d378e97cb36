"""`envcheck metrics` and `envcheck labels`: the node's readiness where fleets look, once.

Both read what `envcheck serve` reads per scrape (``usecases.readiness``: the stored reports
and the level-1 facts read now; no validation) and exit 0 whatever the verdicts: the
metrics and labels say them. A file they write is replaced atomically (``atomic``: a
temporary file named ``.NAME.<random>.tmp`` in the same folder, so node_exporter, which
reads ``*.prom`` only, never sees a part), mode 0644 whatever the umask: another user's
collector reads it.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..errors import UsageError
from ._common import pass_ctx

TEXTFILE = "envcheck.prom"


@click.command()
@click.option("--textfile", "textfile", metavar="DIR", default=None,
              help=f"write DIR/{TEXTFILE} atomically for node_exporter's textfile collector "
                   "instead of printing")
@pass_ctx
def metrics(ctx, textfile: str | None) -> None:
    """Print the node's readiness in Prometheus text format (docs: Prometheus and node labels).

    Each env's stored verdict judged against this host now, each GPU's level-1 health read
    now, the driver and envcheck's version. Runs no validation.
    """
    from .views.metrics import exposition, families

    target = _textfile(textfile) if textfile is not None else None
    text = exposition(families(_readiness(ctx)))
    if target is None:
        sys.stdout.write(text)
    else:
        _write(target, text, "--textfile")


@click.command()
@click.option("--format", "form", type=click.Choice(["nfd", "json"]), default=None,
              help="nfd (the default): a node-feature-discovery features.d file (KEY=VALUE lines); json: "
                   "a versioned JSON document")
@click.option("--json", "as_json", is_flag=True, help="--format json")
@click.option("-o", "--output", "output", metavar="FILE", default=None,
              help="write FILE atomically instead of printing")
@pass_ctx
def labels(ctx, form: str, as_json: bool, output: str | None) -> None:
    """Print node labels in the GPU-feature-discovery style (docs: Prometheus and node labels).

    envcheck.io/env.NAME=ready|degraded|not-ready per env, envcheck.io/ready-envs=N and
    envcheck.io/gpu-health=ok|degraded|faulty; valid Kubernetes labels for every env name.
    """
    from ..usecases.node_labels import node_labels

    if as_json and form == "nfd":
        raise UsageError("--json and --format nfd are two forms of the labels", "pass one of them")
    target = _output(output) if output is not None else None
    result = node_labels(_readiness(ctx))
    if form == "json" or as_json:
        import json

        text = json.dumps(result.to_json(), indent=2) + "\n"
    else:
        from .views.metrics import features_file

        text = features_file(result)
    if target is None:
        sys.stdout.write(text)
    else:
        _write(target, text, "-o")


def _readiness(ctx):
    from ..usecases.readiness import read_now
    from .progress_view import Notices

    return read_now(ctx.home, Notices())[0]


def _textfile(folder: str) -> Path:
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise UsageError(f"--textfile {folder!r} is not a folder",
                         "give the folder node_exporter's --collector.textfile.directory reads")
    return path / TEXTFILE


def _output(file: str) -> Path:
    path = Path(file).expanduser()
    if path.is_dir() or not path.parent.is_dir():
        raise UsageError(f"-o {file!r} is a folder or in no folder",
                         "give a file in an existing folder, e.g. /etc/kubernetes/node-feature-discovery/"
                         "features.d/envcheck")
    return path


def _write(path: Path, text: str, option: str) -> None:
    from ..atomic import write_bytes

    try:
        write_bytes(path, text.encode("utf-8"), 0o644, exact=True)
    except PermissionError:
        raise UsageError(f"{option}: can't write in {path.parent}: permission denied",
                         "run as a user who may write there, or give another folder") from None
    except OSError as exc:
        from ..errors import OperationError

        raise OperationError(f"{option}: can't write {path}: {exc.strerror or exc}",
                             f"free space or fix the folder {os.path.dirname(path)}") from None
