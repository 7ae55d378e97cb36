"""Rendering helpers that need no click (the gate's fast path uses them)."""
from __future__ import annotations

import json
import sys
from typing import Any


def emit_json(data: Any) -> None:
    """Write one JSON document to stdout (dataclasses must be converted by the caller)."""
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def render_gate(result, as_json: bool) -> None:
    """The pre-training gate's answer, for both the fast path and the click command."""
    if as_json:
        emit_json(result.to_json())
        return
    source = f"stored validation, {result.age_s:.0f} s old" if result.cached else "checked now"
    state = "ready" if result.ready else "NOT READY"
    print(f"{state}: env {result.env}: {result.reason} ({source})")
    if result.fix:
        print(f"fix: {result.fix}")
