"""``envcheck diagnose FILE|-``: name the known GPU failures in a log, each with its fix.

Findings are information: exit 0 whenever the log could be read, 2 when it can't.
"""
from __future__ import annotations

import sys
from dataclasses import asdict

import click

from ..validation.diagnose import Finding, diagnose as find_causes
from ..errors import UsageError
from .output import emit_json

SCHEMA = "envcheck.diagnosis/1"


@click.command()
@click.argument("log", metavar="FILE|-")
@click.option("--json", "as_json", is_flag=True, help=f"print the {SCHEMA} JSON document")
def diagnose(log: str, as_json: bool) -> None:
    """Find known GPU/CUDA failures in a log FILE (or stdin: -) and say how to fix them."""
    findings = find_causes(_read(log))
    if as_json:
        emit_json({"schema": SCHEMA, "source": log, "findings": [asdict(f) for f in findings]})
    elif findings:
        click.echo("\n\n".join(render(f) for f in findings))
    else:
        click.echo(f"no known GPU failure found in {'stdin' if log == '-' else log}")


def _read(log: str) -> str:
    if log == "-":
        return sys.stdin.read()
    try:
        with open(log, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError as exc:
        raise UsageError(f"cannot read {log}: {exc.strerror or exc}",
                         "give a readable log file, or - for stdin") from None


def render(finding: Finding) -> str:
    label = f"#{finding.number} " if finding.number else ""
    lines = [
        f"[{finding.severity}] {label}{finding.id}: {finding.title}",
        f"  line {finding.line_number}: {finding.line}",
        f"  cause: {finding.cause}",
        f"  fix: {finding.fix}",
    ]
    lines += [f"  see: {link}" for link in finding.links[:2]]
    return "\n".join(lines)
