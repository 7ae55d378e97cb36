"""Stored validation reports and the fingerprint they depend on.

Kept apart from ``validate`` so the pre-training gate's cache hit imports only this.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA = "envcheck.report/1"


def fingerprint(info, host) -> dict[str, Any]:
    """What a stored validation depends on: a change of any of it means validate again."""
    from ..host.probe import host_fingerprint

    return {"packages": dict(sorted(info.packages.items())),
            "python": info.manifest.get("python", {}).get("version"),
            **host_fingerprint(host)}


def store_report(home, report) -> Path:
    from ..envs.manifest import write_atomic

    path = home.report(report.env)
    write_atomic(path, report.to_json())
    return path


def load_report(home, name: str) -> dict[str, Any] | None:
    """The stored report, or None when absent or unreadable (tolerant, like the manifest)."""
    try:
        with open(home.report(name), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == SCHEMA else None
