"""Text for `cache info` and `cache clean`."""
from __future__ import annotations

from ..render import table


def human_size(count: int) -> str:
    """Bytes as people read them, in binary units as du -h and uv show them."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    size, unit = float(count), 0
    while size >= 1024 and unit < len(units) - 1:
        size, unit = size / 1024, unit + 1
    return f"{count} B" if unit == 0 else f"{size:.1f} {units[unit]}"


def cache_info(result) -> str:
    rows = [("INSTALLER", "OWNER", "SIZE", "FILES", "CLEAN FREES", "PATH")]
    for c in result.caches:
        if c.size is None:
            size = files = frees = "-"
        else:
            size, files = human_size(c.size.bytes), str(c.size.files)
            if not c.size.complete:  # a lower bound: the note says why
                size, files = f"at least {size}", f"at least {files}"
            frees = human_size(c.size.reclaimable_bytes) if c.owned else "not cleaned"
        where = str(c.path) if c.path else "none"
        rows.append((c.installer, c.owner, size, files, frees,
                     where + (" (installs use it)" if c.used else "")))
    lines = table(rows)
    lines += [f"{c.installer} ({c.owner}): {c.note}" for c in result.caches if c.note]
    if any(c.owned and c.size and c.size.reclaimable_bytes < c.size.bytes for c in result.caches):
        lines.append("files uv hard-linked into envs stay with them: a clean frees only the rest")
    return "\n".join(lines)


def cache_cleaned(result) -> str:
    before, after = result.before, result.after
    if before.bytes == 0:
        lines = [f"envcheck's uv cache {result.path} is empty already"]
    else:
        lines = [f"emptied envcheck's uv cache {result.path}: {before.files - after.files} files, "
                 f"{human_size(before.bytes - after.bytes)} ({human_size(before.reclaimable_bytes)} "
                 f"freed on disk; files linked into envs stay with them)"]
    lines += [f"left alone: {c.installer} cache {c.path} ({c.owner}, {human_size(c.size.bytes)})"
              for c in result.left]
    return "\n".join(lines)
