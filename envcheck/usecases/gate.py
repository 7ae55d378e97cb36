"""The pre-training gate: "is this env ready to train here?" in milliseconds when nothing changed.

A stored validation (``validation.reports.StoredReport``, by ``validation.freshness``'s one
rule) answers at once when it passed, is younger than ``max_age`` and its fingerprint
(installed packages and files, Python, the env's manifest and interpreter, driver version,
GPU UUIDs, CUDA variables) equals the current one; otherwise the quick checks run (the smoke
fit only when asked) and their result is stored for the next call. No framework is ever
imported here, and importing this module stays cheap (no dataclasses, typing or pathlib):
``cli/fast.py`` answers a stored pass with it.
"""
from __future__ import annotations

import sys

from ..durations import age
from ..results import OK_VERDICTS, Result, envelope, node, node_host
from ..validation import freshness
from ..validation.health import node_health

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see above)
if TYPE_CHECKING:
    from ..host.level1 import HealthReport
    from ..host.probe import HostState
    from ..paths import Home
    from .session import Session

DEFAULT_MAX_AGE = "24h"  # a stored validation older than this is checked again


class GateResult(Result):
    """The gate's answer. A plain class, not a dataclass: the stored-pass answer (``cli/fast.py``)
    builds one, and importing dataclasses would double its time."""

    schema = "envcheck.gate/1"

    def __init__(self, env: str, ready: bool, cached: bool, reason: str, fix: str | None,
                 age_s: float | None, gpus_usable: int, report: dict | None = None,
                 health: dict | None = None):
        self.env, self.ready, self.cached, self.reason, self.fix = env, ready, cached, reason, fix
        self.age_s, self.gpus_usable, self.report = age_s, gpus_usable, report or {}
        self.health = health  # level 1 read now (validation.health's section), None: not needed
        self.health_problem: tuple | None = None  # (problem, fix) of a degraded health
        self.identity: dict | None = None  # the env as the fleet compares it (EnvInfo.identity)

    @property
    def exit_code(self) -> int:
        return 0 if self.ready else 1

    def envelope(self) -> dict:
        """Ready: the report's verdict without its health check (ready or degraded: health
        counts as read now, never as stored), or degraded by the health read now; else
        not-ready with the gate's reason and fix. The node: the host its report read, and the
        level-1 health read now (else its report's, as facts only: it decides nothing here)."""
        facts = node(node_host(self.report.get("host")), node_health([self.health or self.report.get("health")]),
                     [self.identity] if self.identity else None)
        if not self.ready:
            return envelope("not-ready", self.reason, self.fix, [], facts)
        if self.health_problem is not None:
            return envelope("degraded", *self.health_problem, [self.env], facts)
        verdict = freshness.verdict_without_health(self.report)
        if verdict == "degraded":  # its first warning (health aside: read now, above), never null
            warned = next((c for c in self.report.get("checks") or [] if isinstance(c, dict)
                           and c.get("status") == "warn" and c.get("id") != "health"), {})
            problem = f"env {self.env}: {warned['id']}: {warned.get('summary')}" if warned.get("id") else None
            return envelope("degraded", problem, warned.get("fix"), [self.env], facts)
        return envelope(verdict if verdict in OK_VERDICTS else "ready", ready_envs=[self.env], node_facts=facts)

    def body(self) -> dict:
        return {"env": self.env, "ready": self.ready, "cached": self.cached,
                "reason": self.reason, "fix": self.fix, "age_s": self.age_s,
                "gpus_usable": self.gpus_usable, "verdict": self.report.get("verdict"),
                "report": self.report, "health": self.health}


def judge(name: str, report: dict, cached: bool, require_gpu: bool, min_gpus: int,
          host: HostState | None = None, home: Home | None = None) -> GateResult:
    """The answer a validation report gives for these requirements. ``host`` (a probe) names the
    cause and fix when the env needs GPUs this host has none of, as ``select --require-gpu`` does."""
    usable = int(report.get("gpus_usable") or 0)
    needed = max(min_gpus, 1 if require_gpu else 0)
    failing = [c for c in report.get("checks", []) if c.get("status") == "fail"]
    no_gpu = host.no_gpu_reason() if host is not None and usable < needed else None
    if failing:
        ready, reason, fix = False, f"{failing[0]['id']}: {failing[0]['summary']}", failing[0].get("fix")
    elif no_gpu:
        ready, reason, fix = False, (f"needs {needed} GPU(s) the env can train on, has {usable}: this host "
                                     f"has no usable GPU: {no_gpu[0]}"), no_gpu[1]
    elif usable < needed:
        checked = next((c for c in report.get("checks", []) if c.get("id") == "host"), {})
        ready, reason = False, (f"needs {needed} GPU(s) the env can train on, has {usable}"
                                + (f" ({checked.get('summary')})" if checked.get("summary") else ""))
        fix = checked.get("fix") or _gpu_env_fix(name, report, host, home)
    else:
        ready, reason, fix = True, f"{report.get('verdict')}, {usable} GPU(s) usable", None
    return GateResult(name, ready, cached, reason, fix, freshness.age_s(report), usable, report)


def _gpu_env_fix(name: str, report: dict, host: HostState | None, home: Home | None) -> str:
    """The fix for an env that trains on fewer GPUs than asked on a host that has usable ones:
    a CPU build's is the GPU env to create (as `select --require-gpu` says); else its validation
    says why."""
    build = report.get("build") if isinstance(report.get("build"), dict) else {}
    if host is not None and home is not None and host.usable_gpus and not build.get("cuda_version"):
        from .hints import gpu_hint

        framework = build.get("framework") if isinstance(build.get("framework"), str) else None
        try:
            hint = gpu_hint(home, host, framework)
        except Exception:  # noqa: BLE001 - advice only: an unknown framework name gives the general one
            hint = None
        if hint:
            return f"env {name} is a CPU build, it can't use this host's GPUs: {hint}"
    return f"envcheck validate {name} shows why; see envcheck select --require-gpu"


def needs_gpu(result: GateResult, require_gpu: bool, min_gpus: int) -> bool:
    """Does the job need a GPU: asked for one, or the env's validation trains on some?"""
    return require_gpu or min_gpus > 0 or result.gpus_usable > 0


def with_health(result: GateResult, health: HealthReport | None, needed: bool) -> GateResult:
    """The gate's answer with level 1 read now (``host.level1.HealthReport``; no cache: a GPU
    can fail between two jobs) when the job needs a GPU: a not-ready finding on a visible GPU
    or the node refuses it, with the finding's action as the fix; a degraded one makes a
    ready answer degraded. Unchanged when level 1 was not read or no GPU is needed."""
    if health is None or not needed:
        return result
    from ..validation.health import counted, problem, section

    visible = [g.index for g in health.gpus if g.visible]
    result.health = section(health, visible, 1)
    found = counted(health, visible)
    if result.ready and found and found[0].effect == "not-ready":
        result.ready, result.reason, result.fix = False, f"health: {problem(found[0])}", found[0].action
    elif result.ready and found:
        result.health_problem = (f"health: {problem(found[0])}", found[0].action)
    return result


def check(session: Session, name: str | None, *, require_gpu: bool = False, min_gpus: int = 0,
          max_age: float | None = None, smoke: bool = False, framework: str | None = None,
          level: int = 2, python: str | None = None, adopt: str | None = None) -> GateResult:
    """Gate env ``name`` (None or "auto": the env `select` picks, of ``framework`` if given) on
    this host, from the stored validation when it still holds, with level-1 health read now
    whenever the job needs a GPU. ``level`` 1: level 1 alone (reads only, nothing stored);
    3: the stored validation must have measured figures (else one is run, smoke fit included)."""
    from ..validation.reports import StoredReport, fingerprint

    max_age = age(DEFAULT_MAX_AGE) if max_age is None else max_age
    session.want_level1()
    if adopt and not python:
        from ..errors import UsageError

        raise UsageError("--adopt NAME goes with --python PATH", "pass the env's path: --python PATH --adopt NAME")
    if python and name not in (None, "auto"):
        from ..errors import UsageError

        raise UsageError("--python judges one env, not a named one", "give --python PATH or --env NAME, not both")
    info = session.judged_python(python, adopt) if python else \
        session.resolve_env(name, framework=framework, require_gpu=require_gpu).info
    stored = StoredReport.load(session.home, info.name) if level > 1 else None
    smoke = smoke or level >= 3
    if level == 1:
        report = session.validate_and_store(info, smoke=False, level=1)
        result = judge(info.name, report.to_json(), False, require_gpu, min_gpus, session.host, session.home)
    elif stored is not None and stored.answers(fingerprint(info, session.host), max_age=max_age, smoke=smoke) \
            and stored.data.get("level", 2) >= level:
        result = judge(info.name, stored.data, True, require_gpu, min_gpus, session.host, session.home)
    elif stored is not None and stored.data.get("verdict") in ("ready", "degraded") and info.state == "ready" \
            and (drift := _drift(session, info.name)) is not None:
        result = GateResult(info.name, False, False, f"drifted since validation: {drift.summary()}",
                            f"envcheck env verify {info.name} names what changed; packages go in with envcheck env "
                            f"add (which records them), anything else: recreate the env", stored.age_s,
                            int(stored.data.get("gpus_usable") or 0), stored.data)
    else:
        report = session.validate_and_store(info, smoke=smoke, level=level)
        result = judge(info.name, report.to_json(), False, require_gpu, min_gpus, session.host, session.home)
    result.identity = info.identity()
    return with_health(result, session.health_read(), needs_gpu(result, require_gpu, min_gpus))


def _drift(session: Session, name: str):
    """What changed in env ``name`` since its baseline (``envs.verify``, quick), or None when
    nothing did or it has none to compare with: an env validated ready that drifted is no
    longer the env that was validated, so it is not ready, whatever a new validation would
    say. (One whose stored answer is a failure is validated again: its integrity check names
    a missing requirement first, then the drift.)"""
    from ..envs.verify import NAME

    if not (session.home.env_dir(name) / NAME).is_file():
        return None
    _, drift, _ = session.store.verify(name)
    return None if drift.clean else drift


def _running_env() -> tuple:
    """(home, EnvInfo) for the interpreter running now: its envcheck env, else a plain view of it."""
    from pathlib import Path

    from ..envs.metadata import installed_packages, register_sites
    from ..envs.env_info import EnvInfo
    from ..paths import MANIFEST_NAME, Home
    from .session import env_store

    prefix = Path(sys.prefix)
    if (prefix / MANIFEST_NAME).is_file():
        home = Home(prefix.parent.parent)
        return home, env_store(home).get(prefix.name)
    from .. import frameworks
    from ..envs import adopted

    found = adopted.running()  # the user's own env: judged as it is, no name, no manifest claimed
    register_sites(found.path, found.sites, str(found.interpreter))
    packages = installed_packages(found.path)
    name = found.path.name if found.kind != "system" else found.interpreter.name
    info = EnvInfo(name=name, path=found.path, state="ready", packages=packages,
                   manifest=adopted.manifest(name, found, packages, frameworks.detect(packages)))
    return None, info


def ensure_ready(require_gpu: bool = False, min_gpus: int = 0,
                 max_age: str | float = DEFAULT_MAX_AGE) -> dict:
    """Judge the interpreter this code runs in; return the report or raise NotReady.

    Quick checks only (host, compat, integrity) unless a stored validation of this env is
    still valid. Imports no framework. Inside an env envcheck created, envcheck's own
    interpreter answers (``data.gate_client``, what such an env imports as envcheck), so this
    process imports nothing beyond the standard library.
    """
    from ..data.gate_client import NotReady, ask, env_home, recorded_python

    seconds = age(max_age) if isinstance(max_age, str) else float(max_age)
    home, name = env_home()
    python = recorded_python(home) if home else None
    if python and python != sys.executable:
        result = GateResult(**ask(python, home, name, require_gpu, min_gpus, seconds))
    else:
        result = _judge_here(require_gpu, min_gpus, seconds)
    if not result.ready:
        raise NotReady(result.reason, result.fix, result.report, result)
    return result.report


def _judge_here(require_gpu: bool, min_gpus: int, seconds: float) -> GateResult:
    from ..validation.reports import StoredReport, fingerprint
    from .session import Session

    home, info = _running_env()
    session = Session(home)
    session.want_level1()
    stored = StoredReport.load(home, info.name) if home else None
    if stored is not None and stored.answers(fingerprint(info, session.host), max_age=seconds):
        result = judge(info.name, stored.data, True, require_gpu, min_gpus, session.host, session.home)
        return with_health(result, session.health_read(), needs_gpu(result, require_gpu, min_gpus))
    report = session.validate_and_store(info, smoke=False, store=home is not None)
    result = judge(info.name, report.to_json(), False, require_gpu, min_gpus, session.host, session.home)
    result = with_health(result, session.health_read(), needs_gpu(result, require_gpu, min_gpus))
    if home is None and result.fix:
        result.fix = _from_here(result.fix, info.name)
    return result


def _from_here(fix: str, name: str) -> str:
    """A fix for an interpreter envcheck did not create (its installer's commands already name
    it: ``EnvInfo.add_command``), and the way into an env of envcheck's."""
    return (f"{fix}; or run this job in an env envcheck made: "
            "`envcheck run --env NAME -- python SCRIPT` (envcheck env list)")


