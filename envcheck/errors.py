"""The one exception family of envcheck: every error says what went wrong and the fix."""
from __future__ import annotations


class EnvcheckError(Exception):
    """An error the user can act on. ``exit_code`` follows DESIGN.md's table."""

    exit_code = 1

    def __init__(self, message: str, fix: str | None = None, *, log: str | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.log = log

    def __str__(self) -> str:
        text = self.message
        if self.fix:
            text += f"; fix: {self.fix}"
        if self.log:
            text += f" (full output: {self.log})"
        return text


class UsageError(EnvcheckError):
    """Bad usage or bad input: exit 2, and nothing was changed on disk."""

    exit_code = 2


class OperationError(EnvcheckError):
    """The operation failed for a reason outside the input (install failed, smoke failed): exit 1."""

    exit_code = 1


class BusyError(OperationError):
    """Another envcheck process holds the env's lock."""

    def __init__(self, name: str):
        super().__init__(
            f"env {name} is being changed by another envcheck process",
            "wait for it to finish and try again",
        )
