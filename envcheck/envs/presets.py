"""Presets: one TOML file each, parsed and validated into a frozen ``Preset``.

Built-in presets ship inside the wheel as ``envcheck/presets/*.toml`` (the top-level
``presets/`` folder of the repository in an editable install); user presets live in
``$ENVCHECK_HOME/presets/*.toml`` and override a built-in of the same name. A preset's
name is its file's stem. Every defect in a file is a ``UsageError`` naming the file and
the key (or line), so a typo can never turn into a half-made env. Files are read within
limits (``LIMITS``: size, number of packages, length of each text) so a hostile file costs
neither memory nor time, and each requirement is parsed once, here: ``Preset.requirements``.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from ..errors import UsageError
from ..paths import Home

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

KINDS = ("cpu", "gpu")
TOP_KEYS = ("title", "description", "kind", "framework", "requires-python", "packages", "indexes", "gpu", "variants")
GPU_KEYS = ("cuda", "cudnn", "libraries")
REQUIRED = ("title", "kind", "framework", "packages")
_VERSION = re.compile(r"^\d+(\.\d+){0,2}$")
_TOML_WHERE = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)\s*$")
REQUIREMENT_FIX = "use PEP 508 form like 'numpy>=1.24'"
# What one preset file may hold; each limit is named in the error that reports it.
LIMITS = {"file bytes": 1 << 20, "packages": 500, "libraries": 64, "indexes": 8, "name": 100, "title": 200,
          "description": 4000, "text": 1000}


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    description: str
    kind: str
    framework: str
    requires_python: SpecifierSet
    packages: list[str]
    cuda: str | None
    cudnn: str | None
    libraries: list[str]
    source: Path
    origin: str  # "builtin" | "user" | "file"
    content_hash: str = field(default="", compare=False)
    requirements: tuple[Requirement, ...] = field(default=(), compare=False)  # ``packages``, parsed
    # Extra package indexes the packages come from upstream (a framework's CPU-only index): used when
    # reachable, a warning when not (the configured indexes and find-links may hold the wheels).
    indexes: tuple[str, ...] = ()
    # Which build this is (``variants``: ``cpu``, ``cu12``, a declared variant's name), and every
    # variant the file declares, in its order of preference (empty: it declares none).
    variant: str = field(default="", compare=False)
    variants: tuple["Preset", ...] = field(default=(), compare=False, repr=False)

    def with_variant(self, name: str) -> "Preset":
        """The variant called ``name`` (a UsageError naming those there are)."""
        for preset in self.variants or (self,):
            if preset.variant == name:
                return preset
        names = ", ".join(p.variant for p in self.variants or (self,))
        raise UsageError(f"preset {self.name} has no variant {name!r}", f"choose one of: {names}")

    @property
    def wheel_libraries(self) -> bool:
        """Its CUDA libraries come as pip wheels (``nvidia-*``) inside the env, not from the
        system: they can only be probed once the env exists."""
        return any(r.name.lower().startswith("nvidia-") for r in self.requirements)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "kind": self.kind,
            "framework": self.framework,
            "requires_python": specifier_text(self.requires_python),
            "packages": list(self.packages),
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "libraries": list(self.libraries),
            "indexes": list(self.indexes),
            "source": str(self.source),
            "origin": self.origin,
            "content_hash": self.content_hash,
            "variant": self.variant,
            "variants": [p.variant for p in self.variants],
        }


def specifier_text(specifiers: SpecifierSet) -> str:
    """A specifier set as people write it: lower bounds first ('>=3.10,<3.14')."""
    order = {">=": 0, ">": 0, "~=": 1, "==": 1, "===": 1, "!=": 2, "<=": 3, "<": 3}
    ordered = sorted(specifiers, key=lambda s: (order.get(s.operator, 4), str(s)))
    return ",".join(str(s) for s in ordered)


def parse_requirement(text: str) -> Requirement:
    """A PEP 508 requirement, or a UsageError that shows the accepted form."""
    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        raise UsageError(f"invalid requirement {text!r}: {_first_line(exc)}", REQUIREMENT_FIX) from None


def builtin_dir() -> Path:
    """Where the built-in presets are: package data in a wheel, else the repo's presets/."""
    package = Path(__file__).parent.parent  # envcheck/
    packaged = package / "data" / "presets"
    if packaged.is_dir():
        return packaged
    return package.resolve().parent / "presets"


def load_preset_file(path: Path | str, origin: str = "file") -> Preset:
    """Parse and validate one preset file; its name is the file's stem."""
    path = Path(path)
    _check_name(path)
    raw = _read_limited(path)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})", "save the file as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: {_toml_where(exc, raw)}", "fix the TOML syntax") from None
    except RecursionError:
        raise UsageError(f"{path}: arrays or tables nested too deeply to parse",
                         "a preset needs no nesting beyond packages = [...] and a [gpu] table") from None
    return _build(path, data, origin)


def _check_name(path: Path) -> None:
    """The stem becomes the preset's name, which reaches manifests and ``env export``."""
    name, limit = path.stem, LIMITS["name"]
    if not name or not name.isprintable() or name != name.strip():
        raise UsageError(f"preset file name {path.name!r} holds a control character, a line break or "
                         "leading/trailing space", "rename the file: its name becomes the preset's name")
    if len(name) > limit:
        raise UsageError(f"preset file name {path.name[:40]!r}... is {len(name)} characters long "
                         f"(limit 'name': {limit})", "rename the file to something shorter")


def _read_limited(path: Path) -> bytes:
    """At most the size limit + 1 bytes: ``/dev/zero`` or a huge file can't fill the memory."""
    limit = LIMITS["file bytes"]
    try:
        with open(path, "rb") as fh:
            raw = fh.read(limit + 1)
    except FileNotFoundError:
        raise UsageError(f"preset file {path} not found",
                         "pass the path of an existing .toml file, or see: envcheck presets list") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}", "check the file's permissions") from None
    if len(raw) > limit:
        raise UsageError(f"{path}: larger than {limit} bytes (limit 'file bytes')",
                         "a preset is a short TOML file; check that this is the right file")
    return raw


def available_presets(home: Home) -> dict[str, Preset]:
    """Every preset by name, sorted: built-ins, then the user's (which override by name).

    A broken user preset is an error, not a silent omission.
    """
    found: dict[str, Preset] = {}
    for origin, path in _preset_files(home).values():
        preset = load_preset_file(path, origin)
        found[preset.name] = preset
    return dict(sorted(found.items()))


def resolve_preset(home: Home, name: str | None = None, file: Path | str | None = None) -> Preset:
    """The preset asked for by name (user presets first) or by file; only that file is parsed."""
    if name and file:
        raise UsageError("both a preset name and a preset file were given", "pass only one of them")
    if file:
        return load_preset_file(file, "file")
    if not name:
        raise UsageError("no preset given", "pass a preset name (see: envcheck presets list) or a preset file")
    files = _preset_files(home)
    if name not in files:
        names = ", ".join(sorted(files)) or "none"
        raise UsageError(f"unknown preset {name!r}; available: {names}", "envcheck presets list")
    origin, path = files[name]
    return load_preset_file(path, origin)


def _preset_files(home: Home) -> dict[str, tuple[str, Path]]:
    files: dict[str, tuple[str, Path]] = {}
    for origin, folder in (("builtin", builtin_dir()), ("user", home.presets)):
        if folder.is_dir():
            for path in sorted(folder.glob("*.toml")):
                files[path.stem] = (origin, path)
    return files


def _build(path: Path, data: dict[str, Any], origin: str) -> Preset:
    """The preset a file declares: its first variant, carrying all of them, when it declares
    variants (``envs.variants``), else the one build the file describes."""
    from dataclasses import replace

    from .variants import variant_tables

    _check_keys(path, data, TOP_KEYS, "")
    declared = variant_tables(path, data)
    if not declared:
        return _build_one(path, data, origin, None)
    variants = tuple(_build_one(path, merged, origin, name) for name, merged in declared)
    variants = tuple(replace(v, variants=variants) for v in variants)
    return variants[0]


def _build_one(path: Path, data: dict[str, Any], origin: str, variant: str | None) -> Preset:
    from .variants import implicit_name

    where = f"variant {variant}: " if variant else ""
    for key in REQUIRED:
        if key not in data:
            if variant:
                raise UsageError(f"{path}: {where}missing key '{key}'",
                                 f"add {key} = ... to [variants.{variant}] or to the top of the file")
            raise UsageError(f"{path}: missing key '{key}'", f"add {key} = ... to the file")
    title = _string(path, data, "title", limit=LIMITS["title"])
    description = _string(path, data, "description", required=False, limit=LIMITS["description"])
    kind = _string(path, data, "kind")
    if kind not in KINDS:
        raise UsageError(f"{path}: key 'kind': {kind!r} is not one of {', '.join(KINDS)}",
                         'set kind = "cpu" or kind = "gpu"')
    framework = _string(path, data, "framework")
    requires_python = _specifier(path, _string(path, data, "requires-python", required=False))
    packages = _string_list(path, data, "packages", limit=LIMITS["packages"])
    if not packages:
        raise UsageError(f"{path}: key 'packages' is empty", "list at least one requirement")
    requirements = tuple(_requirement(path, index, text) for index, text in enumerate(packages))
    indexes = _indexes(path, data)
    cuda, cudnn, libraries = _gpu_table(path, data, kind)
    # The hash covers what the env is made of, not the prose: a reworded description must not
    # make provision rebuild an env.
    content = {
        "kind": kind, "framework": framework,
        "requires-python": str(requires_python), "packages": [str(r) for r in requirements],
        "gpu": {"cuda": cuda, "cudnn": cudnn, "libraries": libraries},
        **({"indexes": list(indexes)} if indexes else {}),
        **({"variant": variant} if variant else {}),
    }
    return Preset(name=path.stem, title=title, description=description, kind=kind,
                  framework=framework, requires_python=requires_python, packages=packages,
                  cuda=cuda, cudnn=cudnn, libraries=libraries, source=path, origin=origin,
                  content_hash=_hash(content), requirements=requirements, indexes=indexes,
                  variant=variant or implicit_name(kind, cuda))


def _indexes(path: Path, data: dict[str, Any]) -> tuple[str, ...]:
    if "indexes" not in data:
        return ()
    urls = _string_list(path, data, "indexes", limit=LIMITS["indexes"])
    for index, url in enumerate(urls):
        if not re.match(r"^https?://[^\s/@?#]+(/[^\s?#]*)?$", url):
            from .indexes import redact

            raise UsageError(f"{path}: key 'indexes[{index}]': {redact(url.split('?')[0])!r} is not an "
                             "http(s) URL without credentials or a query",
                             'write it like indexes = ["https://host/simple"]; '
                             "credentials belong in pip's configuration, not in a preset")
    return tuple(urls)


def _requirement(path: Path, index: int, text: str) -> Requirement:
    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        raise UsageError(f"{path}: key 'packages[{index}]': invalid requirement {text!r}: "
                         f"{_first_line(exc)}", REQUIREMENT_FIX) from None


def _gpu_table(path: Path, data: dict[str, Any], kind: str) -> tuple[str | None, str | None, list[str]]:
    if "gpu" not in data:
        if kind == "gpu":
            raise UsageError(f"{path}: kind is 'gpu' but the [gpu] table is missing",
                             'add a [gpu] table with cuda = "X.Y"')
        return None, None, []
    table = data["gpu"]
    if not isinstance(table, dict):
        raise UsageError(f"{path}: key 'gpu' must be a table, not {_type(table)}", "write it as a [gpu] section")
    if kind != "gpu":
        raise UsageError(f"{path}: key 'gpu': a [gpu] table in a preset of kind {kind!r}",
                         'remove the [gpu] table or set kind = "gpu"')
    _check_keys(path, table, GPU_KEYS, "gpu.")
    if "cuda" not in table:
        raise UsageError(f"{path}: missing key 'gpu.cuda'", 'add cuda = "X.Y" to the [gpu] table')
    cuda = _version(path, table, "cuda")
    cudnn = _version(path, table, "cudnn") if "cudnn" in table else None
    libraries = _string_list(path, table, "libraries", "gpu.", LIMITS["libraries"]) if "libraries" in table else []
    return cuda, cudnn, libraries


def _check_keys(path: Path, data: dict[str, Any], allowed: tuple[str, ...], prefix: str) -> None:
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"did you mean '{prefix}{close[0]}'?" if close else f"allowed: {', '.join(allowed)}"
            raise UsageError(f"{path}: unknown key '{prefix}{key}'", f"remove or rename it ({hint})")


def _string(path: Path, data: dict[str, Any], key: str, prefix: str = "", required: bool = True,
            limit: int = LIMITS["text"]) -> str:
    if key not in data and not required:
        return ""
    value = data[key]
    if not isinstance(value, str):
        raise UsageError(f"{path}: key '{prefix}{key}' must be a string, not {_type(value)} ({_short(value)})",
                         f'write it in quotes: {key} = "..."')
    _check_length(path, f"{prefix}{key}", value, limit)
    return value.strip()


def _string_list(path: Path, data: dict[str, Any], key: str, prefix: str = "",
                 limit: int = LIMITS["packages"]) -> list[str]:
    value = data[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{path}: key '{prefix}{key}' must be a list of strings, not {_short(value)}",
                         f'write it as {key} = ["...", "..."]')
    if len(value) > limit:
        raise UsageError(f"{path}: key '{prefix}{key}' lists {len(value)} entries (limit '{key}': {limit})",
                         "list fewer; a preset names the top-level packages, the installer finds the rest")
    for index, item in enumerate(value):
        _check_length(path, f"{prefix}{key}[{index}]", item, LIMITS["text"])
    return [item.strip() for item in value]


def _check_length(path: Path, key: str, value: str, limit: int) -> None:
    if len(value) > limit:
        name = key if key in LIMITS else "text"
        raise UsageError(f"{path}: key '{key}' is {len(value)} characters long (limit '{name}': {limit})",
                         "shorten it")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _version(path: Path, table: dict[str, Any], key: str) -> str:
    value = _string(path, table, key, "gpu.")
    if not _VERSION.match(value):
        raise UsageError(f"{path}: key 'gpu.{key}': {value!r} is not a version like \"12.5\"",
                         f'write {key} = "MAJOR.MINOR"')
    return value


def _specifier(path: Path, text: str) -> SpecifierSet:
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise UsageError(f"{path}: key 'requires-python': invalid specifier {text!r}",
                         "use a PEP 440 specifier like '>=3.10,<3.13'") from None


def _toml_where(exc: Exception, raw: bytes) -> str:
    """'line N: message (column C)' from tomllib's '... (at line N, column C)'."""
    message = str(exc)
    match = _TOML_WHERE.search(message)
    if not match:
        return message
    text = message[: match.start()]
    if match.group(1):
        return f"line {match.group(1)}: {text} (column {match.group(2)})"
    last_line = raw.count(b"\n") + 1
    return f"line {last_line}: {text} (at end of file)"


def _hash(content: dict[str, Any]) -> str:
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _type(value: Any) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "a boolean",
            list: "a list", dict: "a table"}.get(type(value), type(value).__name__)
