"""Reading a node's answer: its verdict, why it is not ready and the first fix, and the envs
ready there.

Each command's document says these its own way (``envcheck.host/1``, ``doctor/1``,
``validation/1``, ``gate/1``, ``provision/1``). A command that fails before it has a document
(no env to validate, say) prints one ``envcheck: error: WHAT; fix: FIX`` line and exits 1:
that node is not ready, for that reason. An exit code other than 0 or 1, or output that is
no JSON document, is ``error``: the node's envcheck did not answer the question (another
version may not know an option). Whether the node counts as ready is its exit code's call
(0), as on the node itself; the verdict shown is its document's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

OK_VERDICTS = ("ready", "degraded")
INSTALL_FIX = "pip install 'envcheck[fleet]' into {python} (the Python Ray runs on that node)"


@dataclass(frozen=True)
class Reading:
    verdict: str
    problem: str | None = None
    fix: str | None = None
    ready_envs: list[str] | None = None  # None: the command doesn't speak of envs (gpu)


def read(command: str, answer: dict[str, Any]) -> Reading:
    """What the node's answer to ``command`` means (see the module docstring)."""
    if not answer.get("installed", True):
        return Reading("no-envcheck", answer.get("error"), INSTALL_FIX.format(python=answer.get("python")))
    if answer.get("timed_out"):
        return Reading("lost", "the node's envcheck gave no answer within --timeout")
    document, code = answer.get("document"), answer.get("exit_code")
    problem, fix = split_error(answer.get("error"))
    if code not in (0, 1) or (document is None and code == 0):
        why = f"its envcheck exited {code}" if code is not None else "its envcheck did not run"
        return Reading("error", problem or why, fix)
    no_envs = None if command == "gpu" else []
    if document is None:
        return Reading("not-ready", problem, fix, no_envs)
    return READERS[command](document, code)


def split_error(line: str | None) -> tuple[str | None, str | None]:
    """``envcheck: error: WHAT; fix: FIX`` -> (WHAT, FIX)."""
    if not line:
        return None, None
    text = line.removeprefix("envcheck: error: ")
    what, sep, fix = text.partition("; fix: ")
    return what, (fix or None) if sep else None


def _failing(checks: list[dict[str, Any]]) -> dict[str, Any] | None:
    for status in ("fail", "warn"):
        for check in checks or []:
            if check.get("status") == status:
                return check
    return None


def _report_reading(report: dict[str, Any], prefix: str = "") -> tuple[str | None, str | None]:
    check = _failing(report.get("checks") or [])
    if check is None:
        return None, None
    return f"{prefix}{check.get('id')}: {check.get('summary')}", check.get("fix")


def _gpu(document: dict[str, Any], code: int) -> Reading:
    if code == 0:
        return Reading("ready")
    nvml = document.get("nvml") or {}
    if nvml.get("status") != "ok":
        return Reading("not-ready", nvml.get("message"), nvml.get("fix"))
    gpus = document.get("gpus") or []
    bad = next((g for g in gpus if g.get("status") != "ok" or not g.get("visible", True)), None)
    if bad is None:
        return Reading("not-ready", "no NVIDIA GPU on this node")
    why = bad.get("problem") or "hidden by CUDA_VISIBLE_DEVICES"
    return Reading("not-ready", f"GPU {bad.get('index')}: {why}", bad.get("fix"))


def _doctor(document: dict[str, Any], code: int) -> Reading:
    report = document.get("report")
    steps = document.get("next_steps") or []
    if not report:
        return Reading("not-ready", "no env to validate", steps[0] if steps else None, [])
    verdict = report.get("verdict", "not-ready")
    problem, fix = _report_reading(report, f"env {report.get('env')}: ")
    return Reading(verdict, problem, fix or (steps[0] if steps and verdict == "not-ready" else None),
                   [report.get("env")] if verdict in OK_VERDICTS else [])


def _validate(document: dict[str, Any], code: int) -> Reading:
    reports = document.get("reports") or []
    verdict = (document.get("summary") or {}).get("verdict", "not-ready")
    worst = next((r for r in reports if r.get("verdict") == verdict), None)
    problem, fix = _report_reading(worst, f"env {worst.get('env')}: ") if worst else (None, None)
    return Reading(verdict, problem, fix, [r.get("env") for r in reports if r.get("verdict") in OK_VERDICTS])


def _check(document: dict[str, Any], code: int) -> Reading:
    if document.get("ready"):
        return Reading(document.get("verdict") or "ready", ready_envs=[document.get("env")])
    return Reading("not-ready", document.get("reason"), document.get("fix"), [])


def _provision(document: dict[str, Any], code: int) -> Reading:
    envs = document.get("envs") or []
    done = [e for e in envs if e.get("action") in ("created", "unchanged") and e.get("verdict") in OK_VERDICTS]
    bad = next((e for e in envs if e.get("action") != "skipped" and e not in done), None)
    ready_envs = [e.get("name") for e in done]
    if bad is not None or not document.get("ok"):
        why = f"env {bad.get('name')}: {bad.get('action')}: {bad.get('reason')}" if bad else None
        return Reading("not-ready", why, bad.get("fix") if bad else None, ready_envs)
    degraded = any(e.get("verdict") == "degraded" for e in done)
    return Reading("degraded" if degraded else "ready", ready_envs=ready_envs)


READERS: dict[str, Callable[[dict[str, Any], int], Reading]] = {
    "gpu": _gpu, "doctor": _doctor, "validate": _validate, "check": _check, "provision": _provision}
