"""A real Ray cluster on this machine for the fleet tests and benchmark: a head and worker
nodes, each ``ray start --block`` with its own environment (fake NVML, env home, PATH, Python).

Each node is started through ``envcheck.processes.start``: ``--block`` keeps ``ray start`` in
the foreground, and its guard becomes the subreaper of every daemon it spawns (gcs_server,
raylet, agents, workers), so a node's processes are exactly the guard's descendants, found by
pid in /proc, never by name. ``stop`` sends SIGTERM to each of them, waits, sends SIGKILL to
every survivor (Ray's daemons may ignore SIGTERM), reaps the guard, and checks that none of
those pids is left; ``kill`` is a node dying: SIGKILL to all of them at once.

Small on purpose (the machine is shared): one CPU per node, an 80 MB object store, no
dashboard, no log monitor, no usage stats, a temp dir and a free port of its own.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from envcheck import processes

ROOT = Path(__file__).resolve().parent.parent
OBJECT_STORE = 80_000_000  # bytes; Ray's minimum is 75 MiB
START_TIMEOUT = 120.0
STOP_GRACE = 3.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it."""
    tree, found, todo = _children(), set(), [pid]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo += tree.get(current, [])
    return found


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def kill_all(pids: set[int], grace: float) -> set[int]:
    """SIGTERM to each, up to ``grace`` s, SIGKILL to each survivor; the pids still alive after."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in pids:
            if alive(pid):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.05)
    return {p for p in pids if alive(p)}


@dataclass
class RayNode:
    name: str
    child: processes.Child
    log: Path
    env: dict[str, str]

    def pids(self) -> set[int]:
        return descendants(self.child.pid) if self.child.returncode is None else set()

    def find(self, text: str) -> list[int]:
        """Pids of this node's processes whose command line contains ``text``."""
        return sorted(p for p in self.pids() if text in cmdline(p))

    def named(self, name: str) -> list[int]:
        """Pids of this node's processes whose command name is ``name`` (e.g. raylet)."""
        return sorted(p for p in self.pids() if command_name(p) == name)

    def stop(self, grace: float = STOP_GRACE) -> set[int]:
        """Stop every process of the node; the pids that would not die (none, normally)."""
        pids = self.pids()
        left = kill_all(pids, grace)
        self.child.stop(grace=0.5)
        return left | {p for p in pids if alive(p)}

    def kill(self) -> None:
        """The node dies: SIGKILL to all its processes at once (its guard reaps them)."""
        pids = self.pids() - {self.child.pid}
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class RayCluster:
    """Head and workers on this machine; ``stop()`` ends every process they started."""

    def __init__(self, work: Path | None = None) -> None:
        self.temp_dir = Path(tempfile.mkdtemp(prefix="rfl-", dir="/tmp"))  # short: socket paths
        self.work = work or self.temp_dir  # for the callers: files of theirs, drivers' folder
        self.port = free_port()
        self.nodes: dict[str, RayNode] = {}
        self.address = ""

    def _start(self, name: str, env: dict[str, str], args: list[str], python: str) -> RayNode:
        log = self.temp_dir / f"{name}.log"
        env = {k: v for k, v in env.items() if k != "RAY_ADDRESS"}
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        argv = [python, "-m", "ray.scripts.scripts", "start", "--block", "--num-cpus", "1",
                "--object-store-memory", str(OBJECT_STORE), "--disable-usage-stats",
                "--include-log-monitor", "false", "--temp-dir", str(self.temp_dir), *args]
        with open(log, "wb") as out:
            child = processes.start(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=str(self.temp_dir))
        node = RayNode(name, child, log, env)
        self.nodes[name] = node
        deadline = time.monotonic() + START_TIMEOUT
        while "Ray runtime started" not in log.read_text(errors="replace"):
            if child.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"ray node {name} did not start:\n{tail}")
            time.sleep(0.2)
        return node

    def start_head(self, env: dict[str, str]) -> RayNode:
        node = self._start("head", env, ["--head", "--port", str(self.port), "--num-gpus", "0",
                                         "--include-dashboard", "false"], sys.executable)
        found = re.search(r"ray start --address='([^']+)'", node.log.read_text(errors="replace"))
        self.address = found.group(1) if found else f"127.0.0.1:{self.port}"
        return node

    def add_worker(self, name: str, env: dict[str, str], labels: dict[str, str],
                   num_gpus: int | None = None, python: str = sys.executable) -> RayNode:
        args = ["--address", self.address, "--labels", ",".join(f"{k}={v}" for k, v in labels.items())]
        args += ["--num-gpus", str(num_gpus)] if num_gpus is not None else []
        return self._start(name, env, args, python)

    def remove(self, name: str) -> set[int]:
        return self.nodes.pop(name).stop()

    def stop(self) -> set[int]:
        """Every node's processes, workers first: SIGTERM, SIGKILL, checked gone."""
        pids = {name: node.pids() for name, node in self.nodes.items()}
        everything = set().union(*pids.values()) if pids else set()
        left = kill_all(everything, STOP_GRACE)
        for node in self.nodes.values():
            node.child.stop(grace=0.5)
        left |= {p for p in everything if alive(p)}
        left |= {p for p in map(int, filter(str.isdigit, os.listdir("/proc")))
                 if str(self.temp_dir) in cmdline(p) and alive(p)}
        self.nodes.clear()
        if not left:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        return left


# -- Pythons for the nodes ---------------------------------------------------------------------

def python_without_envcheck(folder: Path) -> Path:
    """A venv whose Python imports Ray and the rest of this interpreter's packages, but not
    envcheck: the system site-packages is on its path by a plain .pth line, so the .pth
    files there (envcheck's editable install among them) are not run."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = next((folder / "lib").glob("python3*/site-packages"))
    (site / "system-site.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder / "bin" / "python"


def envcheck_of_version(folder: Path, wheels: Path, version: str) -> Path:
    """A venv (seeing this interpreter's packages, through a .pth line: this interpreter may
    itself be a venv, whose packages ``--system-site-packages`` would not show, or one that sees
    its base interpreter's: those too) with this checkout's envcheck installed as version
    ``version``: the bin folder holding its ``envcheck``."""
    from wheelhouse import build_wheel

    files = {str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "envcheck").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    files.update({f"envcheck/data/presets/{p.name}": p.read_text() for p in (ROOT / "presets").glob("*.toml")})
    files[f"envcheck-{version}.dist-info/entry_points.txt"] = "[console_scripts]\nenvcheck = envcheck.cli:run\n"
    files["envcheck/_version.py"] = f"__version__ = {version!r}\n"  # as a release of that version says it
    wheel = build_wheel(wheels, "envcheck", version, files=files)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    import sysconfig

    ours = dict.fromkeys([*(sysconfig.get_paths()[key] for key in ("purelib", "platlib")),
                          *(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))])
    site = folder / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    # after the venv's own folder, so its envcheck wins over this checkout's editable one
    (site / "zz_test_interpreter.pth").write_text("".join(f"{path}\n" for path in ours))
    subprocess.run([sys.executable, "-m", "uv", "pip", "install", "--python", str(folder / "bin" / "python"),
                    "--no-deps", "--offline", "--quiet", str(wheel)], check=True, capture_output=True)
    return folder / "bin"
