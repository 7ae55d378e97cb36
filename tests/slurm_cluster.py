"""A real Slurm cluster on this machine for the Slurm tests and benchmark: Debian's slurm-wlm
(22.05: ``auth/none``, ``cred/none``, ``SlurmUser=root``), one slurmctld and a slurmd per node
(Debian's build runs several slurmd on one host: ``MULTIPLE_SLURMD``), on loopback ports of
their own, with a config, state, spool and log folder of their own.

Each node has its own stand-in hardware, in ``nodes/NAME/``: ``env.sh`` (the fake NVML's
variables, the device seam, the kernel-log seam, an env home, PATH and SLURM_CONF), ``dev/``
(``nvidia<minor>``, ``nvidiactl``, ``nvidia-uvm`` as links to /dev/null: gres.conf's ``File=``
must be character devices) and ``kern.log``. slurmd runs a health check, prolog and epilog with
almost no environment, so each hook is a wrapper that sources its node's ``env.sh`` (as the
admin's wrapper sets PATH) and runs envcheck; a TaskProlog gives srun's tasks the node's
variables. A test changes a node's hardware by rewriting its ``env.sh`` (``set_node``) or
appending to its kernel log.

Every daemon is started through ``envcheck.processes.start`` (its guard is the subreaper of
what the daemon forks: slurmstepd) and stopped by pid: SIGTERM to each descendant, then SIGKILL
to survivors, each checked gone (``stop`` returns what is left: nothing, normally).
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from envcheck import processes
from ray_cluster import alive, cmdline, descendants, free_port, kill_all

START_TIMEOUT = 60.0
STOP_GRACE = 5.0


def slurm_missing() -> str | None:
    """Why the Slurm tests can't run here, or None."""
    for tool in ("slurmctld", "slurmd", "scontrol", "sinfo", "srun", "sbatch"):
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            return f"Debian's slurm-wlm is not installed (no {tool}; apt-get install slurm-wlm; .ci/run installs it as root)"
    if os.geteuid() != 0:
        return "the test cluster runs slurmd as root (SlurmUser=root, auth/none)"
    return None


def _tool(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclass
class Node:
    name: str
    folder: Path
    port: int
    gpus: list[str]
    extra: dict[str, str] = field(default_factory=dict)
    gres: str | None = None  # slurm.conf's Gres=; default gpu:a100:<count>
    child: processes.Child | None = None

    @property
    def dev(self) -> Path:
        return self.folder / "dev"

    @property
    def kernel_log(self) -> Path:
        return self.folder / "kern.log"

    @property
    def home(self) -> Path:
        return self.folder / "home"


class SlurmCluster:
    def __init__(self, root: Path | None = None, interval: int = 5,
                 hooks: tuple[str, ...] = ("healthcheck", "prolog", "epilog")):
        self.root = Path(root or tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
        self.conf = self.root / "etc" / "slurm.conf"
        self.port = free_port()
        self.interval = interval
        self.hooks = hooks
        self.nodes: dict[str, Node] = {}
        self.ctld: processes.Child | None = None
        self.lib_dir: Path | None = None

    # -- the config --------------------------------------------------------------------------

    def add_node(self, name: str, gpus: list[str], gres: str | None = None, **extra: str) -> Node:
        folder = self.root / "nodes" / name
        (folder / "dev").mkdir(parents=True)
        node = Node(name, folder, free_port(), list(gpus), dict(extra), gres)
        for target in [f"nvidia{m}" for m in range(8)] + ["nvidiactl", "nvidia-uvm"]:
            (node.dev / target).symlink_to("/dev/null")
        node.kernel_log.write_text("[    0.000000] Linux version 6.8.0\n")
        node.home.mkdir()
        self.nodes[name] = node
        return node

    def environ(self, **extra: str) -> dict[str, str]:
        """An environment for Slurm's commands run by the test (srun, sinfo, scontrol, envcheck)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "FAKE_NVML_", "ENVCHECK_"))}
        env["SLURM_CONF"] = str(self.conf)
        env.update(extra)
        return env

    def set_node(self, name: str, gpus: list[str] | None = None, **extra: str) -> None:
        """Rewrite node ``name``'s stand-in hardware (its ``env.sh``, read by every hook run)."""
        node = self.nodes[name]
        if gpus is not None:
            node.gpus = list(gpus)
        node.extra.update(extra)
        self._write_env(node)

    def node_environ(self, name: str) -> dict[str, str]:
        node = self.nodes[name]
        env = {"LD_LIBRARY_PATH": str(self.lib_dir), "FAKE_NVML_GPUS": ";".join(node.gpus),
               "ENVCHECK_TEST_DEV_DIR": str(node.dev), "ENVCHECK_TEST_KERNEL_LOG": str(node.kernel_log),
               "ENVCHECK_HOME": str(node.home), "SLURM_CONF": str(self.conf),
               "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}
        env.update(node.extra)
        return env

    def _write_env(self, node: Node) -> None:
        variables = self.node_environ(node.name)
        lines = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in variables.items())
        tmp = node.folder / "env.sh.tmp"
        tmp.write_text(lines)
        os.replace(tmp, node.folder / "env.sh")
        tasks = "".join(f"export {k}={v}\n" for k, v in variables.items())  # TaskProlog: the rest of the line
        tmp = node.folder / "task.env.tmp"
        tmp.write_text(tasks)
        os.replace(tmp, node.folder / "task.env")

    def _hook(self, name: str, command: str) -> Path:
        path = self.root / "etc" / name
        path.write_text("#!/bin/sh\n"
                        f'. "{self.root}/nodes/$SLURMD_NODENAME/env.sh"\n'
                        f'exec {shlex.quote(sys.executable)} -m envcheck {command} '
                        f'>> "{self.root}/nodes/$SLURMD_NODENAME/{name}.log" 2>&1\n')
        path.chmod(0o755)
        return path

    def write_config(self) -> None:
        etc = self.root / "etc"
        etc.mkdir(exist_ok=True)
        for folder in ("state", "log", *(f"spool/{n}" for n in self.nodes)):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        for node in self.nodes.values():
            self._write_env(node)
        task = etc / "taskprolog.sh"
        task.write_text(f'#!/bin/sh\ncat "{self.root}/nodes/$SLURMD_NODENAME/task.env"\n')
        task.chmod(0o755)
        lines = [
            "ClusterName=envcheck", "SlurmctldHost=localhost(127.0.0.1)", f"SlurmctldPort={self.port}",
            "AuthType=auth/none", "CredType=cred/none", "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={self.root}/state", f"SlurmdSpoolDir={self.root}/spool/%n",
            f"SlurmctldPidFile={self.root}/slurmctld.pid", f"SlurmdPidFile={self.root}/slurmd-%n.pid",
            f"SlurmctldLogFile={self.root}/log/slurmctld.log", f"SlurmdLogFile={self.root}/log/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core", "ReturnToService=2", "MpiDefault=none", "SwitchType=switch/none",
            "JobCompType=jobcomp/none", "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none", "SlurmdParameters=config_overrides", "SlurmdTimeout=300",
            "KillWait=2", "MinJobAge=10", "GresTypes=gpu", f"TaskProlog={task}",
        ]
        if "healthcheck" in self.hooks:
            lines += [f"HealthCheckProgram={self._hook('healthcheck', 'slurm healthcheck --budget 4')}",
                      f"HealthCheckInterval={self.interval}", "HealthCheckNodeState=ANY"]
        for hook in ("prolog", "epilog"):
            if hook in self.hooks:
                lines.append(f"{hook.title()}={self._hook(hook, f'slurm {hook}')}")
        for node in self.nodes.values():
            gres = node.gres if node.gres is not None else f"gpu:a100:{len(node.gpus)}" if node.gpus else ""
            lines.append(f"NodeName={node.name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={node.port} "
                         f"CPUs=2 RealMemory=1" + (f" Gres={gres}" if gres else ""))
        lines.append(f"PartitionName=test Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE State=UP "
                     "OverSubscribe=YES")
        self.conf.write_text("\n".join(lines) + "\n")
        gres_lines = [f"NodeName={n.name} Name=gpu Type=a100 File={n.dev}/nvidia[0-{len(n.gpus) - 1}]"
                      for n in self.nodes.values() if n.gpus]
        (etc / "gres.conf").write_text("\n".join(gres_lines) + "\n")

    # -- running -----------------------------------------------------------------------------

    def start(self, lib_dir: Path) -> None:
        self.lib_dir = lib_dir
        self.write_config()
        env = self.environ()
        with open(self.root / "log" / "slurmctld.out", "wb") as out:
            self.ctld = processes.start([_tool("slurmctld"), "-D", "-i", "-f", str(self.conf)], env=env,
                                        stdout=out, stderr=subprocess.STDOUT, cwd=str(self.root))
        for node in self.nodes.values():
            self.start_node(node.name)
        self.wait_for(lambda: all(s == "idle" for s in self.states().values()), START_TIMEOUT, "every node idle")

    def start_node(self, name: str) -> None:
        node = self.nodes[name]
        with open(self.root / "log" / f"{name}.out", "wb") as out:
            node.child = processes.start([_tool("slurmd"), "-D", "-f", str(self.conf), "-N", name],
                                         env=self.environ(), stdout=out, stderr=subprocess.STDOUT,
                                         cwd=str(self.root))

    def stop_node(self, name: str) -> set[int]:
        node = self.nodes[name]
        left = self._stop([node.child]) if node.child else set()
        node.child = None
        return left

    def run(self, *argv: str, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, env=env or self.environ(),
                              timeout=timeout, cwd=str(self.root))

    def states(self) -> dict[str, str]:
        done = self.run("sinfo", "--noheader", "--Node", "--format", "%N|%T")
        return dict(line.split("|", 1) for line in done.stdout.split() if "|" in line)

    def reasons(self) -> dict[str, str]:
        """``sinfo -R``: {node: reason}."""
        done = self.run("sinfo", "--list-reasons", "--noheader", "--format", "%N|%E")
        found = {}
        for line in done.stdout.splitlines():
            nodes, _, reason = line.partition("|")
            for name in self.run("scontrol", "show", "hostnames", nodes).stdout.split():
                found[name] = reason
        return found

    def wait_for(self, what, timeout: float, said: str, step: float = 0.25):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = what()
            if found:
                return found
            time.sleep(step)
        found = what()
        if not found:
            logs = {p.name: p.read_text(errors="replace")[-1500:] for p in (self.root / "log").glob("*")}
            raise AssertionError(f"slurm test cluster: not {said} within {timeout} s; states {self.states()}; "
                                 f"logs {logs}")
        return found

    def _stop(self, children: list[processes.Child]) -> set[int]:
        pids = set().union(*(descendants(c.pid) for c in children if c.returncode is None)) if children else set()
        left = kill_all(pids, STOP_GRACE)
        for child in children:
            child.stop(grace=0.5)
        return left | {p for p in pids if alive(p)}

    def stop(self) -> set[int]:
        """Every daemon and what it started, slurmd first: SIGTERM, SIGKILL, checked gone; also any
        process whose command line names this cluster's folder."""
        left = self._stop([n.child for n in self.nodes.values() if n.child])
        for node in self.nodes.values():
            node.child = None
        left |= self._stop([self.ctld] if self.ctld else [])
        self.ctld = None
        left |= {p for p in map(int, filter(str.isdigit, os.listdir("/proc")))
                 if str(self.root) in cmdline(p) and alive(p) and p != os.getpid()}
        return left
