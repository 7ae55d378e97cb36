"""envcheck's command line: parse once at the edge, call one use case, render its result.

Owns: click commands (``main.py`` and one module per command group), option declarations
shared with the fast path (``options.py``), the rendering layer (``render.py``, with the
views of each result class listed in ``views/__init__.py``: text, Markdown, and HTML from
``templates/``) and how progress shows (``progress_view.py``). Holds no logic: exit codes
and JSON shapes come from results.

May import: ``usecases`` and, for parsing at the edge, the parsers and types below them
(``validation.devices``, ``envs.indexes.IndexSettings``, ``frameworks.names``, ``durations``), and
``atomic`` to write the HTML page as the manifest is written.

``run`` is the console script. It tries the click-free fast path of the pre-training gate
first (``fast.py``: a training job calls ``envcheck check`` before every start, and click
alone costs about 40 ms), and of ``env adopt`` (whose floor is a listing of the env's
distributions), then the click command tree (``main.py``).
"""
from __future__ import annotations

import sys

from .._guard import Interrupts, end_at_first_interrupt, exit_quietly  # cheap; processes is not
from ..errors import EnvcheckError


def _dispatch(argv: list[str]) -> int | None:
    from .fast import fast_adopt, fast_check

    for fast in (fast_check, fast_adopt):
        code = fast(argv)
        if code is not None:
            return code
    from .main import main

    return main.main(args=argv, prog_name="envcheck", standalone_mode=False)


def _error(line: str) -> None:
    """An error line on stderr, through ``render.safe``: it may quote text from outside (a name,
    a GPU's answer) that holds control characters or bytes that aren't UTF-8."""
    from .render import safe

    print(safe(line), file=sys.stderr)


def _click_exit_code(exc: Exception) -> int | None:
    """Exit code for click's own exceptions (None when ``exc`` is not one of them)."""
    if "click" not in sys.modules:
        return None
    import click

    if isinstance(exc, click.exceptions.Abort):
        print("envcheck: interrupted", file=sys.stderr)
        return 130
    if isinstance(exc, click.UsageError):
        where = exc.ctx.command_path if exc.ctx else "envcheck"
        _error(f"envcheck: error: {exc.format_message().rstrip('.')}; fix: see `{where} --help`")
        return 2
    if isinstance(exc, click.ClickException):
        exc.show()
        return exc.exit_code
    if isinstance(exc, click.exceptions.Exit):
        return exc.exit_code
    return None


def _say_version() -> None:
    """With ``results.VERSION_VARIABLE`` set to 1 (a fleet over srun asks so), this envcheck's
    version as the first line on stderr."""
    import os

    from ..results import VERSION_LINE, VERSION_VARIABLE

    if os.environ.get(VERSION_VARIABLE) == "1":
        from .._version import __version__

        print(f"{VERSION_LINE}{__version__}", file=sys.stderr, flush=True)


def run(argv: list[str] | None = None) -> None:
    """Console-script entry: every error becomes one line and an exit code. However many
    interrupts arrive, and wherever they land, the first ends the command (130) and the others
    do nothing: no traceback, no "Exception ignored" (see ``processes.end_at_first_interrupt``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    verbose = "-v" in argv or "--verbose" in argv
    _say_version()
    try:
        try:
            end_at_first_interrupt()
            code = _dispatch(argv)
        finally:  # before any call: no interrupt raises from here on (one raised before is caught below)
            Interrupts.decided = True
    except EnvcheckError as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        _error(f"envcheck: error: {exc}")
        code = exc.exit_code
    except KeyboardInterrupt:
        print("envcheck: interrupted", file=sys.stderr)
        code = 130
    except SystemExit as exc:  # `envcheck run` ends as its ranks did
        code = exc.code
    except BrokenPipeError:
        code = 0
    except Exception as exc:
        code = _click_exit_code(exc)
        if code is None:  # a bug of ours: one line, the traceback only with -v
            if verbose:
                raise
            _error(f"envcheck: internal error: {type(exc).__name__}: {exc} (run with -v for details)")
            code = 1
    exit_quietly(code or 0)
