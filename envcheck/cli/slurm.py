"""`envcheck slurm healthcheck|prolog|epilog|gres`: envcheck as Slurm's health check and job
hooks, and the node's GRES against NVML.

slurm.conf runs a program without arguments and with almost no environment, so each hook is
named there through a small wrapper script that sets PATH (and SLURM_CONF where slurm.conf is
not /etc/slurm/slurm.conf) and runs `envcheck slurm healthcheck` (SLURM-NOTES.md has them).
"""
from __future__ import annotations

import os

import click

from ..durations import seconds
from ._common import declare, pass_ctx
from .options import JSON, Option


def _budget(default: float, what: str) -> Option:
    return Option("--budget", "budget", f"seconds the whole {what} may take (> 0, at most 50: slurmd kills a "
                  "health check at 60 s); a read that doesn't finish in it is a finding", default, seconds,
                  "SECONDS", show_default=True)


DRY_RUN = Option("--dry-run", "dry_run", "print the scontrol line it would run; change nothing", False, is_flag=True)
GRES_CONF = Option("--gres-conf", "gres_conf", "the gres.conf slurmd reads (default: beside slurm.conf: "
                   "$SLURM_CONF's folder, else /etc/slurm)", None, str, "PATH")


@click.group()
def slurm() -> None:
    """envcheck as Slurm's HealthCheckProgram, Prolog and Epilog; the node's GRES against NVML.

    Drain reasons start with `envcheck:`; a node drained by anyone else is never touched.
    Exit 0 when the node (or the job's GPUs) is ready, 1 when not (drained, or left drained by
    someone else), 2 on bad input: no Slurm here, a node Slurm doesn't know, a slurmctld that
    doesn't answer, a malformed gres.conf, a bad --budget. Nothing is drained on exit 2, nor on
    an error of envcheck's own.
    """


@slurm.command()
@declare(_budget(20.0, "check"), DRY_RUN, GRES_CONF, JSON)
@click.option("--env", "envs", multiple=True, metavar="NAME", help="also gate this env (repeatable): not ready drains")
@click.option("--check-envs", is_flag=True, help="also gate every env of the home")
@pass_ctx
def healthcheck(ctx, budget, dry_run, gres_conf, as_json, envs, check_envs) -> None:
    """Level-1 health of every GPU of this node, and its GRES; drain or resume it.

    For slurm.conf's HealthCheckProgram. A not-ready finding drains this node with the reason
    `envcheck: gpuN FINDING: ACTION`; a degraded one drains nothing and goes to syslog. When
    every finding has cleared, the node is resumed only if its drain reason is envcheck's.
    """
    from ..usecases.slurm_health import healthcheck as run

    ctx.finish(run(ctx.home, dict(os.environ), budget=budget, envs=tuple(envs), check_envs=check_envs,
                   dry_run=dry_run, gres_conf=gres_conf), as_json)


@slurm.command()
@declare(_budget(5.0, "prolog"), DRY_RUN, GRES_CONF, JSON)
@pass_ctx
def prolog(ctx, budget, dry_run, gres_conf, as_json) -> None:
    """The job's GPUs before it starts: refuse it on a not-ready one (exit 1, node drained).

    For slurm.conf's Prolog. The job's GPUs are SLURM_JOB_GPUS (else CUDA_VISIBLE_DEVICES) as
    slurmd sets them; a fault on another GPU doesn't stop the job. Keeps a snapshot of the
    job's GPUs for the epilog.
    """
    from ..usecases.slurm_jobs import prolog as run

    ctx.finish(run(ctx.home, dict(os.environ), budget=budget, dry_run=dry_run, gres_conf=gres_conf), as_json)


@slurm.command()
@declare(_budget(5.0, "epilog"), DRY_RUN, GRES_CONF, JSON)
@pass_ctx
def epilog(ctx, budget, dry_run, gres_conf, as_json) -> None:
    """The job's GPUs after it ran: drain on Xids or ECC errors that came while it ran.

    For slurm.conf's Epilog. Compares with the prolog's snapshot (then removes it); the drain
    reason gives the Xid's meaning (79: the GPU fell off the bus, 48: a double-bit ECC error...).
    """
    from ..usecases.slurm_jobs import epilog as run

    ctx.finish(run(ctx.home, dict(os.environ), budget=budget, dry_run=dry_run, gres_conf=gres_conf), as_json)


@slurm.command()
@declare(GRES_CONF, JSON)
@click.option("--write", is_flag=True, help="print the gres.conf lines that match what NVML sees (exit 0)")
@pass_ctx
def gres(ctx, gres_conf, as_json, write) -> None:
    """This node's GPUs as Slurm has them (Gres=, gres.conf) against NVML's.

    Exit 0 when they agree, 1 when they differ, 2 on bad input (a malformed gres.conf).
    """
    from ..usecases.slurm_gres import gres_check

    ctx.finish(gres_check(dict(os.environ), write=write, gres_conf=gres_conf), as_json)
