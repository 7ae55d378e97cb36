"""How long work shows while it runs: always on stderr, never on stdout.

| stderr                            | text output                    | ``--json``                  |
|-----------------------------------|--------------------------------|-----------------------------|
| a terminal (``TERM`` not ``dumb``)| one live status line (rich): spinner, task, phase, detail, elapsed time, log; each task's end kept as a line | the live line only, erased when the command ends |
| not a terminal, or ``TERM=dumb``  | plain lines: a task's start (with its log), each phase change, its end, each with the elapsed time | nothing |
| ``-q`` / ``--quiet``              | nothing                        | nothing                     |

So a log or CI job gets a handful of lines per env (one per phase, never one per package or
byte, as uv prints), a script reading ``--json`` gets a stderr holding only errors, and a
person at a terminal sees the work move. ``NO_COLOR`` turns colour off (rich reads it); the
line itself stays, as uv's spinner does.
"""
from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from ..progress import SILENT, Progress


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s"


class _Task:
    def __init__(self, subject: str, log: Path | str | None):
        self.subject, self.log = subject, log
        self.started = time.monotonic()
        self.phase, self.detail = "", ""

    @property
    def elapsed(self) -> str:
        return _elapsed(time.monotonic() - self.started)


def _say(stream: IO[str], text: str) -> None:
    """One ``envcheck:`` line on ``stream``, flushed; a closed or broken stream is let be (the
    work goes on)."""
    try:
        stream.write(f"envcheck: {text}\n")
        stream.flush()
    except (OSError, ValueError):
        pass


class Notices(Progress):
    """The session's observer (``Session(observer=...)``): each notice one ``envcheck:`` line
    on stderr, with or without ``-q`` (a rolled-back install must not go unsaid), through
    ``render.safe`` (a notice may quote a name from outside). A live status line takes it in
    as it takes in anything written to stderr. Task events are the command's view's business."""

    def notice(self, line: str) -> None:
        from .render import safe

        _say(sys.stderr, safe(line))


class PlainView(Progress):
    """One line per event that matters (start, phase, done); steps are left out."""

    def __init__(self, stream: IO[str]):
        self.stream = stream
        self.task: _Task | None = None

    def _line(self, text: str) -> None:
        _say(self.stream, text)

    def start(self, subject: str, title: str, log: Path | str | None = None) -> None:
        self.task = _Task(subject, log)
        self._line(title + (f" (log: {log})" if log else ""))

    def phase(self, name: str) -> None:
        if self.task is not None:
            self._line(f"{self.task.subject}: {name} [{self.task.elapsed}]")

    def done(self, summary: str) -> None:
        if self.task is not None:
            self._line(f"{self.task.subject}: {summary} in {self.task.elapsed}")
            self.task = None


class LiveView(Progress):
    """One status line redrawn in place by rich's ``Live`` (its own thread keeps the spinner
    and the elapsed time moving); ``keep``: each task's end stays above it as a line."""

    def __init__(self, stream: IO[str], keep: bool):
        from rich.console import Console
        from rich.spinner import Spinner

        self.console = Console(file=stream)
        self.keep = keep
        self.task: _Task | None = None
        self.spinner = Spinner("dots", style="cyan")
        self.live = None

    def _render(self):
        from rich.text import Text

        task = self.task
        if task is None:
            return Text("")
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(task.subject, style="bold")
        text.append(f": {task.phase}")
        if task.detail:
            text.append(f" · {task.detail}", style="dim")
        text.append(f" · {task.elapsed}", style="cyan")
        if task.log:
            text.append(f" · log {task.log}", style="dim")
        self.spinner.update(text=text)
        return self.spinner

    def _refresh(self) -> None:
        """Draw now, so even a phase shorter than a refresh tick is seen."""
        if self.live is not None:
            self.live.refresh()

    def start(self, subject: str, title: str, log: Path | str | None = None) -> None:
        if self.live is None:
            from rich.live import Live

            self.live = Live(console=self.console, get_renderable=self._render, transient=True,
                             refresh_per_second=8, redirect_stdout=False, redirect_stderr=True)
            self.live.start()
        self.task = _Task(subject, log)
        self.task.phase = title
        self._refresh()

    def phase(self, name: str) -> None:
        if self.task is not None:
            self.task.phase, self.task.detail = name, ""
            self._refresh()

    def step(self, detail: str) -> None:
        if self.task is not None:
            self.task.detail = detail

    def done(self, summary: str) -> None:
        task, self.task = self.task, None
        self._refresh()  # the line empty first, so the kept line isn't followed by a stale one
        if task is not None and self.keep and self.live is not None:
            self.live.console.print(f"{task.subject}: {summary} in {task.elapsed}", highlight=False)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def interactive(stream: IO[str]) -> bool:
    """A terminal that can redraw a line: a tty, and ``TERM`` not ``dumb``."""
    try:
        return stream.isatty() and os.environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):
        return False


@contextmanager
def progress_view(*, quiet: bool, as_json: bool) -> Iterator[Progress]:
    """The view this command's progress goes to (see the module docstring); a live line is
    gone when the block ends, however it ends, before the result or an error is printed."""
    stream = sys.stderr
    if quiet:
        yield SILENT
    elif interactive(stream):
        view = LiveView(stream, keep=not as_json)
        try:
            yield view
        finally:
            view.close()
    elif as_json:
        yield SILENT
    else:
        yield PlainView(stream)
