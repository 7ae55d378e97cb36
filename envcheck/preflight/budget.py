"""The budget (``--budget``): the whole preflight, from connecting to the last node's verdict
recorded, within it; each phase's share of it.

One round is what a verdict needs: the facts (every node at once), the probes (nodes that share
a machine in turn: as many turns as the busiest machine has nodes), one collective across the
nodes, and every node's verdict recorded. ``MINIMUM`` is what each phase takes on a small CPU
node (starting envcheck and the env's interpreter, importing the framework, the probes' samples:
3 probes x (a warm-up and a sizing call, then 5 samples of 0.2 s) on two ranks); a budget below
``smallest(turns)`` can't hold one round, and is refused before anything runs, with the
smallest that fits. The halving's rounds, when the collective fails, get what is left.

A phase's share (``Clock.share``) is the time left less what the phases after it need at
least: a phase that finishes early leaves its time to the next, a node that hangs costs only
its own phase. ``Clock.left`` is what remains of the budget.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

CONNECT_S = 3.0  # connecting to the cluster (Ray) or asking Slurm for the nodes
FACTS_S = 6.0  # the facts round: envcheck on every node (Ray: its first task starts a worker there)
TURN_S = 8.0  # one turn of probes (4 to 5 s on a 2-core CPU node here)
COLLECTIVE_S = 7.0  # one collective across the nodes (4 to 5 s for 4 CPU nodes on one 2-core machine)
RECORD_S = 3.0  # every node's verdict recorded
MINIMUM = {"connect": CONNECT_S, "facts": FACTS_S, "turn": TURN_S, "collective": COLLECTIVE_S,
           "record": RECORD_S}


def smallest(turns: int) -> float:
    """The smallest budget that holds one round with ``turns`` turns of probes."""
    return CONNECT_S + FACTS_S + turns * TURN_S + COLLECTIVE_S + RECORD_S


def halving_rounds(nodes: int) -> int:
    """The rounds after the first collective that the halving may take to name a fault:
    ceil(log2 N), so ceil(log2 N) + 1 collectives in all."""
    return max(1, math.ceil(math.log2(max(nodes, 2))))


@dataclass
class Clock:
    budget: float
    started: float = field(default_factory=time.monotonic)

    @property
    def deadline(self) -> float:
        return self.started + self.budget

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def share(self, later: float) -> float:
        """This phase's timeout: what is left less ``later``, what the phases after it need."""
        return self.left() - later
