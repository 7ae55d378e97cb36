"""The pre-training gate without click: ``envcheck [--home H] [-v] check [options]``.

Only the plain spellings of ``check``'s options are recognised here (``--env NAME``,
``--min-gpus N``, ``--max-age A``, ``--require-gpu``, ``--smoke``, ``--json``); anything
else (``--help``, ``--env=NAME``, a typo) returns None and the click command handles it,
so both paths give the same answers and click keeps every error message.
"""
from __future__ import annotations

import os

FLAGS = ("--require-gpu", "--smoke", "--json")
VALUES = ("--env", "--min-gpus", "--max-age")


def _parse(argv: list[str]) -> tuple[str | None, dict[str, str], set[str]] | None:
    args = list(argv)
    home = None
    while args and args[0] in ("--home", "-v", "--verbose"):
        if args[0] == "--home":
            if len(args) < 2:
                return None
            home, args = args[1], args[2:]
        else:
            args = args[1:]
    if not args or args[0] != "check":
        return None
    values = {"--env": "auto", "--min-gpus": "0", "--max-age": "24h"}
    flags: set[str] = set()
    rest = args[1:]
    while rest:
        arg = rest.pop(0)
        if arg in FLAGS:
            flags.add(arg)
        elif arg in VALUES and rest and not rest[0].startswith("-"):
            values[arg] = rest.pop(0)
        else:
            return None
    if not values["--min-gpus"].isdigit():
        return None
    return home, values, flags


def fast_check(argv: list[str]) -> int | None:
    """Answer ``check`` and return its exit code, or None when click should take the call."""
    parsed = _parse(argv)
    if parsed is None:
        return None
    home_dir, values, flags = parsed
    from ..usecases.gate import check, parse_age
    from ..paths import Home
    from .output import render_gate

    home = Home(home_dir or os.environ.get("ENVCHECK_HOME") or None)
    env = values["--env"]
    result = check(home, None if env == "auto" else env, require_gpu="--require-gpu" in flags,
                   min_gpus=int(values["--min-gpus"]), max_age=parse_age(values["--max-age"]),
                   smoke="--smoke" in flags)
    render_gate(result, "--json" in flags)
    return 0 if result.ready else 1
