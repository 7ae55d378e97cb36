"""The node's readiness as data: every env's stored verdict against this host now, and every
GPU's level-1 health. What `envcheck metrics`, `envcheck serve` (per scrape) and `envcheck
labels` render; nothing here runs a validation or imports a framework.

Per env (``EnvReadiness``): its framework and lock variant, the verdict of its stored report
while that report is current (``StoredReport.changed``, the gate's rule), its time, whether it
is stale, each device's seconds per smoke step and the multi-device efficiency it measured.
The node's verdict in the last fleet preflight, when one was kept (``preflight_mark``).
An env is ready when its stored report is current and says ready or degraded; one never
validated, whose report is unreadable or stale, or whose env is not intact is not ready, and
its ``verdict`` says which (``VERDICTS``). Per GPU: ``host.level1``'s check states, read now
(reads only: NVML, the device nodes, the kernel log).

Every text that leaves here for a label goes through ``label_value``: control characters and
undecodable bytes replaced, URL credentials removed (``envs.indexes.redact``), length bounded.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..progress import SILENT, Progress
from ..results import OK_VERDICTS, Result, envelope

if TYPE_CHECKING:
    from ..envs.env_info import EnvInfo
    from ..host.level1 import HealthReport
    from ..paths import Home
    from .preflight_mark import PreflightMark
    from .session import Session

SCHEMA = "envcheck.readiness/1"
# An env's verdict: its current stored report's, or why there is none to give.
VERDICTS = ("ready", "degraded", "not-ready", "never-validated", "unreadable", "stale", "incomplete",
            "broken")
# What the fingerprint holds of the process that reads it, not of the node: the exporter's
# CUDA variables are not the jobs' (a job validated with CUDA_VISIBLE_DEVICES=0,1 is not stale
# to an exporter started without it).
PROCESS_KEYS = ("cuda_visible", "cuda_visible_devices", "cuda_device_order")  # (the last two: older reports)
MAX_LABEL = 128  # characters of a label value: identity, never an unbounded text


@dataclass
class EnvReadiness:
    name: str
    framework: str
    variant: str
    verdict: str  # one of VERDICTS
    validated: float | None = None  # epoch seconds of its stored report; None: none readable
    stale: bool | None = None  # its stored report no longer describes the env and host; None: none
    changed: list[str] = field(default_factory=list)  # what changed (fingerprint keys)
    seconds_per_step: dict[str, float] = field(default_factory=dict)  # device -> s/step, smoke fit
    efficiency: float | None = None  # multi-device scaling efficiency, 0..1
    gpus_usable: int = 0  # GPUs its stored validation trained on

    @property
    def ready(self) -> bool:
        return self.verdict in OK_VERDICTS

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "framework": self.framework, "variant": self.variant,
                "verdict": self.verdict, "ready": self.ready, "validated": self.validated,
                "stale": self.stale, "changed": self.changed, "seconds_per_step": self.seconds_per_step,
                "multi_device_efficiency": self.efficiency}


@dataclass
class GpuReadiness:
    index: int
    uuid: str
    verdict: str  # level 1's: ready | degraded | not-ready
    checks: dict[str, str]  # check -> pass | info | degraded | not-ready | n/a

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.index, "uuid": self.uuid, "verdict": self.verdict, "checks": self.checks}


@dataclass
class Readiness(Result):
    schema: ClassVar[str] = SCHEMA
    version: str
    driver: str | None
    cuda: str | None
    health: str  # the node's level-1 verdict (ready | degraded | not-ready | no-gpu)
    envs: list[EnvReadiness] = field(default_factory=list)
    gpus: list[GpuReadiness] = field(default_factory=list)
    # The envs as the store read them (not rendered). An exporter holding the last answer
    # keeps their paths alive: pathlib interns each path part, and parts dying and coming back
    # every scrape churn CPython's interned-string table until it resizes (+0.5 MB, once).
    infos: list[EnvInfo] = field(default_factory=list, repr=False, compare=False)
    preflight: PreflightMark | None = None  # this node's verdict in the last fleet preflight

    @property
    def ready_envs(self) -> list[str]:
        return [e.name for e in self.envs if e.ready]

    def envelope(self) -> dict:
        """Ready when an env is ready and no GPU is not-ready; degraded when one is ready but an
        env or the GPUs are degraded; else not-ready."""
        ready = self.ready_envs
        if not ready:
            return envelope("not-ready", "no env is ready on this node (stored reports)",
                            "envcheck validate --all", ready)
        if self.health == "not-ready":
            return envelope("not-ready", "a GPU is not ready (level 1)", "envcheck gpu --level 1", ready)
        if self.health == "degraded" or any(e.verdict == "degraded" for e in self.envs):
            return envelope("degraded", None, None, ready)
        return envelope("ready", None, None, ready)

    def body(self) -> dict[str, Any]:
        return {"version": self.version, "driver": self.driver, "cuda": self.cuda, "health": self.health,
                "envs": [e.to_json() for e in self.envs], "gpus": [g.to_json() for g in self.gpus],
                "preflight": self.preflight.body() if self.preflight else None}


def readiness(session: Session) -> Readiness:
    """This node's readiness now: the session's level-1 read (one NVML session) and every env's
    stored report, judged against it."""
    from . import preflight_mark

    session.want_level1()
    health = session.health
    host = health.host
    infos = session.store.list()
    return Readiness(label_value(_version()), label_value(host.driver_version or "") or None,
                     label_value(host.cuda_driver_version or "") or None, health.node_verdict,
                     [env_readiness(session, info) for info in infos], gpus(health), infos,
                     preflight_mark.read(session.home))


def read_now(home: Home, observer: Progress = SILENT) -> tuple[Readiness, HealthReport]:
    """``readiness`` of ``home`` and the level-1 read it judged with, that read not watching
    (a session's own read keeps its NVML session open until the process exits, for a
    validation's run; the exporter reads once per scrape). ``observer`` hears the store's
    notices."""
    from ..host.level1 import level1
    from .session import Session

    session = Session(home, observer=observer, health=level1())
    return readiness(session), session.health


@functools.lru_cache(maxsize=1)
def _version() -> str:
    """envcheck's installed version (as ``--version`` says it), read once per process: the
    exporter asks at every scrape."""
    from importlib.metadata import version

    return version("envcheck")


def env_readiness(session: Session, info: EnvInfo) -> EnvReadiness:
    """Env ``info``'s stored verdict, judged against the session's host now."""
    from ..validation.reports import StoredReport, fingerprint

    lock = info.manifest.get("lock") if isinstance(info.manifest.get("lock"), dict) else {}
    frameworks = info.manifest.get("frameworks") or []
    framework = info.preset.get("framework") or (frameworks[0] if frameworks else "")
    found = EnvReadiness(label_value(info.name), label_value(str(framework or "")),
                         label_value(str(lock.get("variant") or "")), "never-validated")
    stored = StoredReport.load(session.home, info.name)
    if stored is None:
        if session.home.report(info.name).exists():
            found.verdict = "unreadable"
        return _unless_broken(found, info)
    found.validated = _epoch(stored.data.get("created"))
    found.changed = [k for k in stored.changed(fingerprint(info, session.host)) if k not in PROCESS_KEYS]
    found.stale = bool(found.changed)
    found.seconds_per_step = _steps(stored.data.get("devices"))
    found.gpus_usable = stored.data["gpus_usable"]
    found.verdict = "stale" if found.stale else _verdict_now(stored.data, found.gpus_usable, session.health)
    multi = stored.data.get("multi_replica")
    found.efficiency = _number(multi.get("scaling_efficiency")) if isinstance(multi, dict) else None
    return _unless_broken(found, info)


def _verdict_now(report: dict, gpus_usable: int, health: HealthReport) -> str:
    """The gate's rule: the stored checks' verdict but their health check (``freshness``),
    then, for an env that trains on GPUs, the level-1 health read now of the visible GPUs:
    a not-ready finding makes it not-ready, a degraded one a ready env degraded."""
    from ..validation.freshness import verdict_without_health
    from ..validation.health import env_verdict

    verdict = verdict_without_health(report)
    if verdict in OK_VERDICTS and gpus_usable:
        now = env_verdict(health, [g.index for g in health.gpus if g.visible])
        if now == "not-ready" or (now == "degraded" and verdict == "ready"):
            verdict = now
    return verdict


def _unless_broken(found: EnvReadiness, info: EnvInfo) -> EnvReadiness:
    if info.state in ("incomplete", "broken"):
        found.verdict = info.state
    return found


def gpus(health: HealthReport) -> list[GpuReadiness]:
    return [GpuReadiness(g.index, label_value(g.uuid or ""), g.verdict, dict(g.checks)) for g in health.gpus]


def _steps(devices: Any) -> dict[str, float]:
    """Device -> seconds per step of the smoke fits that passed."""
    steps = {}
    for row in devices if isinstance(devices, list) else []:
        if isinstance(row, dict) and isinstance(row.get("device"), str) and row.get("status") == "pass":
            ms = _number(row.get("ms_per_step"))
            if ms is not None:
                steps[label_value(row["device"])] = ms / 1000
    return steps


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _epoch(created: Any) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(created).timestamp()
    except (TypeError, ValueError):
        return None


def label_value(text: str) -> str:
    """``text`` fit for a label: URL credentials removed, each control character or undecodable
    byte replaced by ``?``, at most ``MAX_LABEL`` characters."""
    from ..envs.indexes import redact

    shown = redact(text) or ""
    clean = "".join("?" if (ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xDFFF) else c
                    for c in shown)
    return clean[:MAX_LABEL]
