"""Text for `kernel install|remove|list` (and the kernel line of `env create --kernel`)."""
from __future__ import annotations

from ..render import table


def kernel_installed(result) -> str:
    spec = result.kernel.spec
    lines = [f"installed Jupyter kernel {spec.name} \"{spec.spec['display_name']}\" at {spec.path}"]
    if result.added:
        others = len(result.added) - 1
        lines.append(f"env {spec.env} had no ipykernel: added ipykernel {result.added.get('ipykernel', '')}"
                     + (f" and {others} package{'s' if others != 1 else ''} it needs" if others > 0 else ""))
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def kernel_listing(result) -> str:
    if not result.kernels:
        return ("no Jupyter kernels of envcheck's envs (looked in "
                f"{', '.join(map(str, result.searched))}); make one: envcheck kernel install ENV")
    rows = [("KERNEL", "ENV", "STATUS", "PATH")]
    rows += [(k.spec.name, k.spec.env, k.status, str(k.spec.path)) for k in result.kernels]
    lines = table(rows)
    lines += [f"{k.spec.name}: {k.problem}" + (f"; fix: {k.fix}" if k.fix else "")
              for k in result.kernels if k.problem]
    return "\n".join(lines)


def kernels_removed(result) -> str:
    return "\n".join(f"removed Jupyter kernel {spec.name} of env {result.env} ({spec.path})"
                     for spec in result.removed)
