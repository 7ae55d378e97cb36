"""`env verify`: an env's files against its lock, or against what was installed at create/add
(``envs.verify`` compares; the store takes and keeps the baseline).

Kept apart from ``locking`` and plain (no dataclasses, no typing at import): `env verify` is
run often, by hand, by a node's health check, by a fleet, and its answer should cost little
more than the stats of the env's files (``bench/bench_verify.py`` measures it).
"""
from __future__ import annotations

from ..results import Result

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see above)
if TYPE_CHECKING:
    from ..envs.env_info import EnvInfo
    from ..envs.verify import Drift
    from .session import Session


class VerifyResult(Result):
    schema = "envcheck.verify/1"

    def __init__(self, env: EnvInfo, drift: Drift, adopted: bool = False):
        self.env, self.drift = env, drift
        self.adopted = adopted  # the env had no baseline: its RECORDs were the reference, and one was taken

    @property
    def reference(self) -> str:
        lock = (self.env.manifest.get("lock") or {}).get("digest")
        return f"lock {lock}" if lock else "what was installed at create/add"

    @property
    def exit_code(self) -> int:
        return 0 if self.drift.clean else 1

    @property
    def fix(self) -> str | None:
        """What to do about the drift: packages only added (a `pip install` in the env) are
        recorded with `env add` or taken out again with the env's pip; anything else means
        making the env again (from its lock, where it has one)."""
        if self.drift.clean:
            return None
        name, packages = self.env.name, self.drift.packages
        added = packages["added"]
        only_added = added and not packages["removed"] and not packages["changed"] \
            and not any(self.drift.counts.values())
        if only_added:
            pins = " ".join(f"{n}=={v}" for n, v in sorted(added.items()))
            return (f"record them: envcheck env add {name} {pins}; or take them out again: "
                    f"{self.env.path}/bin/python -m pip uninstall -y {' '.join(sorted(added))}")
        lock = (self.env.manifest.get("lock") or {}).get("source")
        return (f"envcheck env remove {name} --yes && envcheck env create {name} --lock {lock}" if lock
                else f"envcheck env remove {name} --yes, then create it again")

    def body(self) -> dict:
        return {"env": self.env.name, "reference": self.reference,
                "lock": (self.env.manifest.get("lock") or {}).get("digest"), "adopted": self.adopted,
                **self.drift.to_json(), "fix": self.fix}


def verify_env(session: Session, name: str, hashes: bool = False) -> VerifyResult:
    info, drift, adopted = session.store.verify(name, hashes)
    return VerifyResult(info, drift, adopted)
