"""Every duration a user gives envcheck (an option, an environment variable, ``ensure_ready``'s
``max_age`` as text), parsed here and nowhere else, each kind within its stated maximum: a value past
it is bad input (``UsageError``, exit 2) that names the maximum, never a timer that overflows
(``poll`` counts milliseconds in a C int, 24.8 days; ``time_t`` ends further on).

``seconds(text, *, zero=False) -> float``
    How long envcheck waits (per device, for an index, for another process, for a node, a
    preflight's budget): a number of seconds (``120``, ``0.5``, ``1e3``), or one with a unit
    (``60s``, ``5m``, ``1h``), above 0 (0 allowed with ``zero``), at most ``MAX_WAIT_S``, one
    day: a phase of a validation waits up to twice its ``--timeout``.
``age(text) -> float``
    How old something may be (a stored validation): ``24h``, ``30m``, ``90s``, ``2d`` or plain
    seconds, ASCII digits with at most one inner point, then spaces and one unit if any; 0 or
    more, at most ``MAX_AGE_S``, 365 days. An age is compared with clocks, never waited.

No regular expression, only ``math`` and ``errors``: the gate's stored-pass answer
(``cli/fast.py``) parses ``--max-age`` with ``age``.
"""
from __future__ import annotations

import math

from .errors import UsageError

MAX_WAIT_S = 86400.0  # 1 day
MAX_AGE_S = 365 * 86400.0  # 365 days
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds(text: str | float, *, zero: bool = False) -> float:
    """A wait: see the module docstring."""
    spelt = text.strip().lower() if isinstance(text, str) else text
    unit = UNITS.get(spelt[-1:], 0) if isinstance(spelt, str) and spelt[:-1].strip() else 0
    try:
        value = float(spelt[:-1]) * unit if unit else float(text)
    except (TypeError, ValueError):
        value = math.nan
    least = "0 or more" if zero else "above 0"
    if math.isnan(value) or value < 0 or (value == 0 and not zero):
        raise UsageError(f"{text!r} is not a number of seconds {least}", f"give a number {least}, e.g. 120")
    return _at_most(text, value, MAX_WAIT_S, f"at most {MAX_WAIT_S:.0f} seconds, e.g. 3600")


def age(text: str) -> float:
    """An age: see the module docstring."""
    spelt = text.strip().lower()
    number, unit = (spelt[:-1].rstrip(), spelt[-1]) if spelt[-1:] in UNITS else (spelt, "s")
    whole, point, part = number.partition(".")
    if not (whole.isascii() and whole.isdigit() and (not point or (part.isascii() and part.isdigit()))):
        raise UsageError(f"bad age {text!r}", "use a number with s, m, h or d, e.g. 24h")
    return _at_most(text, float(number) * UNITS[unit], MAX_AGE_S, f"at most {MAX_AGE_S / 86400:.0f}d, e.g. 30d")


def _at_most(text: str | float, value: float, maximum: float, fix: str) -> float:
    if value > maximum:
        raise UsageError(f"{text!r} is past the maximum, {_spelt(maximum)}", f"give {fix}")
    return value


def _spelt(limit: float) -> str:
    days = limit / 86400
    return f"{limit:.0f} seconds ({days:.0f} day{'s' if days != 1 else ''})"
