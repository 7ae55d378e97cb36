"""The pre-training gate without click: ``envcheck [--home H] [-v] check [options]``.

The options are ``cli.options.CHECK``, the declarations the click command is built from, in
their plain spellings (``--env NAME``, ``--require-gpu``); anything else (``--help``,
``--env=NAME``, a typo) returns None and the click command handles it, so both paths give
the same answers and click keeps every error message.
"""
from __future__ import annotations

import os


def _parse(argv: list[str]):
    from .options import CHECK

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
    by_flag = {o.flag: o for o in CHECK}
    values = {o.dest: o.default for o in CHECK}
    rest = args[1:]
    while rest:
        option = by_flag.get(rest.pop(0))
        if option is None:
            return None
        if option.is_flag:
            values[option.dest] = True
        elif rest and not rest[0].startswith("-"):
            values[option.dest] = rest.pop(0)
        else:
            return None
    for option in CHECK:
        if option.parse is not None and isinstance(values[option.dest], str):
            values[option.dest] = option.convert(values[option.dest])
    return home, values


def fast_check(argv: list[str]) -> int | None:
    """Answer ``check`` and return its exit code, or None when click should take the call."""
    parsed = _parse(argv)
    if parsed is None:
        return None
    home_dir, values = parsed
    from ..paths import Home
    from ..usecases.gate import check
    from ..usecases.session import Session
    from .render import emit

    as_json = values.pop("as_json")
    session = Session(Home(home_dir or os.environ.get("ENVCHECK_HOME") or None))
    return emit(check(session, values.pop("env_name"), **values), as_json)
