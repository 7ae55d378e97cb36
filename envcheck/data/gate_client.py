"""``envcheck.ensure_ready`` as an env envcheck created imports it: standard library only
(and Python 3.7 or later: the env's Python, not envcheck's, runs it).

``envs.gate_link`` copies this file, as it is, to ``$ENVCHECK_HOME/lib/envcheck/__init__.py``
(the env's ``.pth`` line puts ``lib`` on its path), so the env imports no part of envcheck's
world that could shadow its own packages, and nothing in that copy points into envcheck's
installation: an upgrade, a reinstall, an editable install or a move of envcheck leaves it
working. It asks the interpreter recorded beside it (``lib/envcheck-python``, kept current by
every envcheck command) to run ``envcheck check`` for this env, the gate's one policy.

Inside envcheck itself, ``usecases.gate`` uses ``NotReady`` and ``ask`` from here.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

__all__ = ["ensure_ready", "NotReady"]

PYTHON_FILE = "envcheck-python"  # in $ENVCHECK_HOME/lib: the interpreter that runs envcheck
MANIFEST_NAME = "envcheck.json"  # what makes a folder of $ENVCHECK_HOME/envs an env of envcheck's
ASK_TIMEOUT = 600.0  # seconds for envcheck's interpreter to answer for an env (a quick validation)
_ERROR = "envcheck: error: "
_FIELDS = ("env", "ready", "cached", "reason", "fix", "age_s", "gpus_usable")


class NotReady(Exception):
    """Raised by ``ensure_ready``: ``.reason`` says why, ``.fix`` the next step, ``.report`` the
    evidence (the stored or new validation report, ``{}`` when there is none)."""

    def __init__(self, reason: str, fix: str | None = None, report: dict | None = None, result=None):
        super().__init__(f"not ready to train: {reason}" + (f"; fix: {fix}" if fix else ""))
        self.reason = reason
        self.fix = fix
        self.report = report or {}
        self.result = result  # inside envcheck: the gate's result object


def ensure_ready(require_gpu: bool = False, min_gpus: int = 0, max_age: str | float = "24h") -> dict:
    """Judge the env this interpreter runs in: its validation report, or NotReady.

    Quick checks only (host, compat, integrity) unless a stored validation of this env still
    holds; envcheck's own interpreter answers, so this process imports no framework and
    nothing beyond the standard library."""
    home, name = env_home()
    if home is None:
        raise NotReady(f"{sys.prefix} is not an env envcheck created, and envcheck is not installed here",
                       "run this in an env envcheck created (`envcheck run --env NAME -- python SCRIPT`)")
    answer = ask(recorded_python(home), home, name, require_gpu, min_gpus, max_age)
    if not answer["ready"]:
        raise NotReady(answer["reason"], answer["fix"], answer["report"])
    return answer["report"]


def env_home(prefix: str | None = None) -> tuple[str | None, str]:
    """(its envcheck home, its env name) when ``prefix`` (default: this interpreter's) is an env
    envcheck created, else (None, its folder's name)."""
    prefix = os.path.abspath(prefix or sys.prefix)
    name = os.path.basename(prefix)
    if not os.path.isfile(os.path.join(prefix, MANIFEST_NAME)):
        return None, name
    return os.path.dirname(os.path.dirname(prefix)), name


def recorded_python(home: str) -> str | None:
    """The interpreter that last ran envcheck for ``home``, as it recorded."""
    try:
        with open(os.path.join(home, "lib", PYTHON_FILE), encoding="utf-8") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def ask(python: str | None, home: str, name: str, require_gpu: bool, min_gpus: int,
        max_age: str | float) -> dict:
    """``envcheck check --json`` for env ``name``, run by ``python``: the gate's answer (a dict
    of ``envcheck.gate/1``), or one saying why envcheck could not give it."""
    rerun = f"envcheck --home {home} check --env {name}"
    if not python or not os.path.exists(python):
        return _no_answer(name, f"the interpreter that ran envcheck ({python or 'none recorded'}) is gone",
                          "run any envcheck command (e.g. `envcheck env list`) with the envcheck you use "
                          f"now; it points this env at it. Then: {rerun}")
    age = max_age if isinstance(max_age, str) else f"{float(max_age)}s"
    # -E: the training job's PYTHONPATH and PYTHONHOME must not reach envcheck's interpreter;
    # cwd: a folder named envcheck where the job runs must not shadow envcheck (-m puts cwd first).
    argv = [python, "-E", "-m", "envcheck", "--home", home, "check", "--env", name, "--json",
            "--min-gpus", str(min_gpus), "--max-age", age] + (["--require-gpu"] if require_gpu else [])
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", cwd=home,
                              stdin=subprocess.DEVNULL, timeout=ASK_TIMEOUT)
    except subprocess.TimeoutExpired:
        return _no_answer(name, f"envcheck gave no answer within {ASK_TIMEOUT:g} s", f"run: {rerun}")
    except OSError as exc:
        return _no_answer(name, f"envcheck's interpreter {python} did not start: {exc.strerror or exc}",
                          f"run any envcheck command with the envcheck you use now, then: {rerun}")
    try:
        data = json.loads(proc.stdout)
        answer = {key: data[key] for key in _FIELDS}
    except (ValueError, KeyError, TypeError):
        error = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        error = error[len(_ERROR):] if error.startswith(_ERROR) else error  # its fix stays in it
        if "No module named envcheck" in error:
            return _no_answer(name, f"envcheck is no longer installed for {python}",
                              f"install it again (`{python} -m pip install envcheck`), or run any envcheck "
                              f"command with the envcheck you use now; then: {rerun}")
        return _no_answer(name, error, f"run: {rerun}")
    return {**answer, "report": data.get("report") or {}}


def _no_answer(name: str, reason: str, fix: str) -> dict:
    return {"env": name, "ready": False, "cached": False, "reason": reason, "fix": fix, "age_s": None,
            "gpus_usable": 0, "report": {}}
