"""A node really slowed: its processes under a CPU quota of the cgroup v1 ``cpu`` controller, never
a flag of envcheck's (the preflight tests and bench); or really stopped, mid-collective
(``stopped_mid_collective``: SIGSTOP to each of its processes once its rank has joined).

``CpuQuota(fraction)`` makes a cgroup of its own under ``/sys/fs/cgroup/cpu`` (root only) whose
``cpu.cfs_quota_us`` is ``fraction`` of ``cpu.cfs_period_us``: its processes together get at most
that share of one CPU. ``add(pids)`` moves processes into it (their children, forked later,
start in it too: a Ray node's raylet, its workers and what they start); ``close()`` moves every
process left in it back where it was and removes the group. ``throttled()`` reads the kernel's
``cpu.stat``: how many periods the quota held the group back, the proof it slowed them.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

ROOT = Path("/sys/fs/cgroup/cpu")


def quota_missing() -> str | None:
    """Why a CPU quota can't be set here, or None."""
    if not (ROOT / "cpu.cfs_quota_us").exists():
        return "no cgroup v1 cpu controller at /sys/fs/cgroup/cpu (cpu.cfs_quota_us)"
    if os.geteuid() != 0 or not os.access(ROOT, os.W_OK):
        return "a cgroup of the cpu controller is made by root"
    return None


def _cpu_cgroup(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    return "/"


class CpuQuota:
    def __init__(self, fraction: float, name: str = "node"):
        self.group = ROOT / f"envcheck-test-{os.getpid()}-{name}"
        self.group.mkdir()
        period = int((self.group / "cpu.cfs_period_us").read_text())
        self.quota = max(1000, int(period * fraction))
        (self.group / "cpu.cfs_quota_us").write_text(str(self.quota))
        self.homes: dict[int, str] = {}

    def add(self, pids: set[int] | list[int]) -> None:
        for pid in pids:
            try:
                self.homes[pid] = _cpu_cgroup(pid)
                (self.group / "cgroup.procs").write_text(str(pid))
            except (OSError, ValueError):
                continue  # ended meanwhile

    def members(self) -> list[int]:
        return [int(p) for p in (self.group / "cgroup.procs").read_text().split()]

    def throttled(self) -> int:
        stat = dict(line.split() for line in (self.group / "cpu.stat").read_text().splitlines())
        return int(stat.get("nr_throttled", 0))

    def close(self) -> None:
        for pid in self.members():
            home = ROOT / self.homes.get(pid, "/").lstrip("/")
            try:
                (home / "cgroup.procs").write_text(str(pid))
            except OSError:
                (ROOT / "cgroup.procs").write_text(str(pid))
        self.group.rmdir()

    def __enter__(self) -> CpuQuota:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def stopped_mid_collective(started: subprocess.Popen, pids: Callable[[], set[int]],
                           cmdline: Callable[[int], str]) -> tuple[str, str, set[int]]:
    """Wait for the node's rank of a collective (a process of ``pids()`` whose command line says
    ``"mode": "collective"``), then stop every process of the node (SIGSTOP) while the preflight
    ``started`` runs on; its output and the pids stopped, each let go (SIGCONT) at the end."""
    stopped: set[int] = set()
    try:
        while started.poll() is None and not stopped:
            if any('"mode": "collective"' in cmdline(p) for p in pids()):
                time.sleep(1.0)  # its rank has joined: the others wait on it
                stopped = pids()
                for pid in stopped:
                    os.kill(pid, signal.SIGSTOP)
            time.sleep(0.05)
        out, err = started.communicate(timeout=300)
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    return out, err, stopped
