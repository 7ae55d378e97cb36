"""Distribution names as PEP 503 normalises them: the one rule by which ``envs`` (installed
packages, requirements) and ``frameworks`` (their distributions) compare names.

A leaf beside the packages: it imports nothing (the gate's stored-pass answer reads installed
packages through ``envs.metadata``, which uses it), so neither ``envs`` nor ``frameworks``
owns it and neither imports the other for it.
"""
from __future__ import annotations


def canonical_name(name: str) -> str:
    """PEP 503 normalised project name (the same as packaging.utils.canonicalize_name): runs
    of ``-``, ``_`` and ``.`` become one ``-``, lower case."""
    out = name.replace("_", "-").replace(".", "-").lower()
    while "--" in out:
        out = out.replace("--", "-")
    return out
