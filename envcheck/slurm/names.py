"""Slurm's names: a node's name (checked before it reaches ``scontrol``), this node's name as
Slurm knows it, and host lists (``n[1-3,7]``, ``/dev/nvidia[0-7]``) expanded and folded.

This node is ``SLURMD_NODENAME`` (what slurmd sets for its health check, prolog and epilog),
else the short host name, as slurmd names itself without ``-N``. A node name is letters,
digits, ``.``, ``_`` and ``-``, at most ``NAME_MAX`` characters, starting with a letter or
digit: anything else (a newline, a space, a bracket, a shell character) is refused here, so a
name read from the environment or a file never reaches ``scontrol`` unchecked.
"""
from __future__ import annotations

import os
from typing import Iterable, Mapping

from ..errors import UsageError

NAME_MAX = 64  # a host name's limit (HOST_NAME_MAX); Slurm's node names are host names
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
HOSTLIST_MAX = 100_000  # names one expression may expand to: a typo must not fill the memory


def node_name(text: str, where: str) -> str:
    """``text`` if it is a node name Slurm could have (see the module docstring); a
    UsageError naming ``where`` it came from otherwise."""
    if not text or len(text) > NAME_MAX or not set(text) <= _NAME_CHARS or not text[0].isalnum():
        raise UsageError(f"{where}: {text[:80]!r} is not a Slurm node name",
                         f"a node name is letters, digits, '.', '_' and '-', at most {NAME_MAX} characters")
    return text


def this_node(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(this node's name, where it came from): ``SLURMD_NODENAME``, else the short host name."""
    env = os.environ if environ is None else environ
    given = env.get("SLURMD_NODENAME")
    if given is not None:
        return node_name(given, "SLURMD_NODENAME"), "SLURMD_NODENAME"
    import socket  # only without SLURMD_NODENAME: slurmd sets it for every hook

    return node_name(socket.gethostname().split(".")[0], "the host name"), "the host name"


def expand(expression: str, where: str = "host list") -> list[str]:
    """Every name of a host list: ``n[1-3,7],gpu05`` -> n1 n2 n3 n7 gpu05; several bracket
    groups multiply (``r[1-2]n[1-2]``); a range keeps its first number's zero padding."""
    names: list[str] = []
    for term in _terms(expression, where):
        names += _expand_term(term, where)
        if len(names) > HOSTLIST_MAX:
            raise UsageError(f"{where} {expression[:80]!r} names more than {HOSTLIST_MAX} hosts",
                             "check the ranges in brackets")
    return names


def _terms(expression: str, where: str) -> list[str]:
    """The comma-separated terms, commas inside brackets kept."""
    terms, depth, current = [], 0, []
    for char in expression.strip():
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if depth < 0 or depth > 1:
            raise UsageError(f"{where} {expression[:80]!r}: unbalanced brackets", "write ranges as name[1-3,7]")
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise UsageError(f"{where} {expression[:80]!r}: unbalanced brackets", "write ranges as name[1-3,7]")
    terms.append("".join(current))
    if any(not t.strip() for t in terms):
        raise UsageError(f"{where} {expression[:80]!r}: an empty name", "separate names with single commas")
    return [t.strip() for t in terms]


def _expand_term(term: str, where: str) -> list[str]:
    start = term.find("[")
    if start < 0:
        return [term]
    end = term.index("]", start)
    head, tail = term[:start], _expand_term(term[end + 1:], where)
    out = []
    for number in _numbers(term[start + 1:end], term, where):
        out += [f"{head}{number}{rest}" for rest in tail]
    return out


def _numbers(ranges: str, term: str, where: str) -> list[str]:
    found = []
    for part in ranges.split(","):
        low, dash, high = part.strip().partition("-")
        if not (low.isascii() and low.isdigit() and (not dash or (high.isascii() and high.isdigit()))):
            raise UsageError(f"{where} {term[:80]!r}: bad range {part!r}", "write ranges as name[1-3,7] or name[01-16]")
        first, last = int(low), int(high) if dash else int(low)
        if last < first or last - first > HOSTLIST_MAX:
            raise UsageError(f"{where} {term[:80]!r}: bad range {part!r}", "the first number must not exceed the last")
        found += [str(n).zfill(len(low)) for n in range(first, last + 1)]
    return found


def fold(names: Iterable[str]) -> str:
    """The names as one host list, each run of numbers with the same stem in brackets:
    ``/dev/nvidia0 /dev/nvidia1 /dev/nvidia3`` -> ``/dev/nvidia[0-1,3]`` (no padding kept:
    for device files and plain numbered names)."""
    stems: dict[str, list[int]] = {}
    plain: list[str] = []
    for name in names:
        stem = name.rstrip("0123456789")
        digits = name[len(stem):]
        if digits and (digits == "0" or not digits.startswith("0")):
            stems.setdefault(stem, []).append(int(digits))
        else:
            plain.append(name)
    parts = [f"{stem}{numbers[0]}" if len(numbers) == 1 else f"{stem}[{_ranges(sorted(set(numbers)))}]"
             for stem, numbers in stems.items()]
    return ",".join(parts + plain)


def _ranges(numbers: list[int]) -> str:
    runs, first = [], numbers[0]
    for previous, current in zip(numbers, numbers[1:] + [None]):
        if current is None or current != previous + 1:
            runs.append(str(first) if first == previous else f"{first}-{previous}")
            first = current
    return ",".join(runs)
