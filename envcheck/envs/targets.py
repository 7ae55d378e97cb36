"""The interpreter a lock is installed for, as PEP 751 selects: its marker environment and tags.

A lock says which interpreters it is for (``requires-python``, ``environments``, each
package's ``marker``, each wheel's tags); ``choose`` finds the one to make an env with: the
``--python`` asked for, else the first of the interpreters this host has (the running one, then
the newest) that the lock selects for. Each candidate is first judged without starting it (this
host's environment with its version: ``approximate``), and only the one that fits is run once
for its real environment (``probe``), with which the lock is selected again.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import processes
from ..child_env import clean_environ
from ..errors import UsageError

if TYPE_CHECKING:
    from .locks import Lock, Selected
    from .pythons import Interpreter

PROBE_TIMEOUT = 20.0
# packaging.markers.default_environment(), in the standard library alone (any Python 3), and the
# two build flags an ABI tag carries.
_PROBE = """
import json, os, platform, sys, sysconfig
i = sys.implementation.version
iv = "%d.%d.%d" % (i.major, i.minor, i.micro) + ("" if i.releaselevel == "final" else i.releaselevel[0] + str(i.serial))
env = {"implementation_name": sys.implementation.name, "implementation_version": iv, "os_name": os.name,
       "platform_machine": platform.machine(), "platform_release": platform.release(),
       "platform_system": platform.system(), "platform_version": platform.version(),
       "python_full_version": platform.python_version(),
       "platform_python_implementation": platform.python_implementation(),
       "python_version": ".".join(platform.python_version_tuple()[:2]), "sys_platform": sys.platform}
flags = {"debug": bool(sysconfig.get_config_var("Py_DEBUG")), "threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED"))}
sys.stdout.write(json.dumps({"environment": env, "flags": flags}))
"""


@dataclass(frozen=True)
class Target:
    """An interpreter a lock is selected for: its PEP 508 environment and wheel tags."""

    environment: dict[str, str]
    tags: tuple[Any, ...]  # packaging.tags.Tag, most preferred first

    def describe(self) -> str:
        env = self.environment
        return f"python {env.get('python_full_version')} ({env.get('sys_platform')}, {env.get('platform_machine')})"


def tags_for(environment: dict[str, str], debug: bool = False, threaded: bool = False) -> tuple[Any, ...]:
    """The wheel tags an interpreter of ``environment`` on this machine installs, best first."""
    from packaging import tags

    major, minor = (int(x) for x in environment["python_version"].split(".")[:2])
    platforms = list(tags.platform_tags())
    out: list[Any] = []
    if environment.get("implementation_name") == "cpython":
        abi = f"cp{major}{minor}{'d' if debug else ''}{'t' if threaded else ''}"
        out += tags.cpython_tags(python_version=(major, minor), abis=[abi], platforms=platforms)
        interpreter = f"cp{major}{minor}"
    else:
        interpreter = f"{tags.INTERPRETER_SHORT_NAMES.get(environment.get('implementation_name', ''), 'py')}{major}{minor}"
    out += tags.compatible_tags(python_version=(major, minor), interpreter=interpreter, platforms=platforms)
    return tuple(out)


def approximate(version: Any) -> Target:
    """This host's environment with ``version`` (a ``packaging`` Version) as its Python: a
    CPython of that version here, judged without being started."""
    from packaging.markers import default_environment

    environment = dict(default_environment())
    full = str(version)
    environment.update(python_version=f"{version.major}.{version.minor}", python_full_version=full,
                       implementation_name="cpython", implementation_version=full,
                       platform_python_implementation="CPython")
    return Target(environment, tags_for(environment))


def probe(path: Path, timeout: float = PROBE_TIMEOUT) -> Target:
    """The real environment and tags of the interpreter at ``path`` (run once, isolated)."""
    done = processes.run([str(path), "-I", "-S", "-c", _PROBE], timeout=timeout, env=clean_environ())
    try:
        answer = json.loads(done.stdout) if done.returncode == 0 and not done.timed_out else None
        environment = {str(k): str(v) for k, v in answer["environment"].items()}
        flags = answer["flags"]
        return Target(environment, tags_for(environment, bool(flags.get("debug")), bool(flags.get("threaded"))))
    except (TypeError, ValueError, KeyError, AttributeError):
        raise UsageError(f"{path} did not answer as a Python 3 interpreter",
                         "pass --python with a working Python 3") from None


def choose(lock: Lock, requested: str | None) -> tuple[Interpreter, Target, tuple[Selected, ...]]:
    """The interpreter to make ``lock``'s env with, its target and what it installs. With
    ``requested``, that one or the lock's own reason why not; else the first that fits."""
    from .locks import NotForTarget
    from .pythons import _current, find_python, list_pythons

    if requested:
        interpreter = find_python(None, requested)
        target = probe(interpreter.path)
        return interpreter, target, lock.select(target)
    current = _current()
    first_error: NotForTarget | None = None
    seen = set()
    for interpreter in [current, *list_pythons()]:
        key = interpreter.path.resolve() if interpreter.path.exists() else interpreter.path
        if key in seen:
            continue
        seen.add(key)
        try:
            lock.select(approximate(interpreter.version))
            target = probe(interpreter.path)
            return interpreter, target, lock.select(target)
        except NotForTarget as exc:
            first_error = first_error or exc
    assert first_error is not None  # the running interpreter is always a candidate
    raise UsageError(first_error.message + " (nor any other Python found here)",
                     "install a Python the lock is for, or pass --python PATH; or lock for this host")
