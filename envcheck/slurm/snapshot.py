"""The per-job snapshot: what the prolog read of the job's GPUs, kept until the epilog compares.

Per GPU (by UUID, with its NVML index): the Xids the kernel logged since boot, counted by
number (None where the log can't be read), the uncorrected ECC counters (volatile and
aggregate) and the remapped rows. Kept as ``slurm/NODE/job-JOBID.json`` under envcheck's home,
written atomically (``atomic``), read tolerantly (a missing or corrupt snapshot is "none":
nothing to compare, never a crash), removed by the epilog. Snapshots older than ``KEEP_S``
(an epilog that never ran: the node rebooted) are removed by the next prolog.

``changes(before, after, job)`` is what happened while the job ran, as ``Problem`` s: each Xid
number logged again on a job's GPU, with its meaning and action (``host.xid.classify``: 79 the
GPU fell off the bus, 48 a double-bit ECC error, 94/95 contained/uncontained ECC, 63/64 a row
remapping recorded or failed ...), a rise of the volatile uncorrected ECC count, a new remapping
pending or failed, and each critical Xid NVML reported during the epilog's read.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..atomic import write_bytes
from ..errors import UsageError
from ..host.xid import classify
from .reasons import Problem, undrained

if TYPE_CHECKING:
    from ..host.level1 import GpuVerdict
    from ..paths import Home

VERSION = 1
KEEP_S = 7 * 86400.0


def job_id(text: str | None, where: str = "SLURM_JOB_ID") -> str:
    """A Slurm job id (digits), else bad input."""
    if not text or not text.isascii() or not text.isdigit() or len(text) > 20:
        raise UsageError(f"{where}: {str(text)[:40]!r} is not a Slurm job id",
                         "run this as slurm.conf's Prolog or Epilog: slurmd sets SLURM_JOB_ID")
    return text


def folder(home: Home, node: str) -> Path:
    return home.root / "slurm" / node


def path(home: Home, node: str, job: str) -> Path:
    return folder(home, node) / f"job-{job}.json"


def of_gpu(gpu: GpuVerdict) -> dict[str, Any]:
    """What the snapshot keeps of one GPU's level-1 read."""
    reads = gpu.readings
    xids = reads.get("kernel_xids")
    return {"index": gpu.index, "uuid": gpu.uuid,
            "kernel_xids": None if xids is None else dict(Counter(str(x) for x in xids)),
            "ecc_uncorrected_volatile": reads.get("ecc_uncorrected_volatile"),
            "ecc_uncorrected_aggregate": reads.get("ecc_uncorrected_aggregate"),
            "remapped_rows": reads.get("remapped_rows")}


def save(home: Home, node: str, job: str, gpus: list[GpuVerdict]) -> Path:
    where = path(home, node, job)
    where.parent.mkdir(parents=True, exist_ok=True)
    data = {"version": VERSION, "job": job, "node": node, "taken": time.time(),
            "gpus": [of_gpu(g) for g in gpus]}
    write_bytes(where, json.dumps(data, indent=1).encode())
    _prune(where.parent)
    return where


def _prune(place: Path) -> None:
    cutoff = time.time() - KEEP_S
    for old in place.glob("job-*.json"):
        try:
            if old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            pass


def load(home: Home, node: str, job: str) -> dict[str, Any] | None:
    """The job's snapshot, or None (none kept, or unreadable)."""
    try:
        data = json.loads(path(home, node, job).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and data.get("version") == VERSION and isinstance(data.get("gpus"), list)
    return data if ok else None


def remove(home: Home, node: str, job: str) -> bool:
    try:
        path(home, node, job).unlink()
    except FileNotFoundError:
        return False
    return True


def changes(before: dict[str, Any] | None, after: list[GpuVerdict], job: str) -> list[Problem]:
    """What changed on ``after``'s GPUs since ``before`` (see the module docstring)."""
    kept = {g.get("uuid"): g for g in (before or {}).get("gpus", []) if isinstance(g, dict)}
    found: list[Problem] = []
    for gpu in after:
        now, then = of_gpu(gpu), kept.get(gpu.uuid)
        if then is not None:
            found += _xids(gpu.index, then.get("kernel_xids"), now["kernel_xids"], job, "logged")
            found += _ecc(gpu.index, then, now, job)
        events = gpu.readings.get("xid_events") or []
        found += _xids(gpu.index, {}, dict(Counter(str(x) for x in events)), job, "reported by NVML")
    return found


def _xids(index: int, then: Any, now: Any, job: str, how: str) -> list[Problem]:
    if not isinstance(then, dict) or not isinstance(now, dict):
        return []
    out = []
    for code, count in now.items():
        more = count - int(then.get(code, 0) or 0)
        if more > 0 and code.isdigit():
            effect, cause, action = classify(int(code), index)
            measured = f"Xid {code} {how} {more} time(s) during job {job}"
            out.append(Problem(f"xid-{code}", f"during job {job}: {cause}; {undrained(action)}", index, effect,
                               measured))
    return out


def _ecc(index: int, then: dict[str, Any], now: dict[str, Any], job: str) -> list[Problem]:
    out = []
    before, after = then.get("ecc_uncorrected_volatile"), now["ecc_uncorrected_volatile"]
    if isinstance(before, int) and isinstance(after, int) and after > before:
        out.append(Problem("ecc-uncorrected-during-job",
                           f"{after - before} uncorrected ECC error(s) during job {job}: reset the GPU "
                           f"(`sudo nvidia-smi -r -i {index}`) or reboot; replace it if errors come back",
                           index, "not-ready", f"volatile uncorrected ECC {before} -> {after}"))
    rows_then, rows_now = then.get("remapped_rows") or {}, now["remapped_rows"] or {}
    for key, what in (("pending", "a row remapping became pending"), ("failure", "a row remapping failed")):
        if rows_now.get(key) and not rows_then.get(key):
            out.append(Problem(f"row-remap-{key}-during-job", f"{what} during job {job}: reset the GPU "
                               f"(`sudo nvidia-smi -r -i {index}`)" + (" and have it replaced" if key == "failure" else ""),
                               index, "not-ready", f"remapped rows {key}"))
    return out
