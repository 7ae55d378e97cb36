"""A framework's facts (its release table and the constants its rules read), read through a
view that records each key read, so that a fact no rule reads is found, not kept as if used.

``Framework.facts()`` hands out a :class:`Facts` over the framework's table: every key looked
up through it (``facts["releases"]["2.15"]["cuda"]``, ``.get``, ``.items()``) is added to
``READ`` as its path (the framework's name first). ``unread`` walks the table as written and
names each fact whose path was never read in this process: a test exercises the compat
rules over every framework, then asks. ``ABOUT`` keys say where the facts come from, for the
reader (``title``, ``sources``, ``note``, ``schema``); every other key is a fact a rule reads.
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping

ABOUT = frozenset({"schema", "title", "sources", "note"})
READ: set[tuple[Any, ...]] = set()  # the paths read in this process


class Facts(Mapping[str, Any]):
    """A read-only view of one table of facts (a parsed JSON object) that records reads."""

    __slots__ = ("_data", "path")

    def __init__(self, data: Mapping[str, Any], path: tuple[Any, ...]):
        self._data = data
        self.path = path

    def __getitem__(self, key: str) -> Any:
        value = self._data[key]
        path = (*self.path, key)
        READ.add(path)
        return view(value, path)

    def __contains__(self, key: object) -> bool:  # asking whether a key is there reads no fact
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Facts({'/'.join(map(str, self.path))})"


def view(value: Any, path: tuple[Any, ...]) -> Any:
    """``value`` as a rule reads it: an object as :class:`Facts`, a list of objects as a
    tuple of them (each at its index), anything else as it is."""
    if isinstance(value, Mapping):
        return Facts(value, path)
    if isinstance(value, list) and any(isinstance(item, Mapping) for item in value):
        return tuple(view(item, (*path, index)) for index, item in enumerate(value))
    return value


def unread(facts: Facts) -> list[tuple[Any, ...]]:
    """The paths of the facts under ``facts`` that nothing read in this process (``ABOUT``
    keys aside): each key down to a value that is not an object (a list of objects: each)."""
    return [path for path in _leaves(facts._data, facts.path) if path not in READ]


def _leaves(value: Any, path: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, Mapping):
        items = [(key, item) for key, item in value.items() if key not in ABOUT]
    elif isinstance(value, list) and any(isinstance(item, Mapping) for item in value):
        items = list(enumerate(value))
    else:
        yield path
        return
    for key, item in items:
        yield from _leaves(item, (*path, key))
