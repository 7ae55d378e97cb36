"""Known "GPU not seen / not usable" failures in a log: message pattern -> cause -> fix.

The catalogue is ``envcheck/data/catalogue.json`` (reference/diagnosis-catalogue.md as data,
plus the messages people hit in the frameworks', NCCL, container and kernel logs, each
with the public threads where its cause was settled), read once.

Diagnosis takes time linear in the log's size and memory bounded whatever the log:

- the log is read in windows of ``WINDOW`` bytes cut after a newline, never whole; a line
  longer than a window comes in pieces that repeat the last ``OVERLAP`` bytes of the piece
  before, and since no pattern's match is longer than ``OVERLAP`` (the catalogue bounds every
  repetition), a match across a cut is found in the next piece;
- each window is searched for the catalogue's literals first (``bytes.find`` on the
  lower-cased window: a C loop, no backtracking); a pattern runs only on a line holding one
  of its entry's literals, and an entry already found is not searched for again;
- every repetition in a pattern is bounded, so a pattern runs in time linear in the line;
- input is read up to ``MAX_BYTES``, and a run of ``MAX_RUN`` bytes with no line break (``\\n`` or
  ``\\r``) is refused as not a text log: an endless stream without newlines (``/dev/zero``, a
  binary pipe) gets its answer after 64 MiB (seconds) instead of after 4 GiB.

Log prefixes (timestamps, ``file.cc:123]``, ``[rank0]:``, syslog's ``#012`` for a newline) need no
stripping: patterns are searched, never anchored, and none spans the place a prefix or a wrapped
line's break would fall.

``diagnose(text)`` (validate applies it to smoke stderr) and ``diagnose_stream`` /
``diagnose_file`` (the CLI: a ``Diagnosis`` result) share this path.
"""
from __future__ import annotations

import io
import json
import os
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, BinaryIO, ClassVar, Iterator

from ..errors import UsageError
from ..results import Result

WINDOW = 1 << 20  # bytes read at a time; a window holds at most about two of them
OVERLAP = 4096  # bytes repeated between the pieces of a long line: more than any match
LINE_SHOWN = 1000  # characters of a matching line shown; a longer one is cut around the match
MAX_BYTES = 4 << 30  # a bigger log is refused with the fix: diagnose its end (a minute of reading)
MAX_RUN = 64 << 20  # bytes with no line break (LF or CR) after which input is not a text log


@dataclass(frozen=True)
class Entry:
    """One catalogue entry. ``number`` is its place in the reference (None if not there).
    ``literals``: lower-case bytes, one of which every match of ``patterns`` contains.
    ``generic``: reported for a line only when no other entry explains that line."""

    id: str
    number: int | None
    title: str
    severity: str  # "error" | "info"
    patterns: tuple[re.Pattern[str], ...]
    literals: tuple[bytes, ...]
    cause: str
    fix: str
    links: tuple[str, ...]
    generic: bool = False

    def search(self, line: str) -> re.Match[str] | None:
        for pattern in self.patterns:
            match = pattern.search(line)
            if match:
                return match
        return None


@dataclass(frozen=True)
class Finding:
    """A catalogue entry found in a log: where first (1-based line number) and the line."""

    id: str
    number: int | None
    title: str
    severity: str
    cause: str
    fix: str
    links: tuple[str, ...]
    line_number: int
    line: str


@dataclass
class Diagnosis(Result):
    """The known failures in one log: exit 1 when one of them is an error, as linters do."""

    schema: ClassVar[str] = "envcheck.diagnosis/1"
    source: str
    findings: list[Finding]
    lines_read: int
    bytes_read: int

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0

    def body(self) -> dict[str, Any]:
        return {"source": self.source, "lines_read": self.lines_read,
                "bytes_read": self.bytes_read, "findings": [asdict(f) for f in self.findings]}


@lru_cache(maxsize=1)
def catalogue() -> tuple[Entry, ...]:
    """The catalogue entries, patterns compiled, in the reference's order."""
    text = resources.files("envcheck").joinpath("data", "catalogue.json").read_text("utf-8")
    return tuple(_entry(e) for e in json.loads(text)["entries"])


def _entry(e: dict[str, Any]) -> Entry:
    literals = tuple(literal.encode("ascii") for literal in e["literals"])
    if not literals or any(not lit or lit != lit.lower() for lit in literals):
        raise ValueError(f"catalogue entry {e['id']}: literals must be non-empty and lower-case")
    return Entry(e["id"], e["number"], e["title"], e["severity"],
                 tuple(re.compile(p) for p in e["patterns"]), literals, e["cause"], e["fix"],
                 tuple(e["links"]), e.get("generic", False))


def diagnose(text: str) -> list[Finding]:
    """Each known cause in ``text`` once, in order of its first line (catalogue order within a
    line), with that line."""
    stream = io.BytesIO(text.encode("utf-8", "replace"))
    return diagnose_stream(stream, "text").findings


def diagnose_file(path: str) -> Diagnosis:
    """``diagnose_stream`` of the file at ``path``; UsageError (exit 2) when it can't be read."""
    try:
        stream = open(path, "rb")
    except OSError as exc:
        raise _unreadable(path, exc) from None
    with stream:
        if os.fstat(stream.fileno()).st_size > MAX_BYTES:
            raise _too_big(path)
        return diagnose_stream(stream, path)


def diagnose_stream(stream: BinaryIO, source: str) -> Diagnosis:
    """The known failures in a binary stream, read in bounded windows (see the module doc)."""
    reader = _Reader(stream, source)
    scan = _Scan(catalogue())
    for first_line, window in _windows(reader):
        scan.window(first_line, window)
        if scan.done:
            break
    return Diagnosis(source, scan.findings, reader.lines, reader.bytes)


class _Reader:
    """Reads ``stream`` a window at a time, counting bytes and lines, up to ``MAX_BYTES``."""

    def __init__(self, stream: BinaryIO, source: str):
        self.stream, self.source = stream, source
        self.bytes = self.newlines = 0
        self.run = 0  # bytes since the last LF or CR
        self.last = b"\n"

    @property
    def lines(self) -> int:
        return self.newlines + (self.last != b"\n")

    def read(self) -> bytes:
        try:
            data = self.stream.read(WINDOW)
        except OSError as exc:
            raise _unreadable(self.source, exc) from None
        if data:
            self.bytes += len(data)
            if self.bytes > MAX_BYTES:
                raise _too_big(self.source)
            self.newlines += data.count(b"\n")
            self.last = data[-1:]
            brk = max(data.rfind(b"\n"), data.rfind(b"\r"))
            self.run = len(data) - brk - 1 if brk >= 0 else self.run + len(data)
            if self.run > MAX_RUN:
                raise _no_line_breaks(self.source, self.lines)
        return data


def _unreadable(source: str, exc: OSError) -> UsageError:
    return UsageError(f"cannot read {'stdin' if source == '-' else source}: {exc.strerror or exc}",
                      "give a readable log file, or - for stdin")


def _too_big(source: str) -> UsageError:
    name = "stdin" if source == "-" else source
    return UsageError(f"{name} is larger than the {MAX_BYTES >> 30} GiB that diagnose reads",
                      f"diagnose the log's end: tail -c 1G {'FILE' if source == '-' else source}"
                      " | envcheck diagnose -")


def _no_line_breaks(source: str, line: int) -> UsageError:
    name = "stdin" if source == "-" else source
    return UsageError(f"{name} has {MAX_RUN >> 20} MiB without a line break (line {line}): not a text log",
                      "give diagnose the text log the job wrote; for a binary file, its text: "
                      f"strings {'FILE' if source == '-' else source} | envcheck diagnose -")


def _windows(reader: _Reader) -> Iterator[tuple[int, bytes]]:
    """(number of the first line, bytes): whole lines, except that a line longer than a window
    comes in pieces, each starting with the last ``OVERLAP`` bytes of the piece before."""
    line, pending = 1, b""
    while chunk := reader.read():
        pending += chunk
        cut = pending.rfind(b"\n") + 1
        if cut:
            window, pending = pending[:cut], pending[cut:]
            yield line, window
            line += window.count(b"\n")
        elif len(pending) > WINDOW:
            yield line, pending
            pending = pending[-OVERLAP:]
    if pending:
        yield line, pending


class _Scan:
    """The findings so far; ``window`` adds those of the next window of the log."""

    def __init__(self, entries: tuple[Entry, ...]):
        self.entries = entries
        self.findings: list[Finding] = []
        self.found: set[int] = set()
        owners: dict[bytes, list[int]] = {}
        for index, entry in enumerate(entries):
            for literal in entry.literals:
                owners.setdefault(literal, []).append(index)
        self.owners = owners

    @property
    def done(self) -> bool:
        return len(self.found) == len(self.entries)

    def window(self, first_line: int, data: bytes) -> None:
        lower = data.lower()
        first: dict[int, tuple[int, re.Match[str], str]] = {}  # entry -> (line start, match, line)
        for literal, owners in self.owners.items():
            todo = [i for i in owners if i not in self.found]
            pos = lower.find(literal) if todo else -1
            while pos >= 0:
                start = lower.rfind(b"\n", 0, pos) + 1
                todo = [i for i in todo if i not in first or first[i][0] > start]
                if not todo:
                    break
                end = lower.find(b"\n", pos)
                end = len(lower) if end < 0 else end
                line = data[start:end].decode("utf-8", "replace")
                for i in todo:
                    match = self._match(i, line)
                    if match:
                        first[i] = (start, match, line)
                pos = lower.find(literal, end)
        for i, (start, match, line) in sorted(first.items(), key=lambda item: (item[1][0], item[0])):
            e = self.entries[i]
            self.found.add(i)
            self.findings.append(Finding(e.id, e.number, e.title, e.severity, e.cause, e.fix,
                                         e.links, first_line + lower.count(b"\n", 0, start),
                                         _shown(line, match)))

    def _match(self, index: int, line: str) -> re.Match[str] | None:
        match = self.entries[index].search(line)
        if match and self.entries[index].generic and any(
                not e.generic and e.search(line) for e in self.entries):
            return None
        return match


def _shown(line: str, match: re.Match[str]) -> str:
    """The line as shown: the carriage-return segment holding the match (progress bars redraw
    with \\r), cut to about ``LINE_SHOWN`` characters around the match when longer."""
    start = line.rfind("\r", 0, match.start()) + 1
    end = line.find("\r", match.end())
    end = len(line) if end < 0 else end
    if end - start > LINE_SHOWN:
        margin = max(0, (LINE_SHOWN - (match.end() - match.start())) // 2)
        cut_start, cut_end = max(start, match.start() - margin), min(end, match.end() + margin)
        text = line[cut_start:cut_end]
        return ("…" if cut_start > start else "") + text + ("…" if cut_end < end else "")
    return line[start:end].strip()
