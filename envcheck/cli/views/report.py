"""`report` (and `doctor --html`) for people: text, and one self-contained HTML page.

The page is ``templates/report.html.j2`` rendered by jinja2 with autoescaping on, so every
value that came from outside envcheck (package names, GPU names, a framework's error lines)
shows as text and can't add markup. It loads nothing: no script runs (the CSP forbids it),
styles are inline, the charts are SVG drawn here, and the result's JSON document
(``envcheck.reports/1``) is embedded in a ``<script type="application/json">`` block through
jinja2's ``tojson``, which escapes ``<``, ``>``, ``&`` and ``'`` so the data can't end it.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from .text import host_line, report_lines

CHANGED = {"packages": "installed packages", "python": "Python version", "env_state": "env state",
           "interpreter": "the env's interpreter", "driver_version": "NVIDIA driver",
           "gpu_uuids": "GPUs", "cuda_visible": "the GPUs CUDA sees (CUDA_VISIBLE_DEVICES)",
           "cuda_visible_devices": "CUDA_VISIBLE_DEVICES", "cuda_device_order": "CUDA_DEVICE_ORDER"}
GPU_STACK = {"cuda_version": "CUDA", "cudnn_version": "cuDNN"}  # build facts every backend names alike
BASELINE = "cpu:0"  # the device speedups are measured against
LABEL_W, PLOT_W, TEXT_W, ROW_H, BAR_H = 80, 360, 220, 26, 18  # chart geometry, px


# -- text -------------------------------------------------------------------------------------

def stored_reports(result) -> str:
    lines = [f"host: {host_line(result.host)}"]
    for env in result.envs:
        lines.append("")
        if env.report is None:
            why = f" ({env.missing})" if env.missing != env.validation else ""
            lines.append(f"env {env.name}: {env.validation}{why}; fix: envcheck validate {env.name}")
            continue
        body = report_lines(env.report)
        lines += body[:1] + [f"  {provenance(env.to_json())}"] + body[1:]
    return "\n".join(lines)


def provenance(env: dict[str, Any]) -> str:
    """When the report was made, how deep it went, and whether it still holds."""
    report = env["report"]
    line = f"validated {report['created']} ({report['depth']}, {report['wall_s']:.1f} s); "
    if env["current"]:
        return line + "nothing it depends on changed since"
    changed = ", ".join(CHANGED.get(key, key) for key in env["changed"])
    return line + f"{env['validation']}: {changed} changed since; fix: envcheck validate {env['name']}"


# -- HTML -------------------------------------------------------------------------------------

def html_page(result) -> str:
    """The whole page: the result's JSON document, and the tables and charts made from it."""
    doc = result.to_json()
    return _template().render(doc=doc, host=doc["host"], envs=[_env_view(e) for e in doc["envs"]],
                              provenance=provenance)


@lru_cache(maxsize=1)
def _template():
    import jinja2

    environment = jinja2.Environment(loader=jinja2.PackageLoader("envcheck.cli", "templates"),
                                     autoescape=True, undefined=jinja2.StrictUndefined,
                                     trim_blocks=True, lstrip_blocks=True)
    environment.filters["code"] = code_spans
    return environment.get_template("report.html.j2")


def code_spans(text: Any):
    """``text`` escaped, each `span` in backticks (the commands envcheck's fixes and actions
    quote) as <code>: the page shows a command, not Markdown's quotes around it."""
    import re

    from markupsafe import Markup, escape

    if text is None:
        return ""
    parts = re.split(r"`([^`]+)`", str(text))
    return Markup("".join(str(escape(p)) if i % 2 == 0 else f"<code>{escape(p)}</code>"
                          for i, p in enumerate(parts)))


def _env_view(env: dict[str, Any]) -> dict[str, Any]:
    report = env["report"]
    if report is None:
        return {"env": env, "report": None}
    speedup = report["speedup"]
    from .health import gpu_rows, heading

    return {"env": env, "report": report, "build": _build_line(report["build"]),
            "health_heading": heading(report.get("health")), "health": gpu_rows(report.get("health")),
            "rows": [_device_row(d, speedup) for d in report["devices"]],
            "chart": _chart(report["devices"], speedup), "multi": _multi(report["multi_replica"])}


def _build_line(build: dict[str, Any]) -> str:
    """The framework and its version, the GPU stack it was built with, then the version of each
    other component its smoke backend reports (a fact ``<component>_version``), as it names it:
    read from the facts, whatever the framework."""
    parts = [f"{build.get('framework', '')} {build.get('version', '')}".strip()]
    parts += [f"{label} {build[key]}" for key, label in GPU_STACK.items() if build.get(key)]
    parts += [f"{key.removesuffix('_version')} {value}" for key, value in build.items()
              if key.endswith("_version") and key not in GPU_STACK and value and isinstance(value, str)]
    return ", ".join(p for p in parts if p)


def _ratio(device: str, speedup: dict[str, Any] | None) -> float | None:
    """The stored speedup of ``device`` over the CPU (the CPU itself: 1)."""
    if not speedup:
        return None
    return 1.0 if device == BASELINE else speedup["gpu_over_cpu"].get(device)


def _device_row(d: dict[str, Any], speedup: dict[str, Any] | None) -> dict[str, Any]:
    ratio = _ratio(d["device"], speedup)
    cell = "-" if ratio is None else f"{ratio:.2f}×" + (" (baseline)" if d["device"] == BASELINE else "")
    loss = "-" if d["loss_first"] is None or d["loss_last"] is None else \
        f"{d['loss_first']:.4f} → {d['loss_last']:.4f}"
    error = [ln.strip() for ln in (d["error"] or "").splitlines() if ln.strip()]
    note = error[-1] if error else (f"on {d['placed_on']}" if d["placed_on"] else "")
    return {"device": d["device"], "status": d["status"],
            "ms": "-" if d["ms_per_step"] is None else f"{d['ms_per_step']:.2f}",
            "speedup": cell, "loss": loss, "cudnn": _cudnn(d["cudnn"]), "note": note,
            "error": d["error"] if len(error) > 1 else None}


def _cudnn(facts: dict[str, Any] | None) -> str:
    if not facts:
        return "-"
    if not facts.get("available"):
        return "not available"
    state = "used" if facts.get("enabled") and facts.get("is_acceptable") else "not used"
    return f"{facts.get('version') or '?'} ({state})"


def _chart(devices: list[dict[str, Any]], speedup: dict[str, Any] | None) -> dict[str, Any] | None:
    """Horizontal bars of ms/step, one per device that trained, to one linear scale."""
    timed = [d for d in devices if d["status"] == "pass" and d["ms_per_step"]]
    if not timed:
        return None
    longest = max(d["ms_per_step"] for d in timed)
    bars = []
    for i, d in enumerate(timed):
        ms, ratio = d["ms_per_step"], _ratio(d["device"], speedup)
        width = round(ms / longest * PLOT_W, 3)
        label = f"{ms:.2f} ms/step" + ("" if ratio is None else f", {ratio:.2f}× {BASELINE}")
        bars.append({"device": d["device"], "ms": ms, "width": width, "y": i * ROW_H,
                     "label": label, "text_x": LABEL_W + width + 6})
    return {"bars": bars, "width": LABEL_W + PLOT_W + TEXT_W, "height": len(bars) * ROW_H,
            "label_w": LABEL_W, "bar_h": BAR_H}


def _multi(multi: dict[str, Any] | None) -> dict[str, Any] | None:
    """The data-parallel check, and a meter of its scaling efficiency against 1.0 (ideal)."""
    if multi is None:
        return None
    eff = multi["scaling_efficiency"]
    view = {"multi": multi, "meter": None}
    if eff is not None:
        scale = max(1.0, eff)
        view["meter"] = {"width": round(eff / scale * PLOT_W, 3), "ideal_x": LABEL_W + PLOT_W / scale,
                         "label_w": LABEL_W, "bar_h": BAR_H, "text_x": LABEL_W + PLOT_W + 6,
                         "svg_width": LABEL_W + PLOT_W + TEXT_W, "label": f"{eff:.2f} of ideal"}
    return view
