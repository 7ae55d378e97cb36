"""The documentation: the site builds with `mkdocs build --strict` (a broken link, a missing
anchor or a page left out of the nav fails), its command reference is generated from the click
commands at build time and lists every one, and the README stays a front page."""
from __future__ import annotations

import html
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from conftest import ROOT, clean_env
from envcheck.cli.main import main

DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_LINES = 150
QUICKSTART = (
    "pip install . && envcheck provision --preset tensorflow-cpu --no-smoke && envcheck doctor",
    "pip install -e '.[test]' && python -m pytest",
)
MKDOCS_MODULES = ("mkdocs", "material", "mkdocs_click")
CLICK_HELP = "Show this message and exit."  # click's --help line: only generated text has it


def commands(group: click.Group = main, path: str = "envcheck") -> list[tuple[str, click.Command]]:
    """Every command under ``group``, nested groups' included, with its full path."""
    ctx = click.Context(group, info_name=path)
    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        found.append((f"{path} {name}", command))
        if isinstance(command, click.Group):
            found += commands(command, f"{path} {name}")
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    missing = [m for m in MKDOCS_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: pip install -e '.[test]'")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=clean_env(NO_MKDOCS_2_WARNING="1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_the_site_builds_strict_with_every_page(site: Path) -> None:
    pages = sorted(p.relative_to(DOCS).with_suffix("").as_posix() for p in DOCS.rglob("*.md"))
    for page in pages:
        built = site / ("index.html" if page == "index" else f"{page}/index.html")
        assert built.is_file(), f"docs/{page}.md was not built"


def test_the_reference_lists_every_command_and_option(site: Path) -> None:
    reference = html.unescape((site / "reference" / "index.html").read_text(encoding="utf-8"))
    everything = commands()
    assert {"envcheck env create", "envcheck fleet doctor", "envcheck kernel install"} <= {p for p, _ in everything}
    for path, command in everything:
        anchor = "-".join(path.split())
        assert f'id="{anchor}"' in reference, f"{path} is not in the command reference"
        for param in command.params:
            for flag in getattr(param, "opts", []) if isinstance(param, click.Option) else []:
                assert flag in reference, f"{path}: {flag} is not in the command reference"


def test_no_generated_reference_is_committed() -> None:
    reference = (DOCS / "reference.md").read_text(encoding="utf-8")
    assert "::: mkdocs-click" in reference and ":module: envcheck.cli.main" in reference
    for page in DOCS.rglob("*.md"):
        text = page.read_text(encoding="utf-8")
        assert CLICK_HELP not in text, f"{page.relative_to(ROOT)} holds generated help text"
        assert "**Usage:**" not in text, f"{page.relative_to(ROOT)} holds a generated usage block"


def test_the_readme_is_a_front_page_with_the_quickstart_first() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    sections = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert sections and sections[0] == "Quickstart", sections
    quickstart = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    for command in QUICKSTART:
        assert command in quickstart.splitlines(), f"the Quickstart lacks `{command}`"


def test_the_readme_links_lead_to_files() -> None:
    text = README.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"
