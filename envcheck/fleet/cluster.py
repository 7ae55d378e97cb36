"""The Ray cluster as envcheck sees it: Ray imported, the cluster connected, its alive nodes,
and the ones a command asks.

The address (``--address``, else ``RAY_ADDRESS``, else ``auto``) is resolved and checked by
``address``: no Ray cluster there, or something else answering, is a UsageError (exit 2)
saying what answered and how to start a cluster. A Ray driver attaches to the raylet of the
machine it runs on: run ``envcheck fleet`` on a node of the cluster (Ray Client, ``ray://``,
is not supported: it was not tested).

Which nodes: every alive node, the head only when Ray counts GPUs on it or with
``include_head``. ``--nodes`` is a comma-separated list of terms, each ``KEY=VALUE`` (a node
label, as given to ``ray start --labels``; Ray adds ``ray.io/node-id`` and
``ray.io/accelerator-type``) or a node id or its prefix; a node matching any term is asked,
the head included. A term that matches no alive node is a UsageError listing the nodes.
"""
from __future__ import annotations

import gc
import sys
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError

INSTALL = "pip install 'envcheck[fleet]' (it installs Ray)"
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
    from . import address  # here: the Slurm engine, which shares Node, never pays for it

    address.bound_ray_connect()  # read by Ray as it is imported
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
    """A node as its engine knows it: a Ray node (its id, ``ray.nodes()``'s facts) or a Slurm
    node (``engine`` "slurm": its name as id, its ``Gres`` count and type, its state and reason
    as ``sinfo`` says them)."""
    id: str
    address: str
    labels: dict[str, str] = field(default_factory=dict)
    gpus: int = 0  # as the engine counts them (Ray reads NVML when the node starts; Slurm, its Gres=)
    accelerator_type: str | None = None
    is_head: bool = False
    engine: str = "ray"
    state: str | None = None  # Slurm's
    reason: str | None = None  # Slurm's, when it has one

    @property
    def short_id(self) -> str:
        """A Ray node id's first 8 characters; a Slurm node's name."""
        return self.id[:8] if self.engine == "ray" else self.id

    @property
    def own_labels(self) -> dict[str, str]:
        """The labels the node was started with (Ray's own ``ray.io/*`` left out)."""
        return {k: v for k, v in self.labels.items() if not k.startswith(RAY_LABELS)}

    def describe(self) -> str:
        labels = ",".join(f"{k}={v}" for k, v in self.own_labels.items())
        return f"{self.short_id} {self.address}" + (f" ({labels})" if labels else "")

    def left_out_why(self) -> str:
        """Why the fleet asked it nothing: the head without GPUs, or Slurm's state and reason."""
        if self.engine == "slurm":
            return f"{self.state} in Slurm" + (f": {self.reason}" if self.reason else "") + " (srun runs nothing there)"
        return "the head node has no GPUs (--include-head asks it)"

    def to_json(self) -> dict[str, Any]:
        return {"node_id": self.id, "address": self.address, "labels": dict(self.labels),
                "head": self.is_head, "engine": self.engine, "gpus": self.gpus,
                "ray_gpus": self.gpus if self.engine == "ray" else None,
                "accelerator_type": self.accelerator_type, "state": self.state, "reason": self.reason}


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

def connect(ray: Any, given: str | None) -> str:
    """Connect this process to the cluster as a driver; the address connected to. What
    answers there is asked first (``address``): Ray's connect is left only what may be Ray."""
    import logging

    from . import address

    target = address.resolve(given)
    address.check(target)
    try:
        with address.stderr_kept():
            ray.init(address=target.bootstrap, logging_level=logging.ERROR, log_to_driver=False,
                     namespace="envcheck-fleet")
    except ConnectionError:
        raise UsageError(f"no Ray cluster at {target}: a gRPC server answers there, but Ray could not "
                         f"connect to it as a cluster (Ray tries {address.ray_connect_bound()})",
                         address.GCS_PORT) from None
    except (RuntimeError, ValueError) as exc:
        raise UsageError(f"can't connect to the Ray cluster at {target}: {_first_line(exc)}",
                         address.START) from None
    return target.bootstrap


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
