"""The layout's two rules, read from the source (issue 19): no module of envcheck over
``MAX_LINES`` lines, and no framework named in code outside ``envcheck/frameworks/`` and
``envcheck/data/``: what a framework is, and what to do about it, is asked of the registry.

A framework is named by what the registry declares of it (its name, its distributions, the
variables ``run`` and the smoke runner set for it) and by Keras, which two of them share. A
name counts where code uses it: an identifier (``keras_backend``) or a string that is not a
docstring (``"tf-nightly"``, ``"TF_CPP_MIN_LOG_LEVEL"``, a label). Comments and docstrings
may name frameworks as examples; they decide nothing.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from envcheck import frameworks

PACKAGE = Path(frameworks.__file__).parent.parent  # envcheck/
MAX_LINES = 400
ALLOWED = ("frameworks/", "data/")  # where frameworks may be named, relative to PACKAGE
CODE_TOKENS = {tokenize.NAME, tokenize.STRING} | ({tokenize.FSTRING_MIDDLE}  # Python 3.12+
                                                  if hasattr(tokenize, "FSTRING_MIDDLE") else set())


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def framework_words() -> set[str]:
    """Every name the registry gives a framework, and Keras."""
    words = {"keras"}
    for framework in frameworks.registry().values():
        words.add(framework.name)
        words.update(framework.distributions)
        words.update(framework.run_environ(None))
        words.update(framework.smoke_environ)
        words.update(framework.smoke_scratch)
    return words


def framework_pattern() -> re.Pattern:
    """Any of ``framework_words`` as a word of its own: ``keras_backend`` and ``"Keras on"``
    name Keras, ``"torchvision"`` and ``jaxpr`` name no framework."""
    words = sorted(framework_words(), key=len, reverse=True)
    return re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(map(re.escape, words)) + r")(?![A-Za-z0-9])",
                      re.IGNORECASE)


def docstrings(tree: ast.AST) -> set[tuple[int, int]]:
    """Where each string that stands alone as a statement starts (module, class and function
    docstrings, and those of attributes)."""
    found = set()
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            for statement in statements if isinstance(statements, list) else ():  # a lambda's body: one expression
                if (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
                        and isinstance(statement.value.value, str)):
                    found.add((statement.lineno, statement.col_offset))
    return found


def framework_names_in_code(source: str, pattern: re.Pattern) -> list[str]:
    """``line: token`` for each identifier or non-docstring string in ``source`` naming a framework."""
    skip = docstrings(ast.parse(source))
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in CODE_TOKENS and token.start not in skip and pattern.search(token.string):
            found.append(f"{token.start[0]}: {token.string[:80]}")
    return found


def test_the_scan_sees_what_it_must() -> None:
    """The rule itself: names in code are found, the same words in comments and docstrings not."""
    pattern = framework_pattern()
    assert {"tensorflow", "torch", "keras"} <= {w.lower() for w in framework_words()}
    assert not pattern.search("torchvision") and not pattern.search("jaxpr")
    code = ('"""Validate a tensorflow env."""\n'
            'LABELS = {"keras_backend": "Keras on"}  # keras: a comment\n'
            'def f(env):\n'
            '    """torch here is a word."""\n'
            '    return env.get("TF_FORCE_GPU_ALLOW_GROWTH") or torch_version\n')
    found = framework_names_in_code(code, pattern)
    assert [line.split(":")[0] for line in found] == ["2", "2", "5", "5"], found


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_module_is_over_the_limit(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE.parent)} has {lines} lines: split it by responsibility"


def test_no_framework_is_named_outside_frameworks_and_data() -> None:
    pattern = framework_pattern()
    found = [f"{path.relative_to(PACKAGE.parent)}:{hit}" for path in modules()
             if not path.relative_to(PACKAGE).as_posix().startswith(ALLOWED)
             for hit in framework_names_in_code(path.read_text(encoding="utf-8"), pattern)]
    assert not found, "framework names in code (ask envcheck.frameworks instead):\n" + "\n".join(found)
