"""The pre-training gate without click: ``envcheck [--home H] [-v] [-q] check [options]``.

A job calls the gate before every start, so a stored pass is answered here importing almost
nothing: argv parsed by hand, the env's manifest and stored report read, the fingerprint
computed with ``validation.freshness`` (the one definition the full path uses too) and the
host's facts from ``host.library`` (NVML read only where its library loads, and then by level-1
health, ``host.level1``: a job that needs a GPU is refused when level 1 finds one not-ready
now, whatever the stored report says; ``usecases.gate.with_health``). ``--level`` other than 2
goes to the full path. Everything else goes on to the full path: with the session (and the
host already read, so NVML is initialised once) when the call is ``check`` in the plain
spellings below but the stored report can't say "ready"; to click for anything else
(``--help``, ``--env=NAME``, a typo, a bad value), so click keeps every error message. The answer is the gate's own result
(``usecases.gate.judge``), so its document, result envelope included, is the one click's path
prints for the same answer (test_envelope.py compares them).

Besides the gate, ``env adopt NAME PATH [--json]`` in plain spellings (``fast_adopt``): its
floor is the env's own interpreter listing its distributions (issue 28: at most 1.5x that), so
PATH's probe is started first (why, in ``envs.adopt_probe.probe_ahead``) and the command is
answered without click (about 17 ms of imports: ``click``, ``cli.options``, ``cli.main``) by the
use case click's ``env adopt`` calls, rendered by the same ``render.emit``; its errors are the
use case's, printed by ``cli.run`` as for click's path (test_adopt.py compares the two paths'
output). Any other spelling (``--help``, an option before the arguments, ``--``) goes to click.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see above)
if TYPE_CHECKING:
    from ..host.level1 import HealthReport

REPORT_SCHEMA = "envcheck.report/1"  # = validation.reports.SCHEMA (a test holds them equal)
# `check`'s options as cli.options.CHECK declares them (a test holds them equal): flag -> dest
VALUED = {"--env": "env_name", "--framework": "framework", "--min-gpus": "min_gpus", "--max-age": "max_age",
          "--level": "level", "--python": "python", "--adopt": "adopt"}
SWITCHES = {"--require-gpu": "require_gpu", "--smoke": "smoke", "--json": "as_json"}
GLOBAL_SWITCHES = ("-v", "--verbose", "-q", "--quiet")


def _globals(argv: list[str]) -> tuple[str | None, list[str]] | None:
    """(--home, the arguments after the global options), or None for a spelling not plain."""
    args = list(argv)
    home = None
    while args and (args[0] == "--home" or args[0] in GLOBAL_SWITCHES):
        if args[0] == "--home":
            if len(args) < 2:
                return None
            home, args = args[1], args[2:]
        else:
            args = args[1:]
    return home, args


def _parse(argv: list[str]) -> tuple[str | None, dict] | None:
    """(--home, the options as given) for ``check`` in plain spellings, else None."""
    home, args = _globals(argv) or (None, [])
    if not args or args[0] != "check":
        return None
    given: dict = {}
    rest = args[1:]
    while rest:
        flag = rest.pop(0)
        if flag in SWITCHES:
            given[SWITCHES[flag]] = True
        elif flag in VALUED and rest and not rest[0].startswith("-"):
            given[VALUED[flag]] = rest.pop(0)
        else:
            return None
    return home, given


def fast_adopt(argv: list[str]) -> int | None:
    """Answer ``env adopt NAME PATH [--json]`` and return its exit code, or None when click
    should take the call (any other spelling, or a ``--home`` that is a file: click says so)."""
    home, args = _globals(argv) or (None, ["not plain"])
    if args[:2] != ["env", "adopt"] or not (4 <= len(args) <= 5) or args[4:] not in ([], ["--json"]) \
            or any(a.startswith("-") for a in args[2:4]):
        return None
    home = home or os.environ.get("ENVCHECK_HOME") or None  # click's envvar for --home
    if home is not None and (home == "" or os.path.exists(home) and not os.path.isdir(home)):
        return None
    from ..envs.adopt_probe import probe_ahead
    from ..paths import Home

    where = Home(home)
    probe_ahead(args[3], where.root)
    from ..usecases.catalogue import adopt_env
    from ..usecases.session import Session
    from .progress_view import Notices
    from .render import emit

    result = adopt_env(Session(where, observer=Notices()), args[2], args[3])
    return emit(result, "json" if args[4:] else "text")


def fast_check(argv: list[str]) -> int | None:
    """Answer ``check`` and return its exit code, or None when click should take the call."""
    parsed = _parse(argv)
    if parsed is None:
        return None
    home_dir, given = parsed
    root = home_dir or os.environ.get("ENVCHECK_HOME")
    if root:
        root = os.path.expanduser(root)
    else:
        from ..paths import default_home

        root = str(default_home())
    from ..envs.gate_link import repair

    repair(root)
    answer, health = _stored_pass(root, given)
    if answer is None:
        return _full(root, given, health)
    from .render import emit

    return emit(answer, "json" if given.get("as_json") else "text")


def _stored_pass(root: str, given: dict):
    """(the gate's answer from env NAME's stored report, the host's level-1 health if NVML was
    read), or (None, that health) when only the full path can answer. Where NVML loads, the
    host is read by level 1 (``host.level1``: the probe and each GPU's health reads, one NVML
    session), so a job that needs a GPU is refused when one is faulty now, never from a cache."""
    from ..errors import UsageError
    from ..durations import age
    from ..usecases.gate import DEFAULT_MAX_AGE

    name = given.get("env_name", "auto")
    if name == "auto" or "framework" in given or not _plain(name) or _left_over(root, name) \
            or given.get("level", "2") != "2" or "python" in given or "adopt" in given:
        return None, None
    try:
        min_gpus = int(given.get("min_gpus", "0"))
        max_age = age(given.get("max_age", DEFAULT_MAX_AGE))
    except (ValueError, UsageError):  # the full path says what is wrong with it
        return None, None
    from ..envs.metadata import env_python, identity, installed_packages, register_sites
    from ..host.library import facts_without_nvml
    from ..paths import MANIFEST_NAME, REPORT_NAME
    from ..validation import freshness

    records = os.path.join(root, "envs", name)
    manifest, report = _json(os.path.join(records, MANIFEST_NAME)), _json(os.path.join(records, REPORT_NAME))
    if not (manifest and report and report.get("schema") == REPORT_SCHEMA and min_gpus >= 0) \
            or os.path.islink(records):
        return None, None
    env_dir = records
    adopted = manifest.get("adopted")
    if adopted:  # an env envcheck adopted: its folder is where it was found (envs.adopted)
        try:
            env_dir = adopted["path"]
            register_sites(env_dir, list(adopted["sites"]), adopted["interpreter"])
        except (KeyError, TypeError):
            return None, None
    health, facts = None, facts_without_nvml()
    if facts is None:
        from ..host import nvml_direct
        from ..host.level1 import level1
        from ..host.probe import host_fingerprint

        # pynvml's answers without its 14 ms import; watching on: should the full path validate,
        # NVML's Xid events and the replay counters are watched through its run
        health = level1(nvml=nvml_direct, watch=True)
        facts = host_fingerprint(health.host)
    python = env_python(env_dir)
    packages = installed_packages(env_dir)
    state = "ready" if manifest.get("state") == "ready" and os.path.exists(python) else "not ready"
    python_version = (manifest.get("python") or {}).get("version") if isinstance(manifest.get("python"), dict) else None
    current = freshness.fingerprint(env_dir, python=python, manifest=os.path.join(records, MANIFEST_NAME),
                                    python_version=python_version, state=state,
                                    packages=packages, host=facts,
                                    lock=(manifest.get("lock") or {}).get("digest")
                                    if isinstance(manifest.get("lock"), dict) else None)
    if state != "ready" or not freshness.answers(report, current, max_age, bool(given.get("smoke"))):
        return None, health
    from ..usecases.gate import judge, needs_gpu, with_health

    require_gpu = bool(given.get("require_gpu"))
    try:
        answer = judge(name, report, True, require_gpu, min_gpus, health and health.host)
    except (AttributeError, KeyError, TypeError, ValueError):  # a report of the wrong shape
        return None, health
    if not answer.ready:
        return None, health
    answer = with_health(answer, health, needs_gpu(answer, require_gpu, min_gpus))
    answer.identity = identity(name, manifest, packages)
    return answer, health


def _full(root: str, given: dict, health: HealthReport | None) -> int | None:
    """The session's gate (click parses the values when one isn't plain)."""
    from .options import CHECK

    values = {}
    for option in CHECK:
        value = given.get(option.dest, option.default)
        if isinstance(value, str) and option.parse is not None:
            value = option.convert(value)  # a bad value: UsageError, as click says it
        values[option.dest] = value
    from ..paths import Home
    from ..usecases.gate import check
    from ..usecases.session import Session
    from .progress_view import Notices
    from .render import emit

    as_json = values.pop("as_json")
    session = Session(Home(root), observer=Notices(), health=health)
    return emit(check(session, values.pop("env_name"), **values), "json" if as_json else "text")


def _plain(name: str) -> bool:
    """A name that can only be a folder of ``envs`` (the full path checks it strictly)."""
    return name not in ("", ".", "..") and "/" not in name and os.sep not in name and name.isprintable()


def _left_over(root: str, name: str) -> bool:
    """Did an interrupted change to env ``name`` leave something in ``tmp``? (the full path
    finishes it first)"""
    try:
        return any(entry.startswith(f"{name}.") for entry in os.listdir(os.path.join(root, "tmp")))
    except OSError:
        return False


def _json(path: str) -> dict | None:
    from .jsonlite import loads  # json's text, without json's import

    try:
        with open(path, encoding="utf-8") as fh:
            data = loads(fh.read())
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
