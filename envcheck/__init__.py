"""envcheck: manage deep-learning envs and prove, with evidence, that they train on this machine."""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__", "ensure_ready", "NotReady"]


def __getattr__(name: str):
    # The gate is imported only when asked for, so `import envcheck` stays cheap.
    if name in ("ensure_ready", "NotReady"):
        from .usecases import gate

        return getattr(gate, name)
    raise AttributeError(name)
