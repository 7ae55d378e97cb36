"""Jupyter kernels per env: `kernel install|remove|list`, and the kernels `env create --kernel`
makes and `env remove` takes away.

A kernel of env NAME is named ``envcheck-name``, shown as "Python 3.x (envcheck: NAME)", and
starts ``ENV/bin/python -m ipykernel_launcher`` with what `envcheck run` gives a command in
the env (``child_env.child_environ``, purpose "kernel"), so a notebook sees the GPUs a `run`
would: the env's bin folder first on ``PATH`` and ``VIRTUAL_ENV``; the library folders of its
CUDA wheels first on ``LD_LIBRARY_PATH``; ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (GPUs numbered as
NVML and ``envcheck gpu`` number them); the framework's variables for the installed version
(``run_environ``: memory growth, allocator settings). ``CUDA_VISIBLE_DEVICES`` is left
as the Jupyter server has it. Jupyter lays the kernelspec's ``env`` over the server's own
environment, expanding ``${PATH}`` and ``${LD_LIBRARY_PATH}`` there; the Python variables
`run` strips (``PYTHONPATH``, ``PYTHONHOME``, ...) can't be removed from a kernelspec, so
they are set empty, which Python reads as unset.

ipykernel is added to the env when it lacks it, through the store's ``add`` (transactional,
recorded in the manifest). The kernelspec files themselves are ``envs.kernelspec``'s.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterable

from ..envs import kernelspec as ks
from ..errors import UsageError
from ..progress import SILENT, Progress
from ..results import Result

if TYPE_CHECKING:
    from ..envs.env_info import EnvInfo
    from ..envs.indexes import IndexSettings
    from .session import Session

IPYKERNEL = "ipykernel"


@dataclass
class KernelStatus:
    """One kernelspec envcheck wrote, judged: ``ok``, ``outdated`` (its variables or
    interpreter differ from what the env needs now), ``broken`` (the env is not ready, its
    interpreter or ipykernel is missing) or ``gone`` (its env or env home no longer exists)."""

    spec: ks.Kernelspec
    status: str
    problem: str | None = None
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        spec = self.spec
        return {"name": spec.name, "display_name": spec.spec.get("display_name"), "path": str(spec.path),
                "env": spec.env, "home": spec.home, "env_path": spec.mark.get("env_path"),
                "python": spec.python, "status": self.status, "problem": self.problem, "fix": self.fix}


@dataclass
class KernelListing(Result):
    schema: ClassVar[str] = "envcheck.kernels/1"
    kernels: list[KernelStatus] = field(default_factory=list)
    searched: list[Path] = field(default_factory=list)  # the KERNELS folders looked in

    def body(self) -> dict[str, Any]:
        return {"kernels": [k.to_json() for k in self.kernels], "searched": [str(p) for p in self.searched]}


@dataclass
class KernelInstalled(Result):
    schema: ClassVar[str] = "envcheck.kernel/1"
    kernel: KernelStatus
    added: dict[str, str] = field(default_factory=dict)  # packages installed for ipykernel
    notes: list[str] = field(default_factory=list)

    def body(self) -> dict[str, Any]:
        return {"kernel": self.kernel.to_json(), "added": self.added, "notes": self.notes}


@dataclass
class KernelsRemoved(Result):
    schema: ClassVar[str] = "envcheck.kernel-removal/1"
    env: str
    removed: list[ks.Kernelspec] = field(default_factory=list)

    def body(self) -> dict[str, Any]:
        return {"env": self.env, "removed": [{"name": s.name, "path": str(s.path)} for s in self.removed]}


# -- what a kernel of an env is --------------------------------------------------------------

def kernel_environ(info: EnvInfo) -> dict[str, str]:
    """The kernelspec's ``env`` for env ``info`` (see the module's docstring)."""
    from ..child_env import child_environ
    from .launch import framework_environ

    return child_environ(info.path.resolve(), framework=framework_environ(info), purpose="kernel")


def kernel_spec(info: EnvInfo, home: Path) -> dict[str, Any]:
    """kernel.json of env ``info`` of the env home ``home``, marked as envcheck's."""
    version = ".".join(str(info.manifest.get("python", {}).get("version") or "3").split(".")[:2])
    env_dir = info.path.resolve()  # the folder, not the interpreter: a venv's python is a link to its base
    return {
        "argv": [str(info.python if info.adopted else env_dir / info.python.relative_to(info.path)), "-m",
                 "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python {version} (envcheck: {info.name})",
        "language": "python",
        "interrupt_mode": "signal",
        "env": kernel_environ(info),
        "metadata": {"debugger": True,
                     ks.MARK: {"env": info.name, "home": str(home), "env_path": str(env_dir)}},
    }


def lacks_ipykernel(requirements: Iterable[Any]) -> bool:
    """True when none of ``requirements`` (parsed) names ipykernel."""
    from ..distributions import canonical_name

    return all(canonical_name(r.name) != IPYKERNEL for r in requirements)


# -- install ---------------------------------------------------------------------------------

def check_target(session: Session, name: str, prefix: str | None = None) -> list[str]:
    """Check, before anything changes, that env NAME's kernelspec can go where asked: a folder
    that is free, or envcheck's for this env, or envcheck's for an env that is gone (replaced:
    the notes say so); and one this user can write. UsageError otherwise."""
    from ..envs.env_info import check_name

    check_name(name)
    kernels = ks.kernels_dir(prefix)
    target = kernels / ks.kernel_name(name)
    _check_writable(kernels)
    exists, spec = ks.read(target)
    if not exists or (spec is not None and spec.belongs_to(name, _home(session))):
        return []
    if spec is None:
        raise UsageError(f"{target} exists and is not a kernelspec envcheck wrote",
                         "remove or rename it yourself, or install elsewhere with --prefix DIR")
    other = judge(session, spec)
    if other.status != "gone":
        raise UsageError(f"{target} is the kernel of env {spec.env} in env home {spec.home}",
                         f"remove it first (envcheck --home {shlex.quote(spec.home)} kernel remove {spec.env}"
                         f"{_prefix_option(kernels)}), or install elsewhere with --prefix DIR")
    return [f"replaced {target}, the kernel of env {spec.env} in env home {spec.home} ({other.problem})"]


def _check_writable(kernels: Path) -> None:
    existing = kernels
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"can't write Jupyter kernels into {kernels}: {existing} is not a folder",
                         "install into your own Jupyter folder (no --prefix), or --prefix DIR you can write")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"can't write Jupyter kernels into {kernels}: {existing} is not writable by this user",
                         "install into your own Jupyter folder (no --prefix), or --prefix DIR you can write")


def install_kernel(session: Session, name: str, *, prefix: str | None = None, installer: str | None = None,
                   index: IndexSettings | None = None, progress: Progress = SILENT) -> KernelInstalled:
    """Install env NAME's kernelspec in the user's Jupyter folder or under ``prefix``
    (``PREFIX/share/jupyter/kernels``), adding ipykernel to the env first when it lacks it."""
    store = session.store
    info = _ready(store.get(name))
    notes = check_target(session, name, prefix)
    added: dict[str, str] = {}
    if IPYKERNEL not in info.packages and info.adopted:  # never ours to change: the user installs it
        raise UsageError(f"adopted env {name} has no {IPYKERNEL}, which a Jupyter kernel needs",
                         f"install it with the env's own installer: {info.add_command(IPYKERNEL)}; "
                         f"then envcheck kernel install {name}")
    if IPYKERNEL not in info.packages:
        before = info.packages
        info = store.add(name, (IPYKERNEL,), installer=installer, index=index, progress=progress)
        added = {n: v for n, v in info.packages.items() if before.get(n) != v}
    kernels = ks.kernels_dir(prefix)
    with store.locked(name):
        if not info.python.exists():
            raise UsageError(f"env {name} was removed meanwhile", f"create it again, then envcheck kernel install {name}")
        spec = kernel_spec(info, _home(session))
        try:
            folder = ks.write(kernels, ks.kernel_name(name), spec, _ipykernel_resources(info.path))
            ks.record(info.record_dir, kernels)
        except OSError as exc:  # a place that passed the checks but can't be written after all
            raise UsageError(f"can't write Jupyter kernels into {kernels}: {exc.strerror or exc}",
                             "install into your own Jupyter folder (no --prefix), or --prefix DIR you can write") from None
    if not ks.searched(kernels):
        notes.append(f"Jupyter does not search {kernels}: start it with JUPYTER_PATH={kernels.parent}")
    return KernelInstalled(KernelStatus(ks.Kernelspec(folder, spec), "ok"), added, notes)


def _ready(info: EnvInfo) -> EnvInfo:
    if info.state != "ready":
        raise UsageError(f"env {info.name} is {info.state}: {info.problem}",
                         info.fix or f"envcheck env remove {info.name} --yes, then create it again")
    return info


def _ipykernel_resources(env_dir: Path) -> Path | None:
    from ..envs.metadata import site_packages

    for folder in site_packages(env_dir):
        if (folder / IPYKERNEL / "resources").is_dir():
            return folder / IPYKERNEL / "resources"
    return None


def _home(session: Session) -> Path:
    return session.home.root.resolve()


# -- list, judge, remove ---------------------------------------------------------------------

def judge(session: Session, spec: ks.Kernelspec) -> KernelStatus:
    """Does kernelspec ``spec`` still start a working kernel of its env?"""
    from ..paths import Home
    from .session import env_store

    ours = os.path.realpath(spec.home) == str(_home(session))
    option = "" if ours else f"--home {shlex.quote(spec.home)} "
    place = _prefix_option(spec.path.parent)  # without it, remove misses this kernelspec, install writes another
    reinstall = f"envcheck {option}kernel install {spec.env}{place}"
    gone_fix = f"envcheck {option}kernel remove {spec.env}{place}"
    if not Path(spec.home).is_dir():
        return KernelStatus(spec, "gone", f"its env home {spec.home} is gone", gone_fix)
    store = session.store if ours else env_store(Home(spec.home), session.observer)
    try:
        info = store.get(spec.env)
    except UsageError:
        return KernelStatus(spec, "gone", f"env {spec.env} is gone", gone_fix)
    if info.state != "ready":
        return KernelStatus(spec, "broken", f"env {spec.env} is {info.state}: {info.problem}", info.fix)
    if not Path(spec.python).exists():
        return KernelStatus(spec, "broken", f"its interpreter {spec.python} is missing", reinstall)
    if IPYKERNEL not in info.packages:
        return KernelStatus(spec, "broken", f"env {spec.env} has no ipykernel", reinstall)
    expected = kernel_spec(info, Path(spec.home))
    if any(spec.spec.get(key) != expected[key] for key in ("argv", "env")):
        return KernelStatus(spec, "outdated", "its interpreter or variables differ from what `envcheck run` "
                            "sets in the env now", reinstall)
    return KernelStatus(spec, "ok")


def _prefix_option(kernels: Path) -> str:
    """`` --prefix P`` where the kernelspecs in ``kernels`` need it to be found, else ``""``."""
    prefix = ks.prefix_of(kernels)
    return f" --prefix {shlex.quote(str(prefix))}" if prefix else ""


def _dirs(session: Session, names: Iterable[str], prefix: str | None) -> list[Path]:
    """Jupyter's KERNELS folders, then those the envs ``names`` recorded, then ``prefix``'s."""
    recorded = [d for name in names for d in ks.recorded(session.home.env_dir(name))]
    return ks.search_dirs([*recorded, *([ks.kernels_dir(prefix)] if prefix else [])])


def list_kernels(session: Session, name: str | None = None, *, prefix: str | None = None) -> KernelListing:
    """The kernelspecs envcheck wrote (of env NAME of this home only, when given), judged."""
    from ..envs.env_info import check_name

    if name is not None:
        check_name(name)
    names = [name] if name is not None else [info.name for info in session.store.list()]
    dirs = _dirs(session, names, prefix)
    specs = [s for s in ks.find(dirs) if name is None or s.belongs_to(name, _home(session))]
    return KernelListing([judge(session, s) for s in specs], dirs)


def kernels_of(session: Session, name: str, prefix: str | None = None) -> list[Any]:
    """The kernelspecs envcheck wrote for env NAME of this home, wherever Jupyter, the env's
    record and ``prefix`` say."""
    return [s for s in ks.find(_dirs(session, [name], prefix)) if s.belongs_to(name, _home(session))]


def delete_kernels(specs: list[Any]) -> list[Path]:
    """Delete these kernelspecs (envcheck's, read again first); their folders."""
    for spec in specs:
        ks.delete(spec)
    return [spec.path for spec in specs]


def remove_kernel(session: Session, name: str, *, prefix: str | None = None) -> KernelsRemoved:
    """Remove every kernelspec envcheck wrote for env NAME of this home (the env may be gone)."""
    from ..envs.env_info import check_name

    check_name(name)
    specs = kernels_of(session, name, prefix)
    if not specs:
        searched = ", ".join(map(str, _dirs(session, [name], prefix)))
        raise UsageError(f"no Jupyter kernel of env {name} found (looked in {searched})",
                         "see `envcheck kernel list`")
    delete_kernels(specs)
    return KernelsRemoved(name, specs)
