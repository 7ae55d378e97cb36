"""`envcheck cache info|clean`: real uv installs from the suite's wheels fill envcheck's uv
cache; cleaning it empties it, leaves every env working, waits for a running install (up to
its bound) and never touches a cache envcheck did not make."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env
from test_env import TINY
from wheelhouse import offline

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def made(cli, home: Path, wheelhouse: Path) -> Path:
    """Env "dl" (alpha 1.0) made by uv through envcheck: envcheck's uv cache is filled."""
    (home / "presets").mkdir()
    (home / "presets" / "tiny.toml").write_text(TINY)
    r = cli("env", "create", "dl", "--preset", "tiny", "--installer", "uv", *offline(wheelhouse))
    assert r.code == 0, r.err
    return home / "cache" / "uv"


def own(info: dict) -> dict:
    [cache] = [c for c in info["caches"] if c["owner"] == "envcheck"]
    return cache


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def env_works(cli, home: Path) -> None:
    python = home / "envs" / "dl" / "bin" / "python"
    done = subprocess.run([str(python), "-c", "import alpha; print(alpha.__version__)"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "1.0", done.stderr
    states = {e["name"]: e["state"] for e in cli("env", "list", "--json").json()["envs"]}
    assert states["dl"] == "ready"


def test_info_then_clean_leaves_envs_working(cli, home: Path, made: Path, wheelhouse: Path) -> None:
    info = cli("cache", "info", "--json")
    assert info.code == 0, info.err
    doc = info.json()
    assert doc["schema"] == "envcheck.cache/1"
    cache = own(doc)
    assert cache["installer"] == "uv" and cache["path"] == str(made) and cache["owned"]
    assert cache["used_by_installs"] and cache["exists"] and cache["files"] > 0 and cache["bytes"] > 0
    # alpha's files are hard-linked into the env: a clean frees only what the env doesn't share
    assert 0 < cache["reclaimable_bytes"] < cache["bytes"]
    text = cli("cache", "info")
    assert str(made) in text.out and "installs use it" in text.out

    cleaned = cli("cache", "clean", "--yes", "--json")
    assert cleaned.code == 0, cleaned.err
    result = cleaned.json()
    assert result["schema"] == "envcheck.cache-clean/1"
    assert result["cleaned"]["bytes_before"] == cache["bytes"] and result["cleaned"]["bytes_after"] == 0
    assert own(cli("cache", "info", "--json").json())["bytes"] == 0
    env_works(cli, home)
    # and installs go on: the next one fills the cache again
    assert cli("env", "add", "dl", "beta", *offline(wheelhouse)).code == 0
    assert own(cli("cache", "info", "--json").json())["bytes"] > 0


def test_clean_bounds_out_while_an_install_runs(home: Path, made: Path, slow_links, cli) -> None:
    url, requested, release = slow_links
    # env dl, made from tiny, is an intact twin: --no-link, or other would be linked, not installed
    install = subprocess.Popen(
        [sys.executable, "-m", "envcheck", "env", "create", "other", "--preset", "tiny", "--no-link",
         "--no-index", "--find-links", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=clean_env(ENVCHECK_HOME=str(home)))
    try:
        assert requested.wait(60), "the install never reached the index"
        before = tree(made)
        busy = cli("cache", "clean", "--yes", "--wait", "1")
        assert busy.code == 1 and "an install is running: env other" in busy.err, busy.err
        assert "Traceback" not in busy.err and tree(made) == before
    finally:
        release.set()
        _, err = install.communicate(timeout=120)
    assert install.returncode == 0, err
    assert cli("cache", "clean", "--yes").code == 0
    env_works(cli, home)


def test_clean_waits_for_an_install_to_finish(home: Path, made: Path, slow_links, cli) -> None:
    url, requested, release = slow_links
    install = subprocess.Popen(
        [sys.executable, "-m", "envcheck", "env", "add", "dl", "beta", "--no-index",
         "--find-links", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=clean_env(ENVCHECK_HOME=str(home)))
    try:
        assert requested.wait(60), "the install never reached the index"
        clean = subprocess.Popen([sys.executable, "-m", "envcheck", "cache", "clean", "--yes",
                                  "--wait", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=clean_env(ENVCHECK_HOME=str(home)))
        with pytest.raises(subprocess.TimeoutExpired):
            clean.wait(2)  # held back by the install's lock
    finally:
        release.set()
    assert install.wait(120) == 0
    out, err = clean.communicate(timeout=120)
    assert clean.returncode == 0, err
    assert "emptied envcheck's uv cache" in out
    packages = cli("env", "show", "dl", "--json").json()["env"]["packages"]
    assert packages["beta"] == "1.0"


def test_clean_without_yes_off_a_terminal_is_bad_usage(cli, made: Path) -> None:
    before = tree(made)
    r = cli("cache", "clean")
    assert r.code == 2 and "pass --yes" in r.err and "Traceback" not in r.err
    assert tree(made) == before


@pytest.mark.parametrize("answer, emptied", [("n", False), ("y", True)])
def test_clean_asks_on_a_terminal(home: Path, made: Path, answer: str, emptied: bool) -> None:
    import pty

    before = tree(made)
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "envcheck", "cache", "clean"], stdin=slave,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=clean_env(ENVCHECK_HOME=str(home)))
        os.write(master, f"{answer}\n".encode())
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(master)
        os.close(slave)
    assert f"empty envcheck's uv cache {made}" in err  # the prompt: on stderr, stdout is the result's
    assert (proc.returncode, "emptied" in out) == ((0, True) if emptied else (1, False)), err
    assert (tree(made) != before) == emptied
    if not emptied:
        assert err.rstrip().endswith("envcheck: nothing cleaned")


def test_caches_envcheck_did_not_make_are_left_alone(cli, home: Path, made: Path,
                                                     tmp_path: Path) -> None:
    theirs, pips = tmp_path / "user-uv", tmp_path / "user-pip"
    for folder in (theirs, pips):
        folder.mkdir()
        (folder / "keep.bin").write_bytes(b"x" * 4096)
    env = {"UV_CACHE_DIR": str(theirs), "PIP_CACHE_DIR": str(pips)}
    doc = cli("cache", "info", "--json", env=env).json()
    by_owner = {c["owner"]: c for c in doc["caches"]}
    assert by_owner["UV_CACHE_DIR"]["path"] == str(theirs) and not by_owner["UV_CACHE_DIR"]["owned"]
    assert by_owner["pip"]["path"] == str(pips) and by_owner["pip"]["bytes"] == 4096
    assert not by_owner["envcheck"]["used_by_installs"]
    r = cli("cache", "clean", "--yes", env=env)
    assert r.code == 0, r.err
    assert f"left alone: uv cache {theirs}" in r.out and f"left alone: pip cache {pips}" in r.out
    assert (theirs / "keep.bin").exists() and (pips / "keep.bin").exists()
    assert own(cli("cache", "info", "--json").json())["bytes"] == 0


def test_a_symlinked_cache_is_never_followed(cli, home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious").write_text("keep")
    (home / "cache").mkdir()
    (home / "cache" / "uv").symlink_to(elsewhere)
    r = cli("cache", "clean", "--yes")
    assert r.code == 2 and "symbolic link" in r.err and "Traceback" not in r.err
    assert (elsewhere / "precious").read_text() == "keep"


def test_a_large_cache_envcheck_did_not_make_is_measured_within_a_bound(cli, home: Path, tmp_path: Path) -> None:
    from envcheck.envs.caches import FOREIGN_ENTRIES

    theirs = tmp_path / "user-uv"  # as UV_CACHE_DIR=/root: a folder of any size
    (theirs / "many").mkdir(parents=True)
    (theirs / "big.bin").write_bytes(b"x" * 2**20)
    one = theirs / "one"
    one.write_bytes(b"y")
    for i in range(FOREIGN_ENTRIES + 10):  # links: quick to make, an entry each to walk
        os.link(one, theirs / "many" / f"{i}")
    env = {"UV_CACHE_DIR": str(theirs)}
    info = cli("cache", "info", "--json", env=env)
    assert info.code == 0, info.err
    doc = info.json()
    by_owner = {c["owner"]: c for c in doc["caches"]}
    user = by_owner["UV_CACHE_DIR"]
    assert user["complete"] is False and user["bytes"] >= 2**20 and "du -sh" in user["note"]
    assert by_owner["envcheck"]["complete"] is True and doc["total_complete"] is False
    text = cli("cache", "info", env=env).out
    [row] = [line for line in text.splitlines() if line.split()[:2] == ["uv", "UV_CACHE_DIR"]]
    assert "at least 1.0 MiB" in row
    assert f"measured up to its first {FOREIGN_ENTRIES:,} entries" in text
