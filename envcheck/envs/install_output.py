"""The installers' output, read line by line as it is written to the log, as progress events.

uv and pip say what they are doing in stable words when their output is not a terminal
(as here: it goes through a pipe to the log). uv:

    Resolved 12 packages in 3ms
    Downloading numpy (15.8MiB)          (only downloads over 1 MiB are announced)
     Downloaded numpy
    Prepared 12 packages in 2.1s
    Installed 12 packages in 40ms
    Bytecode compiled 1520 files in 1.3s

pip (which resolves and downloads in turns, and compiles as it installs):

    Collecting numpy
      Downloading numpy-2.1.0-cp311-...whl (16.3 MB)
    Installing collected packages: numpy, scipy
    Successfully installed numpy-2.1.0 scipy-1.14.0

Phases only move forward: pip's next ``Collecting`` after a download stays in "downloading"
as a step, so a plain log gets one line per phase, not one per package. A line these
readers don't know is no event at all; the log keeps every line whatever they make of it.
"""
from __future__ import annotations

import re
from typing import Callable

from ..progress import Progress
from .indexes import redact

_UNITS = {"bytes": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 2 ** 10, "mib": 2 ** 20,
          "gib": 2 ** 30}
_SIZE = re.compile(r"\((\d+(?:\.\d+)?)\s*([kMG]i?B|bytes|B)\)\s*$", re.IGNORECASE)


def size_bytes(text: str) -> float | None:
    """``(2.4 MB)``, ``(934 bytes)``, ``(15.8MiB)`` at the end of ``text``, in bytes."""
    match = _SIZE.search(text)
    return float(match[1]) * _UNITS[match[2].lower()] if match else None


def _short(name: str) -> str:
    """A distribution's name from a wheel's or sdist's URL or path; a bare name as it is."""
    file = name.rstrip("/").rpartition("/")[2]
    return file.partition("-")[0] if re.search(r"\.(whl|zip|tar\.gz)$", file) else file


def human_size(size: float) -> str:
    return f"{size / 2 ** 30:.2f} GiB" if size >= 2 ** 30 else f"{size / 2 ** 20:.1f} MiB"


class InstallerOutput:
    """Turns one installer's lines into ``Progress`` phases and steps (see the module doc)."""

    PHASES = ("resolving", "downloading", "installing", "compiling bytecode")
    rules: tuple[tuple[re.Pattern, str], ...] = ()  # (pattern, name of the handler method)

    def __init__(self, progress: Progress):
        self.progress = progress
        self.current = 0  # index in PHASES
        self.downloads = 0
        self.downloaded = 0.0  # bytes announced

    def begin(self) -> None:
        self.progress.phase(self.PHASES[0])

    def __call__(self, line: str) -> None:
        line = redact(line)  # an index URL's credentials never reach a terminal
        for pattern, handler in self.rules:
            match = pattern.match(line)
            if match:
                getattr(self, handler)(match)
                return

    def enter(self, phase: str, detail: str = "") -> None:
        """Phase ``phase`` (with ``detail`` in its line) unless the output is past it already."""
        index = self.PHASES.index(phase)
        if index > self.current:
            self.current = index
            self.progress.phase(f"{phase} {detail}".strip())

    def download(self, match: re.Match) -> None:
        name = _short(match["name"])
        size = size_bytes(match.string)
        self.downloads += 1
        self.downloaded += size or 0
        self.enter("downloading")
        self.progress.step(f"{name}{f' ({human_size(size)})' if size else ''}; {self.downloads} "
                           f"download{'s' if self.downloads > 1 else ''}, {human_size(self.downloaded)} so far")

    def installing(self, count: int) -> None:
        fetched = f" ({human_size(self.downloaded)} downloaded)" if self.downloads else ""
        self.enter("installing", f"{count} package{'s' if count != 1 else ''}{fetched}")


class UvOutput(InstallerOutput):
    rules = (
        (re.compile(r"Resolved (?P<n>\d+) packages?"), "resolved"),
        (re.compile(r"Downloading (?P<name>\S+) \("), "download"),
        (re.compile(r"\s*Building (?P<name>\S+)"), "building"),
        (re.compile(r"Prepared (?P<n>\d+) packages?"), "prepared"),
        (re.compile(r"Installed (?P<n>\d+) packages?"), "installed"),
        (re.compile(r"Bytecode compiled (?P<n>\d+) files?"), "compiled"),
    )

    def resolved(self, match: re.Match) -> None:
        self.progress.step(f"resolved {match['n']} packages; fetching")

    def building(self, match: re.Match) -> None:
        self.progress.step(f"building {match['name']}")

    def prepared(self, match: re.Match) -> None:
        self.installing(int(match["n"]))

    def installed(self, match: re.Match) -> None:
        self.enter("compiling bytecode")

    def compiled(self, match: re.Match) -> None:
        self.progress.step(f"{match['n']} files compiled")


class PipOutput(InstallerOutput):
    rules = (
        (re.compile(r"(?:Collecting|Processing) (?P<name>\S+)"), "collecting"),
        (re.compile(r"\s*Downloading (?P<name>\S+) \("), "download"),
        (re.compile(r"\s*Using cached (?P<name>\S+)"), "cached"),
        (re.compile(r"Installing collected packages: (?P<names>.*)"), "collected"),
        (re.compile(r"Successfully installed"), "installed"),
    )

    def collecting(self, match: re.Match) -> None:
        self.progress.step(f"collecting {_short(match['name'])}")

    def cached(self, match: re.Match) -> None:
        self.progress.step(f"{match['name']} from the cache")

    def collected(self, match: re.Match) -> None:
        self.installing(len([n for n in match["names"].split(",") if n.strip()]))

    def installed(self, match: re.Match) -> None:
        self.progress.step("installed")


def reader(backend: str, progress: Progress) -> Callable[[str], None]:
    """The line reader of installer ``backend`` ("uv" or "pip"), already in its first phase."""
    output = (UvOutput if backend == "uv" else PipOutput)(progress)
    output.begin()
    return output
