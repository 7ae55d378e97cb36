"""``gres.conf`` and Slurm's ``Gres=`` strings, read as Slurm reads them, refused where Slurm
would refuse them.

A gres.conf line is ``Key=Value`` words (keys in any case; ``#`` starts a comment; a line ending
in ``\\`` goes on), or ``Include PATH``. Lines without ``NodeName`` hold for every node; with
it, for the nodes of its host list. ``File`` is a device path or a bracketed range of them
(``/dev/nvidia[0-7]``). A key Slurm doesn't know, a word without ``=``, an empty value, a bad
range, a line without ``Name`` (but for ``AutoDetect``) or a ``Count`` that is no number is
malformed: a UsageError naming the file and line (exit 2; a health check drains nothing on
it). The file is found beside slurm.conf (``SLURM_CONF``'s folder, else ``/etc/slurm``); a
node without one has no ``File`` lines to compare, as Slurm then has none.

``parse_gres("gpu:a100:8(S:0-1),gpu:2")`` reads the ``Gres`` of ``scontrol show node``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..errors import UsageError
from .names import expand

KEYS = {"autodetect": "AutoDetect", "count": "Count", "cores": "Cores", "file": "File", "flags": "Flags",
        "links": "Links", "multiplefiles": "MultipleFiles", "name": "Name", "nodename": "NodeName",
        "type": "Type", "uniqueid": "UniqueId"}
DEFAULT_CONF = "/etc/slurm/slurm.conf"
SUFFIXES = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4, "p": 1024 ** 5}
INCLUDE_DEPTH = 8
FIX = "write each line as Key=Value words (NodeName, Name, Type, File, Count, Cores, Links, Flags, AutoDetect); see `man gres.conf`"


@dataclass(frozen=True)
class GresLine:
    where: str  # FILE:LINE
    nodes: tuple[str, ...] | None  # None: every node
    name: str | None
    type: str | None = None
    files: tuple[str, ...] = ()
    count: int | None = None
    autodetect: str | None = None

    def to_json(self) -> dict:
        return {"where": self.where, "nodes": list(self.nodes) if self.nodes is not None else None,
                "name": self.name, "type": self.type, "files": list(self.files), "count": self.count,
                "autodetect": self.autodetect}


@dataclass(frozen=True)
class GresConf:
    path: str | None  # None: no gres.conf
    lines: list[GresLine] = field(default_factory=list)

    def for_node(self, node: str, name: str = "gpu") -> list[GresLine]:
        """The lines of GRES ``name`` that hold for ``node``."""
        return [line for line in self.lines if line.name is not None and line.name.lower() == name
                and (line.nodes is None or node in line.nodes)]

    def autodetect(self, node: str) -> str | None:
        """The AutoDetect that holds for ``node`` (a node's line over the global one)."""
        mine = [line.autodetect for line in self.lines if line.autodetect and line.nodes and node in line.nodes]
        every = [line.autodetect for line in self.lines if line.autodetect and line.nodes is None]
        return (mine or every or [None])[-1]

    def files_of(self, node: str) -> list[str]:
        """The GPU device files of ``node``, in gres.conf's order (Slurm's GPU indices)."""
        return [f for line in self.for_node(node) for f in line.files]


def default_path(environ: Mapping[str, str]) -> str:
    """gres.conf beside slurm.conf: ``SLURM_CONF``'s folder, else /etc/slurm."""
    return os.path.join(os.path.dirname(environ.get("SLURM_CONF") or DEFAULT_CONF), "gres.conf")


def load(path: str | None, environ: Mapping[str, str]) -> GresConf:
    """gres.conf at ``path`` (None: beside slurm.conf); no file there: an empty one. A path given
    that isn't there is bad input; so is a malformed file."""
    given = path is not None
    path = path or default_path(environ)
    if not os.path.exists(path):
        if given:
            raise UsageError(f"gres.conf {path}: no such file", "give the gres.conf slurmd reads with --gres-conf")
        return GresConf(None)
    return GresConf(path, _read(Path(path), 0))


def _read(path: Path, depth: int) -> list[GresLine]:
    try:
        text = path.read_text(encoding="utf-8", errors="strict")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"gres.conf {path}: can't be read: {getattr(exc, 'strerror', None) or exc}",
                         "check the file and its permissions") from None
    lines: list[GresLine] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        content = raw.split("#", 1)[0].rstrip()
        if not pending:
            start = number
        if content.endswith("\\"):
            pending += content[:-1] + " "
            continue
        content, pending = pending + content, ""
        where = f"{path}:{start}"
        if not content.strip():
            continue
        words = content.split()
        if words[0].lower() == "include":
            if len(words) != 2 or depth >= INCLUDE_DEPTH:
                raise UsageError(f"gres.conf {where}: bad Include", "write Include PATH, at most 8 deep")
            included = Path(words[1]) if os.path.isabs(words[1]) else path.parent / words[1]
            lines += _read(included, depth + 1)
            continue
        lines.append(parse_line(words, where))
    return lines


def parse_line(words: list[str], where: str) -> GresLine:
    """One gres.conf line's words (see the module docstring)."""
    values: dict[str, str] = {}
    for word in words:
        key, eq, value = word.partition("=")
        known = KEYS.get(key.lower())
        if not eq or known is None:
            raise UsageError(f"gres.conf {where}: {word[:60]!r} is not a Key=Value Slurm knows", FIX)
        value = value.strip('"')
        if not value or not value.isprintable():
            raise UsageError(f"gres.conf {where}: {known} has no value", FIX)
        if known in values:
            raise UsageError(f"gres.conf {where}: {known} given twice", FIX)
        values[known] = value
    if "Name" not in values and "AutoDetect" not in values:
        raise UsageError(f"gres.conf {where}: a line without Name=", FIX)
    nodes = tuple(expand(values["NodeName"], f"gres.conf {where}: NodeName")) if "NodeName" in values else None
    files = tuple(expand(values["File"], f"gres.conf {where}: File")) if "File" in values else ()
    count = _count(values["Count"], where) if "Count" in values else None
    return GresLine(where, nodes, values.get("Name"), values.get("Type"), files, count,
                    values.get("AutoDetect", "").lower() or None)


def _count(text: str, where: str) -> int:
    number, unit = (text[:-1], text[-1].lower()) if text[-1:].lower() in SUFFIXES else (text, "")
    if not (number.isascii() and number.isdigit()):
        raise UsageError(f"gres.conf {where}: Count={text!r} is not a number", "write Count=N (K, M, G suffixes allowed)")
    return int(number) * SUFFIXES.get(unit, 1)


@dataclass(frozen=True)
class Gres:
    """One ``name[:type][:count]`` of a node's ``Gres=``."""
    name: str
    type: str | None
    count: int

    def spelt(self) -> str:
        return ":".join([self.name, *([self.type] if self.type else []), str(self.count)])


def parse_gres(text: str) -> list[Gres]:
    """A node's ``Gres=`` (``gpu:a100:8(S:0-1),gpu:2``; empty or ``(null)``: none)."""
    found = []
    for item in _top_level(text or ""):
        item = item.split("(", 1)[0].strip()
        if not item or item == "(null)":
            continue
        parts = item.split(":")
        name, rest = parts[0], parts[1:]
        count = 1
        if rest and (rest[-1].isdigit() or (rest[-1][:-1].isdigit() and rest[-1][-1:].lower() in SUFFIXES)):
            count = _count(rest.pop(), f"Gres {text!r}")
        found.append(Gres(name, ":".join(rest) or None, count))
    return found


def _top_level(text: str) -> list[str]:
    items, depth, current = [], 0, []
    for char in text:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return items
