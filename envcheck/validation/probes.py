"""The preflight runner (``data/preflight_runner.py``) in an env's own interpreter: a node's
probes, or its rank of the fleet's collective, and the figures judged against level 3's
table beside (``figures.judge``), never instead of the fleet's own comparison.

The runner starts in the smoke runner's environment (``smoke.runner_env``: the env's own,
cleaned, GPUs in NVML's order) and is stopped, with every rank it started, at its deadline
(``processes.run``). Its answer is its one JSON document; a runner that gave none says why
(``Measured.error``: "no answer within N s", its exit, the last lines of its stderr).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .. import processes
from .figures import GpuFacts, judge
from .smoke import runner_env

RUNNER = Path(__file__).parent.parent / "data" / "preflight_runner.py"
SAMPLES = 5  # samples per probe, the median counts
MIN_SECONDS = 0.2  # of work per sample: long enough to see a throttled or shared device
STDERR_LINES = 40


@dataclass(frozen=True)
class Measured:
    """What the runner answered: its document (None: it gave none) and why it failed."""
    document: dict[str, Any] | None
    error: str | None
    seconds: float
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.document is not None and not self.error


def _run(python: Path, job: dict[str, Any], timeout: float, env: Mapping[str, str] | None) -> Measured:
    started = time.monotonic()
    try:
        done = processes.run([str(python), str(RUNNER), json.dumps(job)], timeout=timeout,
                             env=runner_env(python, dict(env or {})))
    except OSError as exc:
        return Measured(None, f"can't run the env's interpreter {python}: {exc}", 0.0)
    seconds = round(time.monotonic() - started, 3)
    tail = "\n".join(done.stderr.splitlines()[-STDERR_LINES:])
    if done.timed_out:
        return Measured(None, f"no answer within {timeout:g} s", seconds, tail)
    try:
        document = json.loads(done.stdout)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        last = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "")
        return Measured(None, f"the runner exited {done.returncode} without an answer"
                        + (f": {last.strip()[:300]}" if last else ""), seconds, tail)
    error = document.get("error")
    return Measured(document, error.splitlines()[0][:600] if isinstance(error, str) else None, seconds, tail)


def probe(python: Path, framework: str, devices: list[str], timeout: float,
          env: Mapping[str, str] | None = None) -> Measured:
    """The node's probes on ``devices`` (its GPUs, or "cpu:0")."""
    job = {"mode": "probe", "framework": framework, "devices": devices, "samples": SAMPLES,
           "min_seconds": MIN_SECONDS, "timeout": max(timeout - 1.0, 1.0)}
    return _run(python, job, timeout, env)


def collective(python: Path, framework: str, device: str, timeout: float,
               env: Mapping[str, str] | None = None) -> Measured:
    """The node's rank of the fleet's collective (RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
    in ``env``); the process group waits ``timeout`` less a margin for its answer, so a peer
    that never comes is this rank's error, not a silence."""
    job = {"mode": "collective", "framework": framework, "device": device, "samples": SAMPLES,
           "min_seconds": MIN_SECONDS, "timeout": max(timeout - 2.0, 1.0)}
    return _run(python, job, timeout, env)


def absolute(document: Mapping[str, Any], gpus: Mapping[str, GpuFacts]) -> list[dict[str, Any]]:
    """Each measured figure against level 3's table (``figures.judge``): its expectation and
    verdict (pass, degraded, n/a: a CPU and a model not in the table have none)."""
    devices = {d: {k: v for k, v in f.items() if v.get("value") is not None or v.get("error")}
               for d, f in (document.get("devices") or {}).items()}
    multi = {"allreduce": document["allreduce"]} if document.get("allreduce") else None
    return [{k: v for k, v in f.to_json().items() if k != "facts"} for f in judge(devices, gpus, multi)]
