"""The same env on every node? Each env the nodes' commands looked at (``doctor``: every env;
``check``: the one it gated), grouped by its lock and content digests (``envs.verify``: the
same on every node made from one lock), with the nodes whose packages differ from the
packages most nodes have, package by package."""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .aggregate import NodeReport


def compare_envs(nodes: list[NodeReport]) -> dict[str, dict[str, Any]]:
    """{env: {"digests": {digest: [node ids]}, "locks": {lock digest: [node ids]}, "missing":
    [node ids], "differ": [{"node_id", "hostname", "packages": {name: {"node": version,
    "others": version}}}], "same": every node that answered has it, with one digest and the
    same packages}}. The packages most nodes have are the reference (``_usual``). A node that said nothing of its envs (an older envcheck, no answer) is in
    no list. Digests and locks of None (an env made by an older envcheck; from a preset) are
    keyed "none"."""
    told = [n for n in nodes if n.envs is not None]
    names = sorted({e.get("name") for n in told for e in n.envs if isinstance(e.get("name"), str)})
    out = {}
    for name in names:
        found = {n.node.id: (n, e) for n in told for e in n.envs if e.get("name") == name}
        digests: dict[str, list[str]] = {}
        locks: dict[str, list[str]] = {}
        for node_id, (_, identity) in found.items():
            digests.setdefault(identity.get("digest") or "none", []).append(node_id)
            locks.setdefault(identity.get("lock") or "none", []).append(node_id)
        usual = _usual([(e.get("packages") or {}, n.ready) for n, e in found.values()])
        differ = []
        for node_id, (report, identity) in found.items():
            packages = identity.get("packages") or {}
            changed = {p: {"node": packages.get(p), "others": usual.get(p)}
                       for p in sorted(set(packages) | set(usual)) if packages.get(p) != usual.get(p)}
            if changed:
                differ.append({"node_id": node_id, "hostname": report.hostname, "packages": changed})
        missing = [n.node.id for n in told if n.node.id not in found]
        out[name] = {"digests": digests, "locks": locks, "missing": missing, "differ": differ,
                     "same": not missing and not differ and len(digests) == 1}
    return out


def _usual(packages: list[tuple[dict[str, str], bool]]) -> dict[str, str]:
    """The package set most nodes have; among sets as common, the one most ready nodes have
    (a node whose env drifted is not ready), then the first seen."""
    counted: Counter = Counter()
    for found, ready in packages:
        counted[tuple(sorted(found.items()))] += 1 + (0.5 if ready else 0) / (len(packages) + 1)
    return dict(counted.most_common(1)[0][0]) if counted else {}
