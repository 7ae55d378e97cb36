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
    """The keys as one expression over lower-case bytes: ``find`` (a line holds a key) and
    ``keys`` (every key a line holds, overlapping ones included: the longest at each position,
    and the keys that are its prefixes)."""

    def __init__(self, keys: list[str]):
        encoded = sorted({k.encode("ascii") for k in keys if k})
        self.find = re.compile(trie(encoded)).search
        known = set(encoded)
        self.prefixes = {key: [key[:n].decode() for n in range(1, len(key) + 1) if key[:n] in known]
                         for key in encoded}

    def keys(self, low: bytes) -> set[str]:
        found: set[str] = set()
        match = self.find(low)
        while match is not None:
            found.update(self.prefixes[match.group()])
            match = self.find(low, match.start() + 1)
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
        find, pos, seen_line = self.automaton.find, 0, -1
        while True:
            match = find(lower, pos)
            if match is None:
                return
            start = lower.rfind(b"\n", 0, match.start()) + 1
            end = lower.find(b"\n", match.end())
            end = len(lower) if end < 0 else end
            if start != seen_line:
                seen_line = start
                self._line(first_line + lower.count(b"\n", 0, start), data[start:end], lower[start:end])
            pos = end

    def _line(self, number: int, raw: bytes, low: bytes) -> None:
        line = raw.decode("utf-8", "replace")
        hit = self.recognisers.classify(line, self.automaton.keys(low))
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
