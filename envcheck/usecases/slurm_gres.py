"""``envcheck slurm gres``: this node's GPUs as Slurm has them against the GPUs NVML sees.

Reads this node's ``Gres=`` (``scontrol show node``), its gres.conf lines and level 1 (count,
models, minor numbers, device files); each difference is a problem (``slurm.gres``). Exit 0
when they agree, 1 when they differ, 2 on bad input (no Slurm here, a node Slurm doesn't know,
a malformed gres.conf). ``write``: the gres.conf lines matching what NVML sees (and the
``Gres=`` for slurm.conf, as a comment); exit 0 once NVML answered, whatever Slurm says now.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from ..errors import OperationError
from ..host.devnodes import dev_dir
from ..results import Result
from ..slurm import client, gres, gresconf
from ..slurm.reading import read_level1
from .slurm_health import Clock, read_node

BUDGET = 20.0


@dataclass
class GresResult(Result):
    schema: ClassVar[str] = "envcheck.slurm.gres/1"
    check: gres.GresCheck
    slurm: client.NodeState
    write: bool = False
    lines: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 0 if self.write or self.check.consistent else 1

    def body(self) -> dict[str, Any]:
        return {**self.check.to_json(), "state": self.slurm.to_json(), "write": self.write, "lines": self.lines}


def gres_check(environ: Mapping[str, str], *, write: bool = False, gres_conf: str | None = None) -> GresResult:
    """Compare (see the module docstring)."""
    clock = Clock(BUDGET)
    node, _, state = read_node(environ, clock)
    conf = gresconf.load(gres_conf, environ)
    report = read_level1(environ)(clock.left())
    if report is None:
        raise OperationError(f"NVML gave no answer within {BUDGET:g} s",
                             "check the GPUs with `nvidia-smi` and the kernel log; reboot the node if it hangs")
    if report.verdict == "no-gpu" and write:
        raise OperationError("NVML sees no GPU here: there is no gres.conf line to write",
                             "install the NVIDIA driver, or remove this node's gpu lines from gres.conf")
    found = gres.compare(node, state.gres, conf, gres.seen_gpus(report))
    return GresResult(found, state, write, gres.lines(found, dev_dir(environ)) if write else [])
