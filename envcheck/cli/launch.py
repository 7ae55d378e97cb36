"""`envcheck run`: run a command in an env, on chosen GPUs; its exit status is envcheck's."""
from __future__ import annotations

import os
import sys

import click

from ._common import pass_ctx


@click.command(context_settings={"allow_interspersed_args": False})
@click.option("--env", "env_name", default="auto", show_default=True, metavar="NAME|auto",
              help="the env to run in; auto = the one `envcheck select` picks")
@click.option("--gpus", default="all", show_default=True, metavar="all|none|0,2",
              help="GPUs the command sees, by NVML index (as `envcheck gpu` shows them); none hides all")
@click.option("--batch-size", type=click.IntRange(min=1), default=None, metavar="N",
              help="the batch, by the env's framework's rule: TensorFlow's global batch (a multiple "
                   "of the GPU count), PyTorch's per-GPU batch (DDP); exported as "
                   "ENVCHECK_GLOBAL_BATCH and ENVCHECK_PER_GPU_BATCH")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- CMD [ARGS]...")
@pass_ctx
def run(ctx, env_name, gpus, batch_size, command):
    """Run CMD with the env's interpreter first on PATH, GPU selection and memory growth.

    CMD sees VIRTUAL_ENV, CUDA_DEVICE_ORDER=PCI_BUS_ID, CUDA_VISIBLE_DEVICES from --gpus and
    TF_FORCE_GPU_ALLOW_GROWTH=true. envcheck becomes CMD, so CMD's exit status is envcheck's
    (killed by a signal: 128+signal in a shell). Exit 2 on bad usage (unknown GPU, a batch
    that does not split over the GPUs), 1 when the env is not ready or none fits, 127 when CMD
    is not found, 126 when it is not executable.
    """
    from ..usecases.launch import CommandNotExecutable, prepare

    launch = prepare(ctx.session, env_name, list(command), gpus=gpus, batch_size=batch_size)
    for note in launch.notes:
        click.echo(f"envcheck: {note}", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    from ..processes import reset_signals

    reset_signals()  # the command starts as a shell's would: no signal ignored or blocked
    try:
        os.execve(launch.executable, launch.argv, launch.environ)
    except OSError as exc:
        raise CommandNotExecutable(f"{launch.argv[0]}: cannot execute: {exc.strerror}",
                                   "check that it is a program or a script with a #! line") from None
