"""``envcheck slurm healthcheck``: the node's health for Slurm's ``HealthCheckProgram``, acted on.

The steps, each bounded by what is left of ``budget`` (default 20 s, at most ``BUDGET_MAX``,
well under the 60 s after which slurmd kills the program):

1. this node's name (``SLURMD_NODENAME``, else the short host name) and its state in Slurm
   (``scontrol show node``), and gres.conf: an unknown node, a slurmctld that doesn't answer,
   a malformed gres.conf or no Slurm here is bad input: exit 2, nothing drained;
2. level-1 health of every GPU (``slurm.reading``, begun while Slurm is asked: a read that
   doesn't finish is a not-ready finding), the GRES consistency of the node (``slurm.gres``), and with ``envs`` the gate of
   each of those envs (``usecases.gate.check``; not ready: a not-ready problem);
3. the decision (``slurm.reasons.decide``) and, unless ``dry_run``, the ``scontrol update``
   that carries it out, last: an error of envcheck's own before it drains nothing.

A degraded finding drains nothing: it is written to the system log (``slurm.journal``), as every
drain and resume is. Exit 0 when nothing is not ready, 1 when something is (the node drained,
or left drained by someone else).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from ..errors import OperationError, UsageError
from ..paths import Home
from ..results import Result
from ..slurm import client, gresconf, journal, names
from ..slurm.gres import GresCheck, compare, seen_gpus
from ..slurm.reading import problems_of, read_level1, timeout_problem, within
from ..slurm.reasons import Action, Problem, decide

DEFAULT_BUDGET = 20.0
BUDGET_MAX = 50.0  # slurmd kills a health check after 60 s
KILLED_AFTER = 60.0


def budget_of(seconds: float, default_max: float = BUDGET_MAX) -> float:
    """A hook's budget, well under Slurm's kill; more is bad input."""
    if seconds > default_max:
        raise UsageError(f"--budget {seconds:g}: more than {default_max:g} s",
                         f"slurmd kills a health check after {KILLED_AFTER:g} s: give at most {default_max:g}")
    return seconds


class Clock:
    """What is left of a budget."""

    def __init__(self, budget: float):
        self.budget, self.start = budget, time.monotonic()

    def left(self, keep: float = 0.0) -> float:
        return max(self.budget - (time.monotonic() - self.start) - keep, 0.1)

    def spent(self) -> float:
        return round(time.monotonic() - self.start, 3)


@dataclass
class NodeCheck(Result):
    """What a Slurm hook found and did on this node; ``healthcheck``'s, and the base of the
    prolog's and epilog's (``slurm_jobs``)."""
    schema: ClassVar[str] = "envcheck.slurm.healthcheck/1"
    node: str
    node_from: str
    slurm: client.NodeState
    budget: float
    problems: list[Problem] = field(default_factory=list)
    action: Action | None = None
    argv: list[str] | None = None
    dry_run: bool = False
    done: bool = False  # the scontrol update ran
    gres: GresCheck | None = None
    seconds: float | None = None
    health_verdict: str | None = None  # level 1's, None when not read in time

    @property
    def blocking(self) -> list[Problem]:
        return [p for p in self.problems if p.effect == "not-ready"]

    @property
    def degraded(self) -> list[Problem]:
        return [p for p in self.problems if p.effect == "degraded"]

    @property
    def exit_code(self) -> int:
        return 1 if self.blocking else 0

    def body(self) -> dict[str, Any]:
        return {"node": self.node, "node_from": self.node_from, "slurm": self.slurm.to_json(),
                "budget_s": self.budget, "seconds": self.seconds, "health": self.health_verdict,
                "ready": not self.blocking, "problems": [p.to_json() for p in self.problems],
                "action": self.action.to_json() if self.action else None,
                "scontrol": self.argv, "dry_run": self.dry_run, "done": self.done,
                "gres": self.gres.to_json() if self.gres else None}


def read_node(environ: Mapping[str, str], clock: Clock) -> tuple[str, str, client.NodeState]:
    """(this node's name, where it came from, its state in Slurm): bad input if Slurm isn't here
    or doesn't know it."""
    node, source = names.this_node(environ)
    client.tool("scontrol", environ)
    return node, source, client.show_node(node, environ, timeout=min(client.READ_TIMEOUT, clock.left() / 3))


def act(check: NodeCheck, environ: Mapping[str, str], clock: Clock, *, may_resume: bool = True) -> NodeCheck:
    """Decide, then (unless a dry run) run the ``scontrol update`` and log it."""
    action = decide(check.slurm, check.problems)
    if action.kind == "resume" and not may_resume:
        action = Action("none", None, "a job hook resumes no node: the health check does, once every finding cleared")
    check.action = action
    if action.state is not None:
        check.argv = client.update_argv(check.node, action.state, action.reason)
        if not check.dry_run:
            client.update(check.node, action.state, action.reason, environ, timeout=max(clock.left(), 2.0))
            check.done = True
            journal.log(f"node {check.node}: {' '.join(check.argv[2:])} ({action.why})", warning=True)
    elif action.kind == "leave":
        journal.log(f"node {check.node}: not ready ({check.blocking[0].id}), {action.why}", warning=True)
    for problem in check.degraded:
        journal.log(f"node {check.node}: degraded, {problem.where} {problem.id}: {problem.measured or ''} "
                    f"({problem.text})")
    check.seconds = clock.spent()
    return check


def healthcheck(home: Home, environ: Mapping[str, str], *, budget: float = DEFAULT_BUDGET,
                envs: tuple[str, ...] = (), check_envs: bool = False, dry_run: bool = False,
                gres_conf: str | None = None) -> NodeCheck:
    """Check this node and drain or resume it (see the module docstring)."""
    clock = Clock(budget_of(budget))
    reading = read_level1(environ)  # while Slurm is asked; a bad answer below abandons it
    node, source, state = read_node(environ, clock)
    conf = gresconf.load(gres_conf, environ)
    check = NodeCheck(node, source, state, budget, dry_run=dry_run)
    report = reading(clock.left(keep=min(5.0, budget / 4)))
    if report is None:
        check.problems.append(timeout_problem(round(clock.spent(), 1)))
        return act(check, environ, clock)
    check.health_verdict = report.verdict
    check.problems += problems_of(report)
    check.gres = compare(node, state.gres, conf, seen_gpus(report))
    check.problems += check.gres.problems
    if envs or check_envs:
        check.problems += env_problems(home, report, envs, check_envs, clock)
    return act(check, environ, clock)


def env_problems(home: Home, report: Any, envs: tuple[str, ...], every: bool, clock: Clock) -> list[Problem]:
    """The gate of each env (every env of the home with ``every``), within what is left of the
    budget: not ready, a not-ready problem; degraded, a degraded one; no answer in time, a
    degraded one (the gate had to validate: validate the env beforehand)."""
    from .gate import check
    from .session import Session

    session = Session(home, health=report)
    wanted = list(envs) + [e.name for e in session.store.list() if every and e.name not in envs]
    for name in envs:
        session.store.get(name)  # an unknown env is bad input, before any gate runs
    found = []
    for name in wanted:
        left = clock.left(keep=min(5.0, clock.budget / 4))
        try:
            result = within(left, lambda: check(session, name))
        except OperationError as exc:  # the gate could not judge it (no env to use, a broken env): not ready
            found.append(Problem(f"env-{name}", f"env {name}: {exc}", None, "not-ready", exc.message))
            continue
        if result is None:
            found.append(Problem(f"env-{name}", f"env {name}: the gate gave no answer within {left:.1f} s; fix: "
                                 f"validate it beforehand (envcheck validate {name}) so the gate answers from "
                                 "the stored validation", None, "degraded", "no answer in time"))
            break  # the thread still runs the gate: no second one beside it
        answer = result.envelope()
        if answer["verdict"] in ("not-ready", "degraded"):
            text = f"env {name}: {answer['problem']}" + (f"; fix: {answer['fix']}" if answer.get("fix") else "")
            found.append(Problem(f"env-{name}", text, None, answer["verdict"], answer["problem"]))
    return found
