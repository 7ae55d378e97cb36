"""The task Ray runs on each node: the node's own envcheck, as a subprocess, and its answer.

Ray ships this module's functions by value (``dispatch`` registers it with cloudpickle), so
a node whose Python lacks envcheck still runs the task, and says so. At module level it
imports only the standard library and two names of ``envcheck.results`` (strings, shipped by
value with the functions); on the node it imports ``envcheck.processes`` alone, never a
framework. On the node it

1. finds the node's envcheck: the ``envcheck`` on the node's PATH (what a shell there runs),
   else ``python -m envcheck`` of the Python Ray runs there. Either way the child starts
   through the node's own ``envcheck.processes`` (its guard, process group and deadline), so
   Ray's Python must import envcheck: ``pip install 'envcheck[fleet]'`` installs both;
2. runs ``envcheck COMMAND ARGS --json`` and, beside it (a thread of the task, so the
   answer waits for one Python start-up, not two), ``envcheck --version``, in the node's
   environment: the raylet's (what ``ray start`` was given), not the Ray worker's, which Ray
   adds to (``RAY_*``, ``OMP_NUM_THREADS=1``, and ``CUDA_VISIBLE_DEVICES`` for a task holding
   GPUs). A task that holds GPUs holds all the node's (as Ray counts them), so leaving Ray's
   ``CUDA_VISIBLE_DEVICES`` out shows envcheck the same GPUs, and the validation it stores
   has the fingerprint that ``envcheck check`` on the node, run without the variable, answers
   from. The working folder is ``/``, so nothing in the Ray worker's folder shadows the
   node's envcheck. When ``--version`` says that Python can't import envcheck, that is the
   node's answer (the command, which could not import it either, is not read);
3. when the command's result envelope carries no host facts (its ``node.host``: none for
   ``provision``, or with no env to report on), also ``envcheck gpu --json``, so the fleet's
   driver versions and GPU models are measured on every node that answered.

``node_task`` yields ``STARTED`` first (the driver learns the task got its resources, so a
validation still waiting for GPUs past its bound is `busy`), then the answer, a plain dict.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import threading
import time
from typing import Any, Callable, Iterator

from ..results import ENVELOPE_KEY, HOST_SCHEMA  # plain strings: shipped with the functions

STARTED = "started"
VERSION_TIMEOUT = 30.0
HOST_TIMEOUT = 60.0


def node_task(command: str, args: list[str], environment: dict[str, str], timeout: float,
              holds_gpus: bool, version: bool = True) -> Iterator[Any]:
    """The Ray task: ``STARTED``, then ``answer(...)``."""
    yield STARTED
    yield answer(command, args, environment, timeout, holds_gpus, version)


def answer(command: str, args: list[str], environment: dict[str, str], timeout: float,
           holds_gpus: bool, version: bool = True) -> dict[str, Any]:
    """Run the node's envcheck, ``environment`` laid over the node's own, and say what it
    answered (see the module docstring); ``version`` False: without ``envcheck --version``
    beside it (a fleet that knows it already: its answer's ``version`` is None)."""
    started = time.monotonic()
    environ = node_environ(holds_gpus)
    argv = find_envcheck(environ)
    reply: dict[str, Any] = {"hostname": socket.gethostname(), "python": sys.executable,
                             "envcheck": " ".join(argv), "installed": True, "version": None,
                             "exit_code": None, "timed_out": False, "document": None, "host": None,
                             "error": None}
    try:
        from envcheck import processes
    except ImportError:
        return {**reply, "installed": False, "error": _not_installed(argv)}
    env = _child_environ(processes, environ, environment)
    asked = _beside(processes, [*argv, "--version"], env, VERSION_TIMEOUT) if version else None
    try:
        done = _run(processes, [*argv, command, *args, "--json"], env,
                    max(timeout - (time.monotonic() - started), 1.0))
    finally:
        versioned = asked() if asked is not None else None
    if _missing((versioned or done).stderr):
        return {**reply, "installed": False, "error": _not_installed(argv)}
    reply["version"] = _version(versioned.stdout) if versioned is not None else None
    reply.update(exit_code=done.returncode, timed_out=done.timed_out, error=last_line(done.stderr))
    reply["document"], bad = parse_document(done.stdout)
    reply["error"] = reply["error"] or bad
    reply["host"] = host_of(reply["document"])
    left = timeout - (time.monotonic() - started)
    if reply["host"] is None and left > 1.0:
        probe = _run(processes, [*argv, "gpu", "--json"], env, min(HOST_TIMEOUT, left))
        reply["host"] = host_of(parse_document(probe.stdout)[0])
    return reply


def node_environ(holds_gpus: bool) -> dict[str, str]:
    """The environment the node's envcheck runs in (see the module docstring)."""
    env = _raylet_environ()
    if env is None:  # not Linux, or another user's raylet: the worker's, less what Ray set
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        if holds_gpus:
            env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _child_environ(processes: Any, node: dict[str, str], environment: dict[str, str]) -> dict[str, str]:
    """The node's envcheck's environment, as the node's ``envcheck.processes`` makes a fleet
    child's: ``environment`` laid over ``node``, cleaned (an envcheck older than
    ``child_environ``: its ``clean_environ``, the same thing)."""
    child_environ = getattr(processes, "child_environ", None)
    if child_environ is None:
        return processes.clean_environ(environment, base=node)
    return child_environ(None, purpose="fleet", base=node, extra=environment)


def _raylet_environ() -> dict[str, str] | None:
    try:
        with open(f"/proc/{int(os.environ['RAY_RAYLET_PID'])}/environ", "rb") as f:
            data = f.read()
    except (KeyError, ValueError, OSError):
        return None
    pairs = (item.split(b"=", 1) for item in data.split(b"\0") if b"=" in item)
    return {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in pairs}


def find_envcheck(environ: dict[str, str]) -> list[str]:
    """The node's envcheck: on its PATH, else ``python -m envcheck`` of Ray's Python."""
    found = shutil.which("envcheck", path=environ.get("PATH", os.defpath))
    return [found] if found else [sys.executable, "-m", "envcheck"]


def _missing(stderr: str) -> bool:
    """Did Python say it has no envcheck (``-m envcheck``, or a console script's import)?"""
    return any(line.rstrip().endswith(("No module named envcheck", "No module named 'envcheck'"))
               or "No module named envcheck.__main__" in line for line in stderr.splitlines())


def _not_installed(argv: list[str]) -> str:
    if argv[1:2] == ["-m"]:
        return (f"envcheck is not installed on this node: no `envcheck` on its PATH, and the Python "
                f"Ray runs here ({sys.executable}) can't import it")
    return (f"the Python Ray runs on this node ({sys.executable}) can't import envcheck "
            f"(the `envcheck` on its PATH, {argv[0]}, is another install)")


def _run(processes: Any, argv: list[str], env: dict[str, str], timeout: float) -> Any:
    try:
        return processes.run(argv, timeout=timeout, bound=timeout, env=env, cwd="/")
    except OSError as exc:
        return processes.Completed(None, "", f"envcheck: error: can't run {argv[0]}: {exc}", False)


def _beside(processes: Any, argv: list[str], env: dict[str, str], timeout: float) -> Callable[[], Any]:
    """``_run`` started in a thread of its own; call the result to wait for its ``Completed``.
    The thread lasts as long as its child: the guard's death signal comes when the thread
    that started it ends, not the process (a cancelled task's worker dies whole, and this
    child with it, as the command's does)."""
    done: list[Any] = []

    def work() -> None:
        try:
            done.append(_run(processes, argv, env, timeout))
        except Exception as exc:  # said in the answer, not lost in the thread
            done.append(processes.Completed(None, "", f"envcheck: error: can't run {argv[0]}: {exc}", False))

    thread = threading.Thread(target=work, name="envcheck --version", daemon=True)
    thread.start()

    def result() -> Any:
        thread.join()
        return done[0]
    return result


def _version(stdout: str) -> str | None:
    """``envcheck, version 0.1.0`` -> ``0.1.0``."""
    words = stdout.split()
    return words[-1] if "version" in words[:-1] else None


def last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


def parse_document(stdout: str) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON document a command printed, or (None, why not)."""
    if not stdout.strip():
        return None, None
    try:
        data = json.loads(stdout)
    except ValueError:
        return None, f"the node's envcheck printed no JSON: {last_line(stdout)[:200]}"
    return (data, None) if isinstance(data, dict) else (None, "the node's envcheck printed no JSON object")


def host_of(document: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``envcheck.host/1`` facts a command's answer carries, if any: its result envelope's
    ``node.host`` (``envcheck.results.node``), whatever the command."""
    found = document.get(ENVELOPE_KEY) if isinstance(document, dict) else None
    place = found.get("node") if isinstance(found, dict) else None
    host = place.get("host") if isinstance(place, dict) else None
    return host if isinstance(host, dict) and host.get("schema") == HOST_SCHEMA else None
