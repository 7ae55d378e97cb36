"""``envcheck gpu``: the driver, its CUDA and every GPU, as NVML reports them.

Exit 0 when at least one GPU is usable, 1 when none is (the reason and its fix are shown).
Kept light: the whole process must stay near Python's own start-up time.
"""
from __future__ import annotations

import click

from ._common import declare, pass_ctx
from .options import JSON


@click.command()
@declare(JSON)
@pass_ctx
def gpu(ctx, as_json: bool) -> None:
    """Show the NVIDIA driver, its CUDA version and the GPUs (like nvidia-smi).

    GPUs are numbered by their NVML index, as nvidia-smi numbers them; `validate --devices`
    and `run --gpus` use the same numbers.
    """
    ctx.finish(ctx.session.host, as_json)
