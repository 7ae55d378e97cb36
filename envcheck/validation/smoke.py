"""Run the smoke runner in an env's own interpreter, isolating crashes and hangs per device.

envcheck never imports a framework itself: ``data/smoke_runner.py`` does the fit inside the
env under test (with the framework's backend, ``frameworks/<name>/smoke.py``, loaded by path) and answers in JSON, and reports its progress on stderr as it goes. This
module decides how to run it:

1. One runner process for all devices, so the framework is imported once.
2. If that process crashes (a signal such as SIGABRT or SIGSEGV), hangs, or is killed for
   memory, the devices it already reported keep their results, and every other device is
   run again in a process of its own. A device that fails alone is marked with its cause
   ("crashed with SIGABRT", "no result within 30 s (hang)", "out of memory"); the others
   are still checked.
3. If the framework never finished importing, every process would fail the same way, so
   nothing is run again: all devices fail with that cause.

Time limits are per phase of a process, not per process: starting Python and importing the
framework gets ``import_timeout``; then each device gets ``timeout`` from the moment the
runner starts it, and the multi-replica check twice that (it sets up a strategy and fits
over all devices), so a hang is caught ``timeout`` after the stuck device started. Progress
extends a phase, never the process: a runner process for N devices is stopped at
import_timeout + timeout × (N + 2) whatever it reports, so the whole smoke (one run, then at
most one per device and one multi-replica run) has a hard bound. A process that runs past a
limit is stopped with everything it started (``envcheck.processes``), and so is a runner
whose envcheck is interrupted or killed.
"""
from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .. import frameworks, processes
from ..child_env import child_environ, venv_of

RUNNER = Path(__file__).parent.parent / "data" / "smoke_runner.py"
MARK = "envcheck-smoke:"
STDERR_LINES = 200
OOM_PATTERNS = ("out of memory", "ResourceExhaustedError", "OOM when allocating",
                "MemoryError", "std::bad_alloc")
Watch = Callable[[str, Any], None]  # hears each mark as it comes: see parse_mark, and "alone"


@dataclass(frozen=True)
class DeviceResult:
    device: str
    status: str  # "pass" | "fail"
    ms_per_step: float | None = None
    loss_first: float | None = None
    loss_last: float | None = None
    placed_on: str | None = None
    error: str | None = None
    memory: dict | None = None  # backends that measure it: weights freed; on a GPU, bytes before/peak/after
    cudnn: dict | None = None  # backends that measure it, on a GPU: cuDNN's state after a convolution

    @classmethod
    def from_json(cls, data: dict) -> DeviceResult:
        return cls(device=data["device"], status=data["status"],
                   ms_per_step=data.get("ms_per_step"), loss_first=data.get("loss_first"),
                   loss_last=data.get("loss_last"), placed_on=data.get("placed_on"),
                   error=data.get("error"), memory=data.get("memory"), cudnn=data.get("cudnn"))


@dataclass(frozen=True)
class MultiReplica:
    """Data-parallel check. ``scaling_efficiency`` = throughput_multi / (replicas ×
    throughput_single), throughput in samples/s, single measured on one device at the
    per-replica batch; it equals ms_single / ms_multi, 1.0 being perfect scaling."""

    status: str  # "pass" | "fail" | "skip"
    replicas: int | None = None
    per_replica_batch: int | None = None
    global_batch: int | None = None
    scaling_efficiency: float | None = None
    ms_per_step: float | None = None
    detail: str = ""
    samples_per_s: float | None = None  # global batch / time per step

    @classmethod
    def from_json(cls, data: dict) -> MultiReplica:
        return cls(status=data["status"], replicas=data.get("replicas"),
                   per_replica_batch=data.get("per_replica_batch"),
                   global_batch=data.get("global_batch"),
                   scaling_efficiency=data.get("scaling_efficiency"),
                   ms_per_step=data.get("ms_per_step"), detail=data.get("detail") or "",
                   samples_per_s=data.get("samples_per_s"))


@dataclass(frozen=True)
class SmokeResult:
    build: dict
    gpus_seen: int | None
    devices: list[DeviceResult]
    multi_replica: MultiReplica | None
    error: str | None
    stderr_tail: str
    wall_s: float
    runs: list[str] = field(default_factory=list)  # how each runner process ended
    # level 3: the runner's measured figures, by the runner's device name, and the
    # multi-replica check's (``validate._figure_checks`` turns them into checks)
    figures: dict = field(default_factory=dict)
    multi_figures: dict | None = None

    @property
    def ok(self) -> bool:
        return (self.error is None and bool(self.devices)
                and all(d.status == "pass" for d in self.devices)
                and (self.multi_replica is None or self.multi_replica.status != "fail"))


@dataclass
class _Run:
    """One runner process: its JSON document (None if it gave none) and how it ended."""

    document: dict | None
    cause: str | None  # None: ended normally; else why there is no document
    stderr: str
    streamed: dict[str, dict]  # device -> result the runner reported before it ended
    imported: bool
    build: dict
    gpus_seen: int | None
    current: str | None  # what the runner was doing when it ended ("cpu:1", "multi-replica")


def runner_env(python: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The runner's environment: envcheck's own with ``env`` laid over it, as
    ``child_env.child_environ`` gives a smoke child (cleaned, the env's own when ``python`` is
    a virtualenv's, GPUs in NVML's order, every framework's smoke variables as defaults)."""
    return child_environ(venv_of(python), framework=frameworks.smoke_environ(), purpose="smoke",
                         extra=env)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _tail(text: str, lines: int = STDERR_LINES) -> str:
    kept = [line for line in text.splitlines() if not line.startswith(MARK)]
    return "\n".join(kept[-lines:])


def parse_mark(line: str) -> tuple[str, Any] | None:
    """A runner's progress mark as (word, value): ("imported", its facts), ("start", "cpu:0"
    or "multi-replica"), ("result", a device's result); the JSON of a mark cut short is None.
    Any other line: None."""
    if not line.startswith(MARK):
        return None
    word, _, rest = line[len(MARK):].strip().partition(" ")
    if word not in ("imported", "result", "figures"):
        return word, rest
    try:
        return word, json.loads(rest)
    except ValueError:
        return word, None


def _progress(stderr: str) -> tuple[dict[str, dict], dict | None, str | None]:
    """What the runner reported before it ended: device results, its "imported" facts
    (None if it never got that far), and what it was doing last."""
    streamed: dict[str, dict] = {}
    imported, current = None, None
    for word, value in filter(None, map(parse_mark, stderr.splitlines())):
        if word == "imported":
            imported = value if isinstance(value, dict) else {}
        elif word == "start":
            current = value
        elif word == "result" and isinstance(value, dict):
            streamed[value["device"]] = value
            current = None
        elif word == "figures" and isinstance(value, dict) and value.get("device") in streamed:
            streamed[value["device"]]["figures"] = value.get("figures")  # level 3, after its result
    return streamed, imported, current


def _cause(returncode: int | None, stderr: str, limit: float | None, bounded: bool) -> str:
    """Why a runner process gave no result, in the words a report shows."""
    if returncode is None and bounded:
        return f"no result within {limit:g} s, the whole run's bound (it kept reporting progress)"
    if returncode is None:
        return f"no result within {limit:g} s (hang)"
    how = f"killed by {_signal_name(-returncode)}" if returncode < 0 else f"exit code {returncode}"
    if any(pattern in stderr for pattern in OOM_PATTERNS):
        return f"out of memory ({how})"
    if returncode == -signal.SIGKILL:
        return "out of memory (killed by SIGKILL, as the kernel's out-of-memory killer does)"
    if returncode < 0:
        return f"crashed with {_signal_name(-returncode)}"
    return f"exited with {how} without a result"


def _run_once(python: Path, job: dict, limits: tuple[float, float],
              env: dict[str, str], watch: Watch | None = None) -> _Run:
    timeout, import_timeout = limits
    bound = import_timeout + timeout * (len(job["devices"]) + 2)

    def progress(line: str) -> float | None:
        """Each progress mark restarts the clock for the phase it begins."""
        mark = parse_mark(line)
        if mark is None:
            return None
        if watch is not None:
            watch(*mark)
        return 2 * timeout if line.endswith("start multi-replica") else timeout

    done = processes.run([str(python), str(RUNNER), json.dumps(job)], timeout=import_timeout,
                         bound=bound, progress=progress, env=env)
    stdout, stderr = done.stdout, done.stderr
    returncode, limit = (None if done.timed_out else done.returncode), done.limit
    streamed, imported, current = _progress(stderr)
    document = None
    if returncode is not None:
        try:
            document = json.loads(stdout)
        except ValueError:
            document = None
    cause = None if isinstance(document, dict) else _cause(returncode, stderr, limit,
                                                           limit == bound)
    return _Run(document if cause is None else None, cause, stderr, streamed,
                imported is not None, (imported or {}).get("build") or {},
                (imported or {}).get("gpus_seen"), current)


def _failed(device: str, cause: str) -> DeviceResult:
    return DeviceResult(device=device, status="fail", error=cause)


def _from_document(run: _Run, wall_s: float, runs: list[str]) -> SmokeResult:
    doc = run.document or {}
    multi = doc.get("multi_replica")
    return SmokeResult(build=doc.get("build") or {}, gpus_seen=doc.get("gpus_seen"),
                       devices=[DeviceResult.from_json(d) for d in doc.get("devices") or []],
                       multi_replica=MultiReplica.from_json(multi) if multi else None,
                       error=doc.get("error"), stderr_tail=_tail(run.stderr), wall_s=wall_s,
                       runs=runs, figures={d.get("device"): d.get("figures") for d in doc.get("devices") or []
                                           if isinstance(d, dict) and "figures" in d},
                       multi_figures=(multi or {}).get("figures"))


def run_smoke(python: Path, devices: list[str], *, backend: str = "auto", timeout: float,
              logical_cpus: int = 0, multi_replica: bool,
              replica_devices: list[str] | None = None, env: dict[str, str] | None = None,
              import_timeout: float = 120.0, steps: int = 12, batch: int = 32,
              seed: int = 0, watch: Watch | None = None, level: int = 2) -> SmokeResult:
    """Smoke-test ``devices`` ("cpu:0", "gpu:1", ...) with the env interpreter ``python``.

    ``timeout`` bounds one device's fit, ``import_timeout`` starting the interpreter and
    importing the framework (see the module docstring). ``logical_cpus`` > 1 splits the CPU
    into that many devices (frameworks that can); naming cpu:N implies at least N + 1. The
    multi-replica check runs over ``replica_devices`` (default: all ``devices``) when
    ``multi_replica`` and there are two or more. ``env`` is laid over envcheck's own
    environment (e.g. ``{"CUDA_VISIBLE_DEVICES": "0"}``). ``watch`` hears the runner's marks
    as they come (``parse_mark``), and ("alone", DEVICE or "multi-replica") before a rerun.
    ``level`` 3 asks the runner for measured figures too (the job's "level": 3).

    If the framework cannot be imported, ``error`` says why and ``devices`` is empty:
    nothing ran. Otherwise there is one DeviceResult per device, in order.
    """
    started = time.perf_counter()
    env_vars = runner_env(python, env)
    job = {"backend": backend, "frameworks": list(frameworks.names()), "devices": list(devices),
           "logical_cpus": logical_cpus,
           "steps": steps, "batch": batch, "seed": seed, "multi_replica": multi_replica,
           "replica_devices": list(replica_devices) if replica_devices else None,
           "multi_timeout": 1.5 * timeout}  # the runner answers before its phase's 2 x timeout
    if level >= 3:
        job["level"] = 3
    whole = _run_once(python, job, (timeout, import_timeout), env_vars, watch)
    runs = [f"all devices: {whole.cause or 'finished'}"]
    if whole.cause is None:
        return _from_document(whole, time.perf_counter() - started, runs)
    if not whole.imported:
        cause = f"{whole.cause} before the framework finished importing"
        return SmokeResult(build={}, gpus_seen=None, devices=[], multi_replica=None,
                           error=cause, stderr_tail=_tail(whole.stderr),
                           wall_s=time.perf_counter() - started, runs=runs)
    return _isolate(python, job, whole, (timeout, import_timeout), env_vars, started, runs, watch)


def _isolate(python: Path, job: dict, whole: _Run, limits: tuple[float, float],
             env: dict[str, str], started: float, runs: list[str],
             watch: Watch | None) -> SmokeResult:
    """Step 2 of the module docstring: rerun, each alone, the devices ``whole`` lost."""
    results: dict[str, DeviceResult] = {}
    figures: dict[str, dict] = {}  # level 3: each device's figures, from whichever run gave them
    build, gpus_seen = whole.build, whole.gpus_seen
    tails = [f"[all devices: {whole.cause}]", _tail(whole.stderr)]
    for device in job["devices"]:
        if device in whole.streamed:
            results[device] = DeviceResult.from_json(whole.streamed[device])
            if "figures" in whole.streamed[device]:
                figures[device] = whole.streamed[device]["figures"]
            continue
        if watch is not None:
            watch("alone", device)
        alone = _run_once(python, dict(job, devices=[device], multi_replica=False), limits,
                          env, watch)
        runs.append(f"{device} alone: {alone.cause or 'finished'}")
        tails += [f"[{device} alone: {alone.cause or 'finished'}]", _tail(alone.stderr)]
        doc = alone.document or {}
        if doc.get("devices"):
            results[device] = DeviceResult.from_json(doc["devices"][0])
            if "figures" in doc["devices"][0]:
                figures[device] = doc["devices"][0]["figures"]
        else:
            results[device] = _failed(device, alone.cause or doc.get("error") or "no result")
    multi = _multi_after_isolation(python, job, whole, results, limits, env, runs, tails, watch)
    devices = [results[d] for d in job["devices"]]
    error = None
    if all(d.status == "pass" for d in devices) and whole.current != "multi-replica":
        error = (f"the run of all devices together {whole.cause}"
                 + (f" during {whole.current}" if whole.current else "")
                 + "; each device passed alone")
    return SmokeResult(build=build, gpus_seen=gpus_seen, devices=devices, multi_replica=multi,
                       error=error, stderr_tail=_tail("\n".join(tails)),
                       wall_s=time.perf_counter() - started, runs=runs, figures=figures)


def _multi_after_isolation(python: Path, job: dict, whole: _Run,
                           results: dict[str, DeviceResult], limits: tuple[float, float],
                           env: dict[str, str], runs: list[str],
                           tails: list[str], watch: Watch | None) -> MultiReplica | None:
    replicas = job["replica_devices"] or job["devices"]
    if not job["multi_replica"] or len(replicas) < 2:
        return None
    failed = [d for d in replicas if results[d].status != "pass"]
    if failed:
        return MultiReplica(status="skip", detail="not run: " + ", ".join(failed)
                            + " failed on its own")
    if whole.current == "multi-replica":
        return MultiReplica(status="fail", detail=f"{whole.cause} during the multi-replica "
                            "check; every device passed alone")
    if watch is not None:
        watch("alone", "multi-replica")
    alone = _run_once(python, dict(job, per_device=False), limits, env, watch)
    runs.append(f"multi-replica alone: {alone.cause or 'finished'}")
    tails += [f"[multi-replica alone: {alone.cause or 'finished'}]", _tail(alone.stderr)]
    multi = (alone.document or {}).get("multi_replica")
    if multi:
        return MultiReplica.from_json(multi)
    return MultiReplica(status="fail", detail=alone.cause or "no result")


def list_devices(python: Path, *, backend: str = "auto", timeout: float,
                 env: dict[str, str] | None = None) -> SmokeResult:
    """Start the framework in the env and have it list its devices, without any fit: what
    ``validate --no-smoke`` needs to know whether the framework itself sees the GPUs."""
    started = time.perf_counter()
    job = {"backend": backend, "frameworks": list(frameworks.names()), "devices": ["cpu:0"],
           "logical_cpus": 0, "steps": 3, "batch": 1,
           "seed": 0, "multi_replica": False, "replica_devices": None, "per_device": False}
    run = _run_once(python, job, (timeout, timeout), runner_env(python, env))
    if run.cause is None:
        return _from_document(run, time.perf_counter() - started, ["listing: finished"])
    error = run.cause if run.imported else f"{run.cause} before the framework finished importing"
    return SmokeResult(build=run.build, gpus_seen=run.gpus_seen, devices=[], multi_replica=None,
                       error=error, stderr_tail=_tail(run.stderr),
                       wall_s=time.perf_counter() - started, runs=[f"listing: {run.cause}"])
