"""One task per node, pinned to it; the answers collected within the deadline; nothing left
running on the nodes.

Each task (``tasks.node_task``, shipped by value) is a Ray streaming generator: its first
item says it started on the node, its second is the node's answer. It is pinned with
``NodeAffinitySchedulingStrategy(soft=False)``: it runs on that node or not at all. It
reserves no CPU (a diagnostic must not queue behind training jobs holding every CPU), no
retry (a second run elsewhere or later would not be this node's answer) and, where
``holds_gpus``, the node's GPUs as Ray counts them, so it doesn't collide with jobs already
holding them.

An outcome per node, in the order given:

- ``answered``: the node's answer (``tasks.answer``);
- ``busy``: holding GPUs, it had not started ``busy_after`` seconds after it was sent
  (other Ray work holds them); the task is cancelled;
- ``unreachable``: it never started: Ray could not place it on the node (the node died or
  left before it ran), or the deadline came first;
- ``lost``: it started, then the node or its worker died (Ray's error is the cause), or it
  gave no answer by the deadline (``timeout`` seconds after sending); it is cancelled.

Ctrl-C, SIGTERM or SIGHUP while waiting: every task still out is cancelled with
``force=True`` (Ray kills its worker; the worker's children, started under envcheck's guard,
die with it), then the interrupt goes on.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..processes import signals_interrupt
from . import tasks
from .cluster import Node

# How often the busy bound and the deadline are looked at while waiting. It delays no answer:
# ``ray.wait`` returns as soon as one is ready (measured: the driver has it about 1 ms after the
# task yields it), and every other one ready by then is taken in the same wake.
POLL_S = 0.5


@dataclass
class Outcome:
    node: Node
    state: str  # answered | busy | unreachable | lost
    answer: dict[str, Any] | None = None
    cause: str | None = None
    seconds: float | None = None


def dispatch(ray: Any, nodes: list[Node], command: str, args: list[str], environment: dict[str, str],
             *, timeout: float, holds_gpus: bool, busy_after: float | None,
             per_node: dict[str, dict[str, str]] | None = None, version: bool = True) -> list[Outcome]:
    """Run ``envcheck COMMAND ARGS --json`` on every node, ``environment`` laid over the node's
    (and ``per_node[node id]`` over that: a rank of a collective); one outcome per node.
    ``version`` False: the node's envcheck version is not asked (a fleet that asked already)."""
    from ray import cloudpickle
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    cloudpickle.register_pickle_by_value(tasks)
    remote = ray.remote(tasks.node_task)
    sent = time.monotonic()
    out: dict[Any, Node] = {}
    for node in nodes:
        gpus = node.gpus if holds_gpus else 0
        out[remote.options(
            num_cpus=0, num_gpus=gpus, max_retries=0, num_returns="streaming",
            name=f"envcheck fleet {command}",
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.id, soft=False),
        ).remote(command, list(args), {**environment, **(per_node or {}).get(node.id, {})}, timeout, gpus > 0,
                 version)] = node
    outcomes: dict[str, Outcome] = {}
    try:
        with signals_interrupt():
            _collect(ray, out, outcomes, sent, timeout, busy_after if holds_gpus else None)
    except BaseException:
        for task in out:
            ray.cancel(task, force=True)
        raise
    return [outcomes[n.id] for n in nodes]


def _collect(ray: Any, out: dict[Any, Node], outcomes: dict[str, Outcome], sent: float,
             timeout: float, busy_after: float | None) -> None:
    """Wait for the answers; ``out`` keeps the tasks still out, ``outcomes`` gets the rest."""
    started: set[str] = set()
    while out:
        elapsed = time.monotonic() - sent
        if elapsed >= timeout:
            break
        if busy_after is not None and elapsed >= busy_after:
            for task, node in list(out.items()):
                if node.id not in started and node.gpus:
                    ray.cancel(task, force=True)
                    del out[task]
                    outcomes[node.id] = Outcome(node, "busy", cause=(
                        f"its {node.gpus} GPU(s) are held by other Ray work: the task did not get "
                        f"them within --busy-after {busy_after:g} s"), seconds=round(elapsed, 3))
        ready, _ = ray.wait(list(out), num_returns=1, timeout=min(POLL_S, timeout - elapsed))
        if ready and len(out) > 1:  # the others ready by now too: one wait per wake, not per item
            ready, _ = ray.wait(list(out), num_returns=len(out), timeout=0)
        for task in ready:
            node = out[task]
            seconds = round(time.monotonic() - sent, 3)
            try:
                item = ray.get(next(task))
            except StopIteration:
                item, error = None, "the task ended without an answer"
            except ray.exceptions.RayError as exc:
                item, error = None, _cause(exc)
            if item == tasks.STARTED:
                started.add(node.id)
                continue
            del out[task]
            if item is not None:
                outcomes[node.id] = Outcome(node, "answered", answer=item, seconds=seconds)
            else:
                state = "lost" if node.id in started else "unreachable"
                outcomes[node.id] = Outcome(node, state, cause=error, seconds=seconds)
    for task, node in out.items():
        ray.cancel(task, force=True)
        state = "lost" if node.id in started else "unreachable"
        what = "gave no answer" if state == "lost" else "did not start"
        outcomes[node.id] = Outcome(node, state, cause=f"the task {what} within --timeout {timeout:g} s",
                                    seconds=round(time.monotonic() - sent, 3))
    out.clear()


def _cause(exc: BaseException) -> str:
    """Ray's error in one line: its type and first sentence (its advice on Ray's logs left out);
    for an exception the task raised, that exception."""
    exc = getattr(exc, "cause", None) or exc
    text = " ".join(str(exc).split())
    for cut in (". ", "\n"):
        if cut in text:
            text = text[:text.index(cut) + 1]
    return f"{type(exc).__name__}: {text[:300].rstrip('.')}"
