"""The fleet's Slurm engine: the nodes asked, one ``srun`` step with one task on each, and each
node's answer read from the step's labelled output, as ``dispatch`` gives Ray's: an ``Outcome``
per node, for the one aggregation (``aggregate``).

Which nodes (``select``): inside an allocation (``SLURM_JOB_ID``; ``salloc``, ``sbatch``) its
nodes (``--nodelist``: those of them), in a step of that job; else those of ``--partition``
and/or ``--nodelist`` (``sinfo``), in a job of their own. Outside an allocation a node that is
drained, down or not responding runs nothing (srun would wait for it): it is left out, with its
state and its reason from ``sinfo``. Neither inside nor given a partition or node list: bad input.

The step (``srun --ntasks-per-node=1 --label``) runs a wrapper of a few shell lines on each
node: it says the node's name (``SLURMD_NODENAME``) and host, runs the node's ``envcheck
COMMAND ARGS --json`` (the ``envcheck`` on the PATH srun gives its tasks) and says its exit
status; the node's envcheck writes its version first on stderr (``results.VERSION_VARIABLE``),
so nothing else starts on the node. A step of a command that holds no GPU overlaps the job's
other steps (``--overlap``: a diagnostic must not queue behind training); one that holds GPUs
(``validate``, ``provision``) gets the job's, or in a job of its own ``--gres=gpu:N`` (the
nodes must then have one count), and waits for them at most ``busy_after`` (``--immediate``).

Outcomes: ``answered`` (it said its exit status); ``lost`` (it started, then gave no status:
the deadline came, or its task died); ``unreachable`` (it never started: srun could not launch
there, with srun's words); ``busy`` (srun could not get the nodes within ``busy_after``). At the
deadline srun is stopped (SIGTERM, which ends the step, then SIGKILL).
"""
from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import Any, Callable, Mapping

from .. import processes
from ..errors import UsageError
from ..results import VERSION_LINE, VERSION_VARIABLE
from ..slurm import client
from ..slurm.gresconf import parse_gres
from ..slurm.names import expand
from ..slurm.reading import started
from .cluster import Node
from .dispatch import Outcome
from .tasks import host_of, last_line, parse_document

MARK = "@envcheck-"
WRAPPER = (f'printf "%s\\n" "{MARK}node $SLURMD_NODENAME $(uname -n)"; '
           f'found=$(command -v "$1") || {{ echo "{MARK}missing $1 $PATH"; exit 127; }}; '
           f'echo "{MARK}path $found"; "$@"; echo "{MARK}exit $?"')
# Variables of one node's task (``per_node``: a rank of a collective): ``NODE_VARS`` holds a line
# ``NAME VAR=VALUE...`` per node, and the wrapper exports its node's; values are words (no space,
# quote or shell character: ``SAFE_VALUE``), so ``export "$kv"`` is all the shell does with them.
NODE_VARS = "ENVCHECK_NODE_VARS"
PER_NODE = (f'for kv in $(printf "%s\\n" "${NODE_VARS}" | awk -v n="$SLURMD_NODENAME" '
            f"'$1 == n {{for (i = 2; i <= NF; i++) print $i}}'); do export \"$kv\"; done; ")
SAFE_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
SAFE_VALUE = re.compile(r"[A-Za-z0-9_.:,=/+@-]*")
LABEL = re.compile(r"^\s*(\d+): ?(.*)$")
LAUNCH_FAILED = re.compile(r"failed on node (\S+?):? (.*)$")
INSTALL_FIX = "install envcheck on that node, on the PATH srun gives its tasks (this envcheck's PATH)"


def select(environ: Mapping[str, str], partition: str | None,
           nodelist: str | None) -> tuple[str, list[Node], list[Node], Callable[[float], list | None] | None]:
    """(where: the allocation or what was given, the nodes to ask, the nodes left out, and inside
    an allocation the ``sinfo`` of its nodes begun beside the step: their GPUs and state, which
    decide nothing there; call it with the seconds to wait)."""
    job = environ.get("SLURM_JOB_ID")
    if job and partition:
        raise UsageError(f"--partition {partition}: inside allocation {job} the fleet runs on its nodes",
                         "drop --partition (--nodelist picks nodes of the allocation), or run outside it")
    if not job and not (partition or nodelist):
        raise UsageError("not inside a Slurm allocation (no SLURM_JOB_ID), and neither --partition nor --nodelist given",
                         "run it inside salloc or sbatch, or give --partition or --nodelist")
    if job:
        allocated = expand(environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST") or "",
                           "SLURM_JOB_NODELIST")
        wanted = expand(nodelist, "--nodelist") if nodelist else allocated
        outside = [n for n in wanted if n not in allocated]
        if outside:
            raise UsageError(f"--nodelist: {', '.join(outside)} not in allocation {job} ({', '.join(allocated)})",
                             "name nodes of the allocation, or run outside it")
        client.tool("srun", environ)
        facts = started(lambda: client.nodes(environ, nodelist=",".join(wanted)))
        return f"slurm job {job}", [Node(n, n, engine="slurm") for n in wanted], [], facts
    states = client.nodes(environ, partition=partition, nodelist=nodelist)
    if nodelist:
        unknown = [n for n in expand(nodelist, "--nodelist") if n not in {s.name for s in states}]
        if unknown:
            raise UsageError(f"--nodelist: Slurm knows no node {', '.join(unknown)}"
                             + (f" in partition {partition}" if partition else ""), "see `sinfo --Node`")
    if not states:
        raise UsageError(f"--partition {partition}: Slurm lists no node in it", "see `sinfo`")
    where = " ".join(f"{flag} {value}" for flag, value in (("partition", partition), ("nodes", nodelist)) if value)
    out = [s for s in states if s.out_of_service or "not-responding" in s.flags]
    return f"slurm {where}", [_node(s) for s in states if s not in out], [_node(s) for s in out], None


def survey(environ: Mapping[str, str], partition: str | None, nodelist: str | None, command: str,
           args: list[str], environment: dict[str, str], *, timeout: float, holds_gpus: bool,
           busy_after: float) -> tuple[str, list[Outcome], list[Node]]:
    """(where, an outcome per node asked, the nodes left out): ``select``, then one step."""
    where, asked, left_out, facts = select(environ, partition, nodelist)
    outcomes = dispatch_srun(environ, asked, command, args, environment, timeout=timeout, holds_gpus=holds_gpus,
                             partition=partition, busy_after=busy_after) if asked else []
    try:
        known = {s.name: _node(s) for s in (facts(client.READ_TIMEOUT) or [])} if facts else {}
    except UsageError:  # the nodes' GPUs and state only, inside an allocation: the answers stand without them
        known = {}
    return where, [replace(o, node=known.get(o.node.id, o.node)) for o in outcomes], left_out


def _node(state: client.NodeState) -> Node:
    gpus = [g for g in parse_gres(state.gres) if g.name == "gpu"]
    kinds = sorted({g.type for g in gpus if g.type})
    labels = {"slurm.partition": ",".join(state.partitions)} if state.partitions else {}
    word = "+".join([state.state, *sorted(state.flags)])
    return Node(state.name, state.address or state.name, labels, sum(g.count for g in gpus),
                ",".join(kinds) or None, engine="slurm", state=word, reason=state.reason)


def node_vars(per_node: dict[str, dict[str, str]]) -> str:
    """``NODE_VARS``'s value: a line per node; a name or value the wrapper can't pass as a word
    is a ValueError (the fleet makes them: ranks, addresses, ports)."""
    lines = []
    for node, variables in per_node.items():
        for name, value in variables.items():
            if not SAFE_NAME.fullmatch(name) or not SAFE_VALUE.fullmatch(value):
                raise ValueError(f"node {node}'s variable {name}={value!r} can't be passed to its task")
        lines.append(" ".join([node, *(f"{k}={v}" for k, v in variables.items())]))
    return "\n".join(lines)


def step_argv(nodes: list[Node], command: str, args: list[str], *, inside: bool, holds_gpus: bool,
              partition: str | None, busy_after: float, per_node: bool = False) -> list[str]:
    """The srun line (see the module docstring); ``per_node``: each task exports its node's
    variables (``NODE_VARS``) first."""
    argv = ["srun", f"--nodes={len(nodes)}", "--ntasks-per-node=1", f"--nodelist={','.join(n.id for n in nodes)}",
            "--label", "--kill-on-bad-exit=0", f"--job-name=envcheck-fleet-{command}",
            f"--export=ALL,{VERSION_VARIABLE}=1"]
    if inside:
        argv += [] if holds_gpus else ["--overlap"]
    else:
        argv += [f"--partition={partition}"] if partition else []
        argv += [f"--immediate={max(int(busy_after), 1)}"]
        if holds_gpus:
            counts = {n.gpus for n in nodes}
            if len(counts) > 1:
                raise UsageError(f"the nodes have different GPU counts ({', '.join(f'{n.id}: {n.gpus}' for n in nodes)}) "
                                 f"and a job of its own asks each the same", "run it inside an allocation (salloc "
                                 "--gres=gpu:N) or pick nodes with one count (--nodelist)")
            argv += [f"--gres=gpu:{counts.pop()}"] if counts and max(counts) > 0 else []
    return argv + ["sh", "-c", (PER_NODE if per_node else "") + WRAPPER, "envcheck-node", "envcheck", command, *args,
                   "--json"]


def dispatch_srun(environ: Mapping[str, str], nodes: list[Node], command: str, args: list[str],
                  environment: dict[str, str], *, timeout: float, holds_gpus: bool, partition: str | None,
                  busy_after: float, per_node: dict[str, dict[str, str]] | None = None) -> list[Outcome]:
    """One step on ``nodes``; an outcome per node, in their order; ``per_node``: {node: its
    task's own variables} (``node_vars``)."""
    inside = bool(environ.get("SLURM_JOB_ID"))
    argv = step_argv(nodes, command, args, inside=inside, holds_gpus=holds_gpus, partition=partition,
                     busy_after=busy_after, per_node=bool(per_node))
    env = {**environ, **environment, **({NODE_VARS: node_vars(per_node)} if per_node else {})}
    started = time.monotonic()
    with processes.signals_interrupt():
        done = client.run(argv, env, timeout)
    return outcomes(nodes, done, round(time.monotonic() - started, 3), timeout, busy_after)


def outcomes(nodes: list[Node], done: processes.Completed, seconds: float, timeout: float,
             busy_after: float) -> list[Outcome]:
    """Each node's outcome from the step's labelled output (see the module docstring)."""
    tasks: dict[str, dict[str, Any]] = {}
    for stream, text in (("out", done.stdout), ("err", done.stderr)):
        for line in text.splitlines():
            found = LABEL.match(line)
            if found:
                tasks.setdefault(found.group(1), {"out": [], "err": []})[stream].append(found.group(2))
    said = [line for line in done.stderr.splitlines() if not LABEL.match(line)]
    by_node = {}
    for task in tasks.values():
        head = next((line for line in task["out"] if line.startswith(f"{MARK}node ")), None)
        if head is not None:
            by_node[head.split()[1] if len(head.split()) > 1 else ""] = task
    failed = {m.group(1): m.group(2) for m in map(LAUNCH_FAILED.search, said) if m}
    whole = last_line("\n".join(line for line in said if "error" in line)) if said else None
    return [_outcome(n, by_node.get(n.id), failed.get(n.id), whole, done, seconds, timeout, busy_after)
            for n in nodes]


def _outcome(node: Node, task: dict | None, launch: str | None, whole: str | None,
             done: processes.Completed, seconds: float, timeout: float, busy_after: float) -> Outcome:
    if task is None:
        if done.timed_out:
            return Outcome(node, "unreachable", cause=f"the step did not start there within --timeout {timeout:g} s",
                           seconds=seconds)
        if whole and ("busy" in whole.lower() or "immediate" in whole.lower()):
            return Outcome(node, "busy", cause=f"srun could not get the node within --busy-after {busy_after:g} s: "
                                               f"{whole}", seconds=seconds)
        cause = launch or whole or f"srun exited {done.returncode} without starting a task there"
        return Outcome(node, "unreachable", cause=cause, seconds=seconds)
    marks = {line.split()[0][len(MARK):]: line.split(" ", 1)[1] if " " in line else ""
             for line in task["out"] if line.startswith(MARK)}
    if "exit" not in marks and "missing" not in marks:
        why = f"gave no answer within --timeout {timeout:g} s" if done.timed_out else "ended without an exit status"
        return Outcome(node, "lost", cause=f"its envcheck started, then {why}", seconds=seconds)
    return Outcome(node, "answered", answer=_answer(task, marks, node), seconds=seconds)


def _answer(task: dict, marks: dict[str, str], node: Node) -> dict[str, Any]:
    """The node's answer, in ``tasks.answer``'s shape."""
    code = marks.get("exit", "").strip()
    code = int(code) if code.lstrip("-").isdigit() else None
    host = marks["node"].split()[1] if len(marks["node"].split()) > 1 else None
    path = marks.get("path")
    version = next((line[len(VERSION_LINE):].strip() for line in task["err"] if line.startswith(VERSION_LINE)), None)
    errors = [line for line in task["err"] if not line.startswith(VERSION_LINE)]
    reply = {"hostname": host, "python": f"the Python of {path}" if path else None, "envcheck": path,
             "installed": True, "version": version, "exit_code": code, "timed_out": False, "document": None,
             "host": None, "error": last_line("\n".join(errors))}
    if "missing" in marks:
        where = marks["missing"].split(" ", 1)
        return {**reply, "installed": False, "exit_code": 127, "fix": INSTALL_FIX,
                "error": f"envcheck is not installed on node {node.id}: no `{where[0]}` on the PATH srun gives its "
                         f"tasks ({where[1] if len(where) > 1 else ''})"}
    document_lines = [line for line in task["out"] if not line.startswith(MARK)]
    reply["document"], bad = parse_document("\n".join(document_lines))
    reply["error"] = reply["error"] or bad
    reply["host"] = host_of(reply["document"])
    return reply

