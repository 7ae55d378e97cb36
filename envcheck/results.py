"""What every use case returns: data with a versioned schema and the exit code it means.

The CLI never decides an exit code or a JSON shape itself: it asks the result. ``to_json``
returns the whole ``envcheck.<thing>/1`` document (``schema`` first); ``exit_code`` follows
the table of docs/json-and-exit-codes.md (0 done/ready, 1 not ready or failed, 2 bad input).
Its other forms (text, Markdown, HTML) are the CLI's: ``envcheck.cli.views`` lists each result
class's renderers.

A result that answers "is it ready?" (``gpu``, ``doctor``, ``validate``, ``check``,
``provision``, ``fleet``) also says so the same way in every command: ``envelope()``, the
answer's verdict, the first problem and its fix, the envs ready where the command speaks of
envs, and the node it was asked on (``node``: the host facts the command read, and the
node's level-1 health), computed by the result from its own data. ``to_json`` puts it last
in the document, as one nested object under ``ENVELOPE_KEY``: the fields each command had
before stay as they were, and a consumer (``envcheck fleet``, a script) reads one shape in one
place whatever the command.
"""
from __future__ import annotations

ENVELOPE_KEY = "envelope"
VERDICTS = ("ready", "degraded", "not-ready")
OK_VERDICTS = ("ready", "degraded")  # the verdicts one can train with
HEALTH_VERDICTS = ("ready", "degraded", "not-ready", "no-gpu")  # a node's level-1 health
HOST_SCHEMA = "envcheck.host/1"  # the host facts ``node`` carries (``host.probe.HostState``)
# A fleet that reaches a node's envcheck without a task of its own (Slurm's srun) sets this
# variable to 1: that envcheck then writes ``VERSION_LINE`` + its version as its first line on
# stderr, so the node's version costs no second start (``cli.run``; ``fleet.srun`` reads it).
VERSION_VARIABLE = "ENVCHECK_SAY_VERSION"
VERSION_LINE = "envcheck-version: "


def verdict_of_statuses(statuses) -> str:
    """A report's verdict from its checks' statuses: not-ready with a failure, degraded with a
    warning, else ready (``validation.reports.verdict_of``; the gate reads stored reports'
    statuses with it)."""
    statuses = set(statuses)
    return "not-ready" if "fail" in statuses else "degraded" if "warn" in statuses else "ready"


def node(host: dict | None = None, health: dict | None = None, envs: list | None = None) -> dict:
    """The node a command was asked on, as its envelope carries it: ``host``, the
    ``envcheck.host/1`` facts the command read (None: it read none); ``health``, the node's
    level-1 health, ``{"verdict": one of HEALTH_VERDICTS, "drain": [{"gpu", "uuid",
    "finding"}...]}`` (None: not read); ``envs``, each env the command looked at as
    ``EnvInfo.identity`` gives it (name, lock digest, content digest, packages; None: none)."""
    return {"host": host, "health": health, "envs": envs}


def node_host(document: dict | None) -> dict | None:
    """An ``envcheck.host/1`` document (``HostState.to_json()``, as nested in a report) as
    ``node`` carries it, without its own envelope; None for anything else."""
    if not isinstance(document, dict) or document.get("schema") != HOST_SCHEMA:
        return None
    return {key: value for key, value in document.items() if key != ENVELOPE_KEY}


def envelope(verdict: str, problem: str | None = None, fix: str | None = None,
             ready_envs: list | None = None, node_facts: dict | None = None) -> dict:
    """The answer in one shape: ``verdict`` (one of ``VERDICTS``), why it is not ready (or the
    first warning) and the first fix (None when there is nothing to say), ``ready_envs``, the
    envs ready (a list; None for a command that doesn't speak of envs), and ``node`` (``node``:
    empty when not given)."""
    return {"verdict": verdict, "problem": problem, "fix": fix, "ready_envs": ready_envs,
            "node": node_facts if node_facts is not None else node()}


class Result:
    """Base class of use-case results (subclasses are dataclasses, but for the gate's). Imports
    nothing, not even ``typing``: the gate's stored-pass answer builds one."""

    schema = ""  # each subclass: "envcheck.<thing>/1"

    def body(self) -> dict:
        """The document's fields after ``schema``."""
        raise TypeError(f"{type(self).__name__} must define body()")

    def envelope(self) -> dict | None:
        """The answer's ``envelope(...)``; None (and no envelope in the document) for a result
        that answers no readiness question (a listing, a cache's size)."""
        return None

    def facts(self) -> dict:
        """The document without its envelope: what another document nests (a host in a health
        report, a health report in a validation)."""
        return {"schema": self.schema, **self.body()}

    def to_json(self) -> dict:
        data = self.facts()
        answer = self.envelope()
        if answer is not None:
            data[ENVELOPE_KEY] = answer
        return data

    @property
    def exit_code(self) -> int:
        return 0
