"""Known "GPU not seen / not usable" failures in a log: message pattern -> cause -> fix.

The catalogue is ``envcheck/data/catalogue.json`` (reference/diagnosis-catalogue.md as data),
read once. ``diagnose(text)`` is pure: validate applies it to smoke stderr, the CLI to any log.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True)
class Entry:
    """One catalogue entry. ``number`` is its place in the reference (None for noise)."""

    id: str
    number: int | None
    title: str
    severity: str  # "error" | "info"
    patterns: tuple[re.Pattern[str], ...]
    cause: str
    fix: str
    links: tuple[str, ...]


@dataclass(frozen=True)
class Finding:
    """A catalogue entry found in a text: where first (1-based line number) and the line."""

    id: str
    number: int | None
    title: str
    severity: str
    cause: str
    fix: str
    links: tuple[str, ...]
    line_number: int
    line: str


@lru_cache(maxsize=1)
def catalogue() -> tuple[Entry, ...]:
    """The catalogue entries, patterns compiled, in the reference's order."""
    text = resources.files("envcheck").joinpath("data", "catalogue.json").read_text("utf-8")
    return tuple(
        Entry(e["id"], e["number"], e["title"], e["severity"],
              tuple(re.compile(p) for p in e["patterns"]), e["cause"], e["fix"], tuple(e["links"]))
        for e in json.loads(text)["entries"])


def _matches(entry: Entry, line: str) -> bool:
    return any(pattern.search(line) for pattern in entry.patterns)


def diagnose(text: str) -> list[Finding]:
    """Each known cause in ``text`` once, in order of its first line (catalogue order within a
    line), with that line."""
    entries = catalogue()
    findings: list[Finding] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        for entry in entries:
            if entry.id not in seen and _matches(entry, line):
                seen.add(entry.id)
                findings.append(Finding(entry.id, entry.number, entry.title, entry.severity,
                                        entry.cause, entry.fix, entry.links, number,
                                        line.strip()))
        if len(seen) == len(entries):
            break
    return findings
