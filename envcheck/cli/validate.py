"""`envcheck validate`: prove envs train on this machine's devices."""
from __future__ import annotations

import click

from ..errors import UsageError
from ._common import pass_ctx
from .output import emit_json

STATUS_MARK = {"pass": "ok", "warn": "WARN", "fail": "FAIL", "skip": "-"}


def _fmt(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def render(report) -> None:
    build = report.build
    head = f"env {report.env}"
    if build.get("version"):
        head += f": {build.get('framework', '')} {build.get('version')}"
    click.echo(head)
    width = max(len(c.id) for c in report.checks)
    for check in report.checks:
        click.echo(f"  {check.id:<{width}}  {STATUS_MARK[check.status]:<4}  {check.summary}")
    if report.devices:
        click.echo(f"\n  {'DEVICE':<7} {'STATUS':<6} {'MS/STEP':>8}  {'LOSS first -> last':<22} NOTE")
        for d in report.devices:
            loss = f"{_fmt(d['loss_first'], '.4f')} -> {_fmt(d['loss_last'], '.4f')}" if d["loss_first"] is not None else "-"
            note = d.get("error") or (f"on {d['placed_on']}" if d.get("placed_on") else "")
            click.echo(f"  {d['device']:<7} {d['status']:<6} {_fmt(d['ms_per_step']):>8}  {loss:<22} {note}")
    if report.speedup:
        parts = ", ".join(f"{dev} {ratio:.1f}x" for dev, ratio in report.speedup["gpu_over_cpu"].items())
        click.echo(f"\n  GPU over CPU speedup: {parts}")
    fixes = [c for c in report.checks if c.fix and c.status in ("fail", "warn")]
    for check in fixes:
        click.echo(f"  fix ({check.id}): {check.fix}")
    click.echo(f"verdict: {report.verdict}")


def _targets(ctx, names: tuple[str, ...], all_: bool) -> list:
    from ..envs.store import EnvStore

    store = EnvStore(ctx.home)
    if names and all_:
        raise UsageError("give env names or --all, not both", "envcheck validate NAME or envcheck validate --all")
    if names:
        return [store.get(n) for n in names]
    envs = store.list()
    if all_:
        if not envs:
            raise UsageError("no envs to validate", "create one: envcheck env create dl --preset tensorflow-cpu")
        return envs
    from ..usecases.selection import select

    chosen = select(envs, home=ctx.home).chosen
    if chosen is None:
        raise UsageError("no env to validate", "create one: envcheck env create dl --preset tensorflow-cpu")
    return [store.get(chosen)]


@click.command()
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--all", "all_", is_flag=True, help="validate every env")
@click.option("--devices", default="all", show_default=True, metavar="all|cpu|gpu|LIST",
              help="devices to smoke-test, e.g. cpu:0,cpu:1 or gpu:0,gpu:2")
@click.option("--no-smoke", is_flag=True, help="skip the Keras fit (quick checks only)")
@click.option("--timeout", default=120.0, show_default=True, type=click.FloatRange(min=1),
              help="seconds allowed per device")
@click.option("--strict", is_flag=True, help="exit 1 on warnings too")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def validate(ctx, names, all_, devices, no_smoke, timeout, strict, as_json):
    """Validate envs: host, compat, integrity, libraries, a smoke fit per device.

    Exit 0 when ready (or degraded without --strict), 1 when not ready, 2 on bad usage.
    With no NAME, the env `envcheck select` would choose.
    """
    from ..host.probe import probe
    from ..validation.reports import store_report
    from ..validation.validate import parse_devices, validate as run_validate

    parse_devices(devices)  # bad input fails before any work
    targets = _targets(ctx, names, all_)
    host = probe()
    reports = []
    for info in targets:
        report = run_validate(info, host, devices=devices, smoke=not no_smoke, timeout=timeout)
        if info.state != "broken":
            store_report(ctx.home, report)
        reports.append(report)
        if not as_json:
            render(report)
    if as_json:
        if len(reports) == 1:
            emit_json(reports[0].to_json())
        else:
            emit_json({"schema": "envcheck.reports/1", "reports": [r.to_json() for r in reports]})
    verdicts = {r.verdict for r in reports}
    failed = "not-ready" in verdicts or (strict and "degraded" in verdicts)
    ctx_exit(1 if failed else 0)


def ctx_exit(code: int) -> None:
    if code:
        raise click.exceptions.Exit(code)
