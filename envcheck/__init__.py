"""envcheck: manage deep-learning envs and prove, with evidence, that they train on this machine."""
from __future__ import annotations

from ._version import __version__

__all__ = ["__version__", "ensure_ready", "NotReady"]


def __getattr__(name: str):
    # The gate is imported only when asked for, so `import envcheck` stays cheap. NotReady is
    # the class an env's own copy of the gate client raises too (data/gate_client.py).
    if name == "ensure_ready":
        from .usecases.gate import ensure_ready

        return ensure_ready
    if name == "NotReady":
        from .data.gate_client import NotReady

        return NotReady
    raise AttributeError(f"module 'envcheck' has no attribute {name!r}")
