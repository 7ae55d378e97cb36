"""``envcheck gpu``: the driver, its CUDA and every GPU, as NVML reports them.

Exit 0 when at least one GPU is usable, 1 when none is (the reason and its fix are shown).
Kept light: the whole process must stay near Python's own start-up time.
"""
from __future__ import annotations

import click

from ._common import declare, pass_ctx
from .options import GPU_LEVEL, JSON


@click.command()
@declare(GPU_LEVEL, JSON)
@pass_ctx
def gpu(ctx, level: int | None, as_json: bool) -> None:
    """Show the NVIDIA driver, its CUDA version and the GPUs (like nvidia-smi).

    GPUs are numbered by their NVML index, as nvidia-smi numbers them; `validate --devices`
    and `run --gpus` use the same numbers. With --level 1, each GPU's health too, read in the
    same NVML session (exit 1 when a GPU is not ready to train: drain it).
    """
    if level == 1:
        ctx.session.want_level1()
        ctx.finish(ctx.session.health, as_json)
    else:
        ctx.finish(ctx.session.host, as_json)
