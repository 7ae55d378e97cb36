"""The one rendering layer: a use case's result as JSON or as text for people.

``emit(result, as_json)`` prints the result and returns its exit code. Text renderers are
registered in ``views.py`` per result class with ``@text("module:Class")``. Click-free: the gate's fast path
uses it too. Tables align to their widest cell; verdicts are coloured on a terminal unless
``NO_COLOR`` is set.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

_RENDERERS: dict[str, Callable[[Any], str]] = {}  # "module:Class" -> renderer (no imports here)
_COLOURS = {"ready": "32", "ok": "32", "pass": "32", "degraded": "33", "warn": "33", "WARN": "33",
            "not-ready": "31", "fail": "31", "FAIL": "31", "NOT READY": "31"}


def emit_json(data: Any) -> None:
    """Write one JSON document to stdout."""
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def text(*classes: str) -> Callable:
    """Register a text renderer for results of the classes named "module:Class". It returns
    the text for stdout, or (stdout, stderr) when it has warnings to tell apart."""
    def register(func: Callable[[Any], str]) -> Callable[[Any], str]:
        for name in classes:
            _RENDERERS[name] = func
        return func
    return register


def render_text(result: Any) -> str:
    from . import views  # noqa: F401  (registers the renderers on first use)

    cls = type(result)
    return _RENDERERS[f"{cls.__module__}:{cls.__name__}"](result)


def emit(result: Any, as_json: bool) -> int:
    """Print ``result`` (JSON or text) and return its exit code."""
    if as_json:
        emit_json(result.to_json())
    else:
        out = render_text(result)
        out, err = out if isinstance(out, tuple) else (out, "")
        if out:
            print(out)
        if err:
            sys.stdout.flush()
            print(err, file=sys.stderr)
    return result.exit_code


def colour(word: str) -> str:
    code = _COLOURS.get(word)
    if code is None or os.environ.get("NO_COLOR") or not sys.stdout.isatty():
        return word
    return f"\033[{code}m{word}\033[0m"


def table(rows: list[tuple[str, ...]], indent: str = "", last_free: bool = True) -> list[str]:
    """Rows aligned to their widest cell; the last column is left as it is (free text)."""
    if not rows:
        return []
    columns = len(rows[0]) - (1 if last_free else 0)
    widths = [max(len(str(r[i])) for r in rows) for i in range(columns)]
    lines = []
    for row in rows:
        cells = [str(c).ljust(w) for c, w in zip(row, widths)] + [str(c) for c in row[columns:]]
        lines.append((indent + "  ".join(cells)).rstrip())
    return lines

