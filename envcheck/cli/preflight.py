"""`envcheck preflight facts|probe|collective|record`: one node's side of `envcheck fleet
preflight`, which runs them on every node (docs: A fleet). Run alone, `facts` and `probe` say
what this node would bring to a fleet: its env's digest, its machine, its devices and their
figures; `collective` is a rank of a process group the standard variables name.
"""
from __future__ import annotations

import click

from ..durations import seconds
from ._common import declare, pass_ctx
from .options import ENV, JSON, Option


def _timeout(default: float) -> Option:
    return Option("--timeout", "timeout", "seconds the probes may take, whole", default, seconds, "SECONDS",
                  show_default=True)


@click.group()
def preflight() -> None:
    """One node's side of `envcheck fleet preflight` (which runs these on every node)."""


@preflight.command()
@declare(ENV, JSON)
@pass_ctx
def facts(ctx, env_name: str, as_json: bool) -> None:
    """What the fleet compares before any probe: the env's digest, the machine (boot id), the
    devices and their models, each GPU's level-1 findings and clocks, free ports.

    Exit 0 when the env is here and its framework has probes, 1 otherwise (said)."""
    from ..usecases.preflight_node import facts as node_facts

    ctx.finish(node_facts(ctx.session, env_name), as_json)


@preflight.command()
@declare(ENV, _timeout(120.0), JSON)
@pass_ctx
def probe(ctx, env_name: str, timeout: float, as_json: bool) -> None:
    """This node's probes: on every GPU (else the CPU) matmul throughput and host<->device
    copies, and an all-reduce inside the node, each the median of 5 samples of >= 0.2 s;
    every figure also judged against level 3's table.

    Exit 0 when measured, 1 when a probe failed (said)."""
    from ..usecases.preflight_node import probe as node_probe

    ctx.finish(node_probe(ctx.session, env_name, timeout), as_json)


@preflight.command()
@declare(ENV, _timeout(60.0), JSON)
@pass_ctx
def collective(ctx, env_name: str, timeout: float, as_json: bool) -> None:
    """This node's rank of a collective across nodes: RANK, WORLD_SIZE, MASTER_ADDR and
    MASTER_PORT name it (torch.distributed's env:// variables); the all-reduce's bus bandwidth.

    Exit 0 when measured, 1 when it failed or a peer never came within --timeout, 2 when a
    variable is missing or malformed."""
    from ..usecases.preflight_node import collective as node_collective

    ctx.finish(node_collective(ctx.session, env_name, timeout), as_json)


@preflight.command()
@click.option("--verdict", envvar="ENVCHECK_PREFLIGHT_VERDICT", required=True,
              help="this node's verdict (healthy, straggler, bad-link, lost, failed, unjudged); "
                   "default: $ENVCHECK_PREFLIGHT_VERDICT")
@click.option("--ratios", envvar="ENVCHECK_PREFLIGHT_RATIOS", default="",
              help="FIGURE:RATIO,... each figure over its model's median; default: $ENVCHECK_PREFLIGHT_RATIOS")
@click.option("--fleet", "where", envvar="ENVCHECK_PREFLIGHT_FLEET", default="",
              help="where the fleet ran; default: $ENVCHECK_PREFLIGHT_FLEET")
@declare(JSON)
@pass_ctx
def record(ctx, verdict: str, ratios: str, where: str, as_json: bool) -> None:
    """Keep this node's verdict in the env home, for `envcheck metrics` and `envcheck labels`
    (envcheck.io/preflight=VERDICT). The fleet runs it on every node that answered."""
    from ..usecases import preflight_mark

    mark = preflight_mark.record(ctx.home, verdict, preflight_mark.parse_ratios(ratios), where)
    ctx.finish(mark, as_json)
