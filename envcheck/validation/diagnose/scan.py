"""The scan of a log's windows: one pass of one combined automaton over each window, then only the
lines it stopped on are recognised.

Every key of every recogniser (``recognise``) goes into one regular expression built as a trie
(``trie``): at each position of the window the engine follows one branch per byte, so the cost
per byte is the same for 50 keys as for 5,000, and lines without a key (nearly all of a
training log) are never looked at again. A line with a key is then searched for all the keys it
holds (overlapping ones too), and only their recognisers run on it.
"""
from __future__ import annotations

import re
from functools import lru_cache
from itertools import groupby
from typing import Any, Callable, Iterable

from .recognise import Hit, Recognisers, recognisers

from . import LINE_SHOWN


def trie(words: Iterable[bytes]) -> bytes:
    """A regular expression matching any of ``words`` (longest first at each position), as a trie:
    one branch per distinct next byte, a word alone on its branch written out whole."""
    return _branches(sorted(set(words)))


def _branches(words: list[bytes]) -> bytes:
    optional = bool(words) and words[0] == b""
    words = words[1:] if optional else words
    if not words:
        return b""
    if len(words) == 1:
        body = re.escape(words[0])
    else:
        branches = [re.escape(bytes([first])) + _branches([w[1:] for w in group])
                    for first, group in groupby(words, key=lambda w: w[0])]
        body = branches[0] if len(branches) == 1 else b"(?:" + b"|".join(branches) + b")"
    return b"(?:" + body + b")?" if optional else body


class Automaton:
    """The keys as expressions over lower-case bytes, one trie per first byte: Python's engine
    finds a pattern with a literal first byte by a fast scan for that byte, but tries every branch
    of an alternation at every position, so one trie per first byte (at most one per character a
    key starts with, whatever the number of keys) costs a fraction of one trie of everything.

    ``lines``: every line holding a key, with every key it holds, overlapping ones included (the
    longest at each position, and the keys that are its prefixes)."""

    def __init__(self, keys: list[str]):
        encoded = sorted({k.encode("ascii") for k in keys if k})
        self.searches = [re.compile(trie(list(group))).search
                         for _, group in groupby(encoded, key=lambda k: k[:1])]
        known = set(encoded)
        self.prefixes = {key: [key[:n].decode() for n in range(1, len(key) + 1) if key[:n] in known]
                         for key in encoded}

    def lines(self, low: bytes) -> dict[int, set[str]]:
        """Each line of ``low`` holding a key (by where it starts) -> every key it holds."""
        found: dict[int, set[str]] = {}
        for search in self.searches:
            match = search(low)
            while match is not None:
                start = low.rfind(b"\n", 0, match.start()) + 1
                end = low.find(b"\n", match.end())
                end = len(low) if end < 0 else end
                keys = found.setdefault(start, set())
                while match is not None:  # every key of this trie on the line, overlapping ones too
                    keys.update(self.prefixes[match.group()])
                    match = search(low, match.start() + 1, end)
                match = search(low, end)
        return found


@lru_cache(maxsize=1)
def automaton() -> Automaton:
    return Automaton(recognisers().keys)


class Scan:
    """The first line of each cause found so far; ``window`` adds those of the next window."""

    def __init__(self) -> None:
        self.recognisers: Recognisers = recognisers()
        self.automaton = automaton()
        self.first: dict[str, tuple[int, str, Hit]] = {}  # entry id -> (line number, line, hit)

    def window(self, first_line: int, data: bytes) -> None:
        lower = data.lower()
        number, counted = first_line, 0
        found = self.automaton.lines(lower)
        for start in sorted(found):
            number += lower.count(b"\n", counted, start)
            counted = start
            end = lower.find(b"\n", start)
            end = len(lower) if end < 0 else end
            self._line(number, data[start:end], found[start])

    def _line(self, number: int, raw: bytes, keys: set[str]) -> None:
        line = raw.decode("utf-8", "replace")
        hit = self.recognisers.classify(line, keys)
        if hit is not None and hit.entry.id not in self.first:
            self.first[hit.entry.id] = (number, line, hit)

    def findings(self, make: Callable[..., Any]) -> list[Any]:
        """Each cause once, in the order of its first line (one cause per line)."""
        ordered = sorted(self.first.values(), key=lambda item: item[0])
        return [make(hit.entry, number, shown(line, hit), hit.code.describe() if hit.code else None)
                for number, line, hit in ordered]


def shown(line: str, hit: Hit) -> str:
    """The line as shown: the carriage-return segment holding the match (progress bars redraw
    with \\r), cut to about ``LINE_SHOWN`` characters around the match when longer."""
    start = line.rfind("\r", 0, hit.start) + 1
    end = line.find("\r", hit.end)
    end = len(line) if end < 0 else end
    if end - start > LINE_SHOWN:
        margin = max(0, (LINE_SHOWN - (hit.end - hit.start)) // 2)
        cut_start, cut_end = max(start, hit.start - margin), min(end, hit.end + margin)
        text = line[cut_start:cut_end]
        return ("…" if cut_start > start else "") + text + ("…" if cut_end < end else "")
    return line[start:end].strip()
