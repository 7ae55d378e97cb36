"""The Ray cluster as envcheck sees it: Ray imported, the cluster connected, its alive nodes,
and the ones a command asks.

The address: ``--address``, else ``RAY_ADDRESS``, else ``auto`` (the cluster ``ray start``
left on this machine). Ray's own connect retries an address that doesn't answer for ever, so
the address is tried first with a plain TCP connection (``CONNECT_TIMEOUT``): no cluster
there is a UsageError (exit 2) saying how to start one. A Ray driver attaches to the raylet
of the machine it runs on: run ``envcheck fleet`` on a node of the cluster (Ray Client,
``ray://``, is not supported: it was not tested).

Which nodes: every alive node, the head only when Ray counts GPUs on it or with
``include_head``. ``--nodes`` is a comma-separated list of terms, each ``KEY=VALUE`` (a node
label, as given to ``ray start --labels``; Ray adds ``ray.io/node-id`` and
``ray.io/accelerator-type``) or a node id or its prefix; a node matching any term is asked,
the head included. A term that matches no alive node is a UsageError listing the nodes.
"""
from __future__ import annotations

import gc
import logging
import os
import socket
import sys
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError

INSTALL = "pip install 'envcheck[fleet]' (it installs Ray)"
START = ("start one: `ray start --head` on the head node and `ray start --address HEAD:6379` on "
         "each other node, then run envcheck fleet on one of them; or pass --address HOST:PORT "
         "(or set RAY_ADDRESS)")
CONNECT_TIMEOUT = 5.0
HEAD_RESOURCE = "node:__internal_head__"
RAY_LABELS = "ray.io/"  # labels Ray sets itself


def import_ray() -> Any:
    """The ``ray`` module; without it, a UsageError saying how to install it.

    Ray's import leaves about 87,000 objects, none of them garbage, that live as long as the
    process. So the cyclic garbage collector is paused while it runs, then what is alive is
    frozen (``gc.freeze``: the process's objects so far, which a CLI process keeps to its end
    anyway): no collection walks them again, during the run or as the interpreter exits.
    That is about 0.04 s off importing and connecting, 0.1 s off exiting (BENCHMARKS.md)."""
    if sys.modules.get("ray") is not None:  # imported already (None: an import that failed)
        return sys.modules["ray"]
    enabled = gc.isenabled()
    gc.disable()
    try:
        import ray
    except ImportError:
        raise UsageError("envcheck fleet needs Ray, which is not installed here", INSTALL) from None
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
    return ray


@dataclass(frozen=True)
class Node:
    id: str
    address: str
    labels: dict[str, str] = field(default_factory=dict)
    gpus: int = 0  # as Ray counts them (it reads NVML when the node starts)
    accelerator_type: str | None = None
    is_head: bool = False

    @property
    def short_id(self) -> str:
        return self.id[:8]

    @property
    def own_labels(self) -> dict[str, str]:
        """The labels the node was started with (Ray's own ``ray.io/*`` left out)."""
        return {k: v for k, v in self.labels.items() if not k.startswith(RAY_LABELS)}

    def describe(self) -> str:
        labels = ",".join(f"{k}={v}" for k, v in self.own_labels.items())
        return f"{self.short_id} {self.address}" + (f" ({labels})" if labels else "")

    def to_json(self) -> dict[str, Any]:
        return {"node_id": self.id, "address": self.address, "labels": dict(self.labels),
                "head": self.is_head, "ray_gpus": self.gpus, "accelerator_type": self.accelerator_type}


def node_from_ray(info: dict[str, Any]) -> Node:
    """A node from one entry of ``ray.nodes()``."""
    resources = info.get("Resources") or {}
    labels = {str(k): str(v) for k, v in (info.get("Labels") or {}).items()}
    kind = labels.get("ray.io/accelerator-type") or next(
        (k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:")), None)
    return Node(id=info["NodeID"], address=info.get("NodeManagerAddress", "?"), labels=labels,
                gpus=int(resources.get("GPU", 0)), accelerator_type=kind,
                is_head=HEAD_RESOURCE in resources)


# -- connecting ------------------------------------------------------------------------------

def connect(ray: Any, address: str | None) -> str:
    """Connect this process to the cluster as a driver; the address connected to."""
    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    bootstrap = _bootstrap(target)
    host, _, port = bootstrap.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except (OSError, ValueError) as exc:
        raise UsageError(f"no Ray cluster at {bootstrap}: {exc}", START) from None
    try:
        ray.init(address=bootstrap, logging_level=logging.ERROR, log_to_driver=False,
                 namespace="envcheck-fleet")
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UsageError(f"can't connect to the Ray cluster at {bootstrap}: {_first_line(exc)}",
                         START) from None
    return bootstrap


def _bootstrap(target: str) -> str:
    """``host:port`` for ``target``, ``auto`` resolved as Ray does."""
    if "://" in target:
        raise UsageError(f"--address {target}: give the cluster's HOST:PORT", "run envcheck fleet on "
                         "a node of the cluster (Ray Client, ray://, is not supported)")
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # another Ray: its own resolution, without the reachability check
        return target
    try:
        resolved = canonicalize_bootstrap_address(target)
    except ConnectionError:
        raise UsageError("no Ray cluster found on this machine", START) from None
    except ValueError:
        raise UsageError(f"--address {target}: not HOST:PORT", "e.g. --address 10.0.0.1:6379") from None
    if not resolved:
        raise UsageError(f"--address {target}: not a Ray cluster address", "e.g. --address 10.0.0.1:6379")
    return resolved


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def alive_nodes(ray: Any) -> list[Node]:
    """The cluster's alive nodes, head first, then by address and id."""
    nodes = [node_from_ray(info) for info in ray.nodes() if info.get("Alive")]
    return sorted(nodes, key=lambda n: (not n.is_head, n.address, n.id))


# -- choosing --------------------------------------------------------------------------------

def parse_selector(text: str) -> list[tuple[str, str | None]]:
    """``--nodes``: ``[(label, value)]`` for ``KEY=VALUE`` terms, ``[(id, None)]`` for the others."""
    terms = []
    for raw in text.split(","):
        term = raw.strip()
        key, eq, value = term.partition("=")
        if not term or (eq and not key.strip()):
            raise UsageError(f"--nodes {text!r}: empty term",
                             "give labels KEY=VALUE or node ids, separated by commas")
        terms.append((key.strip(), value.strip()) if eq else (term, None))
    return terms


def _matches(node: Node, term: tuple[str, str | None]) -> bool:
    key, value = term
    return node.labels.get(key) == value if value is not None else node.id.startswith(key)


def select(nodes: list[Node], selector: str | None, include_head: bool) -> tuple[list[Node], list[Node]]:
    """(the nodes to ask, the head left out): see the module docstring."""
    if selector:
        terms = parse_selector(selector)
        for term in terms:
            if not any(_matches(n, term) for n in nodes):
                shown = f"{term[0]}={term[1]}" if term[1] is not None else term[0]
                raise UsageError(f"--nodes {shown}: no alive node has this label or id",
                                 "alive nodes: " + "; ".join(n.describe() for n in nodes))
        return [n for n in nodes if any(_matches(n, t) for t in terms) or (include_head and n.is_head)], []
    asked = [n for n in nodes if not n.is_head or n.gpus or include_head]
    return asked, [n for n in nodes if n not in asked]
