"""The one rendering layer: a use case's result as JSON or as text for people.

``emit(result, form)`` prints the result ("json", "text", "markdown" or "html") and returns its
exit code. The renderers of each form are listed per result class in ``views/__init__.py``, imported
only when a form other than JSON is asked for. Click-free: the gate's fast path uses it too.
Tables align to their widest cell; verdicts are coloured on a terminal unless ``NO_COLOR`` is
set.

All text for people leaves through ``safe``: names and messages that came from outside
(dist-info folder names, NVML's GPU names, a stored report's lines) may hold terminal control
sequences or bytes that aren't UTF-8, and reach the terminal only as visible escapes. JSON
needs no such pass: it escapes every control character and lone surrogate itself.
"""
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the gate's fast path
if TYPE_CHECKING:      # renders with this module, so neither re nor json is imported on load
    import re

_COLOURS = {"ready": "32", "ok": "32", "pass": "32", "degraded": "33", "warn": "33", "WARN": "33",
            "not-ready": "31", "fail": "31", "FAIL": "31", "NOT READY": "31"}
# C0 controls but newline and tab, DEL, C1 controls, and lone surrogates (undecodable bytes)
_UNSAFE = r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]"  # compiled on first use: JSON needs none
# colour()'s mark for a colour code, made per process so text from outside can't forge one;
# ``safe`` keeps marks as they are and ``_painted`` turns them into escape sequences.
_MARK = f"\x00{os.urandom(8).hex()}:"
_MARKED = _MARK + r"([0-9]+)\x00"  # _MARK holds no character special to re (hex, ':', NUL)


def emit_json(data: object) -> None:
    """Write one JSON document to stdout: ``json.dumps(data, indent=2, default=str)``'s text,
    written by ``jsonlite`` (no ``json`` import)."""
    from .jsonlite import dumps

    sys.stdout.write(dumps(data) + "\n")  # one write, not one per token


def render(result: object, form: str):
    """``result`` in ``form`` ("text", "markdown", "html") as its view in ``views`` renders it."""
    from .views import renderer

    return renderer(result, form)(result)


def emit(result: object, form: str = "text") -> int:
    """Print ``result`` ("json", "text", "markdown" or "html") and return its exit code."""
    if form == "json":
        emit_json(result.to_json())
    else:
        out = render(result, form)
        out, err = out if isinstance(out, tuple) else (out, "")
        if out:
            print(_painted(safe(out)))
        if err:
            sys.stdout.flush()
            print(_painted(safe(err)), file=sys.stderr)
    return result.exit_code


def safe(text: str) -> str:
    """``text`` with every control character but newline and tab shown as a visible escape
    (ESC as ``\\x1b``), and every lone surrogate too: one from a byte that wasn't UTF-8
    (``surrogateescape``) as that byte (``\\xff``), any other as its code point (``\\ud800``). Safe to apply twice."""
    import re

    parts = re.split(_MARKED, text)  # text, colour code, text, ...
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(_UNSAFE, _escaped, parts[i])
    for i in range(1, len(parts), 2):
        parts[i] = f"{_MARK}{parts[i]}\x00"
    return "".join(parts)


def _escaped(match: re.Match) -> str:
    point = ord(match[0])
    if 0xDC80 <= point <= 0xDCFF:
        return f"\\x{point - 0xDC00:02x}"
    return f"\\u{point:04x}" if point > 0xFF else f"\\x{point:02x}"


def _painted(text: str) -> str:
    import re

    return re.sub(_MARKED, lambda m: f"\033[{m[1]}m", text)


def colour(word: str) -> str:
    code = _COLOURS.get(word)
    if code is None or os.environ.get("NO_COLOR") or not sys.stdout.isatty():
        return word
    return f"{_MARK}{code}\x00{word}{_MARK}0\x00"


def table(rows: list[tuple[str, ...]], indent: str = "", last_free: bool = True) -> list[str]:
    """Rows aligned to their widest cell; the last column is left as it is (free text)."""
    if not rows:
        return []
    rows = [tuple(safe(str(c)) for c in row) for row in rows]  # widths of the text as shown
    columns = len(rows[0]) - (1 if last_free else 0)
    widths = [max(len(str(r[i])) for r in rows) for i in range(columns)]
    lines = []
    for row in rows:
        cells = [str(c).ljust(w) for c, w in zip(row, widths)] + [str(c) for c in row[columns:]]
        lines.append((indent + "  ".join(cells)).rstrip())
    return lines

