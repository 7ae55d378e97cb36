"""The data envcheck ships: compatibility tables, the failure catalogue, and the standalone
smoke runner (``smoke_runner.py``, run by path inside an env's interpreter, never imported;
with ``smoke_ranks.py``, which it loads by path; the frameworks' backends it loads from
``envcheck/frameworks/<name>/smoke.py``),
and the gate client an env imports as ``envcheck`` (``gate_client.py``, copied by ``envs.gate_link``).

May import: the standard library only.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any


@lru_cache(maxsize=None)
def load(name: str) -> Any:
    """A JSON file of this folder, parsed once per process."""
    return json.loads(resources.files(__package__).joinpath(name).read_text("utf-8"))


def compat_facts() -> dict[str, Any]:
    """The compatibility tables (``compat.json``: reference/compat.md as data, with sources)."""
    return load("compat.json")
