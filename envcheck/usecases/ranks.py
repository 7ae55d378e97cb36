"""`envcheck run --nproc N`: a distributed job on one host, started the way the standard
distributed launcher does.

N copies of the command, each with the variables an ``env://`` process-group init
reads: ``RANK`` and ``LOCAL_RANK`` (0..N-1), ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE`` (N),
``GROUP_RANK`` 0, ``MASTER_ADDR`` 127.0.0.1 and a ``MASTER_PORT`` free on loopback. Every copy
sees the same GPUs (``CUDA_VISIBLE_DEVICES``); a script picks ``cuda:LOCAL_RANK``, as under
the standard launcher.

Supervision, as the standard launcher's: the ranks run until all have ended; the first that fails (a
non-zero exit or a signal) gets the others stopped (SIGTERM to all at once, one grace, SIGKILL,
each its whole tree: ``processes.stop_all``), since a DDP job with a dead rank only hangs in its next collective. Ctrl-C, SIGTERM or
SIGHUP stop every rank the same way; envcheck then ends as the command alone would have under
that signal (130 for Ctrl-C, 143 for SIGTERM), as a scheduler reading the status expects. Each rank's end is returned, so every exit code is
considered and shown, not only the first.

N is bounded (``rank_limit``): at most ``RANKS_PER_DEVICE`` per usable CPU core or chosen GPU.
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Callable

from .. import processes

LOOPBACK = "127.0.0.1"
RANKS_PER_DEVICE = 4  # the most ranks started per usable CPU core or chosen GPU (``rank_limit``)


@dataclass(frozen=True)
class RankEnd:
    rank: int
    pid: int  # the process envcheck started for the rank (its guard, on Linux)
    returncode: int  # -N: killed by signal N
    stopped: bool  # stopped by envcheck because another rank failed

    @property
    def failed(self) -> bool:
        return self.returncode != 0 and not self.stopped

    def describe(self) -> str:
        code = self.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exited with {code}"
        return f"rank {self.rank} {how}" + (" (stopped: another rank failed)" if self.stopped else "")


class RanksStopped(processes.Interrupted):
    """SIGTERM or SIGHUP during the job: the ``started`` ranks were all stopped."""

    def __init__(self, signum: int, started: int):
        super().__init__(signum)
        self.started = started


def rank_limit(gpus: int) -> tuple[int, str]:
    """The most ranks one job may start here, and how it is counted: ``RANKS_PER_DEVICE`` per
    CPU core this process may run on or per chosen GPU, whichever gives more. Ranks beyond that
    only compete for the same devices, and a typo (100000) would start processes until the
    machine gives out."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if gpus > cores:
        return RANKS_PER_DEVICE * gpus, f"{RANKS_PER_DEVICE} per GPU, {gpus} chosen"
    return RANKS_PER_DEVICE * cores, f"{RANKS_PER_DEVICE} per CPU core, {cores} usable"


def free_port() -> int:
    """A TCP port free on loopback now (the kernel's pick), as the standard launcher's --standalone takes one."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def rank_variables(rank: int, world: int, port: int) -> dict[str, str]:
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world), "GROUP_RANK": "0", "ROLE_RANK": str(rank),
            "MASTER_ADDR": LOOPBACK, "MASTER_PORT": str(port)}


def exit_status(ends: list[RankEnd]) -> int:
    """0 when every rank ended 0; else the first failed rank's status, as a shell reports it
    (128+N for signal N)."""
    failed = [end for end in ends if end.failed] or [end for end in ends if end.returncode != 0]
    if not failed:
        return 0
    code = failed[0].returncode
    return 128 - code if code < 0 else code


def run_ranks(executable: str, argv: list[str], environ: dict[str, str], nproc: int,
              on_end: Callable[[RankEnd], None] = lambda end: None) -> list[RankEnd]:
    """Start ``nproc`` ranks of ``argv``, wait for all, stop the rest when one fails; each
    rank's end in order of ending (``on_end`` hears each as it happens)."""
    port = free_port()
    children: dict[int, processes.Child] = {}
    ends: list[RankEnd] = []
    failing = False
    with processes.signals_interrupt():
        try:
            for rank in range(nproc):
                env = {**environ, **rank_variables(rank, nproc, port)}
                children[rank] = processes.start([executable, *argv[1:]], env=env, stdin=None)
            pause = 0.005
            while children:
                for rank, child in list(children.items()):
                    code = child.poll()
                    if code is None:
                        continue
                    del children[rank]
                    end = RankEnd(rank, child.pid, code, stopped=False)
                    ends.append(end)
                    on_end(end)
                    failing = failing or code != 0
                if failing and children:
                    processes.stop_all(list(children.values()))
                    for rank, child in children.items():
                        end = RankEnd(rank, child.pid, child.returncode, stopped=True)
                        ends.append(end)
                        on_end(end)
                    children.clear()
                time.sleep(pause)
                pause = min(2 * pause, processes.POLL_S * 5)
        except processes.Interrupted as exc:
            raise RanksStopped(exc.signum, len(children) + len(ends)) from None
        finally:
            processes.stop_all(list(children.values()))  # an interrupt: every rank still running goes
    return ends
