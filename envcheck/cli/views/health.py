"""Level-1 health as the views show it: a report's ``health`` section (``validation.health``)
as rows, per GPU its verdict and each finding that is not a pass (effect, what was measured,
its cause and action; an n/a with its reason), and the node's findings. Text here; Markdown
(``markdown.py``) and HTML (``templates/report.html.j2``) lay out the same rows."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...host.level1 import HealthReport


def gpu_rows(section: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per GPU, then one for the node when it has findings: ``label``, ``verdict``,
    ``used`` (by the env), ``findings`` (effect, measured, cause, action)."""
    if not isinstance(section, dict):
        return []
    used = set(section.get("used_gpus") or [])
    rows = []
    for gpu in section.get("gpus") or []:
        if not isinstance(gpu, dict):
            continue
        name = " ".join(str(p) for p in (gpu.get("name"), gpu.get("uuid")) if p)
        rows.append({"label": f"GPU {gpu.get('gpu')}" + (f" ({name})" if name else ""),
                     "verdict": gpu.get("verdict"), "used": gpu.get("gpu") in used,
                     "findings": _findings(gpu.get("findings"))})
    node = _findings((section.get("node") or {}).get("findings"))
    if node:
        rows.append({"label": "node", "verdict": node_verdict(section), "used": section.get("node_used", bool(used)),
                     "findings": node})
    return rows


def node_verdict(section: dict[str, Any]) -> str:
    """The node's verdict as the section says it (``host.level1``: the one word every view
    shows); a section stored before it said so: read from its findings."""
    said = (section.get("node") or {}).get("verdict")
    if said:
        return said
    node = _findings((section.get("node") or {}).get("findings"))
    return next((e for e in ("not-ready", "degraded") if any(f["effect"] == e for f in node)), "ready")


def _findings(found: Any) -> list[dict[str, Any]]:
    return [{k: f.get(k) for k in ("effect", "check", "measured", "cause", "action")}
            for f in found or [] if isinstance(f, dict)]


def heading(section: dict[str, Any] | None) -> str | None:
    if not isinstance(section, dict):
        return None
    verdict = section.get("verdict") or "no GPU used by this env"
    drain = ", ".join(f"GPU {d.get('gpu')}" for d in section.get("drain") or [])
    return (f"health (level {section.get('level')}, GPUs read at level 1): {verdict}"
            + (f"; drain: {drain}" if drain else ""))


def text_lines(section: dict[str, Any] | None, indent: str = "  ") -> list[str]:
    """The health section as indented lines (nothing when there is none)."""
    head = heading(section)
    if head is None:
        return []
    lines = [f"{indent}{head}"]
    for row in gpu_rows(section):
        if row["verdict"] == "no-gpu":  # a state, said once: what to do if a GPU was expected
            said = row["findings"][0]
            lines.append(f"{indent}  {row['label']}: no-gpu ({said['measured']}); {said['action']}")
            continue
        if not row["used"]:  # its findings are not this env's: counted, not listed
            count = len([f for f in row["findings"] if f["effect"] != "info"])
            more = f", {count} finding(s): `envcheck gpu --level 1` lists them" if count else ""
            lines.append(f"{indent}  {row['label']}: {row['verdict']} (not used by this env{more})")
            continue
        lines.append(f"{indent}  {row['label']}: {row['verdict']}")
        for f in row["findings"]:
            action = f"; action: {f['action']}" if f.get("action") else ""
            lines.append(f"{indent}    {f['effect']}: {f['measured']} ({f['cause']}){action}")
    return lines


def health_report(report: HealthReport) -> tuple[str, str]:
    """`envcheck gpu --level 1`: the GPU table as `gpu` shows it, then each GPU's health and
    the node's (every GPU counts: no env narrows them); on stderr, when not ready, the first
    finding and its action."""
    from .text import host_state

    out, err = host_state(report.host)
    data = report.to_json()
    section = {**data, "used_gpus": [g.index for g in report.gpus if g.visible], "node_used": True,
               "drain": [{"gpu": index} for index in data["drain"]]}
    lines = [out, *text_lines(section, indent="")]
    answer = data["envelope"]
    if answer["verdict"] == "not-ready":
        err = f"envcheck: not ready: {answer['problem']}" + (f"\nfix: {answer['fix']}" if answer["fix"] else "")
    return "\n".join(lines), err
