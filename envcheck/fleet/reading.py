"""Reading a node's answer: its verdict, why it is not ready and the first fix, the envs
ready there, and its level-1 health.

One reader for every command: each command's document carries its answer in one shape, the
result envelope (``results.ENVELOPE_KEY``: verdict, problem, fix, ready envs, and the node:
its host facts, read by ``tasks.host_of`` on the node, and its health, ``health``; see
``envcheck.results``), and that is all the fleet reads of it. A document without one comes
from an envcheck older than the envelope: ``error``, saying so, with the fix (upgrade envcheck
on that node). A command that fails before it has a document (no env to validate, say) prints
one ``envcheck: error: WHAT; fix: FIX`` line and exits 1: that node is not ready, for that
reason. An exit code other than 0 or 1, or output that is no JSON document, is ``error``: the
node's envcheck did not answer the question (another version may not know an option). Whether
the node counts as ready is its exit code's call (0), as on the node itself; the verdict shown
is its document's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..results import ENVELOPE_KEY, OK_VERDICTS, VERDICTS
from .health import node_health

__all__ = ["OK_VERDICTS", "Reading", "read", "split_error"]

INSTALL_FIX = "pip install 'envcheck[fleet]' into {python} (the Python Ray runs on that node)"
UPGRADE_FIX = "upgrade envcheck on that node: pip install --upgrade 'envcheck[fleet]' into {python}"


@dataclass(frozen=True)
class Reading:
    verdict: str
    problem: str | None = None
    fix: str | None = None
    ready_envs: list[str] | None = None  # None: the command doesn't speak of envs (gpu)
    health: str = "unknown"  # the node's level-1 verdict (``health.HEALTH_VERDICTS``)
    drain: list[dict[str, Any]] = field(default_factory=list)  # its GPUs to drain
    envs: list[dict[str, Any]] | None = None  # the envs its command looked at (EnvInfo.identity)


def read(command: str, answer: dict[str, Any]) -> Reading:
    """What the node's answer to ``command`` means (see the module docstring)."""
    python = answer.get("python")
    if not answer.get("installed", True):  # the engine may say how to install it there (Slurm: on srun's PATH)
        return Reading("no-envcheck", answer.get("error"), answer.get("fix") or INSTALL_FIX.format(python=python))
    if answer.get("timed_out"):
        return Reading("lost", "the node's envcheck gave no answer within --timeout")
    document, code = answer.get("document"), answer.get("exit_code")
    problem, fix = split_error(answer.get("error"))
    if code not in (0, 1) or (document is None and code == 0):
        why = f"its envcheck exited {code}" if code is not None else "its envcheck did not run"
        return Reading("error", problem or why, fix)
    if document is None:
        return Reading("not-ready", problem, fix, None if command == "gpu" else [])
    found = document.get(ENVELOPE_KEY)
    if not (isinstance(found, dict) and found.get("verdict") in VERDICTS):
        version = answer.get("version")
        return Reading("error", f"its envcheck{f' {version}' if version else ''} answered "
                                f"{document.get('schema') or 'a document'} without the result envelope "
                                f"(\"{ENVELOPE_KEY}\"): an envcheck older than this one",
                       UPGRADE_FIX.format(python=python))
    envs = found.get("ready_envs")
    health, drain = node_health(found)
    looked_at = (found.get("node") or {}).get("envs") if isinstance(found.get("node"), dict) else None
    return Reading(found["verdict"], _text(found.get("problem")), _text(found.get("fix")),
                   [e for e in envs if isinstance(e, str)] if isinstance(envs, list) else None,
                   health, drain, [e for e in looked_at if isinstance(e, dict)] if isinstance(looked_at, list) else None)


def split_error(line: str | None) -> tuple[str | None, str | None]:
    """``envcheck: error: WHAT; fix: FIX`` -> (WHAT, FIX)."""
    if not line:
        return None, None
    text = line.removeprefix("envcheck: error: ")
    what, sep, fix = text.partition("; fix: ")
    return what, (fix or None) if sep else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
