"""What the benchmarks share: the console script, one timed run, interleaved rounds, a table."""
from __future__ import annotations

import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable


def machine(**extra) -> dict:
    """What the results were measured on, for the JSON beside each table."""
    return {"node": platform.node(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "loadavg": os.getloadavg()[0], **extra}


def envcheck_cmd() -> list[str]:
    """The console script next to this interpreter (no pyenv shim in between)."""
    script = Path(sys.executable).parent / "envcheck"
    return [str(script)] if script.exists() else [sys.executable, "-m", "envcheck"]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds and stdout of one whole process that must succeed (else exit with its output)."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-2000:]}")
    return seconds, proc.stdout


def wall_ms(cmd: list[str], env: dict[str, str], *, check: bool = True,
            cpu: list[float] | None = None) -> float:
    """Wall time of one whole process; its CPU time (user + system) is appended to ``cpu``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=check)
    wall = (time.perf_counter() - start) * 1000
    if cpu is not None:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return wall


def interleaved(timers: dict[str, Callable[[], float]], runs: int) -> dict[str, list[float]]:
    """One warm-up each, then ``runs`` rounds, each round running every timer once, so that
    machine noise hits all of them alike."""
    for timer in timers.values():
        timer()
    times: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(runs):
        for name, timer in timers.items():
            times[name].append(timer())
    return times


def table(times: dict[str, list[float]], reference: str, ratio_header: str,
          extra: dict[str, dict[str, str]] | None = None) -> str:
    """Markdown: runs, median, min, max (ms) and the ratio to ``reference``'s median;
    ``extra`` adds columns ({header: {name: cell}})."""
    extra = extra or {}
    base = statistics.median(times[reference])
    head = ["command", "runs", "median ms", "min ms", "max ms", ratio_header, *extra]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, values in times.items():
        median = statistics.median(values)
        cells = [name, str(len(values)), f"{median:.0f}", f"{min(values):.0f}", f"{max(values):.0f}",
                 f"{median / base:.1f}", *(column.get(name, "") for column in extra.values())]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
