"""`envcheck run`: run a command in an env, on chosen GPUs; its exit status is envcheck's."""
from __future__ import annotations

import os
import sys

import click

from .. import frameworks
from ..usecases.ranks import RANKS_PER_DEVICE
from ._common import pass_ctx
from .render import safe


@click.command(context_settings={"allow_interspersed_args": False})
@click.option("--env", "env_name", default="auto", show_default=True, metavar="NAME|auto",
              help="the env to run in; auto = the one `envcheck select` picks")
@click.option("--gpus", default="all", show_default=True, metavar="all|none|0,2",
              help="GPUs the command sees, by NVML index (as `envcheck gpu` shows them) or UUID "
                   "(GPU-...); none hides all")
@click.option("--batch-size", type=click.IntRange(min=1), default=None, metavar="N",
              help="the batch, by the env's framework's rule: "
                   + ", ".join(f"{f.title}'s {f.batch_rule.words}" for f in frameworks.registry().values())
                   + "; exported as ENVCHECK_GLOBAL_BATCH and ENVCHECK_PER_GPU_BATCH")
@click.option("--nproc", type=int, default=None, metavar="N",
              help="start N processes the way a distributed launcher does (RANK, LOCAL_RANK, "
                   f"WORLD_SIZE, MASTER_ADDR, MASTER_PORT), at most {RANKS_PER_DEVICE} per CPU core or "
                   "selected GPU; default: one per selected GPU for "
                   + " and ".join(f.title for f in frameworks.registry().values()
                                  if f.batch_rule.process_per_device) + ", else 1")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- CMD [ARGS]...")
@pass_ctx
def run(ctx, env_name, gpus, batch_size, nproc, command):
    """Run CMD in the env, on the chosen GPUs, with the framework's variables.

    CMD sees VIRTUAL_ENV, CUDA_DEVICE_ORDER=PCI_BUS_ID, CUDA_VISIBLE_DEVICES from --gpus and
    the env framework's settings (its GPU memory growth or allocator settings). One process:
    envcheck becomes CMD, so CMD's exit status is envcheck's (killed by a signal: 128+signal in
    a shell). Several (--nproc, or an env whose framework runs one process per GPU, on several
    GPUs): envcheck supervises them as a distributed launcher does, stops the rest when one
    fails, and exits with the first failure's status. Exit 2 on bad usage (unknown GPU, a
    batch that does not split over the GPUs), 1 when the env is not ready or none fits, 127
    when CMD is not found, 126 when it is not executable.
    """
    from ..usecases.launch import CommandNotExecutable, prepare
    from ..validation.devices import GPUS, parse

    selection = parse(gpus, GPUS)  # bad input fails before any work
    launch = prepare(ctx.session, env_name, list(command), gpus=selection, batch_size=batch_size, nproc=nproc)
    for note in launch.notes:
        click.echo(safe(f"envcheck: {note}"), err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    if launch.nproc is not None:
        _supervise(launch)
    from ..processes import reset_signals

    reset_signals()  # the command starts as a shell's would: no signal ignored or blocked
    try:
        os.execve(launch.executable, launch.argv, launch.environ)
    except OSError as exc:
        raise CommandNotExecutable(f"{launch.argv[0]}: cannot execute: {exc.strerror}",
                                   "check that it is a program or a script with a #! line") from None


def _supervise(launch) -> None:
    """The ranks of a distributed job; every rank's end on stderr, the job's status as ours."""
    from ..usecases.launch import CommandNotExecutable
    from ..usecases.ranks import RanksStopped, exit_status, run_ranks

    try:
        ends = run_ranks(launch.executable, launch.argv, launch.environ, launch.nproc,
                         on_end=lambda end: end.returncode and click.echo(f"envcheck: {end.describe()}", err=True))
    except OSError as exc:
        raise CommandNotExecutable(f"{launch.argv[0]}: cannot execute: {exc.strerror}",
                                   "check that it is a program or a script with a #! line") from None
    except RanksStopped as exc:  # SIGTERM/SIGHUP: every rank stopped; end as a command killed by it
        click.echo(f"envcheck: {exc.args[0]}: stopped all {exc.started} ranks", err=True)
        raise SystemExit(128 + exc.signum) from None
    code = exit_status(ends)
    if code:
        click.echo(f"envcheck: {sum(1 for e in ends if e.failed)} of {launch.nproc} ranks failed", err=True)
    raise SystemExit(code)
