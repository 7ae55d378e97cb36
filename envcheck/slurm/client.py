"""Slurm's own commands, run by envcheck: ``scontrol`` and ``sinfo``, each a bounded child
(``processes.run``: its own process group, a deadline, stopped whole), argv only, never a
shell.

What can go wrong outside envcheck is said in one line naming it, as bad input (UsageError,
exit 2: nothing was changed): no ``scontrol`` on PATH (not inside Slurm), a node Slurm doesn't
know, a slurmctld that doesn't answer within the deadline or that ``scontrol`` can't reach.
A change Slurm refuses (``scontrol update`` exiting non-zero) is an OperationError (exit 1).

``show_node`` reads one node (``scontrol show node NAME --oneliner``): its state flags, its
reason and who set it, its ``Gres``. ``nodes`` reads many (``sinfo --Node``) for the fleet.
``update`` drains or resumes a node; ``update_argv`` is the line it runs (``--dry-run``).
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from typing import Mapping

from .. import processes
from ..errors import OperationError, UsageError
from .names import node_name

READ_TIMEOUT = 10.0  # seconds a read may take when the caller gives no budget of its own
UPDATE_TIMEOUT = 10.0
NOT_INSIDE = ("run it on a node of a Slurm cluster, with Slurm's commands on PATH "
              "(the wrapper slurm.conf names can set PATH and SLURM_CONF)")
_STAMP = re.compile(r" \[([^\]@\s]*)@([0-9T:-]+)\]")  # the reason's " [user@time]" as scontrol shows it
_KEY = re.compile(r"(?:^| )([A-Z][A-Za-z]*)=")


@dataclass(frozen=True)
class NodeState:
    """A node as Slurm has it: ``state`` the base state (idle, mixed, allocated, down...),
    ``flags`` what is added to it (drain, not-responding, ...), the reason and who set it."""
    name: str
    state: str
    flags: frozenset[str] = frozenset()
    reason: str | None = None
    reason_user: str | None = None
    reason_time: str | None = None
    gres: str = ""
    address: str | None = None
    partitions: tuple[str, ...] = ()

    @property
    def drained(self) -> bool:
        """Drained or draining: Slurm gives it no new job."""
        return "drain" in self.flags or self.state in ("drained", "draining")

    @property
    def down(self) -> bool:
        return self.state in ("down", "fail", "failing") or "fail" in self.flags

    @property
    def out_of_service(self) -> bool:
        return self.drained or self.down

    def describe(self) -> str:
        word = "+".join([self.state, *sorted(self.flags)])
        return f"{word}: {self.reason}" if self.reason else word

    def to_json(self) -> dict:
        return {"name": self.name, "state": self.state, "flags": sorted(self.flags),
                "drained": self.drained, "down": self.down, "reason": self.reason,
                "reason_user": self.reason_user, "reason_time": self.reason_time, "gres": self.gres}


def tool(name: str, environ: Mapping[str, str]) -> str:
    """The path of Slurm's command ``name`` on ``environ``'s PATH (the default path without
    one, as exec searches it); not inside Slurm without it."""
    found = shutil.which(name, path=environ.get("PATH") or os.defpath)
    if found is None:
        raise UsageError(f"not inside Slurm: no `{name}` on PATH ({environ.get('PATH') or os.defpath})",
                         NOT_INSIDE)
    return found


def run(argv: list[str], environ: Mapping[str, str], timeout: float) -> processes.Completed:
    """Run Slurm command ``argv`` (its first word found on PATH) within ``timeout`` seconds."""
    command = [tool(argv[0], environ), *argv[1:]]
    try:
        return processes.run(command, timeout=timeout, bound=timeout, env=processes.clean_environ(base=environ),
                             grace=0.5)
    except OSError as exc:
        raise UsageError(f"can't run {command[0]}: {exc.strerror or exc}", NOT_INSIDE) from None


def _refused(done: processes.Completed, argv: list[str], timeout: float) -> str | None:
    """Why ``argv`` gave no answer: its deadline, or what it said; None when it answered."""
    if done.timed_out:
        return f"`{' '.join(argv)}` got no answer from slurmctld within {timeout:g} s"
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())[:300]
        return f"`{' '.join(argv)}` failed: {said or f'exit status {done.returncode}'}"
    return None


def show_node(name: str, environ: Mapping[str, str], timeout: float = READ_TIMEOUT) -> NodeState:
    """Node ``name`` as slurmctld has it (see the module docstring)."""
    argv = ["scontrol", "show", "node", node_name(name, "node"), "--oneliner"]
    done = run(argv, environ, timeout)
    why = _refused(done, argv, timeout)
    if why is not None and "not found" in why:
        raise UsageError(f"Slurm knows no node {name!r}: {why}",
                         "name the node as slurm.conf does (SLURMD_NODENAME, or slurmd -N NAME)")
    if why is not None:
        raise UsageError(f"can't read node {name} from Slurm: {why}",
                         "check that slurmctld runs and answers (`scontrol ping`), and SLURM_CONF")
    return parse_node(done.stdout.strip().splitlines()[0] if done.stdout.strip() else "", name)


def parse_node(line: str, name: str) -> NodeState:
    """One ``scontrol show node --oneliner`` line: its reason (with its ``[user@time]``) is cut
    off first, as it may hold spaces and ``=``; the other fields are ``Key=value``."""
    reason = user = stamp = None
    head, found, tail = line.partition(" Reason=")
    if found:
        stamps = list(_STAMP.finditer(tail))
        last = stamps[-1] if stamps else None
        reason = (tail[:last.start()] if last else tail).strip() or None
        user, stamp = (last.group(1), last.group(2)) if last else (None, None)
    keys = list(_KEY.finditer(head))
    fields = {m.group(1): head[m.end():keys[i + 1].start() if i + 1 < len(keys) else len(head)].strip()
              for i, m in enumerate(keys)}
    if fields.get("NodeName") != name:
        raise UsageError(f"Slurm knows no node {name!r}: scontrol answered {line[:120]!r}",
                         "name the node as slurm.conf does (SLURMD_NODENAME, or slurmd -N NAME)")
    state, flags = parse_state(fields.get("State", "unknown"))
    return NodeState(name, state, flags, reason, user, stamp, _none(fields.get("Gres")),
                     fields.get("NodeAddr"), tuple(p for p in fields.get("Partitions", "").split(",") if p))


def parse_state(text: str) -> tuple[str, frozenset[str]]:
    """``IDLE+DRAIN`` -> (idle, {drain}); ``DOWN*`` -> (down, {not-responding}); sinfo's
    ``drained*`` alike."""
    words = text.strip().lower().split("+")
    base, flags = words[0], {w.replace("_", "-") for w in words[1:] if w}
    if base.endswith(("*", "~", "#", "!", "%", "$", "@", "^", "-")):
        if base.endswith("*"):
            flags.add("not-responding")
        base = base.rstrip("*~#!%$@^-")
    return base or "unknown", frozenset(flags)


def _none(value: str | None) -> str:
    return "" if value in (None, "(null)", "N/A") else value


def nodes(environ: Mapping[str, str], *, partition: str | None = None, nodelist: str | None = None,
          timeout: float = READ_TIMEOUT) -> list[NodeState]:
    """The nodes of ``partition`` and/or ``nodelist`` (every node without either) as ``sinfo``
    lists them, once each, in sinfo's order, with their partitions merged."""
    argv = ["sinfo", "--noheader", "--Node", "--format", "%N|%T|%G|%o|%P|%u|%H|%E"]
    argv += (["--partition", partition] if partition else []) + (["--nodes", nodelist] if nodelist else [])
    done = run(argv, environ, timeout)
    why = _refused(done, argv, timeout)
    if why is not None:
        raise UsageError(f"can't list Slurm's nodes: {why}",
                         "check --partition and --nodelist, and that slurmctld answers (`scontrol ping`)")
    found: dict[str, NodeState] = {}
    for line in done.stdout.splitlines():
        parts = line.split("|", 7)
        if len(parts) < 8:
            continue
        name, state_text, gres, address, part, user, stamp, reason = parts
        state, flags = parse_state(state_text)
        reason = None if reason.strip() in ("", "none") else reason.strip()
        known = found.get(name)
        partitions = (*(known.partitions if known else ()), part.rstrip("*"))
        found[name] = NodeState(name, state, flags, reason, _none(user) or None if reason else None,
                                _none(stamp) or None if reason else None, _none(gres), address, partitions)
    return list(found.values())


def update_argv(name: str, state: str, reason: str | None = None) -> list[str]:
    """``scontrol update NodeName=NAME State=STATE [Reason=REASON]``: each an argv element."""
    argv = ["scontrol", "update", f"NodeName={node_name(name, 'node')}", f"State={state}"]
    return argv + ([f"Reason={reason}"] if reason is not None else [])


def update(name: str, state: str, reason: str | None, environ: Mapping[str, str],
           timeout: float = UPDATE_TIMEOUT) -> None:
    """Set node ``name``'s state (DRAIN with ``reason``, or RESUME); an OperationError when
    Slurm refuses or doesn't answer."""
    argv = update_argv(name, state, reason)
    done = run(argv, environ, timeout)
    why = _refused(done, argv[:4], timeout)
    if why is not None:
        raise OperationError(f"Slurm did not set node {name} to {state}: {why}",
                             "envcheck must run as root or SlurmUser to drain and resume nodes")
