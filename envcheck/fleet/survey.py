"""The fleet use case: one envcheck command on every node asked, one ``FleetResult``.

Two engines, one aggregation: Ray (the default) and Slurm (``engine="slurm"``: ``srun``
selects the nodes and runs one step on them; every answer is read and aggregated the same way).
The steps on Ray: Ray imported (``cluster.import_ray``), the cluster connected, its alive nodes
chosen, one task per node sent and collected (``dispatch``), each answer read
(``aggregate.node_report``). The driver is disconnected however it ends, which ends this
job's Ray workers on every node. While connected, what Ray prints (a driver prints the
errors Ray publishes, a dead raylet's log among them, on stdout) goes to stderr: stdout is
the result's alone, so ``--json`` stays one document.

``COMMANDS`` says, per command, whether its task holds the node's GPUs (``validate`` and
``provision``, which run the smoke fits as their main work; ``gpu``, ``check`` and
``doctor`` hold none) and how long the fleet waits for a node's answer by default.
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass

from . import cluster
from .aggregate import FleetResult, node_report
from .dispatch import dispatch


@dataclass(frozen=True)
class Command:
    holds_gpus: bool
    timeout: float  # seconds, default of --timeout


COMMANDS = {
    "gpu": Command(False, 60.0),
    "labels": Command(False, 60.0),
    "check": Command(False, 120.0),
    "doctor": Command(False, 1800.0),
    "validate": Command(True, 3600.0),
    "provision": Command(True, 7200.0),
}
BUSY_AFTER = 60.0  # seconds a GPU-holding task may wait for the node's GPUs


def survey(command: str, args: list[str], environment: dict[str, str] | None = None, *,
           address: str | None = None, nodes: str | None = None, include_head: bool = False,
           timeout: float | None = None, min_ready: int | None = None,
           busy_after: float = BUSY_AFTER, engine: str = "ray", partition: str | None = None,
           nodelist: str | None = None) -> FleetResult:
    """Run ``envcheck COMMAND ARGS --json`` on the cluster's nodes (see the module docstring),
    with ``environment`` laid over each node's own (for values that must stay off argv);
    ``engine`` "slurm": on Slurm's nodes, through srun (``srun``)."""
    spec = COMMANDS[command]
    timeout = spec.timeout if timeout is None else timeout
    if engine == "slurm":
        from .._version import __version__  # what each node's envcheck says too (results.VERSION_VARIABLE)

        return _over_srun(command, args, environment or {}, spec, timeout, min_ready, busy_after, partition,
                          nodelist, __version__)
    from importlib.metadata import version

    ray = cluster.import_ray()
    with contextlib.redirect_stdout(sys.stderr):
        connected = cluster.connect(ray, address)
        try:
            asked, left_out = cluster.select(cluster.alive_nodes(ray), nodes, include_head)
            outcomes = dispatch(ray, asked, command, args, environment or {}, timeout=timeout,
                                holds_gpus=spec.holds_gpus, busy_after=busy_after)
        finally:
            ray.shutdown()
    return FleetResult(command, list(args), connected, version("envcheck"), timeout,
                       [node_report(command, o) for o in outcomes], left_out, min_ready)


def _over_srun(command: str, args: list[str], environment: dict[str, str], spec: Command, timeout: float,
               min_ready: int | None, busy_after: float, partition: str | None, nodelist: str | None,
               mine: str) -> FleetResult:
    """The same command on Slurm's nodes: ``srun.select`` and ``srun.dispatch_srun`` in place of
    Ray's cluster and dispatch; the same reading and aggregation."""
    import os

    from . import srun

    where, outcomes, left_out = srun.survey(os.environ, partition, nodelist, command, args, environment,
                                            timeout=timeout, holds_gpus=spec.holds_gpus, busy_after=busy_after)
    return FleetResult(command, list(args), where, mine, timeout, [node_report(command, o) for o in outcomes],
                       left_out, min_ready, engine="slurm")
