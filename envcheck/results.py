"""What every use case returns: data with a versioned schema and the exit code it means.

The CLI never decides an exit code or a JSON shape itself: it asks the result. ``to_json``
returns the whole ``envcheck.<thing>/1`` document (``schema`` first); ``exit_code`` follows
README's table (0 done/ready, 1 not ready or failed, 2 bad input). Its other forms (text,
Markdown, HTML) are the CLI's: ``envcheck.cli.views`` lists each result class's renderers.
"""
from __future__ import annotations


class Result:
    """Base class of use-case results (subclasses are dataclasses, but for the gate's). Imports
    nothing, not even ``typing``: the gate's stored-pass answer builds one."""

    schema = ""  # each subclass: "envcheck.<thing>/1"

    def body(self) -> dict:
        """The document's fields after ``schema``."""
        raise TypeError(f"{type(self).__name__} must define body()")

    def to_json(self) -> dict:
        return {"schema": self.schema, **self.body()}

    @property
    def exit_code(self) -> int:
        return 0
