"""``envcheck diagnose FILE|-``: name the known GPU failures in a log, each with its fix.

Exit codes as linters have them: 1 when at least one error-severity failure was found, 0 when
none was (info findings alone are 0), 2 when the log can't be read.
"""
from __future__ import annotations

import click

from ..validation.diagnose import Diagnosis, Finding, diagnose_file, diagnose_stream
from .output import emit_json


@click.command()
@click.argument("log", metavar="FILE|-")
@click.option("--json", "as_json", is_flag=True,
              help="print the envcheck.diagnosis/1 JSON document instead of text")
def diagnose(log: str, as_json: bool) -> None:
    """Find known GPU/CUDA failures in a log FILE (or stdin: -), each with its cause and fix.

    The log is streamed, so its size doesn't matter (up to 4 GiB). Exit 1 when an error was
    found, 0 when none was, 2 when the log can't be read.
    """
    result = diagnose_stream(click.get_binary_stream("stdin"), "-") if log == "-" else diagnose_file(log)
    if as_json:
        emit_json(result.to_json())
    else:
        click.echo(render(result))
    if result.exit_code:
        raise click.exceptions.Exit(result.exit_code)


def render(result: Diagnosis) -> str:
    where = "stdin" if result.source == "-" else result.source
    if not result.findings:
        return f"no known GPU failure found in {where} ({result.lines_read} lines)"
    errors = len(result.errors)
    summary = (f"{errors} error{'s' * (errors != 1)} and {len(result.findings) - errors} info "
               f"in {where} ({result.lines_read} lines)")
    return "\n\n".join([*(render_finding(f) for f in result.findings), summary])


def render_finding(finding: Finding) -> str:
    label = f"#{finding.number} " if finding.number else ""
    lines = [
        f"[{finding.severity}] {label}{finding.id}: {finding.title}",
        f"  line {finding.line_number}: {finding.line}",
        f"  cause: {finding.cause}",
        f"  fix: {finding.fix}",
    ]
    lines += [f"  see: {link}" for link in finding.links[:2]]
    return "\n".join(lines)
