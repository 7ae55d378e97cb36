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
        lines = [head + f"no drift ({drift.checked} files, {drift.hashed} hashed, {drift.mode})"]
        if result.adopted:
            lines.append("it had no baseline (made by an older envcheck): every file was checked against its "
                         "RECORD, and the baseline is kept from now on")
        return safe("\n".join(lines))
    lines = [head + f"DRIFT: {drift.summary()}"]
    for kind, found in drift.packages.items():
        for name, what in found.items():
            if kind == "changed":
                detail = f"{what['from']} -> {what['to']}" + (" (RECORD differs)" if what.get("record") else "")
            else:
                detail = what
            lines.append(f"  package {kind}: {name} {detail}")
    for kind, paths in drift.files.items():
        for path in paths[:SHOWN]:
            lines.append(f"  file {kind}: {path}")
        if drift.counts[kind] > SHOWN:
            lines.append(f"  ... and {drift.counts[kind] - SHOWN} more {kind}")
    lock = (result.env.manifest.get("lock") or {}).get("source")
    fix = (f"envcheck env remove {result.env.name} --yes && envcheck env create {result.env.name} --lock {lock}"
           if lock else f"envcheck env remove {result.env.name} --yes, then create it again")
    lines.append(f"fix: {fix}")
    return safe("\n".join(lines))
