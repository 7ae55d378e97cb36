"""The rounds of a preflight over Ray or Slurm: one connection for all of them, each round the
fleet's own dispatch of ``envcheck preflight SUBCOMMAND`` to some of the nodes.

Ray: connected once (``fleet.cluster``), so the nodes' Ray workers started by the first round
serve the next ones; while connected what Ray prints goes to stderr (as ``fleet.survey`` does);
a round is ``fleet.dispatch.dispatch``. Slurm: the nodes chosen once (``fleet.srun.select``), a
round is one srun step on its nodes (``dispatch_srun``). Each node's own variables (a rank of a
collective, its verdict to record) travel with its task (``per_node``). The nodes' envcheck
version is asked in the first round only. Every answer is read as the fleet reads one
(``fleet.aggregate.node_report``).
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

    @classmethod
    def open(cls, engine: str, *, address: str | None = None, nodes: str | None = None,
             include_head: bool = False, partition: str | None = None, nodelist: str | None = None) -> Rounds:
        """Connect (Ray) or choose Slurm's nodes; ``close()`` disconnects."""
        if engine == "slurm":
            from ..fleet import srun

            where, asked, left_out, _ = srun.select(os.environ, partition, nodelist)
            return cls("slurm", where, asked, left_out, partition)
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

            outcomes = dispatch_srun(os.environ, nodes, COMMAND, argv, {}, timeout=timeout, holds_gpus=holds_gpus,
                                     partition=self.partition, busy_after=busy_after, per_node=per_node)
        else:
            from ..fleet.dispatch import dispatch

            outcomes = dispatch(self._ray, nodes, COMMAND, argv, {}, timeout=timeout, holds_gpus=holds_gpus,
                                busy_after=busy_after, per_node=per_node, version=version)
        return [node_report(COMMAND, o) for o in outcomes]
