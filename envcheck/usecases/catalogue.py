"""`presets list|show` and `env list|show|export|remove`: what exists, as results."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..progress import SILENT, Progress
from ..results import Result

if TYPE_CHECKING:
    from ..envs.env_info import EnvInfo
    from ..envs.indexes import IndexSettings
    from ..envs.presets import Preset
    from .kernels import KernelInstalled
    from .session import Session


@dataclass
class PresetListing(Result):
    schema: ClassVar[str] = "envcheck.presets/1"
    presets: list[Preset] = field(default_factory=list)
    user_dir: str = ""

    def body(self) -> dict[str, Any]:
        return {"presets": [p.to_json() for p in self.presets]}


@dataclass
class PresetDetail(Result):
    schema: ClassVar[str] = "envcheck.preset/1"
    preset: Preset

    def body(self) -> dict[str, Any]:
        return {"preset": self.preset.to_json()}


@dataclass
class EnvListing(Result):
    schema: ClassVar[str] = "envcheck.envs/1"
    envs: list[EnvInfo] = field(default_factory=list)
    hint: str = ""  # what to create when there is nothing

    def body(self) -> dict[str, Any]:
        return {"envs": [e.to_json() for e in self.envs]}


@dataclass
class EnvDetail(Result):
    schema: ClassVar[str] = "envcheck.env/1"
    env: EnvInfo
    changed: dict[str, str] | None = None  # after `env add`: what it installed or upgraded
    created: bool = False  # made by this command
    kernel: KernelInstalled | None = None  # after `env create --kernel`

    @property
    def warnings(self) -> list[str]:
        """What the user should know about the create (a preset's index that was unreachable)."""
        return list(self.env.manifest.get("warnings") or []) if self.created else []

    def body(self) -> dict[str, Any]:
        return {"env": self.env.to_json(), **({"kernel": self.kernel.to_json()} if self.kernel else {}),
                **({"warnings": self.warnings} if self.warnings else {})}


def list_presets(session: Session) -> PresetListing:
    from ..envs.presets import available_presets

    return PresetListing(list(available_presets(session.home).values()), str(session.home.presets))


def show_preset(session: Session, name: str | None, file: str | None) -> PresetDetail:
    from ..envs.presets import resolve_preset

    return PresetDetail(resolve_preset(session.home, name=name, file=file))


def list_envs(session: Session) -> EnvListing:
    from .hints import cpu_hint

    envs = session.store.list()
    return EnvListing(envs, "" if envs else f"create one: {cpu_hint(session.home)}")


def show_env(session: Session, name: str) -> EnvDetail:
    return EnvDetail(session.store.get(name))


def create_env(session: Session, name: str, *, preset_name: str | None, preset_file: str | None,
               python: str | None = None, add: tuple[str, ...] = (), installer: str | None = None,
               index: IndexSettings | None = None, progress: Progress = SILENT, kernel: bool = False,
               for_another_host: bool = False, variant: str | None = None, link: bool = True) -> EnvDetail:
    """Create env NAME from a preset; with ``kernel``, ipykernel too (unless the preset or
    ``add`` names it) and its Jupyter kernel in the user's Jupyter folder. A GPU preset this
    host can't train with is refused before any download unless ``for_another_host``; of a
    preset with variants, this host gets the first that fits (``variant``: that one).
    ``link``: link an intact twin env's files where there is one (``envs.linking``)."""
    from ..envs.presets import resolve_preset
    from ..errors import UsageError
    from .hints import cpu_hint

    if bool(preset_name) == bool(preset_file):
        raise UsageError("give exactly one of --preset and --preset-file", f"e.g. {cpu_hint(session.home)}")
    from .variants import refuse_misfit

    preset = refuse_misfit(session, resolve_preset(session.home, name=preset_name, file=preset_file), python,
                           variant, for_another_host)
    for_kernel = ()  # ipykernel, when the kernel asked for needs it and nothing else names it
    if kernel:
        from ..envs.presets import parse_requirement
        from .kernels import IPYKERNEL, check_target, install_kernel, lacks_ipykernel

        check_target(session, name)  # a place the kernel can't go is bad input: before the create
        for_kernel = (IPYKERNEL,) if lacks_ipykernel([*preset.requirements, *map(parse_requirement, add)]) else ()
    detail = EnvDetail(session.store.create(name, preset, python=python, add=(*add, *for_kernel),
                                            installer=installer, index=index, progress=progress, link=link),
                       created=True)
    if kernel:
        detail.kernel = install_kernel(session, name)
        detail.kernel.added = {n: detail.env.packages.get(n, "?") for n in for_kernel}  # say so
    return detail


def adopt_env(session: Session, name: str, path: str) -> EnvDetail:
    """Register the env or interpreter at ``path`` as env ``name`` (``envs.adopted``): read,
    never changed."""
    return EnvDetail(session.store.adopt(name, path), created=True)


def add_packages(session: Session, name: str, requirements: tuple[str, ...], *, installer: str | None = None,
                 index: IndexSettings | None = None, progress: Progress = SILENT) -> EnvDetail:
    before = session.store.get(name).packages
    info = session.store.add(name, requirements, installer=installer, index=index, progress=progress)
    return EnvDetail(info, {n: v for n, v in info.packages.items() if before.get(n) != v})


def export_env(session: Session, name: str) -> tuple[str, list[str]]:
    """Exact ``name==version`` pins, usable as a requirements file (text by nature, no JSON),
    and why each package that can't be written as one was left out."""
    return session.store.export(name)


def removal_target(session: Session, name: str):
    """The folder `env remove` would delete, after every safety check (for the confirmation)."""
    return session.store.removal_target(name)


def remove_env(session: Session, name: str):
    """Delete env NAME (only an env envcheck created, inside its home) and the Jupyter kernels
    envcheck installed for it; (its folder, the kernels' folders)."""
    from .kernels import delete_kernels, kernels_of

    kernels = kernels_of(session, name)  # first: the env's folder records where they went
    return session.store.remove(name), delete_kernels(kernels)
