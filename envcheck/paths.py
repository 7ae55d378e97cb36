"""Where envcheck keeps things: the env home and its layout.

    $ENVCHECK_HOME/
        envs/NAME/            one virtualenv per env, with envcheck.json (the manifest); for an
                              adopted env, only envcheck's records of it (``envs.adopted``)
        envs/NAME/envcheck-report.json   the last validation (for the pre-training gate)
        locks/NAME.lock       one lock per env, outside the env folder
        presets/*.toml        user presets
        logs/                 installer output: each env's newest create/add logs (``LOGS_KEPT``)
        cache/uv              uv's cache, on the same filesystem as the envs (hard links)
        lib/                  on every env's path: envcheck/ (a copy of data/gate_client.py, the
                              envs' `envcheck.ensure_ready`) and envcheck-python (who answers it)
        preflight.json        this node's verdict in the last `envcheck fleet preflight`
"""
from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the gate's fast path)
if TYPE_CHECKING:
    from pathlib import Path

MANIFEST_NAME = "envcheck.json"
REPORT_NAME = "envcheck-report.json"


def default_home() -> Path:
    from pathlib import Path  # here, not above: the gate's stored-pass answer reads the names only

    env = os.environ.get("ENVCHECK_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("envcheck", appauthor=False))


class Home:
    """The env home. Pure path arithmetic: creating folders is the caller's business."""

    def __init__(self, root: Path | str | None = None):
        from pathlib import Path

        self.root = Path(root).expanduser() if root else default_home()

    @property
    def envs(self) -> Path:
        return self.root / "envs"

    @property
    def locks(self) -> Path:
        return self.root / "locks"

    @property
    def presets(self) -> Path:
        return self.root / "presets"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def uv_cache(self) -> Path:
        return self.root / "cache" / "uv"

    @property
    def preflight(self) -> Path:
        return self.root / "preflight.json"

    def env_dir(self, name: str) -> Path:
        return self.envs / name

    def manifest(self, name: str) -> Path:
        return self.envs / name / MANIFEST_NAME

    def report(self, name: str) -> Path:
        return self.envs / name / REPORT_NAME

    def lock(self, name: str) -> Path:
        return self.locks / f"{name}.lock"
