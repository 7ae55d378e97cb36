"""The node's side of `envcheck fleet preflight`: ``envcheck preflight facts|probe|collective``.

- ``facts``: what the fleet compares before any probe runs: the env's identity (issue 21's
  digests, ``EnvInfo.identity``) or why it is missing here, whether its framework has probes,
  the machine (``/proc/sys/kernel/random/boot_id``: nodes with one boot id share a machine and
  are probed in turn), each device the probes would use with its model (NVML's name; a CPU's
  from ``/proc/cpuinfo``), each GPU's level-1 findings and clocks, the driver, and a few TCP
  ports free here now (a rank 0 of the fleet's collective listens on one).
- ``probe``: the node's probes in the env's interpreter (``validation.probes``): on every GPU
  (else the CPU) matmul throughput and host<->device copies, and an all-reduce inside the node;
  each figure also judged against level 3's table (absolute, beside the fleet's comparison);
  each GPU's level-1 findings after the run (Xids and replays during it included).
- ``collective``: the node's rank of the fleet's process group, as the standard variables name
  it (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

Each result's envelope is ready when it measured (or, for facts, found the env with probes),
else not-ready with why: the fleet reads nodes through envelopes (``fleet.reading``).
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from ..errors import UsageError
from ..results import Result, envelope, node
from .session import Session

PORTS = 8  # free ports a node offers: one per collective it may lead (at most one per round)
BOOT_ID = "/proc/sys/kernel/random/boot_id"
CPUINFO = "/proc/cpuinfo"
RANK_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
CAUSE_CHECKS = ("clocks", "pcie-link", "pcie-replay", "ecc", "memory-repair", "xid", "temperature",
                "processes", "compute-mode")


def boot_id() -> str | None:
    try:
        with open(BOOT_ID, encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:
        return None


def cpu_model() -> str:
    """The CPU's model name, as /proc/cpuinfo says it (test seam, not a user option:
    ``ENVCHECK_TEST_CPUINFO``, a file read in its place, as ``host``'s device and kernel-log seams)."""
    try:
        with open(os.environ.get("ENVCHECK_TEST_CPUINFO") or CPUINFO, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return "CPU " + " ".join(line.partition(":")[2].split())
    except OSError:
        pass
    return "CPU"


def free_ports(count: int = PORTS) -> list[int]:
    """Ports the kernel gives to ``count`` sockets bound together on every address (so they
    differ), closed again: free here now."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _gpu_section(gpu: Any) -> dict[str, Any]:
    """A GPU's level-1 facts a straggler's cause is read from (``host.level1.GpuVerdict``)."""
    readings = gpu.readings or {}
    keep = ("pcie_gen", "pcie_max_gen", "pcie_width", "pcie_max_width", "clock_event_reasons",
            "clocks_sm_mhz", "clocks_mem_mhz", "clocks_sm_app_mhz", "clocks_mem_app_mhz",
            "clocks_sm_max_mhz", "clocks_mem_max_mhz", "temperature_c", "kernel_xids", "xid_events")
    return {"nvml_index": gpu.index, "uuid": gpu.uuid, "verdict": gpu.verdict,
            "findings": [{k: f.to_json()[k] for k in ("id", "check", "effect", "measured", "cause")}
                         for f in gpu.findings if f.check in CAUSE_CHECKS and f.effect != "n/a"],
            "readings": {k: readings.get(k) for k in keep if k in readings}}


def devices(session: Session) -> dict[str, dict[str, Any]]:
    """{the runner's device name: {"kind", "model", level-1 facts}}: every usable GPU, else the CPU."""
    from ..validation.devices import usable_gpus

    session.want_level1()
    health = session.health
    by_index = {g.index: g for g in health.gpus}
    names = {g.index: g.name for g in session.host.gpus}
    found = {}
    for device in usable_gpus(session.host):
        gpu = by_index.get(device.index)
        found[device.runner_name] = {"kind": "gpu", "model": names.get(device.index) or "unknown GPU",
                                     **(_gpu_section(gpu) if gpu is not None else {})}
    return found or {"cpu:0": {"kind": "cpu", "model": cpu_model()}}


def _framework(info: Any) -> str | None:
    from .. import frameworks

    found = info.preset.get("framework") or next(iter(frameworks.detect(info.packages)), None)
    return frameworks.get(found).name if found else None


def _env(session: Session, name: str) -> tuple[Any, str | None, str | None]:
    """(the env's EnvInfo or None, its framework, why it can't be probed here)."""
    from .. import frameworks

    from ..errors import OperationError

    try:
        info = session.resolve_env(name).info
    except (UsageError, OperationError) as exc:
        return None, None, f"env {name}: {exc.message} on this node"
    framework = _framework(info)
    if info.state != "ready":
        return info, framework, f"env {name} is {info.state} here: {info.problem}"
    if framework is None or not (frameworks.FOLDER / framework / "preflight.py").is_file():
        kinds = ", ".join(n for n in frameworks.names() if (frameworks.FOLDER / n / "preflight.py").is_file())
        return info, framework, (f"env {name}'s framework ({framework or 'none found'}) has no preflight probes "
                                 f"(a collective across nodes): use an env of {kinds}")
    return info, framework, None


@dataclass
class PreflightFacts(Result):
    schema: ClassVar[str] = "envcheck.preflight-facts/1"
    env_name: str
    identity: dict[str, Any] | None
    framework: str | None
    problem: str | None
    boot_id: str | None
    hostname: str
    devices: dict[str, dict[str, Any]]
    ports: list[int]
    host: Any = None  # HostState
    health: Any = None  # HealthReport

    @property
    def exit_code(self) -> int:
        return 1 if self.problem else 0

    def envelope(self) -> dict:
        facts = node(self.host.to_json() if self.host else None,
                     self.health.node_health() if self.health else None,
                     [self.identity] if self.identity else None)
        if self.problem:
            return envelope("not-ready", self.problem, "create the same env on every node (from one lock: "
                            "envcheck env create NAME --lock FILE)", [], facts)
        return envelope("ready", None, None, [self.env_name], facts)

    def body(self) -> dict[str, Any]:
        return {"env": self.env_name, "identity": self.identity, "framework": self.framework,
                "problem": self.problem, "boot_id": self.boot_id, "hostname": self.hostname,
                "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
                "driver_version": getattr(self.host, "driver_version", None),
                "devices": self.devices, "ports": self.ports}


def facts(session: Session, env_name: str) -> PreflightFacts:
    info, framework, problem = _env(session, env_name)
    return PreflightFacts(info.name if info is not None else env_name, info.identity() if info is not None else None, framework, problem,
                          boot_id(), socket.gethostname(), devices(session), free_ports(),
                          session.host, session.health)


@dataclass
class Measurement(Result):
    """A probe's or a collective's answer: the runner's document, or why there is none."""
    schema: ClassVar[str] = "envcheck.preflight-probe/1"
    env_name: str
    framework: str | None
    document: dict[str, Any] | None
    error: str | None
    seconds: float
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)
    absolute: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.error else 0

    def envelope(self) -> dict:
        if self.error:
            return envelope("not-ready", self.error, None, [])
        return envelope("ready", None, None, [self.env_name])

    def body(self) -> dict[str, Any]:
        doc = self.document or {}
        return {"env": self.env_name, "framework": self.framework, "error": self.error,
                "seconds": self.seconds, "build": doc.get("build"), "devices": self.devices,
                "allreduce": doc.get("allreduce"), "absolute": self.absolute, **self.extra}


class CollectiveMeasurement(Measurement):
    schema: ClassVar[str] = "envcheck.preflight-collective/1"


def _ready_env(session: Session, env_name: str) -> tuple[Any, str]:
    info, framework, problem = _env(session, env_name)
    if problem:
        from ..errors import OperationError

        raise OperationError(problem, "create the same env on every node")
    return info, framework


def probe(session: Session, env_name: str, timeout: float) -> Measurement:
    """The node's probes (see the module docstring)."""
    from .. import frameworks, processes
    from ..validation import probes
    from ..validation.figures import gpu_facts
    from ..validation.devices import usable_gpus

    info, framework = _ready_env(session, env_name)
    found = devices(session)
    with processes.temporary_directory("envcheck-preflight-") as scratch:
        measured = probes.probe(info.python, framework, list(found), timeout,
                                dict.fromkeys(frameworks.smoke_scratch(), str(scratch)))
    health = session.health
    health.catch_up()  # Xids and replays while the probes ran
    by_index = {g.index: g for g in health.gpus}
    doc = measured.document or {}
    for name, device in found.items():
        device["figures"] = (doc.get("devices") or {}).get(name)
        gpu = by_index.get(device.get("nvml_index"))
        if gpu is not None:
            device.update(_gpu_section(gpu))
    judged = probes.absolute(doc, gpu_facts(usable_gpus(session.host), session.host, health)) if measured.ok else []
    return Measurement(env_name, framework, measured.document, measured.error, measured.seconds, found, judged)


def rank_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The standard ``env://`` variables, checked: a missing or malformed one is bad input."""
    found = {name: environ.get(name, "") for name in RANK_VARIABLES}
    missing = [name for name, value in found.items() if not value]
    if missing:
        raise UsageError(f"{', '.join(missing)} not set: the collective's rank is given as the standard "
                         "env:// variables of a distributed launcher", "set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
                         "(envcheck fleet preflight sets them on every node)")
    for name in ("RANK", "WORLD_SIZE", "MASTER_PORT"):
        if not found[name].isdigit():
            raise UsageError(f"{name}={found[name]!r} is not a whole number", f"set {name} to a number")
    if int(found["RANK"]) >= int(found["WORLD_SIZE"]):
        raise UsageError(f"RANK {found['RANK']} is not below WORLD_SIZE {found['WORLD_SIZE']}",
                         "ranks count from 0")
    return found


def collective(session: Session, env_name: str, timeout: float,
               environ: Mapping[str, str] | None = None) -> CollectiveMeasurement:
    """The node's rank of the fleet's collective, on its first GPU, else its CPU."""
    from .. import frameworks, processes
    from ..validation import probes
    from ..validation.devices import usable_gpus

    ranks = rank_variables(os.environ if environ is None else environ)
    info, framework = _ready_env(session, env_name)
    gpus = usable_gpus(session.host)
    device = gpus[0].runner_name if gpus else "cpu:0"
    started = time.monotonic()
    with processes.temporary_directory("envcheck-preflight-") as scratch:
        measured = probes.collective(info.python, framework, device, timeout,
                                     {**dict.fromkeys(frameworks.smoke_scratch(), str(scratch)), **ranks})
    extra = {"rank": int(ranks["RANK"]), "world": int(ranks["WORLD_SIZE"]), "device": device,
             "master": f"{ranks['MASTER_ADDR']}:{ranks['MASTER_PORT']}",
             "wall_seconds": round(time.monotonic() - started, 3)}
    return CollectiveMeasurement(env_name, framework, measured.document, measured.error, measured.seconds,
                                 extra=extra)
