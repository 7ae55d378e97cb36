"""Options shared by several commands, each declared once: flag, default, parser, help.

Click-free, so the gate's click-free path (``fast.py``) converts ``check``'s values with the
very declarations that ``_common.declare`` turns into click options (its stored-pass answer
reads argv by hand, without importing these: a test holds its flags equal to ``CHECK``).
A parser raises ``UsageError`` (exit 2, one line with its fix) for a bad value; durations are
parsed by ``envcheck.durations`` (``seconds``, ``age``), each within its stated maximum.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Callable

from ..durations import age, seconds
from ..errors import UsageError
from ..usecases.gate import DEFAULT_MAX_AGE
from ..validation import DEFAULT_TIMEOUT


@dataclass(frozen=True)
class Option:
    flag: str
    dest: str
    help: str
    default: Any = None
    parse: Callable[[str], Any] | None = None  # None with is_flag
    metavar: str | None = None
    is_flag: bool = False
    show_default: bool = False

    def convert(self, value: str) -> Any:
        """The parsed value; a bad one is a UsageError naming this option."""
        try:
            return self.parse(value)
        except UsageError as exc:
            raise UsageError(f"{self.flag} {value}: {exc.message}", exc.fix) from None


def count(text: str | int) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        value = -1
    if value < 0:
        raise UsageError(f"bad count {text!r}", "give a whole number >= 0")
    return value


def health_level(text: str | int) -> int:
    """1, 2 or 3 (see ``LEVEL``)."""
    value = str(text).strip()
    if value not in ("1", "2", "3"):
        raise UsageError(f"bad level {text!r}", "give 1 (reads only), 2 (the default: + the env's "
                         "checks and smoke fit) or 3 (+ measured figures)")
    return int(value)


def framework_name(text: str) -> str:
    from .. import frameworks  # on use: the registry's modules import packaging

    return frameworks.get(text.strip().lower()).name  # an unknown one: UsageError listing the known


def _framework_folders() -> list[str]:
    """The registry's frameworks for help texts, without importing it (every command reads
    these declarations, and the registry's modules import packaging, which `envcheck gpu`
    must not pay for): the folders of ``envcheck/frameworks`` that are packages."""
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "frameworks")
    return sorted(e.name for e in os.scandir(root)
                  if e.is_dir() and os.path.isfile(os.path.join(e.path, "__init__.py")))


JSON = Option("--json", "as_json", "print the result as a versioned JSON document", False, is_flag=True)
ENV = Option("--env", "env_name", "the env; auto = the one `envcheck select` picks", "auto", str,
             "NAME|auto", show_default=True)
FRAMEWORK = Option("--framework", "framework", "choose among envs of this framework only "
                   f"({', '.join(_framework_folders())})", None, framework_name, "NAME")
AUTO_FRAMEWORK = replace(FRAMEWORK, help="with --auto: the presets of this framework only "
                         "(default: every framework's)")
REQUIRE_GPU = Option("--require-gpu", "require_gpu",
                     "not ready unless the env can train on a GPU here", False, is_flag=True)
MIN_GPUS = Option("--min-gpus", "min_gpus", "GPUs the env must be able to use", 0, count, "N")
MAX_AGE = Option("--max-age", "max_age", "how old a stored validation may be (s, m, h or d; at most 365d)",
                 DEFAULT_MAX_AGE, age, "AGE", show_default=True)
SMOKE = Option("--smoke", "smoke", "also run the smoke fit when the stored validation can't answer",
               False, is_flag=True)
FOR_ANOTHER_HOST = Option("--for-another-host", "for_another_host", "make a GPU preset's (or lock's) env even "
                          "though this host can't train with it", False, is_flag=True)
NO_SMOKE = Option("--no-smoke", "no_smoke", "skip the smoke fit (quick checks only)", False, is_flag=True)
TIMEOUT = Option("--timeout", "timeout", "seconds allowed per device (> 0, at most a day: 86400)",
                 DEFAULT_TIMEOUT, seconds, "SECONDS", show_default=True)

LEVEL = Option("--level", "level", "health level: 1 = reads only (NVML, device nodes, the kernel "
               "log's Xids; no framework), 2 = 1 + the env's checks and smoke fit, 3 = 2 + measured "
               "figures per GPU", 2, health_level, "1|2|3", show_default=True)

PYTHON = Option("--python", "python", "judge the env or interpreter at PATH (a venv, a uv project, a conda "
                "prefix, a Python) instead, kept nowhere unless --adopt NAME", None, str, "PATH")
ADOPT = Option("--adopt", "adopt", "with --python: adopt it as env NAME (envcheck env adopt), its report kept",
               None, str, "NAME")
CHECK = (ENV, FRAMEWORK, REQUIRE_GPU, MIN_GPUS, MAX_AGE, SMOKE, LEVEL, PYTHON, ADOPT, JSON)


def node_level(text: str | int) -> int:
    """Level 1 only: the levels above judge an env (``gpu --level``)."""
    level = health_level(text)
    if level != 1:
        raise UsageError("a level above 1 judges an env, not the node",
                         f"use envcheck validate ENV --level {level}; envcheck gpu takes --level 1")
    return level


# `gpu`: the node's GPUs, with their level-1 health when asked (as dcgmi diag -r 1 is asked)
GPU_LEVEL = Option("--level", "level", "1: also read each GPU's level-1 health (ECC, row remapping, "
                   "PCIe link, clocks, device nodes, Xids), like dcgmi diag -r 1", None, node_level, "1")



def age_or_never(text: str) -> float | None:
    """An age (``durations.age``: 6h, 30m, 90s, 2d; > 0), or ``never``."""
    if text.strip().lower() == "never":
        return None
    found = age(text)
    if found <= 0:
        raise UsageError(f"bad age {text!r}", "give an age > 0 with s, m, h or d, e.g. 6h, or never")
    return found


# `serve`: validate each env again when its stored validation is older than this
REVALIDATE_EVERY = Option("--revalidate-every", "revalidate_every", "also validate each env again when its "
                          "stored validation is older than AGE (s, m, h or d; e.g. 6h; at most 365d)", "never",
                          age_or_never, "AGE|never", show_default=True)
