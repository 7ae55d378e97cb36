"""The catalogue: the hand-written entries of ``envcheck/data/catalogue.json`` and the entries
generated for the enumerations' codes (``codes``), read once.

An entry is a cause: its title, cause, fix and links, its ``rank`` (how specific it is when
several fit one line), and, for a cause the line alone cannot decide, ``ambiguous`` with the
``possible_causes`` and what to ``look_at``. ``patterns`` (hand entries only) are Python regular
expressions searched within one line, each repetition bounded; ``literals`` are lower-case
strings, one of which every match of the patterns contains, that the scan finds lines by.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

GENERIC_RANK, DEFAULT_RANK = 0, 3


@dataclass(frozen=True)
class Entry:
    """One cause. ``number`` is its place in the reference (None if not there). ``generic``: a
    catch-all, reported for a line only when nothing more specific explains it (rank 0)."""

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
    rank: int = DEFAULT_RANK
    ambiguous: bool = False
    possible_causes: tuple[str, ...] = ()
    possible_ids: tuple[str, ...] = ()
    look_at: str | None = None
    refines: str | None = None

    def search(self, line: str) -> re.Match[str] | None:
        for pattern in self.patterns:
            match = pattern.search(line)
            if match:
                return match
        return None


@lru_cache(maxsize=1)
def catalogue() -> tuple[Entry, ...]:
    """The hand-written entries in the reference's order, then the generated ones."""
    from .codes import tables

    text = resources.files("envcheck").joinpath("data", "catalogue.json").read_text("utf-8")
    hand = [_entry(e) for e in json.loads(text)["entries"]]
    known = {e.id for e in hand}
    generated = [_entry(e) for e in tables().generated.values() if e["id"] not in known]
    return tuple(hand + generated)


@lru_cache(maxsize=1)
def catalogue_by_id() -> dict[str, Entry]:
    return {entry.id: entry for entry in catalogue()}


def _entry(e: dict[str, Any]) -> Entry:
    literals = tuple(literal.encode("ascii") for literal in e["literals"])
    if e["patterns"] and (not literals or any(not lit or lit != lit.lower() for lit in literals)):
        raise ValueError(f"catalogue entry {e['id']}: literals must be non-empty and lower-case")
    generic = e.get("generic", False)
    return Entry(e["id"], e["number"], e["title"], e["severity"],
                 tuple(re.compile(p) for p in e["patterns"]), literals, e["cause"], e["fix"],
                 tuple(e["links"]), generic, e.get("rank", GENERIC_RANK if generic else DEFAULT_RANK),
                 e.get("ambiguous", False), tuple(e.get("possible_causes", ())),
                 tuple(e.get("possible_ids", ())), e.get("look_at"), e.get("refines"))
