"""Can an env's interpreter load the system libraries a preset needs (dlopen, as the framework will)?"""
from __future__ import annotations

import json
from pathlib import Path

from .. import processes
from ..child_env import child_environ, venv_of

_PROBE = """
import ctypes, json, sys
out = {}
for name in sys.argv[1:]:
    try:
        ctypes.CDLL(name)
        out[name] = None
    except OSError as exc:
        out[name] = str(exc)
print(json.dumps(out))
"""


def load_errors(python: Path, libraries: list[str],
                timeout: float = 60.0) -> dict[str, str | None]:
    """{library: None when it loads, else the loader's error}, as ``python`` sees them: in a
    virtualenv, with the environment envcheck gives everything it starts there (its CUDA
    wheels' library folders on the loader's path)."""
    if not libraries:
        return {}
    env = child_environ(venv_of(python), purpose="probe")
    try:
        done = processes.run([str(python), "-c", _PROBE, *libraries], timeout=timeout, env=env)
    except OSError as exc:
        return {name: f"could not probe with {python}: {exc}" for name in libraries}
    try:
        result = None if done.timed_out else json.loads(done.stdout)
    except ValueError:
        result = None
    if not isinstance(result, dict):
        why = (f"no answer within {timeout:g} s (hang)" if done.timed_out
               else (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1])
        return {name: f"could not probe with {python}: {why}" for name in libraries}
    return {name: result.get(name, "not probed") for name in libraries}


def missing_libraries(python: Path, libraries: list[str], timeout: float = 60.0) -> list[str]:
    return [name for name, error in load_errors(python, libraries, timeout).items() if error]
