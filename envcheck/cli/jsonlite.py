"""JSON in and out for the gate's fast path, on the C parts of the standard library's ``json``
without importing the package: ``import json`` compiles five regular expressions and imports
``re`` and ``enum`` (about 5 ms, a third of the gate's own time when nothing changed).

``loads(text)``
    ``json.loads(text)`` for a document ``json.dumps`` wrote (``_json``'s C scanner, which
    parses numbers itself); anything it can't parse raises ``ValueError``.
``dumps(obj)``
    ``json.dumps(obj, indent=2, default=str)``, the same text (the standard library encodes
    with ``indent`` in Python too, with these rules; tests/test_jsonlite.py holds them equal).

The full path reads and writes with ``json`` itself; ``render.emit_json`` writes with this.
"""
from __future__ import annotations

from _json import encode_basestring_ascii as _string
from _json import make_scanner

_INF = float("inf")
_CONSTANTS = {"NaN": float("nan"), "Infinity": _INF, "-Infinity": -_INF}
_SPACE = " \t\n\r"


class _Context:
    """What ``_json.make_scanner`` reads of ``json.JSONDecoder``'s defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


_scan = make_scanner(_Context())


def loads(text: str) -> object:
    start = len(text) - len(text.lstrip(_SPACE))
    try:
        value, end = _scan(text, start)
    except (StopIteration, SystemError, RecursionError) as exc:  # SystemError: the C scanner's
        raise ValueError(f"not JSON: {exc}") from None  # own error wants json.decoder loaded
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if text[end:].strip(_SPACE):
        raise ValueError(f"not JSON: extra data at {end}")
    return value


def dumps(obj: object) -> str:
    parts: list[str] = []
    _encode(obj, 0, parts, set())
    return "".join(parts)


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == _INF:
        return "Infinity"
    if value == -_INF:
        return "-Infinity"
    return float.__repr__(value)


def _scalar(value: object) -> str | None:
    """The text of a scalar, None for anything else (as json's encoder orders its tests)."""
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    return None


def _key(key: object) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return _float(key)
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return int.__repr__(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")


def _encode(value: object, level: int, parts: list[str], seen: set) -> None:
    text = _scalar(value)
    if text is not None:
        parts.append(text)
        return
    if not isinstance(value, (list, tuple, dict)):
        _encode(str(value), level, parts, seen)  # default=str
        return
    if not value:
        parts.append("{}" if isinstance(value, dict) else "[]")
        return
    if id(value) in seen:
        raise ValueError("Circular reference detected")
    seen.add(id(value))
    inner = "\n" + "  " * (level + 1)
    if isinstance(value, dict):
        parts.append("{")
        for i, (key, item) in enumerate(value.items()):
            parts.append(("," if i else "") + inner + _string(_key(key)) + ": ")
            _encode(item, level + 1, parts, seen)
        parts.append("\n" + "  " * level + "}")
    else:
        parts.append("[")
        for i, item in enumerate(value):
            parts.append(("," if i else "") + inner)
            _encode(item, level + 1, parts, seen)
        parts.append("\n" + "  " * level + "]")
    seen.discard(id(value))
