"""Manifests migrate forward (v1 -> v2), and a manifest or report of the wrong shape harms only its env."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Result, clean_env
from envcheck.envs import manifest as mf
from envcheck.frameworks import detect
from envcheck.paths import Home
from envcheck.validation.reports import load_report
from wheelhouse import offline

TF = """title = "tf stand-in"
kind = "cpu"
framework = "tensorflow"
packages = ["tensorflow-cpu==2.21.0"]
"""
TINY = TF.replace("tensorflow-cpu==2.21.0", "alpha==1.0")


@pytest.fixture
def presets(home: Path) -> Path:
    (home / "presets").mkdir()
    (home / "presets" / "tf.toml").write_text(TF)
    (home / "presets" / "tiny.toml").write_text(TINY)
    return home / "presets"


def manifest(home: Path, name: str) -> Path:
    return home / "envs" / name / "envcheck.json"


def as_v1(path: Path) -> None:
    """Rewrite a manifest as envcheck 0.1 wrote it: schema /1, no ``frameworks``."""
    data = json.loads(path.read_text())
    data["schema"] = "envcheck.manifest/1"
    del data["frameworks"]
    path.write_text(json.dumps(data))


def test_migrations_chain_to_the_current_schema():
    assert mf.SCHEMA == "envcheck.manifest/4"
    assert sorted(mf._MIGRATIONS) == list(range(1, mf.VERSION))
    v1 = {"schema": "envcheck.manifest/1", "name": "a", "state": "ready",
          "packages": {"tensorflow-cpu": "2.21.0", "numpy": "2.0"}}
    # /2 named the frameworks; /3 the lock an env was made from, the env it was linked from, its digest;
    # /4 whether envcheck adopted it (null: it made it)
    assert mf.migrate(dict(v1), frameworks_of=detect) == {**v1, "schema": mf.SCHEMA, "frameworks": ["tensorflow"],
                                                          "lock": None, "linked_from": None, "digest": None,
                                                          "adopted": None}
    assert mf.migrate({**v1, "packages": {"torch": "2.5.1"}}, frameworks_of=detect)["frameworks"] == ["torch"]
    assert mf.migrate(dict(v1))["frameworks"] == []  # envs can't name frameworks alone: the caller says how
    with pytest.raises(mf.ManifestError) as newer:
        mf.migrate({**v1, "schema": "envcheck.manifest/5"})
    assert newer.value.fix == "made by a newer envcheck: upgrade envcheck"


def test_a_v1_manifest_lists_ready_with_frameworks_and_add_rewrites_it_as_current(cli, home, presets, wheelhouse):
    assert cli("env", "create", "dl", "--preset", "tf", *offline(wheelhouse)).code == 0
    assert json.loads(manifest(home, "dl").read_text())["frameworks"] == ["tensorflow"]
    as_v1(manifest(home, "dl"))

    (env,) = cli("env", "list", "--json").json()["envs"]
    assert env["state"] == "ready" and env["frameworks"] == ["tensorflow"]
    assert json.loads(manifest(home, "dl").read_text())["schema"] == "envcheck.manifest/1"  # reading never writes

    r = cli("env", "add", "dl", "torch", *offline(wheelhouse))
    assert r.code == 0, r.err
    data = json.loads(manifest(home, "dl").read_text())
    assert data["schema"] == mf.SCHEMA and data["state"] == "ready"
    assert data["frameworks"] == ["tensorflow", "torch"] and data["requested"] == ["tensorflow-cpu==2.21.0", "torch"]


@pytest.fixture(scope="module")
def with_good(tmp_path_factory, wheelhouse) -> Path:
    """A home with env ``good``, made once: the tests beside it only read it."""
    home = tmp_path_factory.mktemp("manifest-home")
    (home / "presets").mkdir()
    (home / "presets" / "tiny.toml").write_text(TINY)
    assert run(home, "env", "create", "good", "--preset", "tiny", *offline(wheelhouse)).code == 0
    return home


def run(home: Path, *args: str) -> Result:
    proc = subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True,
                          env=clean_env(ENVCHECK_HOME=str(home)), timeout=600)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def beside_good(with_good: Path):
    """Envcheck run against ``with_good``'s home; an env ``bad`` a failing test left is cleared."""
    yield lambda *args: run(with_good, *args)
    shutil.rmtree(with_good / "envs" / "bad", ignore_errors=True)


@pytest.mark.parametrize("change, needle, fix", [
    ({"schema": "envcheck.manifest/7"}, "newer envcheck", "upgrade envcheck"),
    ({"python": "3.11"}, "field 'python'", "env remove bad"),
    ({"packages": ["alpha"]}, "field 'packages'", "env remove bad"),
    ({"requested": "alpha"}, "field 'requested'", "env remove bad"),
    ({"preset": {"name": "x\nevilpkg==6.6.6"}}, "field 'preset.name'", "env remove bad"),
    ({"state": None}, "field 'state'", "env remove bad"),
])
def test_a_bad_manifest_breaks_only_its_env(beside_good, with_good, wheelhouse, change, needle, fix):
    cli, home = beside_good, with_good
    assert cli("env", "create", "bad", "--preset", "tiny", *offline(wheelhouse)).code == 0
    data = json.loads(manifest(home, "bad").read_text())
    manifest(home, "bad").write_text(json.dumps({**data, **change}))

    r = cli("env", "list", "--json")
    assert r.code == 0 and "Traceback" not in r.err
    envs = {e["name"]: e for e in r.json()["envs"]}
    assert envs["good"]["state"] == "ready"
    assert envs["bad"]["state"] == "broken" and needle in envs["bad"]["problem"] and fix in envs["bad"]["fix"]
    assert cli("env", "list").code == 0
    assert cli("env", "show", "good").code == 0 and cli("env", "export", "good").code == 0
    shown = cli("env", "show", "bad")
    assert shown.code == 0 and "broken" in shown.out
    bad = cli("env", "export", "bad")
    assert bad.code == 2 and "evilpkg" not in bad.out
    (line,) = [ln for ln in bad.err.splitlines() if ln.startswith("envcheck: error:")]
    assert fix in line.split("fix:")[1]
    assert cli("env", "remove", "bad", "--yes").code == 0  # a broken env can always be removed


REPORT = {"schema": "envcheck.report/1", "env": "dl", "verdict": "ready", "created": "2026-01-01T00:00:00+00:00",
          "fingerprint": {}, "smoke": False, "gpus_usable": 0,
          "checks": [{"id": "host", "status": "pass", "summary": "ok", "detail": "", "fix": None}]}


@pytest.mark.parametrize("change", [
    {}, {"verdict": 1}, {"fingerprint": []}, {"gpus_usable": "2"}, {"gpus_usable": True}, {"created": None},
    {"checks": {}}, {"checks": [{"id": "host", "status": "pass"}]}, {"checks": ["x"]},
    {"checks": [{"id": "host", "status": "pass", "summary": "ok", "fix": 3}]},
])
def test_a_report_of_the_wrong_shape_is_absent(home, change):
    path = home / "envs" / "dl" / "envcheck-report.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**REPORT, **change}))
    assert (load_report(Home(home), "dl") is not None) == (change == {})


def test_envs_never_import_frameworks():
    """Imports go one way: ``frameworks`` reads names from ``envs.metadata``; no envs module
    imports ``frameworks`` (the use cases hand the store ``frameworks.detect``)."""
    import ast

    import envcheck.envs

    for path in Path(envcheck.envs.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                named = [module] if module else [a.name for a in node.names]
                absolute = "envcheck." * (node.level == 2) + module if node.level in (0, 2) else ""
                assert not absolute.startswith("envcheck.frameworks"), path
                assert not (node.level == 2 and "frameworks" in named), path
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("envcheck.frameworks") for a in node.names), path
