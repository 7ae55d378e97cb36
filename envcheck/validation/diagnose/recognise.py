"""One line -> at most one cause: every recogniser whose key the line holds is tried, and the most
specific hit wins (one cause, not five).

A recogniser has ``keys`` (lower-case literals; the scan finds lines holding one) and ``find``:

- ``PatternRecogniser``: a hand-written entry's regular expressions (``catalogue.json``);
- ``NameRecogniser``: a code's name (``cudaErrorMemoryAllocation``, ``CUDNN_STATUS_BAD_PARAM``);
- ``PhraseRecogniser``: a message distinctive enough alone (``no kernel image is available ...``);
- ``ContextRecogniser``: a wrapper that prints a code (``CUDA error: <message>``, ``cuda runtime
  error (N) : <message>``, ``Failed to initialize NVML: <message>``): the message after it decides,
  else a number in one of the wrapper's places, in the numbering the wrapper used;
- ``XidRecogniser``, ``LoaderRecogniser`` (the library a loader message names, by family) and
  ``FormatRecogniser`` (WARN lines, host and platform wordings).

Specificity: an entry's ``rank`` first (a hand entry that reads a code in its context, e.g. a cuDNN
status while creating a handle, 4; a code's own cause 3; a wrapper of another layer's code, such
as an NCCL result carrying a CUDA failure, 2; a catch-all 0), then how the code was named (name
or pattern 3, message 2, number 1), then catalogue order.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable

from .catalogue import Entry, catalogue_by_id
from .codes import Code, Format, Tables, tables

WORD = re.compile(r"[a-z0-9_]")
NAME = re.compile(r"[a-z0-9_]+")
COMPARED = re.compile(r"(?:==|!=|\|\|) ?\(?$")
MIN_PREFIX = 6  # a shorter name prefix (``nccl``) is too common in logs to search for
ASCII_LOWER = {c: c + 32 for c in range(65, 91)}
REGION = 400  # characters after a wrapper's key in which its code is looked for


@dataclass(frozen=True)
class Hit:
    entry: Entry
    code: Code | None
    strength: int
    start: int
    end: int
    order: int = 0

    def rank(self) -> tuple[int, int, int]:
        return (self.entry.rank, self.strength, -self.order)


def lower(line: str) -> str:
    """ASCII lower case: positions stay those of ``line`` (``str.lower`` may change lengths)."""
    return line.translate(ASCII_LOWER)


def _bounded(low: str, start: int, end: int) -> bool:
    return not (start and WORD.match(low, start - 1)) and not WORD.match(low, end)


class PatternRecogniser:
    def __init__(self, entry: Entry):
        self.entry, self.keys = entry, tuple(lit.decode() for lit in entry.literals)

    def find(self, line: str, low: str, keys: set[str]) -> Hit | None:
        match = self.entry.search(line)
        return Hit(self.entry, None, 3, match.start(), match.end()) if match else None


class NameRecogniser:
    """Code names (``cudaErrorMemoryAllocation``, ``CUDNN_STATUS_BAD_PARAM``): keyed on the
    enumeration's name prefix (``cudaerror``) where it is long enough to be rare in logs, else
    on each name; the whole word at the key is looked up."""

    def __init__(self, codes: dict[str, Code], prefixes: Iterable[str], strength: int = 3):
        self.codes, self.strength = codes, strength
        prefixes = tuple(p for p in prefixes if len(p) >= MIN_PREFIX)
        self.keys = prefixes + tuple(n for n in codes if not n.startswith(prefixes))

    def find(self, line: str, low: str, keys: set[str]) -> Hit | None:
        for key in self.keys:
            start = low.find(key) if key in keys else -1
            while start >= 0:
                word = NAME.match(low, start)
                compared = COMPARED.search(low, max(0, start - 5), start)  # `err == cudaErrorX`: a check, not the error
                code = self.codes.get(word.group()) if word and _bounded(low, start, word.end()) and not compared else None
                if code:
                    return Hit(catalogue_by_id()[code.entry], code, self.strength, start, word.end())
                start = low.find(key, start + 1)
        return None


class PhraseRecogniser:
    """Messages distinctive enough alone (``no kernel image is available for execution ...``)."""

    def __init__(self, codes: dict[str, Code]):
        self.codes, self.keys = codes, tuple(codes)

    def find(self, line: str, low: str, keys: set[str]) -> Hit | None:
        best = None
        for key in keys:
            code = self.codes.get(key)
            start = low.find(key) if code else -1
            while start >= 0 and not _bounded(low, start, start + len(key)):
                start = low.find(key, start + 1)
            if start >= 0 and (best is None or len(key) > best.end - best.start):
                best = Hit(catalogue_by_id()[code.entry], code, 2, start, start + len(key))
        return best


class ContextRecogniser:
    """A wrapper that prints codes of ``enumerations`` by message or number after its keys."""

    def __init__(self, spec: dict[str, Any], built: Tables):
        self.keys = tuple(spec["keys"])
        self.number_keys = set(spec.get("number_keys", self.keys))
        self.region = spec.get("region", REGION)
        self.colon_below = spec.get("colon_below", 0)
        self.enumerations = spec["enumerations"]
        texts: dict[str, Code] = {}
        for name in self.enumerations:  # the first enumeration's code where two print the same text
            for text, code in built.messages[name].items():
                texts.setdefault(text, code)
        self.messages = texts
        alternation = "|".join(re.escape(t) for t in sorted(texts, key=len, reverse=True))
        self.search = re.compile(r"(?<![a-z0-9_])(?:" + alternation + r")(?![a-z0-9_])").search if texts else None
        self.numbers = [(order, re.compile(pattern)) for order, pattern in spec["numbers"]]
        self.tables = [built.numbers[name] for name in self.enumerations]

    def find(self, line: str, low: str, keys: set[str]) -> Hit | None:
        for key in self.keys:
            start = low.find(key) if key in keys else -1
            while start >= 0:
                hit = self._after(line, low, start, key in self.number_keys, start + len(key))
                if hit:
                    return hit
                start = low.find(key, start + 1)
        return None

    def _after(self, line: str, low: str, start: int, numbers: bool, key_end: int) -> Hit | None:
        end = min(len(line), start + self.region)
        match = self.search(low, max(0, start - 1), end) if self.search else None
        if match and len(match.group()) < self.colon_below and ":" not in low[key_end:match.start()]:
            match = None
        if match:
            code = self.messages[match.group()]
            return Hit(catalogue_by_id()[code.entry], code, 2, match.start(), match.end())
        for order, pattern in self.numbers if numbers else ():
            found = pattern.search(line, start, end)
            code = found and self._number(int(found.group("num")), order)
            if code:
                return Hit(catalogue_by_id()[code.entry], code, 1, found.start(), found.end())
        return None

    def _number(self, number: int, order: str) -> Code | None:
        first, second = ("old", "new") if order == "old" else ("new", "old")
        for numbering in (first, second):
            for table in self.tables:
                if number in table[numbering]:
                    return table[numbering][number]
        return None


class XidRecogniser:
    PATTERNS = (re.compile(r"xid \(pci:[^)]{0,40}\)[: ]{0,3}(\d{1,3})\b"),
                re.compile(r"\bxid[ =:#]{1,3}(\d{1,3})\b"))

    def __init__(self, built: Tables):
        self.xids, self.keys = built.xids, ("xid",)

    def find(self, line: str, low: str, keys: set[str]) -> Hit | None:
        for strength, pattern in zip((4, 2), self.PATTERNS):
            match = pattern.search(low)
            code = match and self.xids.get(int(match.group(1)))
            if code:
                return Hit(catalogue_by_id()[code.entry], code, strength, match.start(), match.end())
        return None


class LoaderRecogniser:
    """A loader message naming a library: the library's family is the cause (a library envcheck
    doesn't know gives nothing), or the way the file failed when it is there but unusable."""

    def __init__(self, spec: dict[str, Any]):
        self.keys = tuple(spec["keys"])
        self.patterns = [re.compile(p) for p in spec["patterns"]]
        self.families = [(re.compile(rule), entry_id) for entry_id, rule in spec["families"]]
        self.reasons = [(re.compile(rule), entry_id) for entry_id, rule in spec["reasons"]]

    def find(self, line: str, low: str, keys: set[str]) -> Hit | None:
        for pattern in self.patterns:
            for match in pattern.finditer(line):
                library = re.split(r"[/\\]", match.group("lib"))[-1].lower()
                entry_id = next((e for rule, e in self.families if rule.search(library)), None)
                if entry_id is None:
                    continue
                tail = low[match.end("lib"):match.end("lib") + 80]
                entry_id = next((e for rule, e in self.reasons if rule.search(tail)), entry_id)
                code = Code("loader", library, None, match.group(), None, entry_id)
                return Hit(catalogue_by_id()[entry_id], code, 3, match.start(), match.end())
        return None


class FormatRecogniser:
    """Standard wordings with printf fields: each tried where the line holds its literal (or,
    for those too short to search for, after its context)."""

    def __init__(self, formats: Iterable[Format], keys: tuple[str, ...]):
        self.formats, self.keys = list(formats), keys

    def find(self, line: str, low: str, keys: set[str]) -> Hit | None:
        for item in self.formats:  # a wording's regex runs only where its literal is on the line
            if (item.key or item.context) not in keys or item.literal not in low:
                continue
            if item.requires and item.requires not in low:
                continue
            match = _compiled(item.pattern).search(line)
            if match:
                return Hit(catalogue_by_id()[item.code.entry], item.code, 2, match.start(), match.end())
        return None


@lru_cache(maxsize=None)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


class Recognisers:
    """All recognisers, and which of them own each key."""

    def __init__(self, entries: tuple[Entry, ...], built: Tables):
        spec = built.spec
        found: list[Any] = [PatternRecogniser(e) for e in entries if e.patterns]
        found.append(NameRecogniser(built.names, (e["strip"].lower() for e in spec["enumerations"])))
        found.append(PhraseRecogniser(built.phrases))
        found += [ContextRecogniser(c, built) for c in spec["contexts"]]
        found.append(PhraseRecogniser(built.mirrored))  # after the contexts: "HIP error: <it>" is HIP's
        found += [XidRecogniser(built), LoaderRecogniser(spec["loader"])]
        keyed = [f for f in built.formats if f.key]
        by_key: dict[str, list[Format]] = {}
        for item in keyed:
            by_key.setdefault(item.key, []).append(item)
        found += [FormatRecogniser(items, (key,)) for key, items in by_key.items()]
        contexts = {f.context for f in built.formats if not f.key and f.context}
        found += [FormatRecogniser([f for f in built.formats if not f.key and f.context == c], (c,))
                  for c in sorted(contexts)]
        self.owners: dict[str, list[tuple[int, Any]]] = {}
        for order, recogniser in enumerate(found):
            for key in recogniser.keys:
                self.owners.setdefault(key, []).append((order, recogniser))

    @property
    def keys(self) -> list[str]:
        return list(self.owners)

    def classify(self, line: str, keys: set[str]) -> Hit | None:
        """The most specific hit on ``line``, which holds ``keys`` (all of them, prefixes too)."""
        low = lower(line)
        tried: dict[int, Any] = {}
        for key in keys:
            for order, recogniser in self.owners.get(key, ()):
                tried[order] = recogniser
        best = coded = None
        for order in sorted(tried):
            hit = tried[order].find(line, low, keys)
            if hit is not None:
                hit = Hit(hit.entry, hit.code, hit.strength, hit.start, hit.end, order)
                if best is None or hit.rank() > best.rank():
                    best = hit
                if hit.code is not None and (coded is None or hit.rank() > coded.rank()):
                    coded = hit
        if best is not None and best.code is None and coded is not None:  # name the code read in context
            best = Hit(best.entry, coded.code, best.strength, best.start, best.end, best.order)
        return best


@lru_cache(maxsize=1)
def recognisers() -> Recognisers:
    from .catalogue import catalogue

    return Recognisers(catalogue(), tables())
