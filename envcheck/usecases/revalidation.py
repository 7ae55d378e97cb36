"""The exporter's revalidation: which env to validate again, on which GPUs, and the run itself.

`envcheck serve` never validates on a scrape. Between scrapes it asks ``Revalidation.next``
for at most one env, then runs ``envcheck validate ENV`` as its child (``processes.run``: its
own process group, stopped with envcheck), one at a time, and the stored report it writes is
what the next scrape reads. Due:

- when the host's fingerprint changed (driver, GPU UUIDs, CUDA variables): each env whose
  stored report was made on another host than this one now, once per host fingerprint
  (a validation that can't store is not retried until the host changes again);
- with ``every`` (seconds): each env whose stored report is older than that, at most once
  per ``every``.

An env never validated, or not intact (incomplete, broken), is left alone: validating it is
the admin's call. The devices: an env whose stored validation trained on no GPU, the CPU;
else every device (``all``, as by hand) when no process computes on any visible GPU (NVML's
running compute processes, read now; a GPU whose processes can't be read counts as busy),
the CPU and the free GPUs when some are busy, and nothing now when all are.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..host.level1 import HealthReport
    from ..paths import Home
    from ..processes import Completed
    from .readiness import Readiness

HOST_KEYS = ("driver_version", "gpu_uuids")  # the node's; readiness leaves out the process's own
TIMEOUT_S = 3600.0  # one validation, whole


@dataclass(frozen=True)
class Due:
    env: str
    devices: str  # validate's --devices
    why: str


@dataclass
class Revalidation:
    every: float | None = None  # seconds; None: only when the host changes
    on_change: bool = True
    tried_host: dict[str, tuple] = field(default_factory=dict)  # env -> host fingerprint tried on
    tried_at: dict[str, float] = field(default_factory=dict)  # env -> when last tried (periodic)

    def next(self, readiness: Readiness, health: HealthReport, now: float | None = None) -> Due | None:
        """The env to validate now, on which devices, or None."""
        now = time.time() if now is None else now
        host = host_key(health)
        for env in readiness.envs:
            if env.validated is None or env.verdict in ("incomplete", "broken"):
                continue
            why = None
            if self.on_change and set(env.changed) & set(HOST_KEYS) and self.tried_host.get(env.name) != host:
                why = "the host changed since its validation (" + ", ".join(
                    k for k in env.changed if k in HOST_KEYS) + ")"
            elif self.every is not None and now - env.validated >= self.every \
                    and now - self.tried_at.get(env.name, -float("inf")) >= self.every:
                why = f"its validation is older than {self.every:g}s"
            if why is None:
                continue
            devices = free_devices(health) if env.gpus_usable else "cpu"
            if devices is None:
                continue  # every GPU busy: not this env now
            self.tried_host[env.name], self.tried_at[env.name] = host, now
            return Due(env.name, devices, why)
        return None


def host_key(health: HealthReport) -> tuple:
    from ..host.probe import host_fingerprint

    facts = host_fingerprint(health.host)
    return tuple(str(facts.get(k)) for k in HOST_KEYS)


def free_devices(health: HealthReport) -> str | None:
    """validate's ``--devices``: ``all`` when no process computes on any visible GPU (as a
    validation by hand), else the CPU and the GPUs nobody uses, or None when all are busy."""
    visible = health.host.visible_gpus
    free = [g.index for g in visible
            if g.status == "ok" and g.health is not None and g.health.processes == []]
    if len(free) == len(visible):
        return "all"
    return ",".join(["cpu:0", *(f"gpu:{i}" for i in free)]) if free else None


def validate_child(home: Home, due: Due, timeout: float = TIMEOUT_S) -> Completed:
    """``envcheck validate ENV --devices ... --json`` as a child of this envcheck (its group
    stopped with it; the report it stores is the answer). Raises OSError when it can't start."""
    from ..processes import clean_environ, run

    argv = [sys.executable, "-m", "envcheck", "--home", str(home.root), "-q", "validate", due.env,
            "--devices", due.devices, "--json"]
    return run(argv, timeout=timeout, env=clean_environ(base=os.environ), cwd=str(home.root))
