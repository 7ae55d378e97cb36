"""Drain reasons and the drain policy, as NHC and soperator keep them: envcheck's reasons start
with its own prefix, and envcheck resumes only a node whose reason carries it.

``Problem``
    One thing that makes this node not ready (or degraded): where (``gpu``, the NVML index; None
    for the node), the finding's id and the text the reason carries (the action, or for a
    GRES mismatch what differs).
``reason(problems)``
    ``envcheck: gpu3 ecc-uncorrected-volatile: ACTION`` for the first not-ready problem (in the
    order the hook found them: level 1's of the node, then by GPU, then GRES, then envs; the
    epilog's changes first), ``; +N more`` when there are others, on one line: control
    characters and runs of spaces made one space, cut to ``REASON_MAX`` characters. Slurm
    22.05 stores a reason whole (5,000 characters were kept) and ``sinfo -R`` shows it cut to
    its column: envcheck keeps its own short, so the slurmctld log and ``scontrol show node``
    keep it on one line. ``check_reason`` refuses anything else before it reaches ``scontrol``.
``decide(node, problems)``
    What to do (``Action``): drain a node that is not drained; change the reason of a node
    envcheck drained when the first problem changed; leave alone a node drained or down for
    another reason (an admin's, another tool's: never touched); resume a node envcheck drained
    once nothing is wrong; else nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from ..host.findings import Finding
    from .client import NodeState

PREFIX = "envcheck:"
REASON_MAX = 256
_LEADS = ("drain the node and ", "drain the node; ", "drain the node, ")  # said by draining it


@dataclass(frozen=True)
class Problem:
    id: str
    text: str
    gpu: int | None = None
    effect: str = "not-ready"
    measured: str | None = None

    @property
    def where(self) -> str:
        return "node" if self.gpu is None else f"gpu{self.gpu}"

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "id": self.id, "effect": self.effect, "measured": self.measured,
                "text": self.text}


def from_finding(finding: Finding) -> Problem:
    """A level-1 finding as a problem: its action (``undrained``)."""
    return Problem(finding.id, undrained(finding.action or finding.cause), finding.gpu, finding.effect,
                   finding.measured)


def undrained(action: str) -> str:
    """An action less its "drain the node and": the drain says it."""
    for lead in _LEADS:
        if action.startswith(lead):
            return action[len(lead):]
    return action


def one_line(text: str) -> str:
    """``text`` with every control character and run of white space made one space."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def reason(problems: Iterable[Problem]) -> str | None:
    """The drain reason for the not-ready ``problems`` (see the module docstring); None if none."""
    blocking = [p for p in problems if p.effect == "not-ready"]
    if not blocking:
        return None
    first = blocking[0]
    where = "" if first.gpu is None else f"gpu{first.gpu} "
    more = f"; +{len(blocking) - 1} more" if len(blocking) > 1 else ""
    head = f"{PREFIX} {where}{one_line(first.id)}: "
    body = one_line(first.text)
    room = REASON_MAX - len(head) - len(more)
    if len(body) > room:
        body = body[:room - 3].rstrip() + "..."
    return check_reason(head + body + more)


def check_reason(text: str) -> str:
    """``text`` if it is a reason envcheck may set; ValueError otherwise (a bug of envcheck's:
    the command fails, and drains nothing)."""
    if not text.startswith(PREFIX) or len(text) > REASON_MAX or not text.isprintable():
        raise ValueError(f"refusing a drain reason that is not envcheck's own one-line reason: {text[:80]!r}")
    return text


def is_ours(reason_text: str | None) -> bool:
    return bool(reason_text) and reason_text.startswith(PREFIX)


@dataclass(frozen=True)
class Action:
    kind: str  # drain | update | resume | leave | none
    reason: str | None  # the reason to set (drain, update)
    why: str

    @property
    def state(self) -> str | None:
        """The scontrol State= this action sets, if any."""
        return {"drain": "DRAIN", "update": "DRAIN", "resume": "RESUME"}.get(self.kind)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "state": self.state, "reason": self.reason, "why": self.why}


def decide(node: NodeState, problems: list[Problem]) -> Action:
    """What to do with ``node`` given its ``problems`` (see the module docstring)."""
    wanted = reason(problems)
    ours = is_ours(node.reason)
    if wanted is not None:
        if node.out_of_service and not ours:
            return Action("leave", None, f"the node is already {node.describe()}, set by "
                                         f"{node.reason_user or 'someone else'}: envcheck leaves it as it is")
        if node.drained and ours:
            if node.reason == wanted:
                return Action("none", None, "already drained by envcheck for this")
            return Action("update", wanted, f"drained by envcheck for another finding ({node.reason})")
        return Action("drain", wanted, "a not-ready finding")
    if node.out_of_service and ours:
        return Action("resume", None, f"every finding has cleared (drained by envcheck: {node.reason})")
    if node.out_of_service:
        return Action("none", None, f"the node is {node.describe()}, not by envcheck: left as it is")
    return Action("none", None, "nothing is wrong")
