"""The layout's rules, read from the source (issue 19):

- no module of envcheck over ``MAX_LINES`` lines;
- imports go down ``LAYERS`` (CONTRIBUTING.md's Layout, DESIGN.md's flow), never up or sideways, inside
  functions and under ``TYPE_CHECKING`` as much as at the top: so no cycle between envcheck's
  packages and top-level modules;
- no framework named in code or templates outside ``envcheck/frameworks/`` and
  ``envcheck/data/``: what a framework is, and what to do about it, is asked of the registry;
- every public function of the use cases has its parameters typed.

A framework is named by whatever its folder declares of it (``framework_words``). A name counts
where code uses it: an identifier (``keras_backend``) or a string that is not a docstring
(``"tf-nightly"``, ``"TF_CPP_MIN_LOG_LEVEL"``, a label), and anywhere in a template but its
comments. Comments and docstrings may name frameworks as examples; they decide nothing.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from envcheck import frameworks
from envcheck.envs.presets import builtin_dir, load_preset_file

PACKAGE = Path(frameworks.__file__).parent.parent  # envcheck/
MAX_LINES = 400
ALLOWED = ("frameworks/", "data/")  # where frameworks may be named, relative to PACKAGE
CODE_TOKENS = {tokenize.NAME, tokenize.STRING} | ({tokenize.FSTRING_MIDDLE}  # Python 3.12+
                                                  if hasattr(tokenize, "FSTRING_MIDDLE") else set())
JINJA_COMMENT = re.compile(r"\{#.*?#\}", re.DOTALL)

# The import layers, bottom first: a module may import from a layer below its own, never from
# its own or one above. A unit is a package (``envs``) or a top-level module (``child_env``);
# ``envcheck`` is the package's own ``__init__`` (``envcheck.ensure_ready``). This is the one
# statement of the rule: each package's ``__init__`` docstring says which of the units below
# it uses, and why.
LAYERS = (
    ("errors", "paths", "atomic", "results", "progress", "distributions", "_guard", "data", "_version"),
    ("durations",),  # raises errors' UsageError
    ("child_env",),
    ("processes",),
    ("envs", "frameworks"),  # neither imports the other
    ("host",),
    ("slurm",),  # Slurm's commands, drain reasons, gres.conf: the slurm use cases and the fleet use it
    ("validation",),
    ("usecases", "fleet"),  # the fleet runs envcheck itself on each node, as a subprocess
    ("preflight",),  # the fleet compared with itself: the fleet's rounds, the node's verdicts (usecases)
    ("cli", "envcheck"),
    ("__main__",),
)


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


# -- size ------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", modules(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_module_is_over_the_limit(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE.parent)} has {lines} lines: split it by responsibility"


# -- imports go down the layers ----------------------------------------------------------------

def unit_of(module: str) -> str:
    """The unit of a dotted module name of envcheck: ``envcheck.envs.store`` -> ``envs``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "envcheck"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_units(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, unit) of every import of envcheck in ``source`` (module ``module``): at the top,
    in functions, under ``TYPE_CHECKING``, relative or absolute."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # `from envcheck import processes`: the unit is the submodule, if it is one
            names = [f"{origin}.{alias.name}" if origin == "envcheck" and _is_unit(alias.name) else origin
                     for alias in node.names]
        else:
            continue
        found += [(node.lineno, unit_of(name)) for name in names
                  if name == "envcheck" or name.startswith("envcheck.")]
    return found


def _is_unit(name: str) -> bool:
    return (PACKAGE / f"{name}.py").is_file() or (PACKAGE / name / "__init__.py").is_file()


def layer_of(unit: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if unit in layer), None)


def upward_imports(path: Path) -> list[str]:
    module = module_name(path)
    mine = unit_of(module)
    where = path.relative_to(PACKAGE.parent)
    return [f"{where}:{line}: {mine} imports {unit}"
            for line, unit in imported_units(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
            if unit != mine and not layer_of(unit) < layer_of(mine)]


def test_the_import_reader_sees_every_import() -> None:
    """The rule itself: imports inside functions and under TYPE_CHECKING count; relative ones
    resolve from their package; ``from envcheck import X`` is X's unit when X is one."""
    code = ("from __future__ import annotations\n"
            "from typing import TYPE_CHECKING\n"
            "from ..errors import UsageError\n"
            "if TYPE_CHECKING:\n"
            "    from ..usecases.session import Session\n"
            "def f():\n"
            "    from . import frameworks\n"
            "    from envcheck import processes, __version__\n"
            "    import envcheck.cli.main\n")
    assert imported_units(code, "envcheck.host.probe", False) == [
        (3, "errors"), (5, "usecases"), (7, "host"), (8, "processes"), (8, "envcheck"), (9, "cli")]
    assert imported_units("from . import frameworks\n", "envcheck.usecases", True) == [(1, "usecases")]
    assert imported_units("from .. import frameworks\n", "envcheck.usecases", True) == [(1, "frameworks")]


def test_every_package_and_module_has_a_layer() -> None:
    units = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"} | {"envcheck"}
    units |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    placed = [unit for layer in LAYERS for unit in layer]
    assert len(placed) == len(set(placed)), "a unit is in two layers"
    assert units == set(placed), f"place these in LAYERS: {sorted(units - set(placed))}; " \
                                 f"gone: {sorted(set(placed) - units)}"


def test_imports_go_down_the_layers() -> None:
    found = [hit for path in modules() for hit in upward_imports(path)]
    assert not found, "imports up or across the layers (tests/test_layout.py LAYERS):\n" + "\n".join(found)


# -- frameworks are named by the registry only ---------------------------------------------------

def _backend_words(path: Path) -> set[str]:
    """What a backend module declares or sets: its ``NEEDS`` (the import names the smoke runner
    checks) and every variable it writes into ``os.environ`` (``XLA_FLAGS``)."""
    words: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "NEEDS" for t in node.targets):
            words.update(ast.literal_eval(node.value))
        targets = node.targets if isinstance(node, ast.Assign) else []
        for target in targets:  # os.environ["NAME"] = ...
            if isinstance(target, ast.Subscript) and ast.unparse(target.value) == "os.environ":
                words.add(ast.literal_eval(target.slice))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)  # os.environ.setdefault("NAME", ...)
                and ast.unparse(node.func.value) == "os.environ" and node.func.attr == "setdefault"):
            words.add(ast.literal_eval(node.args[0]))
    return words


def framework_words() -> set[str]:
    """Every name a framework's folder declares: its registry name, aliases and title, its
    distributions, the import names its backend needs, every variable `run` or the smoke runner
    may give it (for any release, on any platform) and its backend sets, its presets; and
    Keras, which three of them run."""
    words = {"keras"}
    for framework in frameworks.registry().values():
        words |= {framework.name, framework.title, *framework.aliases, *framework.distributions}
        words |= {variable.name for variable in framework.run_variables}
        words |= {*framework.smoke_environ, *framework.smoke_scratch}
        words |= {*framework.cpu_presets, *framework.gpu_presets}
    for path in sorted((PACKAGE / "frameworks").rglob("*.py")):
        words |= _backend_words(path)
    for path in sorted(builtin_dir().glob("*.toml")):
        preset = load_preset_file(path, "builtin")
        if preset.framework in frameworks.names():
            words.add(preset.name)
    return words


def framework_pattern() -> re.Pattern:
    """Any of ``framework_words`` as a word of its own, or a library's name made from it
    (``libtensorflow_framework.so``, ``libtorch_cuda.so``): ``keras_backend`` and ``"Keras on"``
    name Keras, ``"torchvision"`` and ``jaxpr`` name no framework."""
    words = sorted(framework_words(), key=len, reverse=True)
    return re.compile(r"(?<![A-Za-z0-9])(?:lib)?(?:" + "|".join(map(re.escape, words)) + r")(?![A-Za-z0-9])",
                      re.IGNORECASE)


def docstrings(tree: ast.AST) -> set[tuple[int, int]]:
    """Where each string that stands alone as a statement starts (module, class and function
    docstrings, and those of attributes)."""
    found = set()
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            for statement in statements if isinstance(statements, list) else ():  # a lambda's body: one expression
                if (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
                        and isinstance(statement.value.value, str)):
                    found.add((statement.lineno, statement.col_offset))
    return found


def framework_names_in_code(source: str, pattern: re.Pattern) -> list[str]:
    """``line: token`` for each identifier or non-docstring string in ``source`` naming a framework."""
    skip = docstrings(ast.parse(source))
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in CODE_TOKENS and token.start not in skip and pattern.search(token.string):
            found.append(f"{token.start[0]}: {token.string[:80]}")
    return found


def framework_names_in_text(text: str, pattern: re.Pattern) -> list[str]:
    """``line: line`` for each line of a template (its comments left out) naming a framework."""
    text = JINJA_COMMENT.sub(lambda m: "\n" * m[0].count("\n"), text)
    return [f"{number}: {line.strip()[:80]}" for number, line in enumerate(text.splitlines(), 1)
            if pattern.search(line)]


def test_the_scan_sees_what_it_must() -> None:
    """The rule itself: names in code are found, the same words in comments and docstrings not."""
    pattern = framework_pattern()
    words = {w.lower() for w in framework_words()}
    assert {"tensorflow", "torch", "keras", "pytorch", "jax", "jaxlib"} <= words  # names, aliases, imports
    assert {"pytorch_cuda_alloc_conf", "xla_flags", "xla_python_client_preallocate",
            "keras_home", "tf_cpp_min_log_level"} <= words  # run variables of any release, the backend's own
    assert {"tensorflow-gpu-cuda11-wheels", "pytorch-cpu", "jax-cuda12"} <= words  # presets
    assert not pattern.search("torchvision") and not pattern.search("jaxpr")
    assert pattern.search('"libtensorflow_framework.so.2"') and pattern.search("libtorch_cuda.so")
    code = ('"""Validate a tensorflow env."""\n'
            'LABELS = {"keras_backend": "Keras on"}  # keras: a comment\n'
            'def f(env):\n'
            '    """torch here is a word."""\n'
            '    return env.get("TF_FORCE_GPU_ALLOW_GROWTH") or torch_version\n')
    found = framework_names_in_code(code, pattern)
    assert [line.split(":")[0] for line in found] == ["2", "2", "5", "5"], found
    template = "{# PyTorch: a comment #}\n<td>{{ row.cudnn }}</td>\n<th>JAX devices</th>\n"
    assert framework_names_in_text(template, pattern) == ["3: <th>JAX devices</th>"]


def scanned() -> list[Path]:
    """Every file of envcheck outside ``ALLOWED``: its modules and its templates."""
    return sorted(p for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and not p.relative_to(PACKAGE).as_posix().startswith(ALLOWED))


def test_no_framework_is_named_outside_frameworks_and_data() -> None:
    pattern = framework_pattern()
    found = []
    for path in scanned():
        text = path.read_text(encoding="utf-8")
        hits = (framework_names_in_code(text, pattern) if path.suffix == ".py"
                else framework_names_in_text(text, pattern))
        found += [f"{path.relative_to(PACKAGE.parent)}:{hit}" for hit in hits]
    assert not found, "framework names in code (ask envcheck.frameworks instead):\n" + "\n".join(found)


# -- the use cases are typed -------------------------------------------------------------------

def untyped_parameters(source: str) -> list[str]:
    """``line: function(parameter)`` for each parameter of a public function or method (one
    whose name and class's name have no leading underscore) that has no annotation; ``self``
    and ``cls`` need none."""
    found = []

    def visit(body: list[ast.stmt], owner: str = "") -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, f"{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                args = node.args
                every = [*args.posonlyargs, *args.args, *args.kwonlyargs,
                         *([args.vararg] if args.vararg else []), *([args.kwarg] if args.kwarg else [])]
                found.extend(f"{node.lineno}: {owner}{node.name}({a.arg})" for a in every
                             if a.annotation is None and not (owner and a.arg in ("self", "cls")))

    visit(ast.parse(source).body)
    return found


def test_the_annotation_reader_sees_what_it_must() -> None:
    code = ("def run(session, name: str, *args, **kw: int) -> None: ...\n"
            "def _helper(x): ...\n"
            "class Result:\n"
            "    def body(self, depth): ...\n"
            "    def _private(self, x): ...\n")
    assert untyped_parameters(code) == ["1: run(session)", "1: run(args)", "4: Result.body(depth)"]


def test_every_public_use_case_function_types_its_parameters() -> None:
    found = [f"{path.relative_to(PACKAGE.parent)}:{hit}"
             for path in sorted((PACKAGE / "usecases").glob("*.py"))
             for hit in untyped_parameters(path.read_text(encoding="utf-8"))]
    assert not found, "untyped parameters of use-case functions:\n" + "\n".join(found)
