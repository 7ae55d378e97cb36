"""Each node's level-1 health, read from the document its envcheck printed: the ``health``
sections (``validation.health``: in ``validate``'s reports, ``doctor``'s report,
``check``'s answer, ``provision``'s result), found wherever the command put them, so one
reader serves every command. A node's health verdict is its sections' ``host_verdict`` (the
node's GPUs and device nodes, whatever env was asked about); its GPUs to drain, their
``drain`` lists. A document without a section (``gpu``, an older envcheck, a node that gave
no document) has no health: ``unknown``."""
from __future__ import annotations

from typing import Any, Iterator

HEALTH_VERDICTS = ("ready", "degraded", "not-ready", "no-gpu", "unknown")


def _report_health(report: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    verdict = report.get("verdict") if report.get("verdict") in HEALTH_VERDICTS else "unknown"
    drain = []
    for gpu in report.get("gpus") or []:
        if isinstance(gpu, dict) and gpu.get("verdict") == "not-ready":
            first = next((f for f in gpu.get("findings") or [] if f.get("effect") == "not-ready"), {})
            drain.append({"gpu": gpu.get("gpu"), "uuid": gpu.get("uuid"), "finding": first.get("id")})
    return verdict, drain


def _sections(value: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    if depth > 6:
        return
    if isinstance(value, dict):
        found = value.get("health")
        if isinstance(found, dict) and isinstance(found.get("version"), int) and "host_verdict" in found:
            yield found
        for key, item in value.items():
            if key != "health":
                yield from _sections(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _sections(item, depth + 1)


def node_health(document: Any) -> tuple[str, list[dict[str, Any]]]:
    """(the node's health verdict, its GPUs to drain: gpu, uuid, finding). `gpu --level 1`
    answers with the level-1 report itself (``envcheck.health/1``): its verdict and its GPUs."""
    if isinstance(document, dict) and document.get("schema") == "envcheck.health/1":
        return _report_health(document)
    sections = list(_sections(document))
    verdicts = {s.get("host_verdict") for s in sections}
    verdict = next((v for v in ("not-ready", "degraded", "ready", "no-gpu") if v in verdicts), "unknown")
    drain: dict[tuple, dict[str, Any]] = {}
    for s in sections:
        for d in s.get("drain") or []:
            if isinstance(d, dict):
                drain.setdefault((d.get("gpu"), d.get("uuid")), {k: d.get(k) for k in ("gpu", "uuid", "finding")})
    return verdict, list(drain.values())
