"""A preset's variants: the builds of one framework for different CUDA versions (or a CPU
build), declared in one file as ``[variants.NAME]`` tables.

A variant table may set ``packages``, ``indexes``, ``requires-python`` and a ``[gpu]`` table;
every other key comes from the preset's top level, which may leave ``packages`` out when every
variant names its own. The order of the tables is the order of preference: where several
variants fit a host, the first wins (``usecases.variants`` decides what fits, by the compat
rules, never here: envs don't judge hosts).

A preset without variant tables has one variant, named after its build (``implicit_name``):
``cpu`` for a CPU preset, ``cu<CUDA major>`` for a GPU one (``cu12`` for CUDA 12.8).

    [variants.cu12]
    packages = ["torch~=2.10.0", "numpy"]
    [variants.cu12.gpu]
    cuda = "12.8"

    [variants.cu11]
    packages = ["torch>=2.0,<2.1", "numpy<2"]
    requires-python = ">=3.10,<3.12"
    [variants.cu11.gpu]
    cuda = "11.7"
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import UsageError

KEYS = ("packages", "indexes", "requires-python", "gpu")
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,31}")
LIMIT = 16  # variants one preset may declare


def implicit_name(kind: str, cuda: str | None) -> str:
    """The variant a preset without variant tables is: ``cpu``, or ``cu`` and its CUDA major."""
    return "cpu" if kind != "gpu" or not cuda else f"cu{cuda.split('.')[0]}"


def variant_tables(path: Path, data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``[(name, the preset's data with that variant's keys laid over it)]`` in the file's
    order; empty when the file declares none. Bad input is a UsageError naming the key."""
    tables = data.get("variants")
    if tables is None:
        return []
    if not isinstance(tables, dict) or not tables:
        raise UsageError(f"{path}: key 'variants' must hold one [variants.NAME] table per variant",
                         'write [variants.cu12] with packages = [...] and its own [variants.cu12.gpu]')
    if len(tables) > LIMIT:
        raise UsageError(f"{path}: key 'variants' declares {len(tables)} variants (limit {LIMIT})", "declare fewer")
    base = {k: v for k, v in data.items() if k != "variants"}
    out = []
    for name, table in tables.items():
        if not NAME.fullmatch(name):
            raise UsageError(f"{path}: variant name {name[:40]!r} is not 1-32 lower-case letters, digits, "
                             "'.', '_' or '-'", "name it after its build, like cu121 or cpu")
        if not isinstance(table, dict):
            raise UsageError(f"{path}: key 'variants.{name}' must be a table", f"write it as [variants.{name}]")
        for key in table:
            if key not in KEYS:
                raise UsageError(f"{path}: unknown key 'variants.{name}.{key}'",
                                 f"a variant may set {', '.join(KEYS)}; the rest comes from the top of the file")
        out.append((name, {**base, **table}))
    return out
