"""Level-1 health read for Slurm's hooks: within a budget, and as problems.

``read_level1(environ)`` begins reading ``host.level1`` in a thread of its own (while the hook
asks Slurm about the node) and its result waits at most the seconds it is given: a GPU or driver that stops answering blocks inside NVML, where no signal
reaches, so a read that doesn't finish is a finding (``TIMEOUT_ID``, not-ready, of the node),
never a hook that hangs until Slurm kills it. The thread is a daemon: the command answers and
exits without it.

``problems_of(report, gpus)`` are the not-ready and degraded findings of the node and of the
GPUs ``gpus`` (NVML indices; None: every GPU), as ``reasons.Problem`` s.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, TypeVar

from .reasons import Problem, from_finding

if TYPE_CHECKING:
    from ..host.level1 import HealthReport

T = TypeVar("T")
TIMEOUT_ID = "level1-timeout"
COUNTED = ("not-ready", "degraded")


def read_level1(environ: Mapping[str, str]) -> Callable[[float], HealthReport | None]:
    """The level-1 read begun now (``started``): call the result with the seconds left to wait."""
    from ..host.level1 import level1

    return started(lambda: level1(dict(environ)))


def started(work: Callable[[], T]) -> Callable[[float], T | None]:
    """``work()`` begun now in a daemon thread; the result, called with ``seconds``, waits at most
    that long: ``work``'s value, or None when it had not finished. An error it raised is raised
    there, in the caller's thread."""
    done: list = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as exc:  # handed to the caller's thread, raised there
            done.append(exc)

    thread = threading.Thread(target=run, name="envcheck bounded read", daemon=True)
    thread.start()

    def result(seconds: float) -> T | None:
        thread.join(max(seconds, 0.0))
        if not done:
            return None
        if isinstance(done[0], BaseException):
            raise done[0]
        return done[0]
    return result


def within(seconds: float, work: Callable[[], T]) -> T | None:
    """``work()`` in a daemon thread, waited for at most ``seconds`` (``started``)."""
    return started(work)(seconds)


def timeout_problem(seconds: float) -> Problem:
    return Problem(TIMEOUT_ID, f"the level-1 read (NVML, device nodes, kernel log) did not finish within "
                               f"{seconds:g} s: a GPU or the driver stopped answering; check `nvidia-smi` and "
                               f"the kernel log (`dmesg | grep -i xid`), reboot the node if it hangs",
                   None, "not-ready", f"no answer from NVML within {seconds:g} s")


def problems_of(report: HealthReport, gpus: Iterable[int] | None = None) -> list[Problem]:
    """The node's and ``gpus``' not-ready and degraded findings (see the module docstring)."""
    wanted = None if gpus is None else set(gpus)
    found = [from_finding(f) for f in report.node if f.effect in COUNTED]
    for gpu in report.gpus:
        if wanted is None or gpu.index in wanted:
            found += [from_finding(f) for f in gpu.findings if f.effect in COUNTED]
    return found
