"""Text views of `env lock` and `env verify`."""
from __future__ import annotations

from ..render import safe

SHOWN = 20  # files listed per kind in text (the JSON lists up to verify.LISTED, and counts them all)


def lock_written(result) -> str:
    target = result.target
    gpu = f", driver {target['for_driver']}, GPUs {' '.join(target['for_cc'])}" if target.get("for_driver") else ""
    lines = [f"locked {len(result.lock.packages)} packages for python {target['python']} on {target['platform']}"
             f"{gpu} (variant {target['variant']}) to {result.output}",
             f"digest {result.lock.digest}"]
    if result.wheelhouse:
        lines.append(f"wheelhouse {result.wheelhouse}: {result.wheels} wheels and pylock.toml "
                     f"(make the env offline: envcheck env create NAME --lock {result.wheelhouse}/pylock.toml --offline)")
    return safe("\n".join(lines))


def verified(result) -> str:
    drift = result.drift
    head = f"env {result.env.name} against {result.reference}: "
    if drift.clean:
        compiled = f", {drift.compiled} pyc(s) compiled" if drift.compiled else ""
        lines = [head + f"no drift ({drift.checked} files, {drift.hashed} hashed{compiled}, {drift.mode})"]
        if result.adopted:
            first = ("the first check since it was adopted" if result.env.adopted
                     else "it had no baseline (made by an older envcheck)")
            lines.append(f"{first}: every file was checked against its RECORD, and the baseline is kept from now on")
        return safe("\n".join(lines + _writable(result)))
    lines = [head + f"DRIFT: {drift.summary()}"]
    if drift.bytecode_note:
        lines.append(f"  bytecode could not be judged: {drift.bytecode_note}")
    for kind, found in drift.packages.items():
        for name, what in found.items():
            if kind == "changed":
                detail = f"{what['from']} -> {what['to']}" + (" (RECORD differs)" if what.get("record") else "")
            else:
                detail = what
            lines.append(f"  package {kind}: {name} {detail}")
    for kind, paths in drift.files.items():
        for path in paths[:SHOWN]:
            lines.append(f"  {'pyc not compiled from its source' if kind == 'bytecode' else 'file ' + kind}: {path}")
        if drift.counts[kind] > SHOWN:
            lines.append(f"  ... and {drift.counts[kind] - SHOWN} more {kind}")
    lines.append(f"fix: {result.fix}")
    return safe("\n".join(lines + _writable(result)))


def _writable(result) -> list[str]:
    """What the env's group or anyone may write: a warning, each path, and its fix."""
    drift = result.drift
    if not drift.writable_count:
        return []
    lines = [f"WARNING: {drift.writable_count} file(s) writable by others: anyone who may write them can "
             f"change what a training job runs"]
    lines += [f"  writable by others: {path}" for path in drift.writable[:SHOWN]]
    if drift.writable_count > SHOWN:
        lines.append(f"  ... and {drift.writable_count - SHOWN} more")
    return lines + [f"fix: chmod -R go-w {result.env.path}"]
