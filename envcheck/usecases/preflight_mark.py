"""The node's own verdict in the last `envcheck fleet preflight`, kept in its env home
(``Home.preflight``, ``preflight.json``), so the node's ``metrics`` and ``labels`` say it
(``envcheck.io/preflight``) after the fleet has gone: ``envcheck preflight record`` writes it,
the fleet runs that on every node that answered once the nodes are compared.

A node's verdict (``VERDICTS``): ``healthy`` (every figure within its model's spread across the
fleet, or, alone with its model, passing level 3's table; in a collective that passed),
``straggler`` (a figure slower than its model's median by more than the tolerance and than the
spread says is noise), ``bad-link`` (the halving named it, or a pair with it: a collective with
it fails or is slow, without it passes), ``lost`` (it stopped answering), ``failed`` (its probes
failed: their error is the fleet's), ``unjudged`` (measured, with nothing to judge it against).
Ratios are each figure over its model's median across the fleet (1.0: the median).

Read tolerantly: a file that is missing says nothing (None), one unreadable or of another
shape is None too (never a crash in ``serve``'s scrape).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import UsageError
from ..results import Result, envelope

if TYPE_CHECKING:
    from ..paths import Home

SCHEMA = "envcheck.preflight-mark/1"
VERDICTS = ("healthy", "straggler", "bad-link", "lost", "failed", "unjudged")
OK = ("healthy", "unjudged")
LABEL = "envcheck.io/preflight"
MAX_RATIOS = 16


@dataclass
class PreflightMark(Result):
    schema: ClassVar[str] = SCHEMA
    verdict: str
    ratios: dict[str, float] = field(default_factory=dict)  # figure -> value / its model's median
    fleet: str = ""  # where the fleet ran (its address), as the driver said it
    at: float = 0.0  # epoch seconds

    def envelope(self) -> dict:
        if self.verdict in OK:
            return envelope("ready")
        return envelope("not-ready", f"the last fleet preflight named this node: {self.verdict}",
                        "see the fleet's preflight report (envcheck fleet preflight)")

    def body(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "ratios": self.ratios, "fleet": self.fleet, "at": self.at}


def parse_ratios(text: str) -> dict[str, float]:
    """``matmul_fp32:0.71,copy_h2d:0.98`` -> {figure: ratio} (how the fleet passes them)."""
    found: dict[str, float] = {}
    for term in filter(None, (t.strip() for t in (text or "").split(","))):
        name, _, value = term.partition(":")
        try:
            ratio = float(value)
        except ValueError:
            ratio = math.nan
        if not name or not math.isfinite(ratio) or ratio < 0 or len(name) > 64:
            raise UsageError(f"bad ratio {term!r}", "give FIGURE:RATIO terms separated by commas, "
                             "e.g. matmul_fp32:0.71")
        found[name] = ratio
    if len(found) > MAX_RATIOS:
        raise UsageError(f"{len(found)} ratios", f"give at most {MAX_RATIOS}")
    return found


def record(home: Home, verdict: str, ratios: dict[str, float], fleet: str = "") -> PreflightMark:
    """Write the node's verdict (see the module docstring)."""
    from ..atomic import write_bytes

    if verdict not in VERDICTS:
        raise UsageError(f"unknown preflight verdict {verdict!r}", f"use one of: {', '.join(VERDICTS)}")
    mark = PreflightMark(verdict, ratios, fleet[:200], round(time.time(), 3))
    home.root.mkdir(parents=True, exist_ok=True)
    write_bytes(home.preflight, json.dumps(mark.to_json()).encode("utf-8"))
    return mark


def read(home: Home) -> PreflightMark | None:
    """The node's last verdict, or None (none, or unreadable)."""
    try:
        data = json.loads(home.preflight.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or data.get("verdict") not in VERDICTS:
        return None
    ratios = data.get("ratios") if isinstance(data.get("ratios"), dict) else {}
    at = data.get("at")
    return PreflightMark(data["verdict"],
                         {str(k)[:64]: float(v) for k, v in list(ratios.items())[:MAX_RATIOS]
                          if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)},
                         str(data.get("fleet") or "")[:200],
                         float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else 0.0)
