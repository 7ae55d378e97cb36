"""`doctor --markdown`: one GitHub-flavoured Markdown document to paste into a bug thread.

Every value that came from outside envcheck (GPU and process names from NVML, check
summaries, fixes) passes through ``cell``: a ``|`` can't split a table row, a newline can't
end one, and ``*``, ``_``, backquotes, brackets and angle brackets show as themselves
instead of becoming emphasis, links or HTML. A value NVML can't give is "N/A", with its
reason in a note under the GPU table.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...host.probe import HostState
    from ...validation.reports import Report

NA = "N/A"
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")
LABELS = {"temperature_c": "temperature", "power_draw_w": "power draw",
          "power_limit_w": "power limit", "ecc_uncorrected_volatile": "ECC errors (volatile)",
          "ecc_uncorrected_aggregate": "ECC errors (aggregate)", "pci_bus_id": "PCI bus id",
          "compute_capability": "compute capability", "mig_devices": "MIG devices"}


def cell(value: Any) -> str:
    """``value`` as the text of one Markdown table cell (or list item), escaped."""
    if value is None:
        return NA
    flat = " ".join(str(value).split())  # newlines and tabs: one space
    return _SPECIAL.sub(r"\\\1", flat) or " "


def md_table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def bug_report(result) -> str:
    diagnosis, host = result.diagnosis, result.diagnosis.host
    lines = ["## envcheck doctor", "", *_system(result.system, host), ""]
    if host.gpus:
        verdicts = {g.index: g.verdict for g in diagnosis.health.gpus} if diagnosis.health is not None else {}
        lines += ["### GPUs", "", *_gpus(host.gpus, verdicts), *_na_notes(host.gpus), ""]
    if host.warnings:
        lines += [*(f"- warning: {cell(w)}" for w in host.warnings), ""]
    lines += ["### Envs", ""]
    lines += _envs(result.envs) if result.envs else ["none"]
    lines += ["", *_validation(diagnosis.report)]
    lines += ["### Next steps", "", *(f"- {cell(step)}" for step in diagnosis.next_steps)]
    return "\n".join(lines)


SYSTEM_LABELS = {"os": "OS", "python": "Python", "cpu": "CPU", "glibc": "C library", "gcc": "GCC",
                 "clang": "Clang", "cmake": "CMake", "cuda_toolkit": "CUDA toolkit (nvcc)",
                 "cuda_home": "CUDA_HOME", "cuda_runtime": "CUDA runtime (host libcudart)",
                 "cudnn": "cuDNN (host libcudnn)", "conda": "conda env"}


def _system(system: dict[str, str], host: HostState) -> list[str]:
    nvml = host.nvml_status + (f": {host.message}" if host.message else "")
    rows = [(SYSTEM_LABELS.get(key, key), value) for key, value in system.items()]
    rows += [("NVIDIA driver", host.driver_version), ("CUDA (driver)", host.cuda_driver_version),
             ("NVML", f"{nvml} (version {host.nvml_version or NA})"),
             ("CUDA_VISIBLE_DEVICES", host.cuda_visible_devices or "unset"),
             ("CUDA_DEVICE_ORDER", host.cuda_device_order or "unset")]
    return md_table(("Item", "Value"), rows)


def _gpus(gpus: list, verdicts: dict[int, str]) -> list[str]:
    header = ("GPU", "Name", "CC", "Memory used / total", "Util GPU / memory", "Temp",
              "Power draw / limit", "ECC uncorrected volatile / aggregate", "Processes", "Health")
    return md_table(header, [_gpu_row(g, verdicts.get(g.index)) for g in gpus])


def _gpu_row(g, verdict: str | None) -> tuple[Any, ...]:
    """A GPU's row; its last column is its level-1 health verdict (the word `gpu --level 1`
    says), or NVML's failure for a GPU that could not be read, or "not read"."""
    memory = None if g.memory_total_mib is None else f"{g.memory_used_mib} / {g.memory_total_mib} MiB"
    status = (verdict or (g.status if g.status != "ok" else "not read")) \
        + ("" if g.visible else ", hidden by CUDA_VISIBLE_DEVICES")
    h = g.health
    if h is None:  # not read: a GPU that failed before its health could be
        return (g.index, g.name, g.compute_capability, memory, *[None] * 5, status)
    util = None if h.utilization_gpu_pct is None else \
        f"{h.utilization_gpu_pct} % / {h.utilization_memory_pct} %"
    temp = None if h.temperature_c is None else f"{h.temperature_c} °C"
    power = _pair(h.power_draw_w, h.power_limit_w, " W", "{:.0f}")
    ecc = _pair(h.ecc_uncorrected_volatile, h.ecc_uncorrected_aggregate)
    return (g.index, g.name, g.compute_capability, memory, util, temp, power, ecc,
            _processes(h.processes), status)


def _processes(processes) -> str | None:
    if processes is None:
        return None
    if not processes:
        return "none"
    return ", ".join(f"{p.pid} {p.name or '?'} ({_na(p.used_memory_mib)} MiB)" for p in processes)


def _pair(first: Any, second: Any, unit: str = "", spec: str = "{}") -> str | None:
    """"A / B unit", each N/A on its own; N/A alone when neither is known."""
    if first is None and second is None:
        return None
    return " / ".join(NA if v is None else spec.format(v) for v in (first, second)) + unit


def _na(value: Any) -> str:
    return NA if value is None else str(value)


def _na_notes(gpus: list) -> list[str]:
    """Why each N/A is one: the GPU's failure, or the field's reason."""
    notes = [f"- GPU {g.index}: {g.status}: {cell(g.problem)}; fix: {cell(g.fix)}"
             for g in gpus if g.status != "ok"]
    for g in gpus:
        missing = {**g.unavailable, **(g.health.unavailable if g.health else {})}
        notes += [f"- GPU {g.index}: {cell(LABELS.get(name, name))} N/A: {cell(why)}"
                  for name, why in missing.items()
                  if name not in ("mig_mode", "persistence_mode")]
    return ["", *notes] if notes else []


def _envs(envs: list) -> list[str]:
    from .report import CHANGED

    def verdict(e) -> str:
        stale = ", ".join(CHANGED.get(key, key) for key in e.changed)
        return f"{e.validation} ({e.verdict}; {stale} changed since)" if e.verdict and stale else e.validation

    rows = [(e.name, e.state, ", ".join(e.frameworks) or "none", e.python, verdict(e), e.depth,
             (e.validated or "")[:19] or None)
            for e in envs]
    return md_table(("Env", "State", "Framework", "Python", "Last verdict", "Depth", "Validated"),
                    rows)


def _validation(report: Report | None) -> list[str]:
    if report is None:
        return []
    lines = [f"### Validated now: env {cell(report.env)}, verdict **{cell(report.verdict)}**", ""]
    lines += md_table(("Check", "Status", "Summary", "Fix"),
                      [(c.id, c.status, c.summary, c.fix or "")
                       for c in report.checks])
    if report.devices:
        speedup = (report.speedup or {}).get("gpu_over_cpu", {})
        rows = [(d["device"], d["status"], _ms(d.get("ms_per_step")),
                 f"{speedup[d['device']]:.1f}x" if d["device"] in speedup else "")
                for d in report.devices]
        lines += ["", *md_table(("Device", "Status", "ms/step", "Speedup over CPU"), rows)]
    return [*lines, "", *_health(getattr(report, "health", None))]


def _health(section) -> list[str]:
    """Per GPU its level-1 verdict, then each finding that is not a pass."""
    from .health import gpu_rows, heading

    head = heading(section)
    if head is None:
        return []
    rows = []
    for row in gpu_rows(section):
        label = row["label"] + ("" if row["used"] else " (not used)")
        rows += [(label, row["verdict"], "", "", "", "")] if not row["findings"] else []
        rows += [(label, row["verdict"], f["effect"], f["measured"], f["cause"], f.get("action") or "")
                 for f in row["findings"]]
    return [f"#### {cell(head[:1].upper() + head[1:])}", "",
            *md_table(("GPU", "Verdict", "Effect", "Measured", "Cause", "Action"), rows), ""]


def _ms(value: float | None) -> str | None:
    return None if value is None else f"{value:.2f}"
