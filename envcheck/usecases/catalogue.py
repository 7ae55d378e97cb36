"""`presets list|show` and `env list|show|export|remove`: what exists, as results."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..results import Result


@dataclass
class PresetListing(Result):
    schema: ClassVar[str] = "envcheck.presets/1"
    presets: list[Any] = field(default_factory=list)  # envs.presets.Preset
    user_dir: str = ""

    def body(self) -> dict[str, Any]:
        return {"presets": [p.to_json() for p in self.presets]}


@dataclass
class PresetDetail(Result):
    schema: ClassVar[str] = "envcheck.preset/1"
    preset: Any

    def body(self) -> dict[str, Any]:
        return {"preset": self.preset.to_json()}


@dataclass
class EnvListing(Result):
    schema: ClassVar[str] = "envcheck.envs/1"
    envs: list[Any] = field(default_factory=list)  # envs.store.EnvInfo
    hint: str = ""  # what to create when there is nothing

    def body(self) -> dict[str, Any]:
        return {"envs": [e.to_json() for e in self.envs]}


@dataclass
class EnvDetail(Result):
    schema: ClassVar[str] = "envcheck.env/1"
    env: Any
    changed: dict[str, str] | None = None  # after `env add`: what it installed or upgraded

    def body(self) -> dict[str, Any]:
        return {"env": self.env.to_json()}


def list_presets(session) -> PresetListing:
    from ..envs.presets import available_presets

    return PresetListing(list(available_presets(session.home).values()), str(session.home.presets))


def show_preset(session, name: str | None, file: str | None) -> PresetDetail:
    from ..envs.presets import resolve_preset

    return PresetDetail(resolve_preset(session.home, name=name, file=file))


def list_envs(session) -> EnvListing:
    from .hints import cpu_hint

    envs = session.store.list()
    return EnvListing(envs, "" if envs else f"create one: {cpu_hint(session.home)}")
