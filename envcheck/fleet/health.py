"""Each node's level-1 health, as its answer's result envelope says it (``results.node``): its
``node.health``, which every command's result computes from its own data (``gpu --level 1``
from the level-1 report itself; ``validate``, ``doctor``, ``check``, ``provision`` from the
``health`` sections of their validations), so one reader serves every command and reads
nothing else of the document. The verdict is the node's (its GPUs and device nodes, whatever
env was asked about): ``no-gpu`` where it has no GPU to judge (no NVML, the driver not loaded,
neither NVML nor its device nodes show one), not ``not-ready``; its GPUs to drain, each with its
first not-ready finding (a GPU NVML can't reach, by its device node's minor).
An envelope without it (``gpu`` without ``--level``, an older envcheck, a node that gave no
document) says nothing: ``unknown``."""
from __future__ import annotations

from typing import Any

from ..results import HEALTH_VERDICTS as NODE_VERDICTS

HEALTH_VERDICTS = (*NODE_VERDICTS, "unknown")  # as the fleet's summary counts them


def node_health(found: Any) -> tuple[str, list[dict[str, Any]]]:
    """(the node's health verdict, its GPUs to drain: gpu, uuid, finding) from the result
    envelope ``found`` (the document's, as ``reading.read`` found it; anything else: unknown)."""
    place = found.get("node") if isinstance(found, dict) else None
    health = place.get("health") if isinstance(place, dict) else None
    if not isinstance(health, dict) or health.get("verdict") not in NODE_VERDICTS:
        return "unknown", []
    drain = [{k: d.get(k) for k in ("gpu", "uuid", "finding")}
             for d in health.get("drain") or [] if isinstance(d, dict)]
    return health["verdict"], drain
