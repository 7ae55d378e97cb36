"""`cache info` and `cache clean`: the installers' caches, how big, and emptying envcheck's.

The disk and lock work is ``envs.caches``; these are its results.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..results import Result

if TYPE_CHECKING:
    from ..envs.caches import Cache, Size
    from .session import Session

DEFAULT_WAIT_S = 30.0  # how long `cache clean` waits for a running install


def cache_json(cache: Cache) -> dict[str, Any]:
    """One cache; ``complete`` false: its walk stopped at its budget, ``bytes`` and ``files``
    are lower bounds."""
    size = cache.size
    return {"installer": cache.installer, "owner": cache.owner,
            "path": None if cache.path is None else str(cache.path), "owned": cache.owned,
            "used_by_installs": cache.used, "exists": size is not None,
            "bytes": size.bytes if size else 0, "files": size.files if size else 0,
            "reclaimable_bytes": size.reclaimable_bytes if size else 0,
            "complete": size.complete if size else True, "note": cache.note}


@dataclass
class CacheInfo(Result):
    schema: ClassVar[str] = "envcheck.cache/1"
    caches: list[Cache] = field(default_factory=list)

    @property
    def own(self) -> Cache:
        """envcheck's uv cache: the one `cache clean` empties."""
        return next(c for c in self.caches if c.owned)

    def body(self) -> dict[str, Any]:
        return {"caches": [cache_json(c) for c in self.caches],
                "total_bytes": sum(c.size.bytes for c in self.caches if c.size),
                "total_complete": all(c.size.complete for c in self.caches if c.size)}


@dataclass
class CacheCleaned(Result):
    schema: ClassVar[str] = "envcheck.cache-clean/1"
    path: str
    before: Size
    after: Size
    left: list[Cache] = field(default_factory=list)  # caches envcheck did not make, untouched

    def body(self) -> dict[str, Any]:
        return {"cleaned": {"installer": "uv", "path": self.path,
                            "bytes_before": self.before.bytes, "bytes_after": self.after.bytes,
                            "files_removed": self.before.files - self.after.files,
                            "freed_bytes": self.before.reclaimable_bytes},
                "left": [cache_json(c) for c in self.left]}


def cache_info(session: Session) -> CacheInfo:
    from ..envs.caches import caches

    return CacheInfo(caches(session.home))


def clean_cache(session: Session, info: CacheInfo, *, wait: float = DEFAULT_WAIT_S) -> CacheCleaned:
    """Empty envcheck's uv cache while no install runs; ``info`` (just read) names the
    caches left alone."""
    from ..envs.caches import clean_uv

    before, after = clean_uv(session.home, wait)
    return CacheCleaned(str(session.home.uv_cache), before, after,
                        [c for c in info.caches if not c.owned and c.size is not None])
