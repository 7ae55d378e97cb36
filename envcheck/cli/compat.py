"""``envcheck compat``: can a framework build (named, or an env's) train on this host's GPUs?

Exit 0 for ok and warn, 1 for fail, 2 for bad input.
"""
from __future__ import annotations

import click

from .. import frameworks
from ..host.compat import OPERATING_SYSTEMS
from ._common import declare, pass_ctx
from .options import JSON


@click.command()
@click.option("--framework", metavar="DIST==VERSION",
              help=f"a framework release, e.g. {' or '.join(frameworks.examples())}")
@click.option("--env", "env_name", metavar="NAME", help="judge the framework installed in env NAME")
@click.option("--driver", metavar="VERSION", help="what-if NVIDIA driver version (default: this host's)")
@click.option("--gpu-cc", "gpu_ccs", multiple=True, metavar="X.Y",
              help="what-if GPU compute capability, repeatable (default: this host's GPUs)")
@click.option("--no-gpu", is_flag=True, help="what-if a host without NVIDIA driver or GPU")
@click.option("--os", "os_name", type=click.Choice(OPERATING_SYSTEMS),
              help="what-if operating system (default: this host's)")
@click.option("--python", metavar="X.Y",
              help="Python the framework runs on (default: the env's; unchecked with --framework)")
@click.option("--require-gpu", is_flag=True, help="a build that would run on the CPU fails")
@declare(JSON)
@pass_ctx
def compat(ctx, framework, env_name, driver, gpu_ccs, no_gpu, os_name, python, require_gpu, as_json):
    """Judge a framework build against a driver, GPUs, OS and Python."""
    from ..usecases.compat import judge_compat

    ctx.finish(judge_compat(ctx.session, framework=framework, env_name=env_name, driver=driver,
                            gpu_ccs=gpu_ccs, no_gpu=no_gpu, os_name=os_name, python=python,
                            require_gpu=require_gpu), as_json)
