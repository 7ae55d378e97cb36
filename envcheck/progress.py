"""Progress of long work as events: the core reports them, the CLI decides how they show.

A *task* (creating env dl, validating env tf) goes through *phases* (making the venv,
resolving, downloading, installing, compiling bytecode; the smoke fit of each device), and a
phase may report finer *steps* (which package, how many MiB so far). ``Progress`` is the
observer the core calls; its methods do nothing, so a core function takes
``progress: Progress = SILENT`` and calls it unconditionally, and envcheck used as a library
(``ensure_ready``, the tests) stays quiet; what is said outside any task (a store's
recovery) reaches the session's observer as a ``notice``. The CLI passes a view of its own
(``cli/progress_view.py``: a live status line on a terminal, plain lines elsewhere).

The core never prints, and an observer never raises into it: a view that can't write
(a closed stderr) drops the event rather than fail an install half-way.
"""
from __future__ import annotations

from pathlib import Path


class Progress:
    """The observer of long work. Every event is optional; the base class ignores them all."""

    def start(self, subject: str, title: str, log: Path | str | None = None) -> None:
        """A task begins (and any earlier one is over). ``subject`` names it in later lines
        ("env dl"), ``title`` says what it does ("creating env dl from preset tiny with uv"),
        ``log`` is where its full output goes while it runs."""

    def phase(self, name: str) -> None:
        """The task enters a phase ("resolving", "cpu:0: smoke fit"): worth a line of its own."""

    def step(self, detail: str) -> None:
        """Finer news within the phase ("2 downloads, 31.6 MiB so far"): shown while it is
        current, never a line of its own."""

    def done(self, summary: str) -> None:
        """The task ended as ``summary`` says ("created", "ready")."""

    def notice(self, line: str) -> None:
        """Something done or missed on the side that the user should hear of, in or out of a
        task ("env dl: rolled back an interrupted `env add`", "the report of env tf was not
        stored: ..."): a line of its own, without envcheck's prefix (the view adds it)."""


SILENT = Progress()
