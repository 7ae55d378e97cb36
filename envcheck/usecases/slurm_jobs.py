"""``envcheck slurm prolog`` and ``slurm epilog``: the job's GPUs before and after it runs.

The prolog (default budget 5 s, at most ``BUDGET_MAX``) reads level 1 and takes the job's GPUs
(``slurm.gres.job_gpus``: ``SLURM_JOB_GPUS``, else ``CUDA_VISIBLE_DEVICES``, as slurmd sets
them); a not-ready finding of the node or of one of them drains the node with envcheck's
reason, set by envcheck itself (Slurm would only say "Prolog error"), and exits 1, so Slurm
requeues the job (held, as Slurm 22.05 does with a batch job). A fault on a GPU the job doesn't
have doesn't stop it (the health check drains for it). Otherwise the prolog keeps a snapshot
of the job's GPUs (``slurm.snapshot``) and exits 0. A job without a GPU is not checked.

The epilog reads level 1 again and compares with the snapshot: an Xid logged or ECC errors
counted while the job ran (``snapshot.changes``), or a not-ready finding now on a job's GPU
that didn't change (or on the node), drains the node with that reason (the Xid's meaning) and
exits 1; the snapshot is removed either way. Neither hook resumes a node: the health check
does, once every finding cleared.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Mapping

from ..paths import Home
from ..slurm import gres, gresconf, snapshot
from ..slurm.reading import problems_of, read_level1, timeout_problem
from .slurm_health import Clock, NodeCheck, act, budget_of, read_node

DEFAULT_BUDGET = 5.0
BUDGET_MAX = 50.0


@dataclass
class JobCheck(NodeCheck):
    """What a job hook found and did: a ``NodeCheck`` with the job, its GPUs and its snapshot."""
    schema: ClassVar[str] = "envcheck.slurm.prolog/1"
    job: str = ""
    gpus: list[int] | None = None  # NVML indices; None: not read
    gpus_from: str | None = None
    snapshot: str | None = None  # the snapshot kept (prolog) or compared (epilog)

    def body(self) -> dict:
        return {**super().body(), "job": self.job, "gpus": self.gpus, "gpus_from": self.gpus_from,
                "snapshot": self.snapshot}


@dataclass
class EpilogCheck(JobCheck):
    schema: ClassVar[str] = "envcheck.slurm.epilog/1"


def _start(environ: Mapping[str, str], budget: float, dry_run: bool, kind: type[JobCheck]):
    clock = Clock(budget_of(budget, BUDGET_MAX))
    job = snapshot.job_id(environ.get("SLURM_JOB_ID"))
    node, source, state = read_node(environ, clock)
    check = kind(node, source, state, budget, dry_run=dry_run)
    check.job = job
    return clock, check


def prolog(home: Home, environ: Mapping[str, str], *, budget: float = DEFAULT_BUDGET, dry_run: bool = False,
           gres_conf: str | None = None) -> JobCheck:
    """Check the job's GPUs before it starts (see the module docstring)."""
    clock, check = _start(environ, budget, dry_run, JobCheck)
    conf = gresconf.load(gres_conf, environ)
    if not (environ.get("SLURM_JOB_GPUS") or environ.get("CUDA_VISIBLE_DEVICES")):
        check.gpus, check.gpus_from = [], "the job has no GPU: nothing to check"
        return act(check, environ, clock, may_resume=False)
    report = read_level1(environ)(clock.left(keep=min(2.0, budget / 4)))
    if report is None:
        check.problems.append(timeout_problem(round(clock.spent(), 1)))
        return act(check, environ, clock, may_resume=False)
    check.health_verdict = report.verdict
    check.gpus, missing, check.gpus_from = gres.job_gpus(environ, conf, check.node, gres.seen_gpus(report))
    check.problems += missing + problems_of(report, check.gpus)
    if not check.blocking:
        kept = snapshot.save(home, check.node, check.job, [g for g in report.gpus if g.index in check.gpus])
        check.snapshot = str(kept)
    return act(check, environ, clock, may_resume=False)


def epilog(home: Home, environ: Mapping[str, str], *, budget: float = DEFAULT_BUDGET, dry_run: bool = False,
           gres_conf: str | None = None) -> EpilogCheck:
    """Compare the job's GPUs with the prolog's snapshot (see the module docstring)."""
    clock, check = _start(environ, budget, dry_run, EpilogCheck)
    conf = gresconf.load(gres_conf, environ)
    before = snapshot.load(home, check.node, check.job)
    check.snapshot = str(snapshot.path(home, check.node, check.job)) if before else None
    try:
        if before is None and not (environ.get("SLURM_JOB_GPUS") or environ.get("CUDA_VISIBLE_DEVICES")):
            check.gpus, check.gpus_from = [], "the job has no GPU: nothing to compare"
            return act(check, environ, clock, may_resume=False)
        report = read_level1(environ)(clock.left(keep=min(2.0, budget / 4)))
        if report is None:
            check.problems.append(timeout_problem(round(clock.spent(), 1)))
            return act(check, environ, clock, may_resume=False)
        check.health_verdict = report.verdict
        check.gpus, missing, check.gpus_from = gres.job_gpus(environ, conf, check.node, gres.seen_gpus(report))
        mine = [g for g in report.gpus if g.index in check.gpus]
        check.problems += snapshot.changes(before, mine, check.job) + missing
        changed = {p.gpu for p in check.problems}  # a GPU's change explains its findings now
        check.problems += [p for p in problems_of(report, check.gpus)
                           if p.effect == "not-ready" and (p.gpu is None or p.gpu not in changed)]
        return act(check, environ, clock, may_resume=False)
    finally:
        if not dry_run:
            snapshot.remove(home, check.node, check.job)
