"""Known GPU-stack failures in a log: each line recognised by the code or message it carries -> one
cause -> its fix.

What is recognised (``catalogue``): the hand-written causes of ``envcheck/data/catalogue.json``
(framework wordings, installs, containers, schedulers, Apple MPS, CPU-only builds), and every code
of the GPU stack's published error enumerations (``envcheck/data/enumerations``: CUDA runtime and
driver, NVML, cuDNN, cuBLAS/cuFFT/cuSOLVER/cuSPARSE/cuRAND, NCCL and its WARN lines, the Xid
catalogue, HIP, the loader's, the kernel module's and the container toolkit's messages), each
code tied to its cause by ``envcheck/data/diagnose_codes.json`` (``codes``). A line gives one
finding: where several entries fit, the most specific wins (``recognise``); where the line alone
cannot tell the cause (a bare ``out of memory``), the finding is ``ambiguous``: it lists the
possible causes and says what else to look at, and asserts none.

Diagnosis takes time linear in the log's size and memory bounded whatever the log:

- the log is read in windows of ``WINDOW`` bytes cut after a newline, never whole; a line
  longer than a window comes in pieces that repeat the last ``OVERLAP`` bytes of the piece
  before, and since no pattern's match is longer than ``OVERLAP`` (the catalogue bounds every
  repetition), a match across a cut is found in the next piece;
- each window is searched once for all the catalogue's keys together (one regular expression
  built as a trie of every literal, name and message: a combined automaton whose cost per byte
  does not grow with the number of keys, ``scan``); only a line holding a key is recognised, and
  only the entries owning the keys it holds are tried on it;
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
import os
from dataclasses import asdict, dataclass
from typing import Any, BinaryIO, ClassVar, Iterator

from ...errors import UsageError
from ...results import Result
from .catalogue import Entry, catalogue

WINDOW = 1 << 20  # bytes read at a time; a window holds at most about two of them
OVERLAP = 4096  # bytes repeated between the pieces of a long line: more than any match
LINE_SHOWN = 1000  # characters of a matching line shown; a longer one is cut around the match
MAX_BYTES = 4 << 30  # a bigger log is refused with the fix: diagnose its end (a minute of reading)
MAX_RUN = 64 << 20  # bytes with no line break (LF or CR) after which input is not a text log


@dataclass(frozen=True)
class Finding:
    """A catalogue entry found in a log: where first (1-based line number) and the line.

    ``code``: the code recognised on the line ({"enumeration", "name", "number", "message",
    "meaning"}; None for a wording that is no enumeration's). ``ambiguous``: the line alone
    cannot tell the cause; ``possible_causes`` lists the candidates (``possible_ids``: those
    that are catalogue entries) and ``look_at`` says what decides, and no cause is asserted.
    ``refines``: the broader catalogue id this finding is a kind of (a consumer matching on
    an older, coarser id keeps working)."""

    id: str
    number: int | None
    title: str
    severity: str
    cause: str
    fix: str
    links: tuple[str, ...]
    line_number: int
    line: str
    code: dict[str, Any] | None = None
    ambiguous: bool = False
    possible_causes: tuple[str, ...] = ()
    possible_ids: tuple[str, ...] = ()
    look_at: str | None = None
    refines: str | None = None


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
    from .scan import Scan

    reader = _Reader(stream, source)
    scan = Scan()
    for first_line, window in _windows(reader):
        scan.window(first_line, window)
    return Diagnosis(source, scan.findings(finding), reader.lines, reader.bytes)


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


def finding(entry: Entry, line_number: int, line: str, code: dict[str, Any] | None) -> Finding:
    """The finding of ``entry`` on ``line`` (already cut for showing)."""
    return Finding(entry.id, entry.number, entry.title, entry.severity, entry.cause, entry.fix,
                   entry.links, line_number, line, code, entry.ambiguous, entry.possible_causes,
                   entry.possible_ids, entry.look_at, entry.refines)


__all__ = ["Diagnosis", "Entry", "Finding", "catalogue", "diagnose", "diagnose_file", "diagnose_stream"]
