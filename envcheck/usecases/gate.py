"""The pre-training gate: "is this env ready to train here?" in milliseconds when nothing changed.

A stored validation answers at once when it passed, is younger than ``max_age`` and its
fingerprint (installed packages, Python, driver version, GPU UUIDs, CUDA_VISIBLE_DEVICES)
equals the current one; otherwise the quick checks run (the smoke fit only when asked) and
their result is stored for the next call. No framework is ever imported here.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

from ..errors import UsageError
from ..paths import MANIFEST_NAME
from ..results import Result

ASK_TIMEOUT = 600.0  # seconds for envcheck's interpreter to answer for an env (a quick validation)
DEFAULT_MAX_AGE = "24h"  # a stored validation older than this is checked again
_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_age(text: str) -> float:
    """'24h', '30m', '90s', '2d' or plain seconds."""
    match = _AGE.fullmatch(text.strip().lower())
    if not match:
        raise UsageError(f"bad age {text!r}", "use a number with s, m, h or d, e.g. 24h")
    return float(match[1]) * _UNITS[match[2]]


class NotReady(Exception):
    """Raised by ``ensure_ready``; ``.report`` carries the evidence, ``.fix`` the next step."""

    def __init__(self, result: "GateResult"):
        super().__init__(f"not ready to train: {result.reason}" + (f"; fix: {result.fix}" if result.fix else ""))
        self.result = result
        self.report = result.report
        self.fix = result.fix


@dataclass
class GateResult(Result):
    schema: ClassVar[str] = "envcheck.gate/1"
    env: str
    ready: bool
    cached: bool
    reason: str
    fix: str | None
    age_s: float | None
    gpus_usable: int
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 0 if self.ready else 1

    def body(self) -> dict[str, Any]:
        return {"env": self.env, "ready": self.ready, "cached": self.cached,
                "reason": self.reason, "fix": self.fix, "age_s": self.age_s,
                "gpus_usable": self.gpus_usable, "verdict": self.report.get("verdict"),
                "report": self.report}


def _age(report: dict[str, Any]) -> float | None:
    try:
        created = datetime.fromisoformat(report["created"])
    except (KeyError, TypeError, ValueError):
        return None
    return (datetime.now(timezone.utc) - created).total_seconds()


def _stored_answer(report: dict | None, current: dict, max_age: float, smoke: bool) -> bool:
    """May the stored report answer? It must be of this fingerprint and fresh. A pass answers
    when it went as deep as asked; a failure stands until a validation at least as deep as
    it says otherwise (so a quick check never turns a failed smoke fit into "ready")."""
    from ..validation.reports import deeper

    if not report or report.get("fingerprint") != current:
        return False
    age = _age(report)
    if age is None or not 0 <= age <= max_age:
        return False
    depth = report.get("depth") or ("smoke" if report.get("smoke") else "quick")
    if report.get("verdict") in ("ready", "degraded"):
        return not (smoke and deeper("smoke", depth))
    return deeper(depth, "smoke" if smoke else "listing")  # a rerun would go less deep


def _judge(name: str, report: dict[str, Any], cached: bool, require_gpu: bool, min_gpus: int) -> GateResult:
    usable = int(report.get("gpus_usable") or 0)
    needed = max(min_gpus, 1 if require_gpu else 0)
    failing = [c for c in report.get("checks", []) if c.get("status") == "fail"]
    if failing:
        ready, reason, fix = False, f"{failing[0]['id']}: {failing[0]['summary']}", failing[0].get("fix")
    elif usable < needed:
        host = next((c for c in report.get("checks", []) if c.get("id") == "host"), {})
        ready, reason = False, (f"needs {needed} GPU(s) the env can train on, has {usable}"
                                + (f" ({host.get('summary')})" if host.get("summary") else ""))
        fix = host.get("fix") or f"envcheck validate {name} shows why; see envcheck select --require-gpu"
    else:
        ready, reason, fix = True, f"{report.get('verdict')}, {usable} GPU(s) usable", None
    return GateResult(name, ready, cached, reason, fix, _age(report), usable, report)


def check(session, name: str | None, *, require_gpu: bool = False, min_gpus: int = 0,
          max_age: float | None = None, smoke: bool = False, framework: str | None = None) -> GateResult:
    """Gate env ``name`` (None or "auto": the env `select` picks, of ``framework`` if given) on
    this host, from the stored validation when it still holds."""
    from ..validation.reports import fingerprint, load_report

    max_age = parse_age(DEFAULT_MAX_AGE) if max_age is None else max_age
    info = session.resolve_env(name, framework=framework, require_gpu=require_gpu).info
    stored = load_report(session.home, info.name)
    if _stored_answer(stored, fingerprint(info, session.host), max_age, smoke):
        return _judge(info.name, stored, True, require_gpu, min_gpus)
    report = session.validate_and_store(info, smoke=smoke)
    return _judge(info.name, report.to_json(), False, require_gpu, min_gpus)


def _running_env() -> tuple[Any, Any]:
    """(home, EnvInfo) for the interpreter running now: its envcheck env, else a plain view of it."""
    from ..envs.store import EnvInfo, EnvStore
    from ..paths import Home

    prefix = Path(sys.prefix)
    manifest = prefix / MANIFEST_NAME
    if manifest.is_file():
        home = Home(prefix.parent.parent)
        return home, EnvStore(home).get(prefix.name)
    from ..envs.metadata import installed_packages

    version = ".".join(map(str, sys.version_info[:3]))
    info = EnvInfo(name=prefix.name, path=prefix, state="ready",
                   manifest={"python": {"version": version}, "requested": []},
                   packages=installed_packages(prefix))
    return None, info


def ensure_ready(require_gpu: bool = False, min_gpus: int = 0,
                 max_age: str | float = DEFAULT_MAX_AGE) -> dict[str, Any]:
    """Judge the interpreter this code runs in; return the report or raise NotReady.

    Quick checks only (host, compat, integrity) unless a stored validation of this env is
    still valid. Imports no framework. Inside an env envcheck created (envcheck imported
    through the env's gate link), envcheck's own interpreter answers, so this process
    imports nothing beyond the standard library.
    """
    seconds = parse_age(max_age) if isinstance(max_age, str) else float(max_age)
    delegate = _envcheck_python()
    if delegate is not None:
        result = _ask(delegate, require_gpu, min_gpus, seconds)
    else:
        result = _judge_here(require_gpu, min_gpus, seconds)
    if not result.ready:
        raise NotReady(result)
    return result.report


def _envcheck_python() -> str | None:
    """envcheck's interpreter, as its home records it, when this one is an envcheck env."""
    prefix = Path(sys.prefix)
    if not (prefix / MANIFEST_NAME).is_file():
        return None
    from ..envs.gate_link import envcheck_python

    python = envcheck_python(prefix.parent.parent)
    return python if python and Path(python).exists() and python != sys.executable else None


def _ask(python: str, require_gpu: bool, min_gpus: int, seconds: float) -> GateResult:
    """`envcheck check` for this env, run by envcheck's interpreter: the gate's one policy."""
    import json
    import os
    import subprocess

    prefix = Path(sys.prefix)
    argv = [python, "-m", "envcheck", "--home", str(prefix.parent.parent), "check", "--env",
            prefix.name, "--json", "--min-gpus", str(min_gpus), "--max-age", f"{seconds}s"]
    argv += ["--require-gpu"] if require_gpu else []
    from ..processes import STRIPPED  # standard library only, like everything on this path

    environ = {k: v for k, v in os.environ.items() if k not in STRIPPED}
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", env=environ,
                              stdin=subprocess.DEVNULL, timeout=ASK_TIMEOUT)
    except subprocess.TimeoutExpired:
        return GateResult(prefix.name, False, False, f"envcheck gave no answer within {ASK_TIMEOUT:g} s",
                          f"run: {python} -m envcheck check --env {prefix.name}", None, 0, {})
    try:
        data = json.loads(proc.stdout)
        fields = {k: data[k] for k in ("env", "ready", "cached", "reason", "fix", "age_s", "gpus_usable")}
        return GateResult(**fields, report=data.get("report") or {})
    except (ValueError, KeyError, TypeError):
        error = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return GateResult(prefix.name, False, False, error.removeprefix("envcheck: error: "),
                          f"run: {python} -m envcheck check --env {prefix.name}", None, 0, {})


def _judge_here(require_gpu: bool, min_gpus: int, seconds: float) -> GateResult:
    from ..validation.reports import fingerprint, load_report
    from .session import Session

    home, info = _running_env()
    session = Session(home)
    stored = load_report(home, info.name) if home else None
    if _stored_answer(stored, fingerprint(info, session.host), seconds, False):
        return _judge(info.name, stored, True, require_gpu, min_gpus)
    report = session.validate_and_store(info, smoke=False, store=home is not None)
    return _judge(info.name, report.to_json(), False, require_gpu, min_gpus)
