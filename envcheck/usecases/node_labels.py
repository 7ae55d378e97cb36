"""Node labels in the style of NVIDIA's GPU feature discovery, from a ``Readiness``.

``envcheck.io/env.<name>`` = ready | degraded | not-ready per env, ``envcheck.io/ready-envs`` =
the count of ready envs, ``envcheck.io/gpu-health`` = ok | degraded | faulty (level 1, read
now; absent on a node without GPUs), ``envcheck.io/preflight`` = the node's verdict in the last
fleet preflight (``preflight_mark.VERDICTS``; absent when none was kept). Every key and value is a valid Kubernetes label.

The key's name part (after ``envcheck.io/``) must be at most 63 characters, begin and end with
a letter or digit; env names may be 64 characters and end in ``-``, ``.`` or ``_``. The rule
(``env_key``): ``env.<name>`` as it is when the name has at most 59 characters, ends in a
letter or digit and does not itself end in ``-`` and 8 lowercase hex digits; otherwise
``env.<prefix>-<hash>``, where ``<hash>`` is the first 8 hex digits of the name's SHA-256 and
``<prefix>`` its first 50 characters with trailing ``-``, ``.``, ``_`` dropped. A kept name
never has the changed form, so two envs never share a key unless their names' hashes agree
in 32 bits and their prefixes match.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..results import Result

if TYPE_CHECKING:
    from .readiness import Readiness

PREFIX = "envcheck.io/"
ENV_PART = "env."
NAME_MAX = 63  # a label key's name part
KEPT_MAX = NAME_MAX - len(ENV_PART)  # 59
HASHED_PREFIX = 50  # + "-" + 8 hex = 59
_HASHED_FORM = re.compile(r".*-[0-9a-f]{8}")
_NAME_PART = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
HEALTH = {"ready": "ok", "degraded": "degraded", "not-ready": "faulty"}


def env_key(name: str) -> str:
    """The label key of env ``name`` (see the module docstring)."""
    kept = len(name) <= KEPT_MAX and name[-1:].isalnum() and name.isascii() and not _HASHED_FORM.fullmatch(name)
    if kept:
        return f"{PREFIX}{ENV_PART}{name}"
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{PREFIX}{ENV_PART}{name[:HASHED_PREFIX].rstrip('-._')}-{digest}"


def valid_key(key: str) -> bool:
    """Is ``key`` a Kubernetes label key with envcheck's prefix?"""
    return key.startswith(PREFIX) and bool(_NAME_PART.fullmatch(key[len(PREFIX):]))


@dataclass
class NodeLabels(Result):
    schema: ClassVar[str] = "envcheck.labels/1"
    labels: dict[str, str]
    envs: dict[str, str]  # env name -> its label key
    readiness: Readiness

    def envelope(self) -> dict:
        return self.readiness.envelope()

    def body(self) -> dict[str, Any]:
        return {"labels": self.labels, "envs": self.envs}


def node_labels(readiness: Readiness) -> NodeLabels:
    labels, keys = {}, {}
    for env in readiness.envs:
        keys[env.name] = env_key(env.name)
        labels[keys[env.name]] = env.verdict if env.verdict in ("ready", "degraded") else "not-ready"
    labels[f"{PREFIX}ready-envs"] = str(len(readiness.ready_envs))
    if readiness.health in HEALTH:
        labels[f"{PREFIX}gpu-health"] = HEALTH[readiness.health]
    if readiness.preflight is not None:
        labels[f"{PREFIX}preflight"] = readiness.preflight.verdict
    return NodeLabels(labels, keys, readiness)
