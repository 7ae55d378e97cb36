"""``envcheck diagnose FILE|-``: name the known GPU failures in a log, each with its fix.

Exit codes as linters have them: 1 when at least one error-severity failure was found, 0 when
none was (info findings alone are 0), 2 when the log can't be read.
"""
from __future__ import annotations

import click

from ._common import declare, pass_ctx
from .options import JSON


@click.command()
@click.argument("log", metavar="FILE|-")
@declare(JSON)
@pass_ctx
def diagnose(ctx, log: str, as_json: bool) -> None:
    """Find known GPU/CUDA failures in a log FILE (or stdin: -), each with its cause and fix.

    Every code of the GPU stack's error enumerations is recognised (CUDA runtime and driver,
    NVML, cuDNN, cuBLAS and the other CUDA libraries, NCCL, Xid, HIP, the loader, the kernel
    module, the container toolkit, Fabric Manager, MIG, Slurm, Kubernetes), by name, message or
    number, inside whatever framework printed it; each finding names the code. One cause per line:
    where the line alone cannot tell, the finding lists the possible causes and what to look at.

    The log is streamed, so its size doesn't matter (up to 4 GiB; input with no line break in
    64 MiB is not a text log and is refused). Exit 1 when an error was found, 0 when none was, 2
    when the log can't be read.
    """
    from ..validation.diagnose import diagnose_file, diagnose_stream

    result = diagnose_stream(click.get_binary_stream("stdin"), "-") if log == "-" else diagnose_file(log)
    ctx.finish(result, as_json)
