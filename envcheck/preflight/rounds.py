"""The rounds of a preflight over Ray or Slurm: one connection for all of them, each round the
fleet's own dispatch of ``envcheck preflight SUBCOMMAND`` to some of the nodes.

Ray: connected once (``fleet.cluster``), so the nodes' Ray workers started by the first round
serve the next ones; while connected what Ray prints goes to stderr (as ``fleet.survey`` does);
a round is ``fleet.dispatch.dispatch``. Slurm: the nodes chosen once (``fleet.srun.select``), a
round is one srun step on its nodes (``dispatch_srun``), every step in one allocation: the
user's (inside salloc or sbatch), else one of the preflight's own, whole nodes
(``salloc --no-shell --exclusive``), cancelled at the end. Steps overlap the allocation's other steps
(``--overlap``): a step stopped at its deadline on a node that stopped answering lingers there
until the node comes back, and must not hold the next round off the others. Each node's own
variables (a rank of a collective, its verdict to record) travel with its task (``per_node``).
The nodes' envcheck version is asked in the first round only. Every answer is read as the fleet
reads one (``fleet.aggregate.node_report``).
"""
from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from ..fleet.aggregate import NodeReport, node_report
from ..fleet.cluster import Node

COMMAND = "preflight"


@dataclass
class Rounds:
    engine: str
    where: str = ""
    nodes: list[Node] = field(default_factory=list)
    left_out: list[Node] = field(default_factory=list)
    partition: str | None = None
    _ray: Any = None
    _stack: contextlib.ExitStack | None = None
    environ: dict[str, str] = field(default_factory=dict)  # Slurm's commands' (the allocation's)
    job: str | None = None  # the preflight's own allocation, to cancel

    @classmethod
    def open(cls, engine: str, *, address: str | None = None, nodes: str | None = None,
             include_head: bool = False, partition: str | None = None, nodelist: str | None = None) -> Rounds:
        """Connect (Ray) or choose Slurm's nodes; ``close()`` disconnects."""
        if engine == "slurm":
            from ..fleet import srun

            where, asked, left_out, _ = srun.select(os.environ, partition, nodelist)
            environ, job = dict(os.environ), None
            if not environ.get("SLURM_JOB_ID") and len(asked) > 1:
                job, environ = allocate(environ, asked, partition)
            return cls("slurm", where, asked, left_out, partition, environ=environ, job=job)
        from ..fleet import cluster

        ray = cluster.import_ray()
        stack = contextlib.ExitStack()
        stack.enter_context(contextlib.redirect_stdout(sys.stderr))
        try:
            where = cluster.connect(ray, address)
            stack.callback(ray.shutdown)
            asked, left_out = cluster.select(cluster.alive_nodes(ray), nodes, include_head)
        except BaseException:
            stack.close()
            raise
        return cls("ray", where, asked, left_out, None, ray, stack)

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None
        if self.job is not None:
            from ..slurm import client

            client.run(["scancel", self.job], self.environ, client.READ_TIMEOUT)
            self.job = None

    def __enter__(self) -> Rounds:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def ask(self, nodes: list[Node], subcommand: str, args: list[str], timeout: float, *,
            per_node: dict[str, dict[str, str]] | None = None, holds_gpus: bool = False,
            version: bool = False) -> list[NodeReport]:
        """``envcheck preflight SUBCOMMAND ARGS --json`` on ``nodes`` at once; a report per node,
        in their order (its ``report``: the node's document)."""
        if not nodes:
            return []
        argv = [subcommand, *args]
        busy_after = max(timeout / 2, 1.0)
        if self.engine == "slurm":
            from ..fleet.srun import dispatch_srun

            outcomes = dispatch_srun(self.environ, nodes, COMMAND, argv, {}, timeout=timeout, holds_gpus=False,
                                     partition=self.partition, busy_after=busy_after, per_node=per_node)
        else:
            from ..fleet.dispatch import dispatch

            outcomes = dispatch(self._ray, nodes, COMMAND, argv, {}, timeout=timeout, holds_gpus=holds_gpus,
                                busy_after=busy_after, per_node=per_node, version=version)
        return [node_report(COMMAND, o) for o in outcomes]


ALLOCATE_WAIT = 30  # seconds salloc waits for the nodes (--immediate): nodes held by other jobs are busy


def allocate(environ: dict[str, str], nodes: list[Node], partition: str | None) -> tuple[str, dict[str, str]]:
    """An allocation of the whole ``nodes`` for the preflight's steps: its job id, and the
    environment its steps run in (as inside salloc: SLURM_JOB_ID, SLURM_JOB_NODELIST)."""
    import re

    from ..errors import OperationError
    from ..slurm import client
    from ..slurm.names import fold

    names = [n.id for n in nodes]
    argv = ["salloc", "--no-shell", "--exclusive", f"--nodes={len(names)}", f"--nodelist={','.join(names)}",
            "--job-name=envcheck-preflight", f"--immediate={ALLOCATE_WAIT}",
            *([f"--partition={partition}"] if partition else [])]
    done = client.run(argv, environ, ALLOCATE_WAIT + client.READ_TIMEOUT)
    granted = re.search(r"Granted job allocation (\d+)", done.stderr + done.stdout)
    if granted is None:
        said = " ".join((done.stderr or done.stdout).split())[:300]
        raise OperationError(f"Slurm gave the preflight no allocation of {fold(names)}: {said or 'no answer'}",
                             "wait for the jobs on those nodes (squeue -w NODES), or run it inside your allocation")
    return granted.group(1), {**environ, "SLURM_JOB_ID": granted.group(1), "SLURM_JOB_NODELIST": fold(names)}
