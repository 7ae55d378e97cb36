"""Can an env's interpreter load the system libraries a preset needs (dlopen, as the framework will)?"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

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


def load_errors(python: Path, libraries: list[str]) -> dict[str, str | None]:
    """{library: None when it loads, else the loader's error}, as ``python`` sees them."""
    if not libraries:
        return {}
    from ..envs.installers import clean_environ

    try:
        proc = subprocess.run([str(python), "-c", _PROBE, *libraries], capture_output=True, text=True,
                              timeout=60, env=clean_environ())
        result = json.loads(proc.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return {name: f"could not probe with {python}: {exc}" for name in libraries}
    return {name: result.get(name, "not probed") for name in libraries}


def missing_libraries(python: Path, libraries: list[str]) -> list[str]:
    return [name for name, error in load_errors(python, libraries).items() if error]
