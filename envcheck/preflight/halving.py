"""The halving: when the collective across all nodes fails, is slow or doesn't finish in its share,
groups of the nodes are tested again until the node or the pair at fault is named, in at most
ceil(log2 N) + 1 collectives in all (the first one included).

A round tests groups that share no node, all at once (one dispatch). A ``Trial`` is bad when a
rank failed or gave no answer in the round's share, or, with ``--min-busbw``, when its bus
bandwidth is below that floor. A node in a passing group is proven good. Each group known to
hold a fault (a suspect) is split:

- one node: named (it failed beside nodes proven good, or alone);
- two nodes {a, b}: each tested with a node proven good ({a, g1} and {b, g2}; alone when none is
  free): a bad one is named (a node that gave no answer at all is named as lost); both bad,
  both; both good, the pair (the link between them);
- three or more: split in halves (a half of one node is tested with a free good node, else
  alone); a bad half is a suspect; both bad, both are; both good, the fault lies between the
  halves, and both halves are named together.

Suspects left when the rounds or the budget run out are named as they stand ("somewhere in").
Two nodes need 1 round after the first, three or four 2, N ceil(log2 N): within the bound.
Pure: the caller runs the tests (``run.collectives``).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Trial:
    nodes: tuple[str, ...]
    ok: bool
    why: str | None = None  # a bad test's first cause
    busbw: float | None = None  # GB/s, when measured
    seconds: float | None = None  # from sending its tasks to the last answer
    silent: tuple[str, ...] = ()  # its nodes that gave no answer at all

    def to_json(self) -> dict:
        return {"nodes": list(self.nodes), "ok": self.ok, "why": self.why, "busbw": self.busbw,
                "seconds": self.seconds, "silent": list(self.silent)}


@dataclass(frozen=True)
class Named:
    nodes: tuple[str, ...]
    kind: str  # node | pair | between | somewhere
    why: str
    silent: bool = False  # a node that gave no answer at all (lost)
    against: tuple[str, ...] = ()  # "between": the other half

    def to_json(self) -> dict:
        return {"nodes": list(self.nodes), "kind": self.kind, "why": self.why, "silent": self.silent,
                "against": list(self.against)}


@dataclass
class Halving:
    nodes: list[str]
    max_rounds: int
    rounds: list[list[Trial]] = field(default_factory=list)
    suspects: list[tuple[str, ...]] = field(default_factory=list)
    good: set[str] = field(default_factory=set)
    named: list[Named] = field(default_factory=list)
    _plan: list[tuple[tuple[str, ...], list[tuple[str, ...]]]] = field(default_factory=list)

    def first(self, test: Trial) -> None:
        """The collective across every node."""
        self.rounds.append([test])
        if test.ok:
            self.good |= set(test.nodes)
        else:
            self.suspects = [test.nodes]

    @property
    def done(self) -> bool:
        return not self.suspects

    def next_round(self) -> list[tuple[str, ...]]:
        """The groups to test next; [] when nothing is left to test or no round is left (the
        suspects left are then named as they stand)."""
        if not self.suspects:
            return []
        if len(self.rounds) >= self.max_rounds:
            self.give_up("the halving's rounds ran out")
            return []
        free = [n for n in self.nodes if n in self.good]
        self._plan = []
        for suspect in self.suspects:
            if len(suspect) == 1:
                self._plan.append((suspect, []))
                continue
            parts = [(n,) for n in suspect] if len(suspect) == 2 else [
                suspect[:(len(suspect) + 1) // 2], suspect[(len(suspect) + 1) // 2:]]
            self._plan.append((suspect, [part + ((free.pop(0),) if len(part) == 1 and free else ())
                                         for part in parts]))
        groups = [g for _, tests in self._plan for g in tests]
        if not groups:
            self._name_singles()
        return groups

    def record(self, tests: list[Trial]) -> None:
        """The round's outcomes, for the groups ``next_round`` gave (in any order)."""
        by_nodes = {t.nodes: t for t in tests}
        self.rounds.append(list(tests))
        for t in tests:
            if t.ok:
                self.good |= set(t.nodes)
        suspects: list[tuple[str, ...]] = []
        for suspect, groups in self._plan:
            if not groups:
                self._name(suspect, "node", "failed in the collective beside nodes proven good")
                continue
            parts = [tuple(n for n in g if n in suspect) for g in groups]
            results = [by_nodes[g] for g in groups]
            bad = [(part, r) for part, r in zip(parts, results) if not r.ok]
            if len(suspect) == 2:
                if not bad:
                    self._name(suspect, "pair", "each passes without the other, the two together fail: the link "
                               "between them")
                for part, r in bad:
                    self._name(part, "node", r.why or "failed", part[0] in r.silent)
            elif not bad:
                self.named.append(Named(parts[0], "between", "each half passes, the whole fails: a link between "
                                        "the halves", against=parts[1]))
            else:
                for part, r in bad:
                    if len(part) == 1:
                        self._name(part, "node", r.why or "failed", part[0] in r.silent)
                    else:
                        suspects.append(part)
        self.suspects = suspects
        self._name_singles()

    def _name_singles(self) -> None:
        for suspect in [s for s in self.suspects if len(s) == 1]:
            self._name(suspect, "node", "failed in the collective beside nodes proven good")
        self.suspects = [s for s in self.suspects if len(s) > 1]

    def _name(self, nodes: tuple[str, ...], kind: str, why: str, silent: bool = False) -> None:
        self.named.append(Named(nodes, kind, why, silent))

    def give_up(self, why: str) -> None:
        """Name the suspects left as they stand."""
        for suspect in self.suspects:
            self.named.append(Named(suspect, "somewhere", f"{why}: the fault is somewhere in these nodes"))
        self.suspects = []

    def to_json(self) -> dict:
        return {"max_rounds": self.max_rounds, "rounds": [[t.to_json() for t in r] for r in self.rounds],
                "named": [n.to_json() for n in self.named]}
