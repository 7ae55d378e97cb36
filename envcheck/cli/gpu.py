"""``envcheck gpu``: the driver, its CUDA and every GPU, as NVML reports them.

Exit 0 when at least one GPU is usable, 1 when none is (the reason and its fix are shown).
Kept light: the whole process must stay near Python's own start-up time.
"""
from __future__ import annotations

import click

from ..host.probe import Gpu, HostState, probe
from .output import emit_json

NA = "N/A"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="print the envcheck.host/1 JSON document")
def gpu(as_json: bool) -> None:
    """Show the NVIDIA driver, its CUDA version and the GPUs (like nvidia-smi)."""
    state = probe()
    if as_json:
        emit_json(state.to_json())
    else:
        click.echo(render(state))
    reason = state.no_gpu_reason()
    if reason is not None:
        if not as_json:
            message, fix = reason
            click.echo(f"envcheck: no usable GPU: {message}\nfix: {fix}", err=True)
        raise click.exceptions.Exit(1)


def render(state: HostState) -> str:
    """nvidia-smi-like header, one row per GPU, then per-GPU problems and warnings."""
    lines = [_header(state)]
    if state.gpus:
        lines.append(_row("GPU", "Name", "CC", "Memory used / total", "UUID", "Visible"))
        lines += [_gpu_row(g) for g in state.gpus]
        lines += [f"GPU {g.index}: {g.status}: {g.problem}; fix: {g.fix}"
                  for g in state.gpus if g.status != "ok"]
        lines += [f"GPU {g.index}: {name} N/A ({why})"
                  for g in state.gpus for name, why in g.unavailable.items()
                  if name not in ("mig_mode", "persistence_mode")]
    lines += [f"warning: {w}" for w in state.warnings]
    return "\n".join(lines)


def _header(state: HostState) -> str:
    if not state.ok and state.nvml_status != "no-gpu":
        return f"NVML: {state.nvml_status}"
    return (f"Driver Version: {state.driver_version or NA}   "
            f"CUDA Version: {state.cuda_driver_version or NA}   "
            f"NVML Version: {state.nvml_version or NA}")


def _row(index: str, name: str, cc: str, memory: str, uuid: str, visible: str) -> str:
    return f"{index:>3}  {name:<28} {cc:<4} {memory:>22}  {uuid:<14} {visible}"


def _gpu_row(g: Gpu) -> str:
    memory = NA
    if g.memory_total_mib is not None:
        memory = f"{g.memory_used_mib} / {g.memory_total_mib} MiB"
    uuid = (g.uuid[:12] + "…") if g.uuid and len(g.uuid) > 13 else (g.uuid or NA)
    visible = f"yes (cuda:{g.cuda_index})" if g.visible else "no"
    if g.status != "ok":
        visible += f", {g.status}"
    return _row(str(g.index), g.name or NA, g.compute_capability or NA, memory, uuid, visible)
